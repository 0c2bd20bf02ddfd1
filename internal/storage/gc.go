package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"humongo/internal/optime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// History GC (doc.go, "Stable, oldest, recovery and GC"). Two mechanisms share gcState:
//
//   - the queue (gc_queue.go): commits append the keys they wrote; a queue pass visits only
//     the keys whose writes are now at or below the oldest timestamp. This is the steady
//     state, and its cost is proportional to what was written, not to the data's size.
//   - the sweep (gcPass below): a bounded, resumable scan of the whole key space. It runs
//     once whenever key tracking (re)starts, to cover what the in-memory queue cannot know:
//     history left by a previous process, and writes made while tracking was off (before
//     the first oldest timestamp, or after the queue overflowed).
//
// gcStep, called by gcLoop every gcInterval and when the oldest timestamp moves, runs the
// sweep while one is due and then a queue pass.

// gcState is the GC's bookkeeping. mu serialises passes and guards the fields below it;
// the commit-side queue has its own mutex (gcQueue.mu) so commits never wait for a pass.
type gcState struct {
	q gcQueue

	mu sync.Mutex
	// resume is the sweep's resume point: the engine key to continue from; nil = start of
	// the first ident.
	resume []byte
	// sweeping is set while a sweep started by startSweep has not reached the end.
	sweeping bool
	// pending holds queued writes whose timestamps are still above oldest; ready is the
	// reused buffer of a pass's keys to visit.
	pending, ready []gcNote

	// Counters for tests and benchmarks (what the work was proportional to).
	sweptVersions atomic.Int64 // versions examined by sweep passes
	visitedKeys   atomic.Int64 // distinct keys visited by queue passes
	removed       atomic.Int64 // versions deleted by either
}

// gcPassVersions bounds the work of one sweep pass (versions examined).
const gcPassVersions = 20000

func (e *Engine) gcLoop(ctx context.Context) {
	t := time.NewTicker(gcInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.gcKick:
		}
		if err := e.gcStep(ctx); err != nil && ctx.Err() == nil {
			e.logger.Error("history GC failed", "err", err)
		}
	}
}

// gcStep runs the GC work that is due: the sweep, if tracking is (re)starting or a sweep is
// unfinished, in bounded passes that yield to ctx; then one queue pass.
func (e *Engine) gcStep(ctx context.Context) error {
	oldest := e.gcHorizon()
	if oldest.IsNull() || e.closed.Load() {
		return nil
	}
	if e.startSweep(oldest) {
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			done, err := e.gcSweepPass()
			if err != nil {
				return err
			}
			if done {
				break
			}
		}
	}
	return e.gcQueuePass(ctx)
}

// startSweep reports whether a sweep is to run now: one is unfinished, or tracking is off
// and may restart (the queue turns tracking on before the sweep's first iterator exists, so
// every write is either queued or seen by the sweep).
func (e *Engine) startSweep(oldest optime.Timestamp) bool {
	e.gc.mu.Lock()
	defer e.gc.mu.Unlock()
	if e.gc.sweeping {
		return true
	}
	if !e.gc.q.startTracking(oldest) {
		return false
	}
	e.gc.sweeping = true
	e.gc.resume = nil
	return true
}

// gcSweepPass runs one pass of the current sweep; done when no sweep is running (any more).
func (e *Engine) gcSweepPass() (done bool, err error) {
	e.gc.mu.Lock()
	defer e.gc.mu.Unlock()
	if !e.gc.sweeping {
		return true, nil
	}
	done, err = e.gcPassLocked(gcPassVersions)
	if done && err == nil {
		e.gc.sweeping = false
	}
	return done, err
}

// gcPass is gcPassLocked under the GC mutex.
func (e *Engine) gcPass(limit int) (done bool, err error) {
	e.gc.mu.Lock()
	defer e.gc.mu.Unlock()
	return e.gcPassLocked(limit)
}

// gcPassLocked is one bounded sweep pass: it removes history below the oldest timestamp
// for at most limit versions, starting at the saved resume point. For each key it keeps
// every version newer than oldest and the newest version at or below oldest (unless that
// one is a tombstone); everything older is deleted. A key that keeps versions above oldest
// which can become garbage later (two or more versions, or a tombstone) is queued with its
// newest timestamp, so the queue finishes what the sweep cannot collect yet. Oplog idents
// are skipped. done is true when the pass reached the end of the key space.
func (e *Engine) gcPassLocked(limit int) (done bool, err error) {
	oldest := e.gcHorizon()
	if oldest.IsNull() || e.closed.Load() {
		return true, nil
	}
	lo, _ := identBounds(firstIdentPrefixID)
	if e.gc.resume != nil {
		lo = e.gc.resume
	}
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo})
	if err != nil {
		return false, err
	}
	defer it.Close()
	idents := make(map[uint32]*identInfo)
	for _, ii := range *e.idents.Load() {
		idents[ii.id] = ii
	}
	d := newGCDeleter(e)
	defer d.close()
	var (
		prefix       []byte
		passedOldest bool
		above        []optime.Timestamp // the current key's versions above oldest
		newestTomb   bool               // the current key's newest version is a tombstone
		kept         int                // versions of the current key not deleted
		examined     int
	)
	// endKey queues the key just finished, once per version above oldest, if garbage can
	// still appear in it: as if each of those writes had been queued by its commit.
	endKey := func() {
		if prefix == nil || len(above) == 0 || (kept < 2 && !newestTomb) {
			return
		}
		if ii := idents[binary.BigEndian.Uint32(prefix)]; ii != nil && ii.oplog == nil {
			key := string(prefix[prefixLen : len(prefix)-1])
			for _, ts := range above {
				e.gc.pending = append(e.gc.pending, gcNote{ii: ii, key: key, ts: ts})
			}
		}
	}
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		p := splitKey(k)
		if p == len(k) {
			return false, fmt.Errorf("%w: unversioned key %s", ErrCorrupt, keyFormatter(k))
		}
		first := prefix == nil || string(k[:p]) != string(prefix)
		if first {
			endKey()
			if err := d.keyBoundary(); err != nil {
				return false, err
			}
			if ii := idents[binary.BigEndian.Uint32(k)]; ii != nil && ii.oplog != nil {
				// Oplog keys are written once and leave by truncation: no history to
				// collect, and the oplog is often most of the data. Position on the
				// ident's last key; the loop's Next moves past it.
				_, hi := identBounds(ii.id)
				prefix = nil
				if !it.SeekLT(hi) {
					break
				}
				continue
			}
			if examined >= limit {
				// Stop at a key boundary so the next pass sees this key's versions whole.
				e.gc.resume = append([]byte(nil), k[:p]...)
				e.gc.sweptVersions.Add(int64(examined))
				return false, d.flush()
			}
			prefix = append(prefix[:0], k[:p]...)
			passedOldest, kept, above = false, 0, above[:0]
		}
		examined++
		vts := versionTs(k, p)
		if vts > oldest {
			above = append(above, vts)
		}
		switch {
		case vts > oldest && !first:
			kept++
			continue
		case vts <= oldest && passedOldest:
			if err := d.delete(k); err != nil {
				return false, err
			}
			continue
		}
		// The key's newest version, or its newest at or below oldest: its kind decides.
		v, err := it.ValueAndErr()
		if err != nil {
			return false, err
		}
		_, tomb, err := decodeValue(v)
		if err != nil {
			return false, fmt.Errorf("key %s: %w", keyFormatter(k), err)
		}
		if first {
			newestTomb = tomb
		}
		if vts > oldest {
			kept++
			continue
		}
		passedOldest = true
		if !tomb {
			kept++
			continue
		}
		if err := d.delete(k); err != nil {
			return false, err
		}
	}
	if err := it.Error(); err != nil {
		return false, err
	}
	endKey()
	e.gc.sweptVersions.Add(int64(examined))
	e.gc.resume = nil
	return true, d.flush()
}

// gcDeleter batches the point deletions of a GC pass.
type gcDeleter struct {
	e *Engine
	b *pebble.Batch
}

func newGCDeleter(e *Engine) *gcDeleter { return &gcDeleter{e: e, b: e.db.NewBatch()} }

// gcBatchDeletes is the number of deletions after which a GC batch is applied (at the next
// key boundary); tests lower it.
var gcBatchDeletes = 1000

// gcAfterFlush, when set (tests), runs after each GC batch is applied.
var gcAfterFlush func()

func (d *gcDeleter) delete(k []byte) error {
	_ = d.b.Delete(k, nil)
	return nil
}

// keyBoundary applies the batch when it is full; call it only between two keys. A key's
// deletions must land in one batch: applying the deletion of a tombstone without the
// deletion of the older versions under it would resurrect the deleted value (its newest
// version again) for every reader until the next batch.
func (d *gcDeleter) keyBoundary() error {
	if d.b.Count() >= uint32(gcBatchDeletes) {
		return d.flush()
	}
	return nil
}

func (d *gcDeleter) flush() error {
	if d.b.Empty() {
		return nil
	}
	n := int64(d.b.Count())
	err := d.e.db.Apply(d.b, pebble.NoSync)
	d.b.Reset()
	if err == nil {
		d.e.gc.removed.Add(n)
		if gcAfterFlush != nil {
			gcAfterFlush()
		}
	}
	return err
}

func (d *gcDeleter) close() { _ = d.b.Close() }

// RecoverToStable rolls every timestamped ident back to the stable timestamp by deleting each
// version newer than it; untimestamped idents keep all their writes. No RecoveryUnit may have
// an open snapshot. It returns the stable timestamp.
func (e *Engine) RecoverToStable() (optime.Timestamp, error) {
	if e.closed.Load() {
		return 0, ErrClosed
	}
	stable := e.StableTimestamp()
	if stable.IsNull() {
		return 0, errors.New("storage: RecoverToStable without a stable timestamp")
	}
	e.snaps.mu.Lock()
	open := len(e.snaps.open)
	e.snaps.mu.Unlock()
	if open > 0 {
		return 0, fmt.Errorf("%w: RecoverToStable with %d open snapshots", ErrSnapshotsOpen, open)
	}
	// Prepared units hold no snapshot but their writes build on the data being rolled back:
	// the caller aborts them first and reconstructs them after (prepare.go).
	if n := e.prep.units.Load(); n > 0 {
		return 0, fmt.Errorf("%w: RecoverToStable with %d prepared units", ErrSnapshotsOpen, n)
	}
	// Prepared commits whose commit oplog entry is above stable are undone even when their
	// commit timestamp is not (prepare.go).
	undone, err := e.undoPreparedCommitsAfter(stable)
	if err != nil {
		return 0, err
	}
	for _, ii := range *e.idents.Load() {
		if ii.untimestamped() {
			continue
		}
		removed, err := e.removeVersionsAfter(ii, stable)
		if err != nil {
			return 0, err
		}
		if removed > 0 || undone[ii.id] {
			if err := e.recomputeCounts(ii); err != nil {
				return 0, err
			}
			if ii.isOplog() {
				if err := e.initOplogMarkers(ii); err != nil {
					return 0, err
				}
			}
		}
	}
	if err := e.db.LogData(nil, pebble.Sync); err != nil {
		return 0, err
	}
	e.ts.mu.Lock()
	e.ts.maxCommitted = stable
	e.ts.mu.Unlock()
	e.logger.Info("recovered to stable timestamp", "stable", stable.String())
	return stable, nil
}

// removeVersionsAfter deletes every version of ii with a timestamp > ts.
func (e *Engine) removeVersionsAfter(ii *identInfo, ts optime.Timestamp) (int, error) {
	lo, hi := identBounds(ii.id)
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	b := e.db.NewBatch()
	defer func() { _ = b.Close() }()
	removed := 0
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		p := splitKey(k)
		if p == len(k) {
			return removed, fmt.Errorf("%w: unversioned key %s", ErrCorrupt, keyFormatter(k))
		}
		if versionTs(k, p) > ts {
			_ = b.Delete(k, nil)
			removed++
			if b.Count() >= 1000 {
				if err := e.db.Apply(b, pebble.NoSync); err != nil {
					return removed, err
				}
				b.Reset()
			}
		}
	}
	if err := it.Error(); err != nil {
		return removed, err
	}
	if !b.Empty() {
		if err := e.db.Apply(b, pebble.NoSync); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// rawVersion is one stored version, for tests that inspect the key space.
type rawVersion struct {
	key  string
	ts   optime.Timestamp
	tomb bool
	val  string
}

// rawVersions returns every stored version of every key in ident, in engine order.
func (e *Engine) rawVersions(ident string) ([]rawVersion, error) {
	ii, err := e.lookupIdent(ident)
	if err != nil {
		return nil, err
	}
	lo, hi := identBounds(ii.id)
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []rawVersion
	for valid := it.First(); valid; valid = it.Next() {
		_, uk, ts, _, err := decodeEngineKey(it.Key())
		if err != nil {
			return nil, err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		payload, tomb, err := decodeValue(v)
		if err != nil {
			return nil, err
		}
		out = append(out, rawVersion{key: string(uk), ts: ts, tomb: tomb, val: string(payload)})
	}
	return out, it.Error()
}
