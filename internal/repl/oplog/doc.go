// Package oplog writes and applies `local.oplog.rs`, the replicated log of every write
// (spec: replication.md "Life as a Primary / Doing a Write", "Oplog Entry Application",
// "Idempotency concerns", "Replication Timestamp Glossary"; execution.md "Oplog Collection",
// "Oplog Visibility", "Vectored Inserts").
//
// # Writing (primary)
//
// Writer implements opobserver.Observer. Every replicated write calls it inside its own
// WriteUnitOfWork, so the entry and the write commit together at the same timestamp. Open
// creates the oplog on a --replSet node (capped at Config.MaxSizeBytes through the engine's
// truncate markers) and positions the slot allocator after its newest entry. The
// coordinator installs the writer with commands.DB.SetObserver and supplies the term.
//
// Entries have MongoDB's shape, in its field order:
//
//	{lsid?, txnNumber?, op, ns, ui, o, o2?, fromMigrate?, stmtId?, ts, t: long, v: long 2,
//	 wall: date, prevOpTime?}
//
//	i  o: the document
//	u  o: {$v: 2, diff: {d, u, i, s<field>}} (diff.go) or the whole new document when that
//	   is smaller (a replacement); o2: {_id}
//	d  o: {_id}
//	c  ns "<db>.$cmd"; o: {create: c, ...options, idIndex}, {drop: c},
//	   {renameCollection: "db.a", to: "db.b", stayTemp, dropTarget?: uuid},
//	   {createIndexes: c, ...spec}, {dropIndexes: c, index: name} (o2: the spec),
//	   {collMod: c, ...changes, index?}, {dropDatabase: 1}
//	n  ns "", o: {msg: ...} (LogNoop)
//
// # Timestamps and holes
//
// LocalOplogInfo hands out slots: max(wall seconds:1, last+1, all-durable+1), reserved and
// registered in flight with the engine (RecoveryUnit.SetTimestamp) under one mutex, so the
// engine's all-durable point, which is the oplog visibility point of forward oplog cursors,
// never passes a reserved slot whose unit has not committed or rolled back. A rolled-back
// unit leaves an unused timestamp, not a hole. Each observer call sets its slot as the
// unit's current timestamp before the write it logs (opobserver's package comment), so data
// and entry carry the same timestamp, and vectored inserts stamp document i with slot i.
//
// Known limit: writes that never reach the observer (the `local` database) take
// engine-assigned timestamps; one that commits between a slot's computation and its
// registration could land above it. The all-durable+1 floor makes this a narrow window; an
// engine call that assigns and registers atomically would close it.
//
// # Applying (secondary, initial sync, recovery)
//
// Applier.Apply applies one entry at its timestamp, idempotently: an insert is an upsert by
// _id, an update applies its diff to the current document (replay over the post image is a
// no-op), a delete of a missing document succeeds, and commands check whether they already
// took effect. ModeInitialSync and ModeRecovering also tolerate DuplicateKey, missing
// documents and collections (spec: "Idempotency concerns"). Applied writes are marked
// unreplicated (opobserver.UnreplicatedWrites), so they log nothing; the caller writes the
// received entry itself with Writer.AppendEntry. Grouping a batch by document for parallel
// writers (ApplyBatch) is a follow-up.
//
// An applyOps entry (a committed transaction, or the applyOps command's) applies all its
// operations in one unit at its own timestamp; a partialTxn entry applies nothing, and the
// last entry of its chain applies the whole chain's operations, read back through
// prevOpTime (txn_apply.go). A transaction's commit entry also derives its
// config.transactions record, state "committed" (sessions.go).
//
// # Change stream pre-images
//
// For a collection with changeStreamPreAndPostImages, the writer records each update's and
// delete's pre-image in config.system.preimages with the entry (a transaction's per applyOps
// entry and index, at commit or prepare), and the applier records the same pre-image from the
// document it reads before applying (preimages.go; read and expired by
// internal/changestream/images).
//
// # Only a writable primary logs writes of its own
//
// Every replicated write reaches the Writer (the op observer), so the Writer is where a node
// that is not a writable primary is stopped (MongoDB's logOp check, "logOp() but can't accept
// write to collection"): logEntries fails with NotWritablePrimary unless Config.Writable (the
// coordinator's CanAcceptNonLocalWrites) says yes. Whatever the path (a command, an
// aggregation stage, the TTL monitor, an index build), a secondary thus never writes
// replicated data of its own. Replication's own writes (application, initial sync, rollback,
// startup recovery) are unreplicated and never reach it; unreplicated namespaces
// (opobserver.IsReplicatedNS: local, system.profile, config.system.preimages) and no-ops (ns "", such as the "new
// primary" entry written while draining) are exempt.
package oplog
