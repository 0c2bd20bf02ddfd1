// Package storage is Humongo's timestamped MVCC storage engine on Pebble. Spec sections
// (spec/execution.md): "Storage Transactions" (RecoveryUnit, WriteUnitOfWork, lazy
// initialization, WriteConflictException), "Startup Recovery" and "Recovery To A Stable
// Timestamp", "Checkpoints", "Journaling", and "Oplog Collection" (Oplog Visibility, Oplog
// Truncation); and the storage half of prepared transactions (spec/replication.md
// "Cross-Shard Transactions and the Prepared State", "Prepare Conflicts").
//
// It plays the part WiredTiger plays for MongoDB: tables ("idents") of byte keys and values,
// snapshot-isolated transactions with timestamps, write-write conflict detection, history
// kept down to the oldest timestamp, rollback of timestamped data to the stable timestamp,
// and a journal that is synced in groups. Pebble is imported only here.
//
// # Key format (all encodings live in keys.go)
//
// One Pebble DB holds everything. An ident is a 4-byte big-endian prefix id; the id is
// allocated from a persisted counter and never reused, so a dropped ident's leftovers can
// never reappear under a new table. A stored version of user key k in ident id is
//
//	id(4) ‖ k ‖ 0x00 ‖ ts(8, big-endian) ‖ 0x09
//
// The part up to and including the 0x00 sentinel is the MVCC prefix; the last 9 bytes are the
// version suffix, and the final byte (its length) lets Split find the boundary from the end
// without knowing where k ends (k may contain any byte). A key that ends in 0x00 has no
// suffix: it is a bare key. Bare keys are used for the engine's metadata (prefix id 0:
// format version, ident records, counts, stable/oldest timestamps, the timestamp lease and
// the clean-shutdown marker) and as seek keys, because the custom comparer orders
//
//	prefix bytewise; then the empty suffix first; then timestamps descending.
//
// So SeekGE(prefix ‖ suffix(readTs)) lands on the newest version at or below readTs, a point
// read is one SeekPrefixGE, and bloom filters (built on Split's prefix) skip tables that do
// not hold the key. The sentinel keeps bytewise prefix order equal to user-key order (adding
// the same trailing byte to every key preserves order). Values start with a header byte:
// 0x01 value, 0x02 tombstone. A delete is a tombstone version, so history stays readable at
// older timestamps; GC removes it once it is below the oldest timestamp.
//
// Alternatives rejected: one Pebble DB per ident (no atomic multi-table commits, many WALs
// to sync); the timestamp inside the prefix (breaks bloom filters and point-read seeks);
// Pebble's own sequence numbers as the MVCC clock (MongoDB timestamps are chosen by the
// replication layer and must be settable, rolled back and read at arbitrary points, which
// sequence numbers are not); timestamps ascending (then "newest at or below T" needs a
// reverse seek, which Pebble does more slowly).
//
// # Transactions
//
// A RecoveryUnit opens its snapshot lazily: it fixes the read timestamp (MaxTimestamp for
// ReadNoTimestamp, the provided one, or the all-durable point), records the commit sequence
// (below), then creates one Pebble iterator, which is a consistent view. Point reads reuse
// that iterator with SeekPrefixGE (a fresh iterator per read costs about a third more CPU,
// see BenchmarkPointGetFreshSnapshot); cursors clone it, so they see exactly the same view. Writes are buffered in the unit (the latest
// value per key for reads, plus an ordered op log) and applied at commit as one Pebble batch
// with NoSync. Cursors merge the buffer with the snapshot; the buffer's keys are also kept in
// an insert-only B-tree (keytree.go) and the buffer side is re-located by an O(log n) seek on
// every move, so writes made while a cursor is open are seen, and a unit interleaving writes
// and cursor opens stays O(n log n) (a key list re-sorted after each write made it quadratic).
//
// A commit whose unit wrote to an ident that was dropped after the write fails with
// WriteConflict and is rolled back: commits check for dropped idents and apply their batch
// under the read side of a lock whose write side DropIdent takes to mark the ident, so no
// version lands under a dead prefix after its range deletion (where nothing would reclaim
// it). WiredTiger instead refuses such a drop (EBUSY) and MongoDB's reaper retries; here the
// drop wins and the writer retries against the new catalog.
//
// Commit timestamps: SetCommitTimestamp (all writes) or SetTimestamp (the writes that
// follow) are explicit; otherwise commit assigns max(now.secs:1, highest seen + 1). Every
// timestamp seen raises a high-water mark; before a timestamp at or above a persisted lease
// (a seconds value) is used, the lease is moved 10 s ahead and written to the WAL before the
// commit batch, so after a restart (WAL order is preserved by crashes) the high-water mark
// starts at the lease and assigned timestamps never go backwards even if the clock does.
//
// # All-durable point and oplog visibility (no holes)
//
// Explicit timestamps are registered "in flight" when set and every assigned timestamp when
// assigned; they leave the set after the batch is applied (or on rollback). The all-durable
// timestamp is (oldest in flight − 1), or the largest committed timestamp if nothing is in
// flight. Because a snapshot computes that point before creating its Pebble view, every
// commit at or below it has already been applied and is in the view. Forward cursors on
// oplog idents under ReadNoTimestamp stop at the point captured at snapshot open, so a
// reader never passes a hole that a slower writer fills later; reverse cursors do not.
// Callers reserving oplog timestamps must call SetTimestamp under the same mutex that hands
// out the timestamps (as MongoDB's oplog slot reservation does), or a reserved but not yet
// registered timestamp is a hole the engine cannot know about.
//
// # Write conflicts (first updater wins)
//
// A commit, after its batch is applied, takes the next commit sequence number; a snapshot
// records the current sequence before its view is created. A sharded in-memory table maps
// (ident, key) to its uncommitted writer and the sequence of its last commit. Put/Delete
// fail at once with WriteConflict (112) if another unit owns the key, or if the key's last
// commit sequence is newer than the unit's snapshot (it was committed after the snapshot
// opened, so the unit did not see it). Commit and rollback release ownership. Entries
// whose sequence is at or below the oldest open snapshot cannot conflict with anyone any
// more and are pruned when a shard grows. The order "apply batch, then take sequence" and
// "take sequence, then open view" makes a false negative impossible; the only imprecision
// is a rare false positive (a commit that lands in a view but takes a later sequence), which
// merely causes a retry. Comparing against the newest stored version instead would need a
// second (unsnapshotted) read per write and cannot tell same-timestamp rewrites apart.
// WriteConflictRetry retries with jittered exponential backoff (1 ms doubling to 100 ms).
//
// # Durability
//
// Commits never sync. A journal flusher goroutine syncs the WAL (LogData with Sync) every
// JournalCommitInterval when something was written, and at once when WaitUntilDurable
// callers wait: each waiter waits for the sync round that starts after its call, so one
// fsync serves every waiter of a round (group commit) and no waiter is released by a sync
// that began before its commit. Ident create/drop, the format version and the removal of
// the clean-shutdown marker are synced on return. A kill -9 can lose commits nobody waited
// for, never one whose WaitUntilDurable returned; reopening replays Pebble's WAL.
//
// # Stable, oldest, recovery and GC
//
// SetStableTimestamp persists the stable timestamp (untimestamped metadata, durable with the
// next sync). RecoverToStable, with no open snapshots, deletes every version newer than
// stable in every timestamped ident (data, index and catalog idents alike) by a scan, keeps
// untimestamped idents whole, recomputes their counts and returns stable. Startup recovery
// calls it explicitly; Open never rolls anything back by itself.
//
// Background GC keeps for each key every version above the oldest timestamp and the newest
// version at or below it, unless that version is a tombstone (then the key's history below
// oldest is dropped entirely). Reads at or above oldest are unaffected; ReadProvided below
// oldest fails with SnapshotTooOld. Only writes make garbage, so GC visits only written
// keys: commits queue the (ident, key, timestamp) of each write to a non-oplog ident, and a
// pass (every second, or when oldest moves) visits the keys whose writes are now at or
// below oldest (gc_queue.go). A full sweep, in bounded passes that stop with Close, runs
// only when tracking starts: after Open (history left by the previous process) and after
// the queue overflowed because oldest stopped moving (gc.go). Rescanning everything every
// second instead cost a fifth to a third of a replica set member's CPU.
//
// # Fast counts
//
// Per ident, records and dataSize are in-memory atomics changed at commit by the units'
// AdjustCounts deltas, persisted every second and at Close. Close writes a clean-shutdown
// marker that Open removes (synced). Without it, Open recomputes every ident's counts by a
// scan; the definition is: records = number of keys whose newest version is not a
// tombstone, dataSize = the sum of those versions' value lengths. Callers' deltas must
// maintain exactly that (RecordStore does).
//
// # Oplog truncation
//
// Oplog idents keep truncate markers: segments of about a tenth of the configured maximum
// size with their entry count, bytes and timestamp range, built by a scan at open (and when
// the maximum changes) and extended by commits. When the total exceeds the maximum, the
// oldest whole segments are range-deleted, never one whose last entry is at or above the
// pinned timestamp or above stable; counts drop by the segment's totals.
//
// # Prepared units (prepare.go)
//
// Prepare(ts) freezes an open unit of work for two-phase commit: its buffered writes stay in
// memory and its keys stay owned (writers get WriteConflict), and the keys are published with
// ts in an immutable sorted set behind an atomic pointer that is nil when nothing is prepared
// (the read hot path pays one atomic load). A point read, or a cursor move whose crossed key
// interval holds a prepared key (so prepared inserts absent from the view count too), by
// another unit reading at or above ts (or without a timestamp) fails with an error matching
// ErrPrepareConflict; readers below ts, and units set to PrepareConflictIgnore, read the old
// version. The unit resolves by commit at a commit timestamp ≥ ts (WriteUnitOfWork
// CommitPrepared, or SetCommitTimestamp then Commit) or by rollback; either wakes waiters
// (Engine.PrepareConflictRetry waits on a channel carried by the error). A committed key keeps
// conflicting with readers whose view predates the commit and whose read timestamp covers it,
// until no open snapshot predates it. The prepare and commit timestamps are not held in
// flight: holding the all-durable (oplog visibility) point below the prepare timestamp would
// hide the prepare oplog entry from secondaries until the transaction resolved; prepare
// conflicts protect readers instead. Prepared units are not durable (their oplog entry is;
// the transaction layer reconstructs them), so Close loses them and RecoverToStable refuses to
// run with one open. A prepared commit at or below stable whose durable timestamp (commit
// oplog entry) is above it writes a metadata record so RecoverToStable can undo it, and GC
// keeps history below its commit timestamp until stable reaches the durable timestamp.
//
// # Invariants
//
//   - Only this package imports Pebble; every Pebble key is produced by keys.go.
//   - A version is never written outside a commit batch; a committed batch is never changed
//     except by GC (below oldest), RecoverToStable (above stable), drop and oplog truncation.
//   - A snapshot's timestamps are fixed before its view: no view misses a commit at or below
//     its all-durable or oplog-visibility point.
//   - Corrupt keys or values yield errors wrapping ErrCorrupt, never a panic.
package storage
