package storage

// This file is the storage engine's public contract: the types and signatures the catalog,
// index and replication layers program against. Keep signatures stable; add, don't change.
// Timestamps are optime.Timestamp (MongoDB's BSON timestamp as a uint64, seconds high), the one
// type replication and the oplog use too; in the signature summary below, Timestamp means it.

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"humongo/internal/recordid"
)

// Options configure Open.
type Options struct {
	// Dir is the data directory; created if missing. Ignored when InMemory.
	Dir string
	// InMemory keeps everything in memory (tests that do not exercise durability).
	InMemory bool
	// JournalCommitInterval is how often the journal flusher syncs the WAL
	// (journalCommitInterval, default 100 ms).
	JournalCommitInterval time.Duration
	// CacheSize is the block cache size in bytes (default 256 MiB).
	CacheSize int64
	// Logger receives STORAGE component logs (default slog.Default()).
	Logger *slog.Logger
	// Now supplies wall-clock time for engine-assigned commit timestamps (default time.Now).
	Now func() time.Time
}

// IdentOptions describe a table at creation; they are durable and fixed for its life.
type IdentOptions struct {
	// Untimestamped tables (the analog of WiredTiger's logged, non-timestamped tables: the
	// `local` database, replication state) keep all their writes across RecoverToStable.
	Untimestamped bool
	// Oplog makes the table oplog-style: keys are recordid.Long(int64(ts)).Key() where ts is
	// the commit timestamp of the write. Forward cursors opened under ReadNoTimestamp stop at the
	// oplog visibility point (they never see past a hole left by a slower concurrent commit);
	// reverse cursors ignore visibility, as MongoDB's do.
	Oplog bool
}

// ReadSource chooses the snapshot a RecoveryUnit reads from (spec: ReadSource).
type ReadSource int

const (
	// ReadNoTimestamp reads the newest committed data as of when the snapshot opens.
	ReadNoTimestamp ReadSource = iota
	// ReadProvided reads the data committed with timestamp <= the provided timestamp (and
	// committed before the snapshot opened). Callers supply lastApplied, the majority commit
	// point or atClusterTime through this source.
	ReadProvided
	// ReadAllDurable reads at the all-durable (no holes) point, fixed when the snapshot opens.
	ReadAllDurable
)

// Errors. Storage-level conditions that surface to clients are *mongoerr.Error values
// (WriteConflict 112); these sentinels are internal.
var (
	ErrNoSuchIdent    = errors.New("storage: no such ident")
	ErrIdentExists    = errors.New("storage: ident already exists")
	ErrNotInUnit      = errors.New("storage: write outside a WriteUnitOfWork")
	ErrClosed         = errors.New("storage: engine is closed")
	ErrCorrupt        = errors.New("storage: corrupt data")
	ErrSnapshotActive = errors.New("storage: cannot change read source with an open snapshot")
	// ErrSnapshotsOpen: RecoverToStable was called while some RecoveryUnit had an open
	// snapshot or was prepared (a live caller excludes users and aborts prepared units first
	// and may retry once they are gone).
	ErrSnapshotsOpen = errors.New("storage: open snapshots")
)

// IsWriteConflict reports whether err is a WriteConflict (mongoerr code 112).
// func IsWriteConflict(err error) bool — implemented in the engine files.

// WriteConflictRetry runs f until it returns something other than a WriteConflict, backing off
// exponentially (bounded) between attempts; it stops with ctx's error when ctx is done.
// f must open and commit its own WriteUnitOfWork on a RecoveryUnit whose snapshot is abandoned
// between attempts.
// func WriteConflictRetry(ctx context.Context, opName string, f func() error) error

// The Engine (engine.go) provides:
//
//	func Open(opts Options) (*Engine, error)
//	func (e *Engine) Close() error                 // clean shutdown: stops background work, persists counts, syncs
//	func (e *Engine) CleanShutdownLast() bool      // false after a crash (counts were recomputed at open)
//
//	// Idents are tables, stored as key prefixes in one Pebble DB. Creation and drop are durable
//	// on return and not part of any unit (as in WiredTiger); callers undo a create on rollback.
//	func (e *Engine) NewIdentName(kind string) string   // "collection-<counter>-<random>", "index-…"
//	func (e *Engine) CreateIdent(name string, opts IdentOptions) error // ErrIdentExists
//	func (e *Engine) DropIdent(name string) error       // range deletion of every version; ErrNoSuchIdent;
//	                                                    // units with uncommitted writes to it fail to commit (WriteConflict)
//	func (e *Engine) HasIdent(name string) bool
//	func (e *Engine) ListIdents() []string              // sorted
//
//	// Timestamps (spec: stable, oldest, all-durable).
//	func (e *Engine) SetStableTimestamp(ts Timestamp)   // persisted; never moves backwards unless force
//	func (e *Engine) ForceStableTimestamp(ts Timestamp)
//	func (e *Engine) StableTimestamp() Timestamp
//	func (e *Engine) SetOldestTimestamp(ts Timestamp)   // history below it may be garbage collected
//	func (e *Engine) OldestTimestamp() Timestamp
//	func (e *Engine) AllDurableTimestamp() Timestamp    // largest T such that every commit <= T is done
//	func (e *Engine) OplogVisibleTimestamp() Timestamp  // = AllDurableTimestamp
//	func (e *Engine) RecoverToStable() (Timestamp, error) // drops versions > stable in timestamped idents
//
//	// Durability: commits do not sync. The journal flusher syncs every JournalCommitInterval;
//	// WaitUntilDurable returns once everything committed before the call is on disk (group commit).
//	func (e *Engine) WaitUntilDurable(ctx context.Context) error
//
//	// Fast counts per ident: live records and the sum of their value sizes, maintained by
//	// callers through RecoveryUnit.AdjustCounts, persisted periodically and on Close, and
//	// recomputed by a scan at Open after an unclean shutdown.
//	func (e *Engine) Counts(ident string) (records, dataSize int64)
//	func (e *Engine) SetCounts(ident string, records, dataSize int64) // validate's correction
//
//	// Oplog-style idents.
//	func (e *Engine) SetOplogMaxSize(ident string, bytes int64)   // capped by truncate markers
//	func (e *Engine) SetPinnedOplogTimestamp(ts Timestamp)         // truncation keeps entries >= ts
//	func (e *Engine) TruncateOplogAfter(ident string, ts Timestamp) error // removes entries with ts > given
//
//	func (e *Engine) NewRecoveryUnit() *RecoveryUnit
//
// A RecoveryUnit (recovery_unit.go) is one operation's storage transaction. Not safe for
// concurrent use; one per operation.
//
//	func (ru *RecoveryUnit) SetReadSource(src ReadSource, ts Timestamp) error // ErrSnapshotActive if a snapshot is open
//	func (ru *RecoveryUnit) ReadSource() (ReadSource, Timestamp)
//	func (ru *RecoveryUnit) PreallocateSnapshot() error  // open the snapshot now instead of at first access
//	func (ru *RecoveryUnit) AbandonSnapshot()            // release the snapshot (not inside a unit); next access opens a new one
//	func (ru *RecoveryUnit) Close()                      // abandon everything; the unit must not be in a WUOW
//
//	// WriteUnitOfWork. Nested BeginUnitOfWork calls join the outer unit: only the outermost
//	// Commit commits, and an inner End without Commit dooms the whole unit.
//	func (ru *RecoveryUnit) BeginUnitOfWork() *WriteUnitOfWork
//	func (w *WriteUnitOfWork) Commit() error  // atomic commit of every write; runs OnCommit hooks
//	func (w *WriteUnitOfWork) End()           // rolls back unless committed; runs OnRollback hooks (defer it)
//	func (ru *RecoveryUnit) InUnitOfWork() bool
//
//	// Commit timestamps. Without either, the engine assigns one at commit, greater than every
//	// timestamp it has seen. SetCommitTimestamp applies to every write in the unit;
//	// SetTimestamp applies to the writes that follow it (vectored inserts, applyOps), and marks
//	// ts in flight for AllDurableTimestamp until the unit commits or rolls back.
//	func (ru *RecoveryUnit) SetCommitTimestamp(ts Timestamp) error
//	func (ru *RecoveryUnit) SetTimestamp(ts Timestamp) error
//	func (ru *RecoveryUnit) OnCommit(f func(commitTs Timestamp))  // in registration order
//	func (ru *RecoveryUnit) OnRollback(f func())                  // in reverse registration order
//
//	// Key-value access to an ident. Reads see the unit's own writes. Values returned are copies
//	// owned by the caller. Put and Delete need an open WriteUnitOfWork and return a
//	// WriteConflict if another uncommitted unit wrote the key, or if a version newer than this
//	// unit's snapshot was committed (first updater wins).
//	func (ru *RecoveryUnit) Get(ident string, key []byte) (value []byte, found bool, err error)
//	func (ru *RecoveryUnit) Put(ident string, key, value []byte) error
//	func (ru *RecoveryUnit) Delete(ident string, key []byte) error
//	func (ru *RecoveryUnit) AdjustCounts(ident string, records, dataSize int64) // applied at commit
//
//	// Cursors iterate the newest visible version of each live key, merged with the unit's own
//	// writes, within [Lower, Upper) in key order (descending when Reverse).
//	func (ru *RecoveryUnit) NewCursor(ident string, opts CursorOptions) (*Cursor, error)
//	func (c *Cursor) First() bool            // first key in direction
//	func (c *Cursor) Seek(key []byte) bool   // forward: first key >= key; reverse: last key <= key
//	func (c *Cursor) Next() bool             // next key in direction
//	func (c *Cursor) Valid() bool
//	func (c *Cursor) Key() []byte            // valid until the next move
//	func (c *Cursor) Value() []byte          // valid until the next move
//	func (c *Cursor) Err() error
//	func (c *Cursor) Save()                  // before the unit abandons its snapshot (yield)
//	func (c *Cursor) Restore() (bool, error) // after: repositions at the saved key or the next one
//	func (c *Cursor) Close()
//
// Prepared units (prepare.go; doc.go "Prepared units"). Prepare inside an open unit of work;
// the unit then only commits (at a commit timestamp ≥ prepare) or rolls back.
//
//	func (ru *RecoveryUnit) Prepare(ts Timestamp) error    // no writes afterwards; keys block readers ≥ ts
//	func (ru *RecoveryUnit) IsPrepared() bool
//	func (ru *RecoveryUnit) PrepareTimestamp() Timestamp
//	func (w *WriteUnitOfWork) CommitPrepared(commitTs, durableTs Timestamp) error // outermost unit; durableTs 0 = commitTs
//	func (ru *RecoveryUnit) SetDurableTimestamp(ts Timestamp) error // prepared units, after SetCommitTimestamp
//	// SetCommitTimestamp on a prepared unit requires ts ≥ prepare; Commit without it fails and
//	// the unit stays prepared; End without commit rolls it back.
//	var ErrPrepareConflict; func IsPrepareConflict(err error) bool
//	func (ru *RecoveryUnit) SetPrepareConflictBehavior(b PrepareConflictBehavior) error // Enforce (default), Ignore, IgnoreAllowWrites
//	func (ru *RecoveryUnit) RefreshSnapshot() error         // new view at the same fixed read timestamp (after a conflict)
//	func (e *Engine) PrepareConflictRetry(ctx context.Context, f func() error) error // waits for a resolution between attempts
//	func (e *Engine) PreparedUnits() int64
//
// A RecordStore (record_store.go) is a collection's table of BSON documents keyed by RecordId.
//
//	func OpenRecordStore(e *Engine, ident string) (*RecordStore, error) // next id = max existing + 1
//	func (rs *RecordStore) Ident() string
//	func (rs *RecordStore) Insert(ru *RecoveryUnit, doc []byte) (recordid.ID, error) // allocates a long id
//	func (rs *RecordStore) InsertWithID(ru *RecoveryUnit, id recordid.ID, doc []byte) error
//	func (rs *RecordStore) Update(ru *RecoveryUnit, id recordid.ID, doc []byte) error
//	func (rs *RecordStore) Delete(ru *RecoveryUnit, id recordid.ID) error
//	func (rs *RecordStore) Get(ru *RecoveryUnit, id recordid.ID) (doc []byte, found bool, err error)
//	func (rs *RecordStore) NewCursor(ru *RecoveryUnit, reverse bool) (*RecordCursor, error)
//	func (c *RecordCursor) Next() (id recordid.ID, doc []byte, ok bool) // doc valid until the next call
//	func (c *RecordCursor) SeekID(id recordid.ID) (recordid.ID, []byte, bool) // first id >= id in direction
//	func (c *RecordCursor) Err() error; Save(); Restore() (bool, error); Close()
//	func (rs *RecordStore) Counts() (records, dataSize int64)
//
// Record stores maintain fast counts themselves (AdjustCounts on insert/update/delete).

// CursorOptions bound and orient a cursor.
type CursorOptions struct {
	Lower   []byte // inclusive; nil = start of ident
	Upper   []byte // exclusive; nil = end of ident
	Reverse bool
}

var (
	_ = context.Background
	_ = recordid.Long
)
