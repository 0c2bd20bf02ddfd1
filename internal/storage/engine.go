package storage

import (
	"context"
	"errors"
	"fmt"
	"humongo/internal/optime"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

const (
	defaultJournalCommitInterval = 100 * time.Millisecond
	defaultCacheSize             = 256 << 20
	// leaseStepSecs is how far ahead of the newest timestamp the persisted lease is written,
	// so that the lease key is rewritten at most once per leaseStepSecs of timestamps.
	leaseStepSecs = 10
	// countsPersistInterval is how often dirty fast counts are written back.
	countsPersistInterval = time.Second
	// gcInterval is how often the background GC runs a bounded pass.
	gcInterval = time.Second
)

// identInfo is the in-memory state of one ident. Immutable fields are set at creation; counts
// are atomics updated by commits.
type identInfo struct {
	name  string
	id    uint32
	flags byte

	records     atomic.Int64
	dataSize    atomic.Int64
	countsDirty atomic.Bool

	// dropped is set by DropIdent under Engine.dropMu (write side); commits check it under
	// the read side, so no commit applies a version after the ident's range deletion.
	dropped atomic.Bool

	// oplog is non-nil for oplog idents (truncate markers; see oplog.go).
	oplog *oplogState
}

func (ii *identInfo) untimestamped() bool { return ii.flags&identFlagUntimestamped != 0 }
func (ii *identInfo) isOplog() bool       { return ii.flags&identFlagOplog != 0 }

// Engine is the storage engine: one Pebble DB holding every ident as a key prefix. It is safe
// for concurrent use; RecoveryUnits are not.
type Engine struct {
	db     *pebble.DB
	cache  interface{ Unref() }
	opts   Options
	logger *slog.Logger
	now    func() time.Time

	closed atomic.Bool

	// idents is a copy-on-write map (name -> info) so that the per-operation lookup is a
	// lock-free load. identMu serialises create and drop.
	idents  atomic.Pointer[map[string]*identInfo]
	identMu sync.Mutex
	nextID  uint32 // guarded by identMu
	// dropMu orders commits against ident drops: a commit checks that none of its idents is
	// dropped and applies its batch under the read lock; DropIdent marks the ident dropped
	// under the write lock before deleting its range. A unit that wrote to an ident dropped
	// before its commit therefore fails instead of leaving versions under a dead prefix.
	dropMu  sync.RWMutex
	nameSeq atomic.Uint64

	ts timestampState

	stable atomic.Uint64
	oldest atomic.Uint64
	pinned atomic.Uint64
	// stableMu serialises stable-timestamp persistence so the durable value never regresses.
	stableMu sync.Mutex
	// stableMoved is closed (and cleared) when the stable timestamp moves: WaitStable's
	// signal. Guarded by stableMu; nil while nobody waits.
	stableMoved chan struct{}

	snaps     snapshotRegistry
	conflicts conflictTable
	prep      prepareState    // prepared units' keys (prepare.go)
	pcommits  preparedCommits // outstanding prepared-commit records (prepare.go)

	cleanShutdownLast bool

	journal journalFlusher
	gc      gcState

	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup
	// gcKick wakes the GC loop early (SetOldestTimestamp); oplogKick wakes the truncater.
	gcKick    chan struct{}
	oplogKick chan struct{}
}

// Open opens (creating if needed) the engine in opts.Dir, or in memory.
func Open(opts Options) (*Engine, error) { return openEngine(opts, nil) }

// openEngine is Open with an injectable filesystem (tests use vfs.NewCrashableMem).
func openEngine(opts Options, fs vfs.FS) (*Engine, error) {
	if opts.JournalCommitInterval <= 0 {
		opts.JournalCommitInterval = defaultJournalCommitInterval
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = defaultCacheSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	dir := opts.Dir
	if fs == nil {
		if opts.InMemory {
			fs = vfs.NewMem()
			dir = ""
		} else {
			if dir == "" {
				return nil, errors.New("storage: Options.Dir is required")
			}
			fs = vfs.Default
		}
	}
	logger := opts.Logger.With("c", "STORAGE")
	cache := pebble.NewCache(opts.CacheSize)
	popts := &pebble.Options{
		Comparer:           mvccComparer,
		Cache:              cache,
		FS:                 fs,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{logger},
	}
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("storage: open %q: %w", opts.Dir, err)
	}
	e := &Engine{
		db:        db,
		cache:     cache,
		opts:      opts,
		logger:    logger,
		now:       opts.Now,
		gcKick:    make(chan struct{}, 1),
		oplogKick: make(chan struct{}, 1),
	}
	e.snaps.open = make(map[uint64]int)
	e.conflicts.init()
	err = e.loadMetadata()
	if err == nil {
		err = e.loadPreparedCommits()
	}
	if err != nil {
		_ = db.Close()
		cache.Unref()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.bgCancel = cancel
	e.journal.init(e)
	e.startBackground(ctx)
	return e, nil
}

// loadMetadata reads the format version, idents, timestamps and counts, and recomputes counts
// after an unclean shutdown.
func (e *Engine) loadMetadata() error {
	fresh := false
	v, found, err := e.getMeta(metaFormatKey)
	switch {
	case err != nil:
		return err
	case !found:
		fresh = true
		if err := e.db.Set(metaFormatKey, encodeUint64(formatVersion), pebble.Sync); err != nil {
			return fmt.Errorf("storage: write format version: %w", err)
		}
	default:
		fv, err := decodeUint64(v)
		if err != nil {
			return err
		}
		if fv != formatVersion {
			return fmt.Errorf("storage: on-disk format version %d, this binary supports %d", fv, formatVersion)
		}
	}

	idents := make(map[string]*identInfo)
	e.nextID = firstIdentPrefixID
	if err := e.scanMeta(metaIdentTag, func(name string, val []byte) error {
		rec, err := decodeIdentRecord(val)
		if err != nil {
			return err
		}
		idents[name] = newIdentInfo(name, rec)
		e.nextID = max(e.nextID, rec.id+1)
		return nil
	}); err != nil {
		return err
	}
	if v, found, err := e.getMeta(metaNextIDKey); err != nil {
		return err
	} else if found {
		n, err := decodeUint64(v)
		if err != nil {
			return err
		}
		e.nextID = max(e.nextID, uint32(n))
	}
	e.idents.Store(&idents)

	for _, m := range []struct {
		key []byte
		dst *atomic.Uint64
	}{{metaStableKey, &e.stable}, {metaOldestKey, &e.oldest}} {
		v, found, err := e.getMeta(m.key)
		if err != nil {
			return err
		}
		if found {
			n, err := decodeUint64(v)
			if err != nil {
				return err
			}
			m.dst.Store(n)
		}
	}
	if v, found, err := e.getMeta(metaLeaseKey); err != nil {
		return err
	} else if found {
		n, err := decodeUint64(v)
		if err != nil {
			return err
		}
		// Every timestamp handed out before the restart is below the lease, so starting the
		// high-water mark there keeps engine-assigned timestamps monotonic across restarts
		// even if the wall clock went backwards.
		e.ts.leaseSecs = uint32(n)
		e.ts.hwm = optime.MakeTimestamp(uint32(n), 0)
	}
	// Nothing is in flight at open; the data is as of stable (or newer, untimestamped).
	e.ts.maxCommitted = optime.Timestamp(e.stable.Load())
	if optime.Timestamp(e.stable.Load()) > e.ts.hwm {
		e.ts.hwm = optime.Timestamp(e.stable.Load())
	}

	_, clean, err := e.getMeta(metaCleanKey)
	if err != nil {
		return err
	}
	e.cleanShutdownLast = fresh || clean
	if e.cleanShutdownLast {
		if err := e.scanMeta(metaCountsTag, func(name string, val []byte) error {
			if len(name) != prefixLen || len(val) != 16 {
				return fmt.Errorf("%w: counts record", ErrCorrupt)
			}
			id := uint32(name[0])<<24 | uint32(name[1])<<16 | uint32(name[2])<<8 | uint32(name[3])
			for _, ii := range idents {
				if ii.id == id {
					r, _ := decodeUint64(val[:8])
					d, _ := decodeUint64(val[8:])
					ii.records.Store(int64(r))
					ii.dataSize.Store(int64(d))
				}
			}
			return nil
		}); err != nil {
			return err
		}
	} else {
		e.logger.Info("unclean shutdown detected; recomputing fast counts", "idents", len(idents))
		for _, ii := range idents {
			if err := e.recomputeCounts(ii); err != nil {
				return err
			}
		}
	}
	// The marker is removed durably before any new write can happen, so a crash from now on
	// is recognised as unclean.
	if clean {
		if err := e.db.Delete(metaCleanKey, pebble.Sync); err != nil {
			return fmt.Errorf("storage: remove clean-shutdown marker: %w", err)
		}
	}
	for _, ii := range idents {
		if ii.isOplog() {
			if err := e.initOplogMarkers(ii); err != nil {
				return err
			}
		}
	}
	return nil
}

func newIdentInfo(name string, rec identRecord) *identInfo {
	ii := &identInfo{name: name, id: rec.id, flags: rec.flags}
	if ii.isOplog() {
		ii.oplog = &oplogState{}
	}
	return ii
}

// recomputeCounts scans ident for live keys (newest version not a tombstone): records is
// their number and dataSize the sum of their value lengths. This is the definition of the
// fast counts; callers' AdjustCounts deltas are expected to maintain exactly that.
func (e *Engine) recomputeCounts(ii *identInfo) error {
	lo, hi := identBounds(ii.id)
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	var records, size int64
	for valid := it.First(); valid; valid = it.NextPrefix() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		payload, tomb, err := decodeValue(v)
		if err != nil {
			return fmt.Errorf("ident %s key %s: %w", ii.name, keyFormatter(it.Key()), err)
		}
		if !tomb {
			records++
			size += int64(len(payload))
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	ii.records.Store(records)
	ii.dataSize.Store(size)
	ii.countsDirty.Store(true)
	return nil
}

func (e *Engine) getMeta(key []byte) ([]byte, bool, error) {
	v, closer, err := e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := slices.Clone(v)
	_ = closer.Close()
	return out, true, nil
}

// scanMeta calls f for every metadata key starting with tag, with the rest of the name.
func (e *Engine) scanMeta(tag string, f func(name string, val []byte) error) error {
	lo := appendPrefix(nil, metaPrefixID)
	lo = append(lo, tag...)
	hi := appendPrefix(nil, metaPrefixID)
	hi = append(hi, tag[:len(tag)-1]...)
	hi = append(hi, tag[len(tag)-1]+1)
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		_, uk, _, versioned, err := decodeEngineKey(it.Key())
		if err != nil {
			return err
		}
		if versioned || !strings.HasPrefix(string(uk), tag) {
			return fmt.Errorf("%w: metadata key %s", ErrCorrupt, keyFormatter(it.Key()))
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := f(string(uk[len(tag):]), v); err != nil {
			return err
		}
	}
	return it.Error()
}

// Close shuts the engine down cleanly: stops background work, persists counts, writes the
// clean-shutdown marker and syncs. Every RecoveryUnit must have been closed.
func (e *Engine) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	e.bgCancel()
	e.bgWG.Wait()
	e.prep.closeAll() // prepared units die with the process; their waiters fail with ErrClosed
	e.journal.shutdown(ErrClosed)
	var errs []error
	errs = append(errs, e.persistCounts(true))
	errs = append(errs, e.db.Set(metaCleanKey, nil, pebble.Sync))
	errs = append(errs, e.db.Close())
	e.cache.Unref()
	return errors.Join(errs...)
}

// CleanShutdownLast reports whether the previous shutdown was clean (false after a crash:
// counts were recomputed at Open).
func (e *Engine) CleanShutdownLast() bool { return e.cleanShutdownLast }

// ---- idents ----

func (e *Engine) lookupIdent(name string) (*identInfo, error) {
	if ii, ok := (*e.idents.Load())[name]; ok {
		return ii, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNoSuchIdent, name)
}

// NewIdentName returns a fresh ident name for kind ("collection", "index", ...). The random
// part keeps names unique across restarts without persisting the counter.
func (e *Engine) NewIdentName(kind string) string {
	return kind + "-" + strconv.FormatUint(e.nameSeq.Add(1), 10) + "-" + strconv.FormatUint(rand.Uint64()>>1, 10)
}

// CreateIdent creates a table. It is durable on return and not part of any unit.
func (e *Engine) CreateIdent(name string, opts IdentOptions) error {
	if e.closed.Load() {
		return ErrClosed
	}
	if name == "" {
		return errors.New("storage: empty ident name")
	}
	e.identMu.Lock()
	defer e.identMu.Unlock()
	cur := *e.idents.Load()
	if _, ok := cur[name]; ok {
		return fmt.Errorf("%w: %s", ErrIdentExists, name)
	}
	rec := identRecord{id: e.nextID}
	if opts.Untimestamped {
		rec.flags |= identFlagUntimestamped
	}
	if opts.Oplog {
		rec.flags |= identFlagOplog
	}
	b := e.db.NewBatch()
	defer b.Close()
	_ = b.Set(metaKey(metaIdentTag+name), rec.encode(), nil)
	_ = b.Set(metaNextIDKey, encodeUint64(uint64(rec.id+1)), nil)
	// A prefix id is never reused, but clear the range anyway in case an earlier crash left
	// data under it before the ident record became durable.
	lo, hi := identBounds(rec.id)
	_ = b.DeleteRange(lo, hi, nil)
	if err := e.db.Apply(b, pebble.Sync); err != nil {
		return fmt.Errorf("storage: create ident %s: %w", name, err)
	}
	e.nextID++
	next := make(map[string]*identInfo, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[name] = newIdentInfo(name, rec)
	e.idents.Store(&next)
	return nil
}

// DropIdent deletes a table and every version in it (a range deletion); durable on return.
func (e *Engine) DropIdent(name string) error {
	if e.closed.Load() {
		return ErrClosed
	}
	e.identMu.Lock()
	defer e.identMu.Unlock()
	cur := *e.idents.Load()
	ii, ok := cur[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoSuchIdent, name)
	}
	// Commits that passed their dropped check have applied their batches (their versions
	// get lower sequence numbers than the range deletion below); later ones see the flag.
	e.dropMu.Lock()
	ii.dropped.Store(true)
	e.dropMu.Unlock()
	b := e.db.NewBatch()
	defer b.Close()
	lo, hi := identBounds(ii.id)
	_ = b.DeleteRange(lo, hi, nil)
	_ = b.Delete(metaKey(metaIdentTag+name), nil)
	_ = b.Delete(countsKey(ii.id), nil)
	if err := e.db.Apply(b, pebble.Sync); err != nil {
		return fmt.Errorf("storage: drop ident %s: %w", name, err)
	}
	next := make(map[string]*identInfo, len(cur))
	for k, v := range cur {
		if k != name {
			next[k] = v
		}
	}
	e.idents.Store(&next)
	return nil
}

// HasIdent reports whether the ident exists.
func (e *Engine) HasIdent(name string) bool {
	_, ok := (*e.idents.Load())[name]
	return ok
}

// ListIdents returns every ident name, sorted.
func (e *Engine) ListIdents() []string {
	cur := *e.idents.Load()
	out := make([]string, 0, len(cur))
	for k := range cur {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---- timestamps ----

// timestampState tracks the commit-timestamp high-water mark, in-flight timestamps and the
// largest committed timestamp (for AllDurableTimestamp).
type timestampState struct {
	mu sync.Mutex
	// hwm is the largest timestamp seen (assigned, set explicitly, or stable).
	hwm optime.Timestamp
	// leaseSecs bounds every timestamp ever seen: all are < MakeTimestamp(leaseSecs, 0). It is
	// persisted (metaLeaseKey) before any timestamp reaching it is used.
	leaseSecs uint32
	// inflight is a sorted multiset of timestamps of uncommitted units.
	inflight []optime.Timestamp
	// maxCommitted is the largest timestamp of a finished commit.
	maxCommitted optime.Timestamp
}

// observeLocked raises the high-water mark to ts, extending the persisted lease if needed.
// The lease write is applied (to the WAL) before the caller's commit batch, so a commit that
// survives a crash always has its lease.
func (e *Engine) observeLocked(ts optime.Timestamp) {
	if ts > e.ts.hwm {
		e.ts.hwm = ts
	}
	if ts >= optime.MakeTimestamp(e.ts.leaseSecs, 0) {
		secs := uint64(ts.Secs()) + leaseStepSecs
		if secs > 1<<32-1 {
			secs = 1<<32 - 1
		}
		e.ts.leaseSecs = uint32(secs)
		e.journal.dirty.Store(true)
		if err := e.db.Set(metaLeaseKey, encodeUint64(secs), pebble.NoSync); err != nil {
			e.logger.Error("persisting timestamp lease failed", "err", err)
		}
	}
}

// assignCommitTimestamp returns a new timestamp greater than every one seen, registered in
// flight.
func (e *Engine) assignCommitTimestamp() optime.Timestamp {
	secs := e.now().Unix()
	if secs < 0 {
		secs = 0
	}
	if secs > 1<<32-1 {
		secs = 1<<32 - 1
	}
	e.ts.mu.Lock()
	defer e.ts.mu.Unlock()
	ts := optime.MakeTimestamp(uint32(secs), 1)
	if ts <= e.ts.hwm {
		ts = e.ts.hwm + 1
	}
	e.observeLocked(ts)
	e.addInflightLocked(ts)
	return ts
}

// registerInflight marks an explicitly set timestamp as in flight.
func (e *Engine) registerInflight(ts optime.Timestamp) {
	e.ts.mu.Lock()
	defer e.ts.mu.Unlock()
	e.observeLocked(ts)
	e.addInflightLocked(ts)
}

func (e *Engine) addInflightLocked(ts optime.Timestamp) {
	i, _ := slices.BinarySearch(e.ts.inflight, ts)
	e.ts.inflight = slices.Insert(e.ts.inflight, i, ts)
}

// finishInflight removes tss from the in-flight set; if committed, they count as committed.
func (e *Engine) finishInflight(tss []optime.Timestamp, committed bool) {
	if len(tss) == 0 {
		return
	}
	e.ts.mu.Lock()
	defer e.ts.mu.Unlock()
	for _, ts := range tss {
		if i, ok := slices.BinarySearch(e.ts.inflight, ts); ok {
			e.ts.inflight = slices.Delete(e.ts.inflight, i, i+1)
		}
		if committed && ts > e.ts.maxCommitted {
			e.ts.maxCommitted = ts
		}
	}
}

// AllDurableTimestamp is the largest T such that every commit with a timestamp <= T has
// finished: one below the oldest in-flight timestamp, or the largest committed timestamp.
func (e *Engine) AllDurableTimestamp() optime.Timestamp {
	e.ts.mu.Lock()
	defer e.ts.mu.Unlock()
	if len(e.ts.inflight) > 0 {
		return e.ts.inflight[0] - 1
	}
	return e.ts.maxCommitted
}

// OplogVisibleTimestamp is the oplog visibility point (= AllDurableTimestamp).
func (e *Engine) OplogVisibleTimestamp() optime.Timestamp { return e.AllDurableTimestamp() }

// SetStableTimestamp sets and persists the stable timestamp; it never moves backwards.
func (e *Engine) SetStableTimestamp(ts optime.Timestamp) { e.setStable(ts, false) }

// ForceStableTimestamp sets the stable timestamp even if it moves backwards (rollback).
func (e *Engine) ForceStableTimestamp(ts optime.Timestamp) { e.setStable(ts, true) }

func (e *Engine) setStable(ts optime.Timestamp, force bool) {
	e.stableMu.Lock()
	defer e.stableMu.Unlock()
	if !force && ts <= optime.Timestamp(e.stable.Load()) {
		return
	}
	e.stable.Store(uint64(ts))
	if e.stableMoved != nil {
		close(e.stableMoved)
		e.stableMoved = nil
	}
	e.ts.mu.Lock()
	e.observeLocked(ts)
	e.ts.mu.Unlock()
	// Untimestamped metadata write; made durable by the journal flusher like any commit.
	e.journal.dirty.Store(true)
	if err := e.db.Set(metaStableKey, encodeUint64(uint64(ts)), pebble.NoSync); err != nil {
		e.logger.Error("persisting stable timestamp failed", "err", err)
	}
	e.kickOplogTruncation()
}

// StableTimestamp returns the stable timestamp.
func (e *Engine) StableTimestamp() optime.Timestamp { return optime.Timestamp(e.stable.Load()) }

// WaitStable waits until the stable timestamp reaches ts or ctx is done, and returns the
// stable timestamp it saw (a majority read that must not read below ts waits here).
func (e *Engine) WaitStable(ctx context.Context, ts optime.Timestamp) (optime.Timestamp, error) {
	for {
		e.stableMu.Lock()
		st := optime.Timestamp(e.stable.Load())
		if st >= ts {
			e.stableMu.Unlock()
			return st, nil
		}
		if e.stableMoved == nil {
			e.stableMoved = make(chan struct{})
		}
		moved := e.stableMoved
		e.stableMu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return st, context.Cause(ctx)
		}
	}
}

// SetOldestTimestamp lets history below ts be garbage collected; it never moves backwards.
func (e *Engine) SetOldestTimestamp(ts optime.Timestamp) {
	for {
		cur := e.oldest.Load()
		if uint64(ts) <= cur {
			return
		}
		if e.oldest.CompareAndSwap(cur, uint64(ts)) {
			break
		}
	}
	e.journal.dirty.Store(true)
	if err := e.db.Set(metaOldestKey, encodeUint64(uint64(ts)), pebble.NoSync); err != nil {
		e.logger.Error("persisting oldest timestamp failed", "err", err)
	}
	select {
	case e.gcKick <- struct{}{}:
	default:
	}
}

// OldestTimestamp returns the oldest timestamp.
func (e *Engine) OldestTimestamp() optime.Timestamp { return optime.Timestamp(e.oldest.Load()) }

// ---- counts ----

func countsKey(id uint32) []byte {
	return metaKey(metaCountsTag + string(appendPrefix(nil, id)))
}

// Counts returns the fast counts of ident (zero if it does not exist).
func (e *Engine) Counts(ident string) (records, dataSize int64) {
	ii, err := e.lookupIdent(ident)
	if err != nil {
		return 0, 0
	}
	return ii.records.Load(), ii.dataSize.Load()
}

// SetCounts overwrites the fast counts (validate's correction).
func (e *Engine) SetCounts(ident string, records, dataSize int64) {
	ii, err := e.lookupIdent(ident)
	if err != nil {
		return
	}
	ii.records.Store(records)
	ii.dataSize.Store(dataSize)
	ii.countsDirty.Store(true)
}

// persistCounts writes the counts of dirty idents (all idents if all) as metadata.
func (e *Engine) persistCounts(all bool) error {
	b := e.db.NewBatch()
	defer b.Close()
	for _, ii := range *e.idents.Load() {
		if !ii.countsDirty.Swap(false) && !all {
			continue
		}
		v := make([]byte, 0, 16)
		v = append(v, encodeUint64(uint64(ii.records.Load()))...)
		v = append(v, encodeUint64(uint64(ii.dataSize.Load()))...)
		_ = b.Set(countsKey(ii.id), v, nil)
	}
	if b.Empty() {
		return nil
	}
	e.journal.dirty.Store(true)
	return e.db.Apply(b, pebble.NoSync)
}

// ---- background work ----

func (e *Engine) startBackground(ctx context.Context) {
	e.bgWG.Add(4)
	go func() {
		defer e.bgWG.Done()
		e.journal.run(ctx)
	}()
	go func() {
		defer e.bgWG.Done()
		t := time.NewTicker(countsPersistInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := e.persistCounts(false); err != nil {
					e.logger.Error("persisting counts failed", "err", err)
				}
				// Committed prepared keys every snapshot now contains stop being checked;
				// prepared-commit records stable has passed are dropped.
				e.prep.prune(e.snaps.minOpen)
				e.settlePreparedCommits()
			}
		}
	}()
	go func() {
		defer e.bgWG.Done()
		e.gcLoop(ctx)
	}()
	go func() {
		defer e.bgWG.Done()
		e.oplogTruncateLoop(ctx)
	}()
}

// pebbleLogger routes Pebble's logs to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "src", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "src", "pebble")
}

// Fatalf is called by Pebble on unrecoverable internal errors; Pebble expects it not to
// return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "src", "pebble", "fatal", true)
	panic("pebble fatal: " + msg)
}
