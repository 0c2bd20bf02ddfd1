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

# Fuzz targets named by the storage-engine acceptance list (KeyString decode, raw BSON access)
# and the wire framing. `go test -fuzz` takes one target per run.
fuzz() {
	local pkg=$1 target=$2
	echo "== fuzz $target ($pkg, $fuzztime)"
	go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg"
}
fuzz ./internal/keystring FuzzDecode
fuzz ./internal/bsonutil FuzzCompareRaw
fuzz ./internal/wire FuzzReadMessage
