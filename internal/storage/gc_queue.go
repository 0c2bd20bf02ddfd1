package storage

import (
	"cmp"
	"context"
	"fmt"
	"humongo/internal/optime"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// The GC queue: history GC in proportion to writes, not to the data.
//
// Only a write makes garbage. A version V of key k is collectible exactly when some newer
// version W of k has a timestamp at or below oldest (then V is not the newest version at or
// below oldest), or when V is itself the newest at or below oldest and a tombstone. In both
// cases a write W of k with ts(W) <= oldest exists (W = V in the tombstone case). So if
// every write W is remembered as (k, ts(W)) and k is visited once oldest >= ts(W), every
// collectible version is found: the visit applies the same per-key rule as the sweep.
//
// Commits append (ident, key, timestamp) for every write to a non-oplog ident (an append
// under a mutex, after the batch is applied, so a pass that takes the log and then opens
// its iterator sees every write it took). A queue pass moves the log to pending, takes the
// entries with ts <= oldest, sorts and deduplicates their keys, and visits each with one
// SeekPrefixGE on an iterator reused across keys (ascending seeks, bloom filters). Entries
// above oldest wait for later passes; a hot key written many times is visited once per
// pass however many entries it has.
//
// The queue is bounded (gcQueueMax). When oldest stops moving (a standalone never sets it;
// a replica set whose commit point is stuck) the queue overflows: it is dropped and
// tracking turns off, so commits stop paying for it, and the next sweep (started when
// oldest moves past the value at the overflow) turns it back on. The same sweep covers the
// writes made while tracking was off; tracking starts before the sweep's first iterator is
// created, so each write is queued or visible to the sweep, and the sweep queues every key
// it leaves with versions above oldest that may still become garbage.

// gcQueueMax bounds the queued writes (the log, and separately pending) before the queue
// overflows: at 25k writes/s about 40 s of oldest-timestamp lag, at most some tens of MB.
const gcQueueMax = 1 << 20

// gcIterKeys is how many keys a queue pass visits with one iterator before it replaces it
// (an old iterator pins memtables and sstables) and checks its context.
const gcIterKeys = 4096

// gcNote is one queued write: key k of ident ii written at ts.
type gcNote struct {
	ii  *identInfo
	key string
	ts  optime.Timestamp
}

// gcQueue is the commit side of the queue.
type gcQueue struct {
	mu sync.Mutex
	// tracking: commits append to log. Off at Open and after an overflow, until a sweep
	// starts.
	tracking bool
	log      []gcNote
	spare    []gcNote // the previous log's buffer, reused
	// overflowAt is the oldest timestamp when the queue overflowed; tracking restarts only
	// once oldest has moved past it (so a stuck oldest does not cause sweep after sweep).
	overflowAt optime.Timestamp
	// limit overrides gcQueueMax when non-zero (tests).
	limit int
}

func (q *gcQueue) maxLocked() int {
	if q.limit > 0 {
		return q.limit
	}
	return gcQueueMax
}

// noteGCWrites queues a committed unit's writes (their timestamps are final). Called after
// the commit batch is applied.
func (e *Engine) noteGCWrites(ops []pendingOp) {
	q := &e.gc.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.tracking {
		return
	}
	for i := range ops {
		op := &ops[i]
		if op.ii.oplog != nil {
			continue
		}
		q.log = append(q.log, gcNote{ii: op.ii, key: op.key, ts: op.ts})
	}
	if len(q.log) > q.maxLocked() {
		// No pass has drained the log for a long time: oldest is not moving.
		q.overflowLocked(e.gcHorizon())
	}
}

// overflowLocked drops the log and turns tracking off until a sweep restarts it.
func (q *gcQueue) overflowLocked(oldest optime.Timestamp) {
	q.tracking = false
	q.log, q.spare = nil, nil
	q.overflowAt = max(q.overflowAt, oldest)
}

// startTracking turns tracking on if it is off and oldest has moved past the last overflow;
// it reports whether it did (the caller must then sweep).
func (q *gcQueue) startTracking(oldest optime.Timestamp) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.tracking || oldest <= q.overflowAt {
		return false
	}
	q.tracking = true
	return true
}

// take returns the queued writes and gives the log a fresh buffer. The caller hands the
// returned slice back with recycle once it has copied what it needs.
func (q *gcQueue) take() []gcNote {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.log
	q.log, q.spare = q.spare[:0], nil
	return out
}

func (q *gcQueue) recycle(buf []gcNote) {
	clear(buf) // drop the key strings
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.tracking && q.spare == nil {
		q.spare = buf[:0]
	}
}

// gcQueuePass visits the keys of queued writes that are now at or below the oldest
// timestamp and removes their collectible versions.
func (e *Engine) gcQueuePass(ctx context.Context) error {
	oldest := e.gcHorizon()
	if oldest.IsNull() || e.closed.Load() {
		return nil
	}
	g := &e.gc
	g.mu.Lock()
	defer g.mu.Unlock()
	taken := g.q.take()
	g.pending = append(g.pending, taken...)
	g.q.recycle(taken)

	ready, keep := g.ready[:0], g.pending[:0]
	for _, n := range g.pending {
		switch {
		case n.ii.dropped.Load():
			// Its range is deleted; nothing left to collect.
		case n.ts <= oldest:
			ready = append(ready, n)
		default:
			keep = append(keep, n)
		}
	}
	clear(g.pending[len(keep):])
	g.pending = keep
	g.q.mu.Lock()
	if limit := g.q.maxLocked(); len(g.pending) > limit {
		// Oldest lags too far behind the writes: stop tracking until it moves, then sweep.
		clear(g.pending)
		g.pending = nil
		g.q.overflowLocked(oldest)
		e.logger.Info("history GC queue overflowed; a sweep will run when the oldest timestamp moves",
			"oldest", oldest.String(), "limit", limit)
	}
	g.q.mu.Unlock()
	defer func() {
		clear(ready)
		g.ready = ready[:0]
	}()
	if len(ready) == 0 {
		return nil
	}
	slices.SortFunc(ready, func(a, b gcNote) int {
		if c := cmp.Compare(a.ii.id, b.ii.id); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	ready = slices.CompactFunc(ready, func(a, b gcNote) bool { return a.ii == b.ii && a.key == b.key })
	return e.gcVisitKeys(ctx, ready, oldest)
}

// gcVisitKeys applies the per-key rule to each key (sorted, distinct): keep every version
// above oldest and the newest at or below it unless that is a tombstone; delete the rest.
func (e *Engine) gcVisitKeys(ctx context.Context, keys []gcNote, oldest optime.Timestamp) error {
	d := newGCDeleter(e)
	defer d.close()
	var it *pebble.Iterator
	defer func() {
		if it != nil {
			_ = it.Close()
		}
	}()
	var seek []byte
	for i, n := range keys {
		if i%gcIterKeys == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if it != nil {
				_ = it.Close()
			}
			var err error
			if it, err = e.db.NewIter(nil); err != nil {
				it = nil
				return err
			}
		}
		if err := d.keyBoundary(); err != nil {
			return err
		}
		seek = appendPrefix(seek[:0], n.ii.id)
		seek = append(seek, n.key...)
		seek = append(seek, 0)
		passedOldest := false
		// SeekPrefixGE at the bare key lands on the newest version and Next stays within
		// the key's versions.
		for valid := it.SeekPrefixGE(seek); valid; valid = it.Next() {
			k := it.Key()
			p := splitKey(k)
			if p == len(k) {
				return fmt.Errorf("%w: unversioned key %s", ErrCorrupt, keyFormatter(k))
			}
			if versionTs(k, p) > oldest {
				continue
			}
			if !passedOldest {
				passedOldest = true
				v, err := it.ValueAndErr()
				if err != nil {
					return err
				}
				_, tomb, err := decodeValue(v)
				if err != nil {
					return fmt.Errorf("key %s: %w", keyFormatter(k), err)
				}
				if !tomb {
					continue
				}
			}
			if err := d.delete(k); err != nil {
				return err
			}
		}
		if err := it.Error(); err != nil {
			return err
		}
	}
	e.gc.visitedKeys.Add(int64(len(keys)))
	return d.flush()
}
