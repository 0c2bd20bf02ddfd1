package server

import (
	"context"
	"runtime/debug"
	"testing"
	"time"

	"humongo/internal/mongoerr"
)

// waitWaiting polls (no sleep decides the outcome) until n requests wait on b.
func waitWaiting(t *testing.T, b *byteBudget, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, w := b.inUse(); w == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %d waiting", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The in-flight budget admits messages while they fit, queues the next in order, admits a
// message larger than the whole budget alone (never deadlocks on it), and lets a waiter go
// when its context ends.
func TestByteBudget(t *testing.T) {
	ctx := context.Background()
	gc0 := debug.SetGCPercent(100)
	debug.SetGCPercent(gc0)
	b := newByteBudget(100)
	r1, err := b.acquire(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 2)
	go func() {
		r, err := b.acquire(ctx, 60)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	waitWaiting(t, b, 1)

	// A waiter that gives up leaves the queue.
	cctx, cancel := context.WithCancelCause(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.acquire(cctx, 10)
		done <- err
	}()
	waitWaiting(t, b, 2)
	cancel(mongoerr.New(mongoerr.InterruptedAtShutdown, "shutdown"))
	if err := <-done; !mongoerr.Is(err, mongoerr.InterruptedAtShutdown) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	waitWaiting(t, b, 1)

	r1()
	r1() // idempotent
	r2 := <-got
	if used, _ := b.inUse(); used != 60 {
		t.Fatalf("used %d after handing over, want 60", used)
	}

	// Larger than the budget: waits for everything in flight, then runs alone.
	go func() {
		r, err := b.acquire(ctx, 1000)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	waitWaiting(t, b, 1)
	r2()
	r3 := <-got
	if used, _ := b.inUse(); used != 100 {
		t.Fatalf("an oversized message holds %d, want the whole budget", used)
	}
	r3()
	if used, w := b.inUse(); used != 0 || w != 0 {
		t.Fatalf("at the end: used %d, waiting %d", used, w)
	}
	select {
	case <-b.idle:
	default:
		t.Error("no idle signal for the memory releaser")
	}
	burstGC.mu.Lock()
	n := burstGC.n
	burstGC.mu.Unlock()
	if n != 0 || debug.SetGCPercent(gc0) != gc0 {
		t.Errorf("after the burst: %d budgets counted in a burst, GOGC not restored", n)
	}
}
