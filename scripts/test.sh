#!/usr/bin/env bash
# The project's test command (README): unit, property, integration and crash tests with the race
# detector, then each fuzz target for a bounded time. CI runs this via .ci/run.
#
#   FUZZTIME=10s scripts/test.sh   # shorter fuzzing for a quick local run
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-60s}

echo "== go test -race ./..."
go test -race -timeout 20m ./...

# Real clients against a real humongod: mongosh and the Node driver (npm), pymongo (Debian).
echo "== e2e"
bash e2e/run.sh

# Fuzz targets. The storage-engine issue requires 60 s each for KeyString decode and raw BSON
# access; the wire framing gets the same. The rest get a shorter run (FUZZTIME_SHORT) to keep
# the suite inside its time budget. `go test -fuzz` takes one target per run.
short=${FUZZTIME_SHORT:-20s}
fuzz() {
	local pkg=$1 target=$2 time=$3
	echo "== fuzz $target ($pkg, $time)"
	go test -run='^$' -fuzz="^${target}\$" -fuzztime="$time" "$pkg"
}
fuzz ./internal/keystring FuzzDecode "$fuzztime"
fuzz ./internal/bsonutil FuzzCompareRaw "$fuzztime"
fuzz ./internal/wire FuzzReadMessage "$fuzztime"
fuzz ./internal/keystring FuzzRoundTrip "$short"
fuzz ./internal/bsonutil FuzzLookup "$short"
fuzz ./internal/query FuzzParseMatch "$short"
fuzz ./internal/query FuzzProjection "$short"
fuzz ./internal/query/update FuzzParseApply "$short"
fuzz ./internal/index FuzzGetKeys "$short"
fuzz ./internal/agg FuzzPipeline "$short"
fuzz ./internal/commands FuzzDispatchOpMsg "$short"
