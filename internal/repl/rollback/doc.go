// Package rollback is replica-set rollback by recover-to-stable-timestamp (spec/replication.md,
// "Rollback"; checklist-replication.md §9; MongoDB's RollbackImpl). A member whose oplog
// diverged from its sync source's (an old primary's w:1 writes that no majority has) gets back
// onto the source's branch of history:
//
//  1. FindCommonPoint walks our oplog and the source's backwards in step until both have an
//     entry with the same (ts, t): the common point. Our entries after it are rolled back.
//     No common point, or one before the stable timestamp or the majority commit point, is
//     unrecoverable: the stable timestamp only ever covers majority-committed entries, and
//     rolling those back would lose acknowledged w:"majority" writes, so the caller shuts the
//     node down instead (MongoDB fasserts).
//  2. The rollback id (replSetGetRBID) is incremented and persisted, so a node syncing from
//     this one, or an initial sync reading from it, notices that history changed.
//  3. Data modification, under the global lock in X; any failure from here on is unrecoverable:
//     the current version of every document an insert, update or delete after the common
//     point touched is written to <dbpath>/rollback/<collection UUID>/removed.<time>.bson
//     (concatenated BSON, as MongoDB does; createRollbackDataFiles); minValid is set to the
//     source's top of oplog as read in step 1; oplogTruncateAfterPoint is set to the common
//     point; storage recovers to the stable timestamp (every timestamped table, the durable
//     catalog included, loses its versions above it; the catalog and the collection handles
//     are reloaded); the oplog is truncated after the common point; our own entries in
//     (stable, common point] are applied again (recovery.ReplayOplog, startup recovery's
//     replay, in oplog.ModeRecovering); the truncate point is cleared; the oplog writer's
//     LastWritten goes back to the common point.
//
// The caller (internal/repl/coord, secondary.go) moves the member to ROLLBACK before Run (reads
// fail with NotPrimaryOrSecondary, writes with NotWritablePrimary), and afterwards resets
// lastApplied and lastDurable to the common point and records minValid: the member is
// RECOVERING while steady-state replication fetches the source's branch from the common point,
// and SECONDARY once it has applied up to minValid (the source's top when rollback began).
//
// Run talks to storage and to the sync source only through the Local and Remote interfaces,
// so the protocol is tested without processes; Node implements both over a real storage
// engine, ClientRemote implements Remote over the Go driver.
//
// Invariants: nothing is modified before the common point is known and checked against the
// stable timestamp and the commit point; the rollback files are durable (fsynced) before
// recovery deletes the versions they preserve; the committed snapshot (majority reads) is
// never above the commit point, which is never above the common point, so no majority read
// ever returned a document that rollback removes.
//
// Not done (yet): waiting for index builds that are running in the background, aborting and
// reconstructing prepared transactions, fast-count corrections for collections that the
// recovery does not touch (counts are recomputed per table by the storage engine instead),
// and a limit on how much may be rolled back.
package rollback
