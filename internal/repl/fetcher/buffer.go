package fetcher

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Buffer is the steady-state OplogBuffer: an in-memory blocking queue of fetched entries
// between the fetcher (producer) and the applier (consumer), bounded by bytes so a slow
// applier applies back-pressure to the fetcher instead of growing without limit.
//
// On a delayed member (secondaryDelaySecs, see SetDelay) Next is also MongoDB's batcher
// holding entries back: the fetcher keeps fetching and buffering at once, and Next hands out
// an entry only once its wall time is at least the delay in the past.
type Buffer struct {
	maxBytes int
	// delay and now are set once by SetDelay before the buffer is used (nil: no delay).
	delay DelaySource
	now   func() time.Time

	mu      sync.Mutex
	entries []bsoncore.Document // guarded by mu; FIFO, entries[0] is the oldest
	bytes   int                 // guarded by mu; sum of len(entries[i])
	changed chan struct{}       // guarded by mu; closed and replaced on every push or pop
}

// NewBuffer returns a buffer holding at most maxBytes of entries (a single push larger than
// that is still accepted into an empty buffer, so one huge batch cannot wedge the fetcher).
func NewBuffer(maxBytes int) *Buffer {
	if maxBytes <= 0 {
		maxBytes = 256 << 20
	}
	return &Buffer{maxBytes: maxBytes, changed: make(chan struct{})}
}

func (b *Buffer) signalLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// DelaySource reports the member's current secondaryDelaySecs, and a channel closed when it
// may have changed (a reconfig), so a Next waiting out the old delay re-evaluates.
type DelaySource func() (delay time.Duration, changed <-chan struct{})

// SetDelay makes Next hold entries back by delay's current value, measured from each entry's
// `wall` against now (nil: time.Now). Call it before the buffer is used.
func (b *Buffer) SetDelay(delay DelaySource, now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	b.delay, b.now = delay, now
}

// entryWall is an oplog entry's `wall` (the primary's wall clock when it wrote it); ok is
// false for an entry without one, which is never held back.
func entryWall(d bsoncore.Document) (time.Time, bool) {
	ms, ok := d.Lookup("wall").DateTimeOK()
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// Push appends docs (which the buffer now owns), waiting while the buffer is full.
func (b *Buffer) Push(ctx context.Context, docs []bsoncore.Document) error {
	n := 0
	for _, d := range docs {
		n += len(d)
	}
	for {
		b.mu.Lock()
		if b.bytes == 0 || b.bytes+n <= b.maxBytes {
			b.entries = append(b.entries, docs...)
			b.bytes += n
			b.signalLocked()
			b.mu.Unlock()
			return nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Next waits until the buffer holds an entry and returns the next batch: up to maxOps
// entries and maxBytes bytes (at least one entry), ending before the first entry for which
// alone reports true, or holding only that entry when it comes first (commands are applied
// in batches of one).
//
// With a delay (SetDelay) the batch also ends before the first entry whose wall time is
// less than the delay in the past (MongoDB's secondaryDelayBoundary); when that is the first
// entry, Next waits on a timer until it is due, or until the delay may have changed.
func (b *Buffer) Next(ctx context.Context, maxOps, maxBytes int, alone func(bsoncore.Document) bool) ([]bsoncore.Document, error) {
	for {
		// The delay source takes its owner's lock: ask before taking ours.
		var delay time.Duration
		var delayChanged <-chan struct{}
		var boundary time.Time // entries with a later wall time are held back
		if b.delay != nil {
			delay, delayChanged = b.delay()
			if delay > 0 {
				boundary = b.now().Add(-delay)
			}
		}
		b.mu.Lock()
		var wait time.Duration // > 0: the first entry is due in wait
		if len(b.entries) > 0 && !boundary.IsZero() {
			if w, ok := entryWall(b.entries[0]); ok && w.After(boundary) {
				wait = w.Sub(boundary)
			}
		}
		if len(b.entries) > 0 && wait == 0 {
			n, size := 0, 0
			for n < len(b.entries) && n < maxOps {
				d := b.entries[n]
				if !boundary.IsZero() && n > 0 {
					if w, ok := entryWall(d); ok && w.After(boundary) {
						break
					}
				}
				if alone != nil && alone(d) {
					if n == 0 {
						n, size = 1, len(d)
					}
					break
				}
				if n > 0 && size+len(d) > maxBytes {
					break
				}
				size += len(d)
				n++
			}
			out := make([]bsoncore.Document, n)
			copy(out, b.entries[:n])
			clear(b.entries[:n])
			b.entries = b.entries[n:]
			b.bytes -= size
			b.signalLocked()
			b.mu.Unlock()
			return out, nil
		}
		ch := b.changed
		b.mu.Unlock()
		var due <-chan time.Time
		var t *time.Timer
		if wait > 0 {
			t = time.NewTimer(wait)
			due = t.C
		}
		select {
		case <-ch:
		case <-due:
		case <-delayChanged:
		case <-ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
	}
}

// Len returns the number of buffered entries and their size in bytes.
func (b *Buffer) Len() (entries, bytes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.entries), b.bytes
}

// WaitEmpty waits until every pushed entry has been taken by Next.
func (b *Buffer) WaitEmpty(ctx context.Context) error {
	for {
		b.mu.Lock()
		if len(b.entries) == 0 {
			b.mu.Unlock()
			return nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Clear drops every buffered entry (sync source change after a rollback, shutdown).
func (b *Buffer) Clear() {
	b.mu.Lock()
	clear(b.entries)
	b.entries, b.bytes = nil, 0
	b.signalLocked()
	b.mu.Unlock()
}
