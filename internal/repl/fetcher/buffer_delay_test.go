package fetcher

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// fakeDelay is a DelaySource and clock the test moves by hand: changing either closes the
// channel the buffer waits on, so Next re-evaluates without any real time passing.
type fakeDelay struct {
	mu      sync.Mutex
	delay   time.Duration
	now     time.Time
	changed chan struct{}
}

func (f *fakeDelay) source() (time.Duration, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay, f.changed
}

func (f *fakeDelay) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeDelay) set(delay time.Duration, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay, f.now = delay, now
	close(f.changed)
	f.changed = make(chan struct{})
}

func walled(op string, wall time.Time) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("op", op).AppendDateTime("wall", wall.UnixMilli()).Build()
}

// held asserts that Next hands out nothing: ctx's short deadline only bounds how long the
// test looks (a correct buffer never returns the entry, however long it is given).
func held(t *testing.T, b *Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if batch, err := b.Next(ctx, 10, 1<<20, isCmd); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next = %d entries, %v; want them held back", len(batch), err)
	}
}

// TestBufferSecondaryDelay: with a delay, Next releases an entry only once its wall time is
// the delay in the past, ends a batch before the first entry that is not due yet, and
// re-evaluates when the delay changes (reconfig).
func TestBufferSecondaryDelay(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	f := &fakeDelay{delay: 10 * time.Second, now: t0, changed: make(chan struct{})}
	b := NewBuffer(1 << 20)
	b.SetDelay(f.source, f.clock)
	ctx := context.Background()
	if err := b.Push(ctx, []bsoncore.Document{
		walled("i", t0), walled("i", t0.Add(time.Second)), walled("i", t0.Add(5*time.Second)),
		entry("n", 0), // no wall: never held back on its own
	}); err != nil {
		t.Fatal(err)
	}
	held(t, b) // now = t0: the first entry is due at t0+10s

	// A Next waiting for the first entry wakes when the clock (here: the delay source) moves.
	type result struct {
		batch []bsoncore.Document
		err   error
	}
	res := make(chan result, 1)
	go func() {
		batch, err := b.Next(ctx, 10, 1<<20, isCmd)
		res <- result{batch, err}
	}()
	f.set(10*time.Second, t0.Add(11*time.Second)) // boundary t0+1s: the first two are due
	r := <-res
	if r.err != nil || len(r.batch) != 2 {
		t.Fatalf("Next at t0+11s = %d entries, %v; want 2", len(r.batch), r.err)
	}
	for _, d := range r.batch {
		w, _ := entryWall(d)
		if now := f.clock(); now.Sub(w) < 10*time.Second {
			t.Fatalf("entry with wall %v released at %v, before its delay", w, now)
		}
	}
	held(t, b) // the t0+5s entry is due at t0+15s

	// A reconfig to no delay releases the rest at once.
	f.set(0, t0.Add(11*time.Second))
	batch, err := b.Next(ctx, 10, 1<<20, isCmd)
	if err != nil || len(batch) != 2 {
		t.Fatalf("Next without delay = %d entries, %v; want 2", len(batch), err)
	}
}

// TestBufferSecondaryDelayTimer: with the real clock, a held entry is released by Next's own
// timer (no other wake-up), and not before its wall time plus the delay.
func TestBufferSecondaryDelayTimer(t *testing.T) {
	const delay = 300 * time.Millisecond
	never := make(chan struct{})
	b := NewBuffer(1 << 20)
	b.SetDelay(func() (time.Duration, <-chan struct{}) { return delay, never }, nil)
	wall := time.Now()
	if err := b.Push(context.Background(), []bsoncore.Document{walled("i", wall)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // liveness only
	defer cancel()
	batch, err := b.Next(ctx, 10, 1<<20, isCmd)
	released := time.Now()
	if err != nil || len(batch) != 1 {
		t.Fatalf("Next = %d entries, %v", len(batch), err)
	}
	// wall has millisecond precision in the entry: compare against the stored value.
	w, _ := entryWall(batch[0])
	t.Logf("released %v after the entry's wall time (delay %v)", released.Sub(w), delay)
	if released.Sub(w) < delay {
		t.Fatalf("released %v after wall time, before the %v delay", released.Sub(w), delay)
	}
}
