// Package operation is the operation layer under the command handlers (MongoDB's
// OperationContext and the storage decorations of its ServiceContext; spec/execution.md
// "Storage Transactions", "Read Operations", "Write Operations", "Concurrency Control").
//
// It owns:
//
//   - DB, the storage side of one data node: engine, catalog, collection write paths, lock
//     manager, spill directory, and the per-node state that packages above keep on it
//     (Decoration), released by Close;
//   - Context, one operation: the context.Context it was created with (deadline, kill and
//     shutdown: a maxTimeMS deadline surfaces as MaxTimeMSExpired), its Locker and
//     RecoveryUnit, the read source its read concern chose, the logical session it runs in,
//     and the shardVersion/databaseVersion the request carried;
//   - the one way to open a collection with locks and a unit of work (ReadCollection,
//     WriteCollection, EnsureCollection, DDL, DatabaseDDL, InUnit);
//   - prepare conflicts for everything above storage (spec: replication.md "Prepare
//     Conflicts"): ReadSource.IgnorePrepare (set by read concern) makes a read return the
//     pre-prepare data; every write's retry loop (writeConflictRetry) waits for a prepared
//     transaction it met and retries in a new unit, and a transaction's statement waits and
//     fails with WriteConflict when its unit cannot continue past it;
//   - the one read seam (read.go): every read of user data opens its snapshot with
//     Context.OpenRead or Context.ReadLocked and plans through the returned Read, which
//     applies the namespace's ownership filter (resolved by DB.ShardCheck for a versioned
//     request; DB.OwnershipFilterFor overrides it in tests);
//   - the shard's version check seam (DB.ShardCheck): the collection access methods and DDL
//     call it under their locks when the operation carries shardVersion / databaseVersion
//     (for Context.VersionedNS), as MongoDB's AutoGetCollection does; the sharding layer
//     (internal/sharding/filtering) implements it.
//
// Read concern (repl), write concern (repl) and retryable writes (txn) sit above this package
// and use it; command handlers sit above all of them.
//
// Known deviation: only the operations that lock a collection (or a database for its DDL)
// through this package are version-checked; commands that read the catalog without locking
// (listCollections, listIndexes) are not.
package operation
