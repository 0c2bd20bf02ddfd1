package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// gcState is the resume point of the bounded background GC.
type gcState struct {
	mu     sync.Mutex
	resume []byte // engine key to continue from; nil = start of the first ident
}

// gcPassVersions bounds the work of one GC pass (versions examined).
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
		// Keep passing while there is work, but yield to ctx between bounded passes.
		for ctx.Err() == nil {
			done, err := e.gcPass(gcPassVersions)
			if err != nil {
				e.logger.Error("history GC failed", "err", err)
				break
			}
			if done {
				break
			}
		}
	}
}

// gcPass removes history below the oldest timestamp for at most limit versions, starting at
// the saved resume point. For each key it keeps every version newer than oldest and the
// newest version at or below oldest (unless that one is a tombstone); everything older is
// deleted. done is true when the pass reached the end of the key space.
func (e *Engine) gcPass(limit int) (done bool, err error) {
	oldest := e.OldestTimestamp()
	if oldest.IsNull() || e.closed.Load() {
		return true, nil
	}
	e.gc.mu.Lock()
	defer e.gc.mu.Unlock()
	lo, _ := identBounds(firstIdentPrefixID)
	if e.gc.resume != nil {
		lo = e.gc.resume
	}
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo})
	if err != nil {
		return false, err
	}
	defer it.Close()
	b := e.db.NewBatch()
	defer func() { _ = b.Close() }()
	flush := func() error {
		if b.Empty() {
			return nil
		}
		err := e.db.Apply(b, pebble.NoSync)
		b.Reset()
		return err
	}
	var prefix []byte
	passedOldest := false
	examined := 0
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		p := splitKey(k)
		if p == len(k) {
			return false, fmt.Errorf("%w: unversioned key %s", ErrCorrupt, keyFormatter(k))
		}
		if prefix == nil || string(k[:p]) != string(prefix) {
			if examined >= limit {
				// Stop at a key boundary so the next pass sees this key's versions whole.
				e.gc.resume = append([]byte(nil), k[:p]...)
				return false, flush()
			}
			prefix = append(prefix[:0], k[:p]...)
			passedOldest = false
		}
		examined++
		if versionTs(k, p) > oldest {
			continue
		}
		if !passedOldest {
			passedOldest = true
			v, err := it.ValueAndErr()
			if err != nil {
				return false, err
			}
			if _, tomb, err := decodeValue(v); err != nil {
				return false, fmt.Errorf("key %s: %w", keyFormatter(k), err)
			} else if !tomb {
				continue
			}
		}
		_ = b.Delete(k, nil)
		if b.Count() >= 1000 {
			if err := flush(); err != nil {
				return false, err
			}
		}
	}
	if err := it.Error(); err != nil {
		return false, err
	}
	e.gc.resume = nil
	return true, flush()
}

// RecoverToStable rolls every timestamped ident back to the stable timestamp by deleting each
// version newer than it; untimestamped idents keep all their writes. No RecoveryUnit may have
// an open snapshot. It returns the stable timestamp.
func (e *Engine) RecoverToStable() (Timestamp, error) {
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
	for _, ii := range *e.idents.Load() {
		if ii.untimestamped() {
			continue
		}
		removed, err := e.removeVersionsAfter(ii, stable)
		if err != nil {
			return 0, err
		}
		if removed > 0 {
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
func (e *Engine) removeVersionsAfter(ii *identInfo, ts Timestamp) (int, error) {
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
	ts   Timestamp
	tomb bool
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
		_, tomb, err := decodeValue(v)
		if err != nil {
			return nil, err
		}
		out = append(out, rawVersion{key: string(uk), ts: ts, tomb: tomb})
	}
	return out, it.Error()
}
