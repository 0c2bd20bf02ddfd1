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
// Step-up (spec "Transitioning to PRIMARY"): with data replication the watcher
// (secondary.go) keeps the fetcher and applier running while the primary-elect catches up to
// the newest optime it learned (catchUpTimeoutMillis), then drains them — the last batch
// applied, journaled, reported and visible — before completeDrain writes the "new primary"
// no-op and the node accepts writes.
//
// Locking: c.mu guards the TopologyCoordinator and everything derived from it. Neither network
// IO nor the journal wait of durable-state persistence happens under c.mu. The core's
// durability contract (topology/doc.go: the term and last vote are durable before any message
// produced by the same call is sent) is kept by ordering instead: handleLocked hands the state
// and the rest of the action list to a goroutine that writes it (writeDurable) and only then
// carries out the rest; a vote reply waits for the write. States are numbered under c.mu and
// written in that order (an older one is never written after a newer one).
//
// Time comes from Options.Clock (RealClock by default; a fake in tests).
package coord
