// Package coord is the ReplicationCoordinator of a replica-set member: it owns the pure
// TopologyCoordinator (internal/repl/topology) and does everything the core may not — the
// clock, goroutines, network IO and persistence (spec/replication.md: "Replication and Topology
// Coordinators", "Communication", "Heartbeats", "Commit Point Propagation", "Update Position
// Commands", "Elections", "Step Up/Down").
//
// One ticker goroutine feeds Tick(now) and carries out the returned actions: heartbeats to
// every member every heartbeatIntervalMillis, dry-run then real elections, step-downs and the
// primary-elect → drain → "new primary" no-op → writable transition. Every message between
// members is an ordinary command over the MongoDB wire protocol (replSetHeartbeat,
// replSetRequestVotes, replSetUpdatePosition), sent with the Go driver over a
// directConnection client per member.
//
// Locking: c.mu guards the TopologyCoordinator and everything derived from it. Network IO never
// happens under c.mu; durable-state persistence does, because the core's durability contract
// (topology/doc.go) requires the term and last vote to be durable before any message produced
// by the same call is sent, and holding the mutex is the simplest way to order the two.
package coord
