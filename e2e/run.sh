#!/usr/bin/env bash
# e2e/run.sh: real-client smoke tests of humongod and humongos (ARCHITECTURE.md, testing tier 6).
#
# Builds humongod, starts it on a free port with a temporary dbpath, installs the clients it
# needs (npm: mongosh, the Node driver and Mongoose into e2e/node_modules, pinned by
# package-lock.json; Debian: python3-pymongo), runs e2e/mongosh_smoke.js, e2e/node_smoke.js,
# e2e/pymongo_smoke.py and e2e/mongoose_smoke.js, stops the server with SIGTERM, and prints one
# summary line per client. Then it starts a 3-member replica set of humongod (--replSet, each on
# a free port, initiated with mongosh) and runs the transaction checks: e2e/mongosh_txn.js,
# e2e/node_txn.js and e2e/mongoose_txn.js (withTransaction / connection.transaction commits,
# aborts leave nothing behind, uncommitted writes are invisible outside), and the change stream
# checks e2e/mongosh_changestream.js and e2e/node_changestream.js (watch(), ChangeStream,
# Mongoose Model.watch()), and stops it with
# SIGTERM. Then it starts the humongos router skeleton (--configdb cfg/127.0.0.1:1) and
# checks with mongosh that hello answers msg "isdbgrid". Last, `humongo up --shards 2` starts a
# sharded cluster (2 shards, a config server, a router) and e2e/mongosh_sharded.js runs the
# mongosh sh.* helpers, CRUD, an aggregation and getShardDistribution() through the router;
# `humongo down` stops it. Last, `humongo up --standalone --tls --auth` starts a humongod in
# requireTLS with a local CA and authorization on, and mongosh (--tls --tlsCAFile, -u/-p with
# SCRAM-SHA-256), the Node driver (SCRAM-SHA-256 and SCRAM-SHA-1), pymongo (SCRAM-SHA-1) and
# Mongoose (tls=true&tlsCAFile= and the credentials in the URI) each write and read a document
# over TLS as the first user; a plain mongosh and an unauthenticated one are refused.
# Exits non-zero if any client failed or the server did not shut down cleanly. A client is
# skipped ("SKIP: registry unreachable") only when installing it failed with a network error.
#
# Idempotent: installs happen only when missing or when package-lock.json changed. Every step
# has a timeout (E2E_STEP_TIMEOUT, default 120 s; installs E2E_INSTALL_TIMEOUT, default 900 s).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
step_timeout=${E2E_STEP_TIMEOUT:-120}
install_timeout=${E2E_INSTALL_TIMEOUT:-900}

work=$(mktemp -d "${TMPDIR:-/tmp}/humongo-e2e.XXXXXX")
pid=""
log="$work/humongod.log"

say() { printf 'e2e: %s\n' "$*"; }

stop_server() {
	# SIGTERM and a bounded wait; SIGKILL only if the server does not exit in 30 s.
	[ -n "$pid" ] || return 0
	local rc=0
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 1 300); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			say "humongod did not exit within 30s of SIGTERM; killing it"
			kill -KILL "$pid" 2>/dev/null
			rc=1
		fi
	fi
	wait "$pid" 2>/dev/null
	local st=$?
	[ "$rc" -ne 0 ] || rc=$st
	pid=""
	return "$rc"
}

# The replica set's member pids (empty when it is not running).
rs_pids=()

# stop_replset: SIGTERM every member, as stop_server does one; fails if any did not exit cleanly.
stop_replset() {
	local rc=0 p
	for p in "${rs_pids[@]}"; do
		pid=$p
		stop_server || rc=1
	done
	rs_pids=()
	return "$rc"
}

# The sharded cluster of `humongo up --shards 2` (see below), stopped with `humongo down`.
sharded_dir="$work/sharded"
sharded_up=""
stop_sharded() {
	[ -n "$sharded_up" ] || return 0
	sharded_up=""
	local out
	out=$(timeout "$step_timeout" "$work/humongo" down --dir "$sharded_dir" 2>&1)
	local rc=$?
	printf '%s\n' "$out" >"$work/sharded-down.out"
	if [ "$rc" -ne 0 ] || grep -Eq 'SIGKILL|still running' <<<"$out"; then
		printf '%s\n' "$out"
		return 1
	fi
}
# The TLS standalone of `humongo up --standalone --tls` (see below), stopped with `humongo down`.
tls_dir="$work/tls-standalone"
tls_up=""
stop_tls() {
	[ -n "$tls_up" ] || return 0
	tls_up=""
	timeout "$step_timeout" "$work/humongo" down --dir "$tls_dir" >"$work/tls-down.out" 2>&1
}
cleanup() {
	stop_server >/dev/null 2>&1
	stop_replset >/dev/null 2>&1
	stop_sharded >/dev/null 2>&1
	stop_tls >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# network_error FILE: the install output shows the registry could not be reached.
network_error() {
	grep -Eqi 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network (is )?unreachable|socket hang up|request to https?://[^ ]* failed|Temporary failure (in name )?resolv|Could not resolve|Failed to fetch|Unable to connect|Connection (failed|timed out|refused)' "$1"
}

declare -A result
failed=0

# --- install clients ------------------------------------------------------------------------
npm_state=ok
install_npm() {
	local stamp="$here/node_modules/.humongo-lock-sha"
	local want
	want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
	if [ -x "$here/node_modules/.bin/mongosh" ] && [ -f "$here/node_modules/mongoose/package.json" ] &&
		[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		return 0
	fi
	if ! command -v npm >/dev/null 2>&1; then
		say "npm is not installed (Node.js is required for the mongosh, Node driver and Mongoose clients)"
		npm_state=fail
		return 1
	fi
	say "installing npm packages (mongosh, mongodb, mongoose) into e2e/node_modules..."
	local t0=$SECONDS out="$work/npm-install.log"
	if (cd "$here" && timeout "$install_timeout" npm install --no-audit --no-fund --loglevel=error) >"$out" 2>&1; then
		# npm may normalise the lock file: stamp what is there now.
		sha256sum "$here/package-lock.json" | cut -d' ' -f1 >"$stamp"
		say "npm install took $((SECONDS - t0))s"
		return 0
	fi
	cat "$out"
	if network_error "$out"; then
		npm_state=skip
	else
		npm_state=fail
	fi
	return 1
}

py_state=ok
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3 || echo python3)
install_pymongo() {
	# Debian's package installs into the system interpreter, hence /usr/bin/python3.
	"$python" -c 'import pymongo' 2>/dev/null && return 0
	local sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; else
			say "python3-pymongo is missing and apt-get needs root"
			py_state=fail
			return 1
		fi
	fi
	say "installing python3-pymongo with apt-get..."
	local out="$work/apt.log"
	export DEBIAN_FRONTEND=noninteractive
	if ! timeout "$install_timeout" $sudo apt-get install -y -q python3-pymongo >"$out" 2>&1; then
		# The package lists may be missing or stale: update them once and retry.
		if ! timeout "$install_timeout" $sudo apt-get update -q >>"$out" 2>&1 ||
			! timeout "$install_timeout" $sudo apt-get install -y -q python3-pymongo >>"$out" 2>&1; then
			tail -20 "$out"
			if network_error "$out"; then py_state=skip; else py_state=fail; fi
			return 1
		fi
	fi
	"$python" -c 'import pymongo' 2>/dev/null && return 0
	say "python3-pymongo installed but '$python -c \"import pymongo\"' fails"
	py_state=fail
	return 1
}

install_npm
install_pymongo

# wait_port LOG: the port of the "Waiting for connections" line of the server $pid logs to
# LOG (empty if it exits or does not log it within 30 s).
wait_port() {
	local line
	for _ in $(seq 1 300); do
		line=$(grep -m1 '"msg":"Waiting for connections"' "$1" 2>/dev/null || true)
		if [ -n "$line" ]; then
			printf '%s\n' "$line" | sed -n 's/.*"attr":{[^}]*"port":\([0-9][0-9]*\).*/\1/p'
			return
		fi
		kill -0 "$pid" 2>/dev/null || return
		sleep 0.1
	done
}

# --- build and start humongod ---------------------------------------------------------------
say "building humongod..."
if ! (cd "$root" && timeout 600 go build -o "$work/humongod" ./cmd/humongod); then
	say "FAIL: go build ./cmd/humongod"
	exit 1
fi
"$work/humongod" --port 0 --bind_ip 127.0.0.1 --dbpath "$work/db" >"$log" 2>&1 &
pid=$!
port=$(wait_port "$log")
if [ -z "$port" ]; then
	say "FAIL: humongod did not log \"Waiting for connections\" within 30s"
	tail -30 "$log"
	exit 1
fi
uri="mongodb://127.0.0.1:$port"
say "humongod pid $pid listening on port $port"

# --- run the clients ------------------------------------------------------------------------
run_client() { # name state command...
	local name=$1 state=$2
	shift 2
	case $state in
	skip)
		result[$name]="SKIP: registry unreachable"
		return
		;;
	fail)
		result[$name]="FAIL: could not install the client"
		failed=$((failed + 1))
		return
		;;
	esac
	local t0=$SECONDS out="$work/$name.out"
	if timeout "$step_timeout" "$@" >"$out" 2>&1; then
		result[$name]="PASS ($((SECONDS - t0))s)"
	else
		local rc=$?
		cat "$out"
		if [ "$rc" -eq 124 ]; then
			result[$name]="FAIL: timed out after ${step_timeout}s"
		else
			result[$name]="FAIL (exit $rc)"
		fi
		failed=$((failed + 1))
	fi
}

# mongosh must not phone home (telemetry, update checks) nor write to the real home directory:
# its global config file disables both, and HOME points into the work directory.
mkdir -p "$work/home"
printf 'mongosh:\n  forceDisableTelemetry: true\n  updateURL: ""\n' >"$work/mongosh.conf"
run_client mongosh "$npm_state" env HOME="$work/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$work/mongosh.conf" \
	"$here/node_modules/.bin/mongosh" "$uri/e2e_mongosh?directConnection=true" \
	--quiet --norc --file "$here/mongosh_smoke.js"
run_client node "$npm_state" node "$here/node_smoke.js" "$uri/?directConnection=true"
run_client pymongo "$py_state" "$python" "$here/pymongo_smoke.py" "$uri/?directConnection=true"
run_client mongoose "$npm_state" node "$here/mongoose_smoke.js" "$uri/?directConnection=true"

# --- stop the server cleanly ----------------------------------------------------------------
if ! stop_server; then
	say "FAIL: humongod did not shut down cleanly on SIGTERM"
	tail -20 "$log"
	failed=$((failed + 1))
fi

# --- transactions on a 3-member replica set -------------------------------------------------
# Transactions need a replica set (a standalone refuses them with code 20). Each member starts
# on a free port and logs it; the set is initiated with those ports, the first member is asked
# to stand for election once the others are SECONDARY (else the set waits out
# electionTimeoutMillis, 10 s), and the clients connect with the replica-set URI so that they
# follow the primary.
start_replset() {
	local i hosts="" members="" rport
	for i in 0 1 2; do
		log="$work/rs$i.log"
		"$work/humongod" --port 0 --bind_ip 127.0.0.1 --dbpath "$work/rs$i" --replSet rs0 >"$log" 2>&1 &
		pid=$!
		rs_pids+=("$pid")
		rport=$(wait_port "$log")
		if [ -z "$rport" ]; then
			say "replica-set member $i did not log \"Waiting for connections\" within 30s"
			tail -30 "$log"
			return 1
		fi
		hosts="$hosts${hosts:+,}127.0.0.1:$rport"
		members="$members${members:+, }{_id: $i, host: '127.0.0.1:$rport'}"
	done
	pid=""
	rs_uri="mongodb://$hosts/?replicaSet=rs0"
	local first=${hosts%%,*} out
	if ! out=$(timeout "$step_timeout" env HOME="$work/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$work/mongosh.conf" \
		"$here/node_modules/.bin/mongosh" "mongodb://$first/?directConnection=true" --quiet --norc --eval "
		rs.initiate({_id: 'rs0', members: [$members]});
		const deadline = Date.now() + 60000;
		while (!db.hello().isWritablePrimary) {
			if (Date.now() > deadline) throw new Error('no primary within 60s: ' + EJSON.stringify(rs.status()));
			// Votes come only from members that have the config and finished their initial
			// sync (an election asked earlier waits ~10 s for them and fails): stand once every
			// member is a SECONDARY, and again if an attempt failed.
			if (rs.status().members.every((m) => m.self || m.stateStr === 'SECONDARY')) {
				try { db.adminCommand({replSetStepUp: 1}); } catch (e) {}
			}
			sleep(100);
		}
		print('primary ' + db.hello().me);" 2>&1); then
		say "initiating the replica set failed:"
		printf '%s\n' "$out"
		return 1
	fi
	say "replica set rs0 ($hosts): $out"
}
if [ "$npm_state" = ok ]; then
	t0=$SECONDS
	if start_replset; then
		say "replica set up in $((SECONDS - t0))s"
		run_client mongosh-txn "$npm_state" env HOME="$work/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$work/mongosh.conf" \
			"$here/node_modules/.bin/mongosh" "$rs_uri" --quiet --norc --file "$here/mongosh_txn.js"
		run_client node-txn "$npm_state" node "$here/node_txn.js" "$rs_uri"
		run_client mongoose-txn "$npm_state" node "$here/mongoose_txn.js" "$rs_uri"
		run_client mongosh-cs "$npm_state" env HOME="$work/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$work/mongosh.conf" \
			"$here/node_modules/.bin/mongosh" "$rs_uri" --quiet --norc --file "$here/mongosh_changestream.js"
		run_client node-cs "$npm_state" node "$here/node_changestream.js" "$rs_uri"
	else
		for name in mongosh-txn node-txn mongoose-txn mongosh-cs node-cs; do
			result[$name]="FAIL: the replica set did not start"
			failed=$((failed + 1))
		done
	fi
	if ! stop_replset; then
		say "FAIL: a replica-set member did not shut down cleanly on SIGTERM"
		for i in 0 1 2; do tail -10 "$work/rs$i.log"; done
		failed=$((failed + 1))
	fi
else
	for name in mongosh-txn node-txn mongoose-txn mongosh-cs node-cs; do
		result[$name]=${result[mongosh]}
		[ "$npm_state" = skip ] || failed=$((failed + 1))
	done
fi

# --- humongos: the router skeleton answers the handshake as a mongos ------------------------
# Runs in this shell (not through run_client) so stop_server and cleanup see its pid.
mongos_smoke() {
	if ! (cd "$root" && timeout 600 go build -o "$work/humongos" ./cmd/humongos); then
		say "go build ./cmd/humongos failed"
		return 1
	fi
	log="$work/humongos.log"
	"$work/humongos" --configdb cfg/127.0.0.1:1 --port 0 --bind_ip 127.0.0.1 >"$log" 2>&1 &
	pid=$!
	local mport msg
	mport=$(wait_port "$log")
	if [ -z "$mport" ]; then
		say "humongos did not log \"Waiting for connections\" within 30s"
		tail -30 "$log"
		return 1
	fi
	msg=$(timeout "$step_timeout" env HOME="$work/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$work/mongosh.conf" \
		"$here/node_modules/.bin/mongosh" "mongodb://127.0.0.1:$mport/test" --quiet --norc \
		--eval 'db.hello().msg' 2>&1)
	if [ "$msg" != "isdbgrid" ]; then
		say "humongos hello.msg: got '$msg', want 'isdbgrid'"
		return 1
	fi
	if ! stop_server; then
		say "humongos did not shut down cleanly on SIGTERM"
		return 1
	fi
}
case $npm_state in
skip) result[humongos]="SKIP: registry unreachable" ;;
fail)
	result[humongos]="FAIL: could not install mongosh"
	failed=$((failed + 1))
	;;
*)
	t0=$SECONDS
	if mongos_smoke; then
		result[humongos]="PASS ($((SECONDS - t0))s)"
	else
		result[humongos]="FAIL"
		failed=$((failed + 1))
	fi
	;;
esac

# --- mongosh against a sharded cluster: `humongo up --shards 2` ------------------------------
# humongo starts the whole cluster (2 single-member shards, a config server, a router; it
# finds humongod and humongos next to itself in $work), initiates the sets and adds the shards,
# and prints the router's URI; e2e/mongosh_sharded.js runs the sh.* helpers, CRUD, an
# aggregation and getShardDistribution() through the router; `humongo down` stops it all.
# humongo takes the ports it is given (--ports): free ones are found by binding port 0 (Node is
# there whenever mongosh is), and a start that lost a port to another program is retried.
free_ports() { # N: N distinct free ports, comma-separated
	node -e '
		const net = require("net");
		const n = Number(process.argv[1]), ports = [], servers = [];
		const next = () => {
			if (ports.length === n) { servers.forEach((s) => s.close()); console.log(ports.join(",")); return; }
			const s = net.createServer().listen(0, "127.0.0.1", () => { ports.push(s.address().port); servers.push(s); next(); });
		};
		next();' "$1"
}
sharded_smoke() {
	if ! (cd "$root" && timeout 600 go build -o "$work/" ./cmd/humongo ./cmd/humongos); then
		say "go build ./cmd/humongo ./cmd/humongos failed"
		return 1
	fi
	local ports out rc suri="" t0=$SECONDS
	for _ in 1 2 3; do
		ports=$(free_ports 4) || return 1
		sharded_up=1 # from here down must run, even if up fails half way
		out=$(timeout "$step_timeout" "$work/humongo" up --shards 2 --dir "$sharded_dir" --ports "$ports" 2>&1)
		rc=$?
		printf '%s\n' "$out" >"$work/sharded-up.out"
		suri=$(sed -n 's/^sharded deployment is up: \(mongodb:[^ ]*\)$/\1/p' <<<"$out")
		[ "$rc" -eq 0 ] && [ -n "$suri" ] && break
		stop_sharded >/dev/null 2>&1
		suri=""
		grep -q 'in use' <<<"$out" || break # only a lost port is worth another try
	done
	if [ -z "$suri" ]; then
		say "humongo up --shards 2 failed:"
		printf '%s\n' "$out"
		return 1
	fi
	say "sharded cluster up in $((SECONDS - t0))s (ports $ports): $suri"
	run_client mongosh-sharded "$npm_state" env HOME="$work/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$work/mongosh.conf" \
		"$here/node_modules/.bin/mongosh" "$suri" --quiet --norc --file "$here/mongosh_sharded.js"
	t0=$SECONDS
	if ! stop_sharded; then
		say "humongo down did not stop the sharded cluster cleanly"
		return 1
	fi
	say "humongo down took $((SECONDS - t0))s"
}
case $npm_state in
skip) result[mongosh-sharded]="SKIP: registry unreachable" ;;
fail)
	result[mongosh-sharded]="FAIL: could not install mongosh"
	failed=$((failed + 1))
	;;
*)
	# run_client sets the result and counts a failing script; a failure around it (build,
	# up, down) is counted here.
	if ! sharded_smoke; then
		case ${result[mongosh-sharded]:-} in
		FAIL*) ;;
		*)
			result[mongosh-sharded]="FAIL${result[mongosh-sharded]:+ (the script: ${result[mongosh-sharded]})}"
			failed=$((failed + 1))
			;;
		esac
	fi
	;;
esac

# --- TLS and authentication: `humongo up --standalone --tls --auth` ----------------------------
# humongo makes a local CA and a server certificate in $tls_dir/tls and a keyfile, starts
# humongod with --tlsMode requireTLS and authorization, creates the user admin and prints a URI
# with the credentials and tls=true&tlsCAFile=; each client authenticates (SCRAM-SHA-256 or
# SCRAM-SHA-1) and writes and reads one document over TLS with only the CA file; mongosh
# without TLS, and mongosh without credentials, must be refused.
tls_checks=(mongosh-tls node-tls pymongo-tls mongoose-auth)
tls_smoke() {
	if [ ! -x "$work/humongo" ] && ! (cd "$root" && timeout 600 go build -o "$work/" ./cmd/humongo); then
		say "go build ./cmd/humongo failed"
		return 1
	fi
	local port out turi="" ca="$tls_dir/tls/ca.pem"
	for _ in 1 2 3; do
		port=$(free_ports 1) || return 1
		tls_up=1
		out=$(timeout "$step_timeout" "$work/humongo" up --standalone --tls --auth --dir "$tls_dir" --port "$port" 2>&1)
		printf '%s\n' "$out" >"$work/tls-up.out"
		turi=$(sed -n 's/^standalone deployment is up: \(mongodb:[^ ]*\)$/\1/p' <<<"$out")
		[ -n "$turi" ] && break
		stop_tls
		grep -q 'in use' <<<"$out" || break
	done
	if [ -z "$turi" ]; then
		say "humongo up --standalone --tls --auth failed:"
		printf '%s\n' "$out"
		return 1
	fi
	local pw
	pw=$(cut -d: -f2 "$tls_dir/credentials")
	say "TLS standalone with authorization up: ${turi/$pw/****}"
	run_client mongosh-tls "$npm_state" env HOME="$work/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$work/mongosh.conf" \
		"$here/node_modules/.bin/mongosh" --tls --tlsCAFile "$ca" "mongodb://127.0.0.1:$port/e2e_tls?directConnection=true" \
		-u admin -p "$pw" --authenticationDatabase admin --authenticationMechanism SCRAM-SHA-256 \
		--quiet --norc --eval "
		db.c.insertOne({_id: 'mongosh', over: 'tls'});
		const d = db.c.findOne({_id: 'mongosh'});
		if (!d || d.over !== 'tls') throw new Error('mongosh over TLS read ' + EJSON.stringify(d));"
	# A plain client of a requireTLS server must fail to connect.
	if timeout "$step_timeout" env HOME="$work/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$work/mongosh.conf" \
		"$here/node_modules/.bin/mongosh" "mongodb://127.0.0.1:$port/?directConnection=true&serverSelectionTimeoutMS=2000" \
		--quiet --norc --eval 'db.hello()' >"$work/mongosh-plain.out" 2>&1; then
		say "a plain mongosh connected to the requireTLS server"
		result[mongosh-tls]="FAIL: a plain mongosh was not refused"
		failed=$((failed + 1))
	fi
	# An unauthenticated client over TLS connects but may not read.
	if timeout "$step_timeout" env HOME="$work/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$work/mongosh.conf" \
		"$here/node_modules/.bin/mongosh" --tls --tlsCAFile "$ca" "mongodb://127.0.0.1:$port/e2e_tls?directConnection=true" \
		--quiet --norc --eval 'db.c.findOne()' >"$work/mongosh-noauth.out" 2>&1 ||
		! grep -q 'requires authentication' "$work/mongosh-noauth.out"; then
		say "an unauthenticated mongosh was not refused:"
		cat "$work/mongosh-noauth.out"
		result[mongosh-tls]="FAIL: an unauthenticated mongosh was not refused"
		failed=$((failed + 1))
	fi
	run_client node-tls "$npm_state" node -e "
		const { MongoClient } = require('$here/node_modules/mongodb');
		(async () => {
			for (const authMechanism of ['SCRAM-SHA-256', 'SCRAM-SHA-1']) {
				const client = new MongoClient(process.argv[1], { serverSelectionTimeoutMS: 10000, directConnection: true, authMechanism });
				try {
					const c = client.db('e2e_tls').collection('c');
					await c.insertOne({ _id: 'node-' + authMechanism, over: 'tls' });
					const d = await c.findOne({ _id: 'node-' + authMechanism });
					if (!d || d.over !== 'tls') throw new Error('node over TLS read ' + JSON.stringify(d));
					const st = await client.db('admin').command({ connectionStatus: 1 });
					if (st.authInfo.authenticatedUsers[0].user !== 'admin') throw new Error('connectionStatus ' + JSON.stringify(st));
				} finally { await client.close(); }
			}
		})().catch((e) => { console.error(e); process.exit(1); });" "$turi"
	run_client pymongo-tls "$py_state" "$python" -c "
import sys, pymongo
client = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000, directConnection=True, authMechanism='SCRAM-SHA-1')
c = client['e2e_tls']['c']
c.insert_one({'_id': 'pymongo', 'over': 'tls'})
d = c.find_one({'_id': 'pymongo'})
assert d and d['over'] == 'tls', d" "$turi"
	run_client mongoose-auth "$npm_state" node -e "
		const mongoose = require('$here/node_modules/mongoose');
		(async () => {
			await mongoose.connect(process.argv[1], { serverSelectionTimeoutMS: 10000, directConnection: true, dbName: 'e2e_tls' });
			try {
				const Item = mongoose.model('Item', new mongoose.Schema({ name: String, qty: Number }));
				await Item.create({ name: 'secured', qty: 1 });
				const d = await Item.findOne({ name: 'secured' });
				if (!d || d.qty !== 1) throw new Error('mongoose over TLS with auth read ' + JSON.stringify(d));
			} finally { await mongoose.disconnect(); }
		})().catch((e) => { console.error(e); process.exit(1); });" "$turi"
	if ! stop_tls; then
		say "FAIL: humongo down did not stop the TLS standalone"
		cat "$work/tls-down.out"
		failed=$((failed + 1))
	fi
}
case $npm_state in
skip) for name in "${tls_checks[@]}"; do result[$name]="SKIP: registry unreachable"; done ;;
fail)
	for name in "${tls_checks[@]}"; do result[$name]="FAIL: could not install mongosh"; done
	failed=$((failed + 1))
	;;
*)
	if ! tls_smoke; then
		for name in "${tls_checks[@]}"; do
			case ${result[$name]:-} in
			FAIL* | PASS*) ;;
			*)
				result[$name]="FAIL: the TLS server did not start"
				failed=$((failed + 1))
				;;
			esac
		done
	fi
	;;
esac

for name in mongosh node pymongo mongoose mongosh-txn node-txn mongoose-txn mongosh-cs node-cs humongos mongosh-sharded "${tls_checks[@]}"; do
	say "$(printf '%-16s %s' "$name" "${result[$name]}")"
done
if [ "$failed" -ne 0 ]; then
	say "FAILED ($failed)"
	exit 1
fi
say "OK"
