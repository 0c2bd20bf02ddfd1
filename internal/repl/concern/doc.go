// Package concern owns read concern, write concern, the cluster-wide default read/write
// concern and the cluster time a replica-set member gossips (spec/replication.md "Read
// Concern", "Write Concern", "Commit Point Propagation"; MongoDB 7.0's read_concern_mongod.cpp,
// write_concern.cpp, ReadWriteConcernDefaults and VectorClock gossip).
//
// It sits above the operation layer (it picks an operation's read source and waits on the
// replication coordinator) and below every user of it: the command handlers, and next the
// transaction and sharding layers. Commands keep only the glue that reads a command's fields
// and calls Begin / Finish / ParseWriteConcern / WaitForWrite.
//
// Read timestamps (storage ReadProvided), MongoDB's RecoveryUnit::ReadSource:
//
//	local/available  primary: newest data (no timestamp); secondary: lastApplied, so a read
//	                 never sees half an applier batch (kLastApplied)
//	majority         the committed snapshot: the storage stable timestamp, which the
//	                 coordinator sets to min(commit point, lastApplied) (kMajorityCommitted)
//	snapshot         atClusterTime, or the all-durable point when absent (returned as
//	                 cursor.atClusterTime) (kProvided)
//	linearizable     newest data on a writable primary, then a majority-confirmed no-op
//
// A cursor keeps its read source, not its first timestamp: every getMore picks the source's
// timestamp again (Reapply), as MongoDB's getMore does (applyCursorReadConcern sets
// kMajorityCommitted again; AutoGetCollectionForRead picks kLastApplied again). So a
// majority cursor's later batches come from the newest committed snapshot (never from
// uncommitted data), a secondary's cursor follows lastApplied (a tailable oplog cursor of a
// chained secondary sees new entries), and neither pins history until the oldest timestamp
// passes it (SnapshotTooOld). Only snapshot reads stay at one timestamp. (Find cursors do
// this; aggregation cursors still keep their first timestamp.)
//
// A count without a predicate answers from the collection's record count, which is not
// versioned (as MongoDB's fast count): on a secondary it may include a batch in progress.
//
// On a standalone (as MongoDB 7.0 on a standalone): local, available and majority read the
// newest data; snapshot and linearizable fail with NotAReplicaSet, afterClusterTime with
// IllegalOperation.
//
// Write concern: parsing as WriteConcernOptions::parse and validateWriteConcern do, the
// default write concern of a replica set, and the wait after the writes (waiters wake when
// the commit point or a member's optime moves). A failed wait does not fail the command: the
// reply keeps `ok: 1`, `n` and `writeErrors` and gains a `writeConcernError`
// (command_helpers.cpp appendCommandWCStatus), which the dispatcher attaches from a
// *WriteConcernReply.
package concern

import (
	"humongo/internal/operation"
	"humongo/internal/repl/coord"
)

// Node is what concern needs of one server: its storage, its replication coordinator (nil on
// a standalone) and its concern state.
type Node struct {
	DB    *operation.DB // nil in servers started without storage
	Repl  *coord.Coordinator
	State *ServerState
	// Member: the node is a sharded-cluster member (a shard or a config server), which
	// gossips $configTime and $topologyTime with other members.
	Member bool
}
