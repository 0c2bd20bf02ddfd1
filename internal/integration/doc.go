// Package integration holds end-to-end tests of a real `humongod` process driven over TCP by
// the official Go driver v2 (ARCHITECTURE.md, testing tier 4; issue 3 acceptance): every
// CRUD, query and DDL command with MongoDB 7.0's reply shapes and error codes, cursor batching
// across getMore, killCursors, index use shown by explain, upserts, arrayFilters, unique-index
// violations, a clean-restart durability test, and loopback benchmarks of the end-to-end path
// (`go test -bench . ./internal/integration`).
//
// The tests build humongod once per test binary (TestMain) and start it as a child process on
// an ephemeral port with a temporary dbpath; the port comes from the server's JSON log line
// "Waiting for connections" (attr.port). The package has no non-test code.
package integration
