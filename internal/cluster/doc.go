// Package cluster is Humongo's integration and fault-injection harness (ARCHITECTURE.md,
// testing tiers 4 and 5): it builds the real binaries once per test process, starts
// `humongod` (and later `humongos`) processes on 127.0.0.1 ephemeral ports with their own
// dbpaths, and gives tests the faults a real deployment suffers: kill -9, SIGTERM, SIGSTOP /
// SIGCONT, restart on the same dbpath and port, and, through package proxy, slow, cut and
// partitioned links. Package checker judges the histories the tests record.
//
// Rules the harness keeps so that no test can hang CI or leak processes:
//   - every wait takes a context or has a bound;
//   - every process is killed when its test ends (t.Cleanup), and on Linux also when the test
//     binary dies (Pdeathsig);
//   - each process's stdout and stderr go to a log file in the test's temp dir, and when a
//     test fails the last lines of every log are printed.
//
// A Deployment is described by a Topology so replica sets and sharded clusters fit the same
// shape later: Start(t, topology, opts) starts the processes, connects a client, and tears
// everything down at test end. Standalone and ReplicaSet exist; for a replica set (replset.go)
// Start also initiates the set, waits for a primary and connects with the replica-set URI,
// and the Deployment gives Primary, WaitForPrimary, WaitForState, StepDown and per-member
// direct clients.
package cluster
