#!/usr/bin/env bash
# The driver-specification stage of the test command: the Go driver's own unified-format spec
# tests (crud, collection-management, retryable-reads, sessions, versioned-api, run-command,
# gridfs, index-management, command-logging-and-monitoring, unified-test-format, transactions,
# causal-consistency, retryable-writes, change-streams) against a standalone humongod and a
# three-member replica set, both with enableTestCommands, then transactions, sessions and
# change-streams through two routers over two shards; after the replica-set run every member
# must be up and dbHash equal on all members. The work is internal/integration's
# TestDriverSpecs; its driverSpecsAllowed lists, with reasons, the few tests allowed to fail
# (time-series, spec-data gaps).
#
# The spec data and its runner (run.sh) live outside this repository, in
# ../shared/driver-specs (HUMONGO_DRIVER_SPECS overrides the path to run.sh). The runner is
# built once from the driver module of go.mod into DRIVER_SPECS_WORK (default
# $TMPDIR/humongo-driver-specs-runner); without the spec data, or offline when the runner is not
# built yet, the stage is skipped with a message saying so.
set -euo pipefail
cd "$(dirname "$0")/.."

runsh=${HUMONGO_DRIVER_SPECS:-$(cd .. && pwd)/shared/driver-specs/run.sh}
if [ ! -f "$runsh" ]; then
	echo "driver-specs: SKIP: no driver spec runner at $runsh (set HUMONGO_DRIVER_SPECS to its run.sh)"
	exit 0
fi
export HUMONGO_DRIVER_SPECS=$runsh
export DRIVER_SPECS_WORK=${DRIVER_SPECS_WORK:-${TMPDIR:-/tmp}/humongo-driver-specs-runner}
start=$(date +%s)
status=0
go test -count=1 -timeout 40m -run '^TestDriverSpecs$' -v ./internal/integration/ || status=$?
echo "driver-specs: $(( $(date +%s) - start )) s"
exit "$status"
