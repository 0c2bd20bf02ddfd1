package fetcher

import (
	"context"
	"sync"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Buffer is the steady-state OplogBuffer: an in-memory blocking queue of fetched entries
// between the fetcher (producer) and the applier (consumer), bounded by bytes so a slow
// applier applies back-pressure to the fetcher instead of growing without limit.
type Buffer struct {
	maxBytes int

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
func (b *Buffer) Next(ctx context.Context, maxOps, maxBytes int, alone func(bsoncore.Document) bool) ([]bsoncore.Document, error) {
	for {
		b.mu.Lock()
		if len(b.entries) > 0 {
			n, size := 0, 0
			for n < len(b.entries) && n < maxOps {
				d := b.entries[n]
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
		select {
		case <-ch:
		case <-ctx.Done():
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
