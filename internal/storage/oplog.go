package storage

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"humongo/internal/optime"
	"humongo/internal/recordid"
)

// Oplog truncate markers (spec: "Oplog Truncation"). The oplog is divided into segments of
// about a tenth of its maximum size; each records its entry count, payload bytes and
// timestamp range. When the total exceeds the maximum, whole oldest segments are removed by
// one range deletion each, never one containing an entry at or above the pinned timestamp,
// above the stable timestamp, or younger than the minimum retention period
// (replSetResizeOplog's minRetentionHours: an entry's timestamp seconds are its wall time).

const (
	defaultOplogSegmentBytes = 1 << 20
	minOplogSegmentBytes     = 1 << 10
)

type oplogState struct {
	// truncMu serialises truncation (background loop, tests) and marker rebuilds, so a
	// segment is deleted and its counts subtracted exactly once.
	truncMu  sync.Mutex
	mu       sync.Mutex
	maxSize  int64
	segBytes int64
	// minRetention keeps segments whose newest entry is younger than this (0: none).
	minRetention time.Duration
	segs         []oplogSegment // oldest first; the last one is still being filled
	total        int64
}

type oplogSegment struct {
	records int64
	bytes   int64
	first   optime.Timestamp
	last    optime.Timestamp
}

func (s *oplogState) segmentTarget() int64 {
	if s.segBytes > 0 {
		return s.segBytes
	}
	return defaultOplogSegmentBytes
}

// addLocked accounts an entry of n payload bytes at ts.
func (s *oplogState) addLocked(n int64, ts optime.Timestamp) {
	if len(s.segs) == 0 || s.segs[len(s.segs)-1].bytes >= s.segmentTarget() {
		s.segs = append(s.segs, oplogSegment{first: ts, last: ts})
	}
	seg := &s.segs[len(s.segs)-1]
	seg.records++
	seg.bytes += n
	seg.first = min(seg.first, ts)
	seg.last = max(seg.last, ts)
	s.total += n
}

// noteOplogWrite accounts a committed write to an oplog ident.
func (e *Engine) noteOplogWrite(ii *identInfo, valLen int, ts optime.Timestamp) {
	s := ii.oplog
	s.mu.Lock()
	s.addLocked(int64(valLen-1), ts)
	over := s.maxSize > 0 && s.total > s.maxSize
	s.mu.Unlock()
	if over {
		e.kickOplogTruncation()
	}
}

func (e *Engine) kickOplogTruncation() {
	select {
	case e.oplogKick <- struct{}{}:
	default:
	}
}

// initOplogMarkers rebuilds ii's segments by scanning its live entries.
func (e *Engine) initOplogMarkers(ii *identInfo) error {
	s := ii.oplog
	s.truncMu.Lock()
	defer s.truncMu.Unlock()
	lo, hi := identBounds(ii.id)
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.segs, s.total = nil, 0
	for valid := it.First(); valid; valid = it.NextPrefix() {
		_, uk, _, _, err := decodeEngineKey(it.Key())
		if err != nil {
			return err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		payload, tomb, err := decodeValue(v)
		if err != nil {
			return err
		}
		if tomb {
			continue
		}
		id, err := recordid.FromKey(uk)
		if err != nil || !id.IsLong() {
			return fmt.Errorf("%w: oplog key %x", ErrCorrupt, uk)
		}
		s.addLocked(int64(len(payload)), optime.Timestamp(id.Int64()))
	}
	return it.Error()
}

// SetOplogMaxSize caps an oplog ident at bytes of entry payload.
func (e *Engine) SetOplogMaxSize(ident string, bytes int64) {
	ii, err := e.lookupIdent(ident)
	if err != nil || ii.oplog == nil {
		return
	}
	s := ii.oplog
	s.mu.Lock()
	s.maxSize = bytes
	s.segBytes = max(bytes/10, minOplogSegmentBytes)
	s.mu.Unlock()
	// Re-segment existing entries with the new granularity.
	if err := e.initOplogMarkers(ii); err != nil {
		e.logger.Error("rebuilding oplog truncate markers failed", "ident", ident, "err", err)
	}
	e.kickOplogTruncation()
}

// OplogMaxSize is an oplog ident's cap in bytes of entry payload (0 when unknown or uncapped).
func (e *Engine) OplogMaxSize(ident string) int64 {
	ii, err := e.lookupIdent(ident)
	if err != nil || ii.oplog == nil {
		return 0
	}
	ii.oplog.mu.Lock()
	defer ii.oplog.mu.Unlock()
	return ii.oplog.maxSize
}

// SetOplogMinRetention keeps an oplog ident's entries for at least d after their timestamp
// (wall-clock seconds) even when the oplog is over its maximum size; 0 turns it off.
// Lowering it may let truncation proceed, so truncation is kicked.
func (e *Engine) SetOplogMinRetention(ident string, d time.Duration) {
	ii, err := e.lookupIdent(ident)
	if err != nil || ii.oplog == nil {
		return
	}
	ii.oplog.mu.Lock()
	ii.oplog.minRetention = max(d, 0)
	ii.oplog.mu.Unlock()
	e.kickOplogTruncation()
}

// SetPinnedOplogTimestamp keeps oplog entries at or after ts from truncation.
func (e *Engine) SetPinnedOplogTimestamp(ts optime.Timestamp) {
	e.pinned.Store(uint64(ts))
	e.kickOplogTruncation()
}

func (e *Engine) oplogTruncateLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.oplogKick:
		}
		if err := e.truncateOplogs(); err != nil {
			e.logger.Error("oplog truncation failed", "err", err)
		}
	}
}

// truncateOplogs removes whole oldest segments of every oversized oplog ident.
func (e *Engine) truncateOplogs() error {
	for _, ii := range *e.idents.Load() {
		if ii.oplog == nil {
			continue
		}
		if err := e.truncateOplog(ii); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) truncateOplog(ii *identInfo) error {
	s := ii.oplog
	s.truncMu.Lock()
	defer s.truncMu.Unlock()
	pinned, stable := optime.Timestamp(e.pinned.Load()), e.StableTimestamp()
	for {
		s.mu.Lock()
		if s.maxSize <= 0 || s.total <= s.maxSize || len(s.segs) < 2 {
			s.mu.Unlock()
			return nil
		}
		seg := s.segs[0]
		if (!pinned.IsNull() && seg.last >= pinned) || (!stable.IsNull() && seg.last > stable) {
			s.mu.Unlock()
			return nil
		}
		if s.minRetention > 0 && time.Since(time.Unix(int64(seg.last.Secs()), 0)) < s.minRetention {
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		lo := appendBareKey(nil, ii.id, recordid.Long(int64(seg.first)).Key())
		hi := appendBareKey(nil, ii.id, recordid.Long(int64(seg.last)+1).Key())
		if err := e.db.DeleteRange(lo, hi, pebble.NoSync); err != nil {
			return err
		}
		s.mu.Lock()
		// Only truncateOplog removes segments (serialised by truncMu), so seg is still first.
		s.segs = s.segs[1:]
		s.total -= seg.bytes
		s.mu.Unlock()
		ii.records.Add(-seg.records)
		ii.dataSize.Add(-seg.bytes)
		ii.countsDirty.Store(true)
	}
}

// TruncateOplogAfter removes oplog entries with timestamps > ts (startup recovery, rollback).
func (e *Engine) TruncateOplogAfter(ident string, ts optime.Timestamp) error {
	ii, err := e.lookupIdent(ident)
	if err != nil {
		return err
	}
	if ii.oplog == nil {
		return fmt.Errorf("storage: %s is not an oplog ident", ident)
	}
	_, hi := identBounds(ii.id)
	lo := appendBareKey(nil, ii.id, recordid.Long(int64(ts)+1).Key())
	if err := e.db.DeleteRange(lo, hi, pebble.Sync); err != nil {
		return err
	}
	if err := e.recomputeCounts(ii); err != nil {
		return err
	}
	return e.initOplogMarkers(ii)
}
