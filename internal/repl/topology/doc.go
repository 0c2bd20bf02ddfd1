// Package topology is the pure decision core of replica-set replication: one
// TopologyCoordinator per node decides elections, heartbeats, step-downs, the
// majority commit point, sync-source selection and the member state before
// steady state: STARTUP2 for a node that needs initial sync, RECOVERING while
// its data is behind minValid (spec/replication.md: "Replication and Topology
// Coordinators", "Heartbeats", "Commit Point Propagation", "Update Position
// Commands", "Sync Source Selection", "Elections", "Initial Sync", "Startup
// Recovery", "Rollback"; checklist-replication.md §4, §8, §10 and §11).
//
// The coordinator follows MongoDB's TopologyCoordinator and etcd-io/raft: it
// never does IO, starts goroutines, reads the clock or sleeps. Every input is a
// method call that carries the current time (`now`); every output is either a
// direct return value (a heartbeat or vote response) or a list of Actions the
// caller must carry out (send heartbeats, persist durable state, step down,
// change sync source, ...). Randomness (the election-timeout offset) comes from
// the *rand.Rand given at construction, so the same inputs always produce the
// same outputs; that is what lets internal/repl/sim run thousands of seeded
// fault schedules.
//
// Durability contract (STYLE.md rule 9): whenever the term or the last vote
// changes, the coordinator returns an ActPersistDurable action (and
// ProcessVoteRequest returns persist=true). The caller must make that state
// durable (local.replset.election) BEFORE it sends any message produced by the
// same call — a vote reply acknowledged before the vote is durable could let a
// restarted voter vote twice in one term.
//
// Invariants the coordinator maintains (and the simulation checks):
//   - term never decreases; lastVote.Term <= term;
//   - at most one real-election vote is granted per term (lastVote);
//   - the commit point is monotonic and, on a primary, only advances to an
//     optime of the current term that is durable (or applied, when
//     writeConcernMajorityJournalDefault is false) on a majority of voters;
//   - a primary that sees a higher term, or cannot hear from a majority of
//     voters for electionTimeout, steps down.
package topology
