// Package sim is a deterministic simulation of a replica set built on the
// pure decision core internal/repl/topology (spec/replication.md; the
// fault-injection invariants of checklist-replication.md). N nodes each run a
// TopologyCoordinator plus a tiny in-memory oplog of (term, timestamp)
// entries; secondaries pull entries from their sync source ("oplog
// fetching"), report progress with replSetUpdatePosition, and roll back to
// the common point when their log diverges from the source's.
//
// Everything is driven by one seeded *rand.Rand and a virtual clock: a lossy,
// reordering, partitionable network, node crashes and restarts that keep only
// durable state (term, last vote, the journaled oplog prefix), and a client
// that writes to whichever node claims to be a writable primary. The same
// seed always replays the same history, so a failing seed is a reproducible
// bug report.
//
// Invariants checked as the run proceeds:
//   - NoTwoPrimariesInSameTerm;
//   - a node never votes for two candidates in one term, across restarts;
//   - leader completeness: a new primary's log holds every majority-committed
//     entry;
//   - the majority-committed entries form one history (every primary's
//     committed prefix agrees);
//   - each node's commit point is monotonic (per incarnation) and lies on
//     its own branch of history;
//   - NeverRollbackCommitted: rollback never truncates an entry at or
//     before the node's own commit point, nor a last entry committed in the
//     current term (RaftMongo.tla's form; see Sim.rollback for the
//     older-term case MongoDB allows);
//   - liveness sanity: after the network heals for long enough, a writable
//     primary exists and every acknowledged w:majority write is in its log.
package sim
