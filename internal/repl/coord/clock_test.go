package coord_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/repl/coord"
	"humongo/internal/repl/topology"
)

// fakeClock is a coord.Clock that moves only when Advance is called.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*fakeTicker
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

type fakeTicker struct {
	c      *fakeClock
	every  time.Duration
	next   time.Time
	ch     chan time.Time
	closed bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, fakeWaiter{at: f.now.Add(d), ch: ch})
	return ch
}

func (f *fakeClock) NewTicker(d time.Duration) coord.Ticker {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTicker{c: f, every: d, next: f.now.Add(d), ch: make(chan time.Time, 1)}
	f.tickers = append(f.tickers, t)
	return t
}

func (t *fakeTicker) C() <-chan time.Time { return t.ch }

func (t *fakeTicker) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.closed = true
}

// Advance moves the clock by d, firing due tickers (dropping ticks a slow reader missed, as
// time.Ticker does) and timers.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	for _, t := range f.tickers {
		if t.closed {
			continue
		}
		for !t.next.After(f.now) {
			select {
			case t.ch <- t.next:
			default:
			}
			t.next = t.next.Add(t.every)
		}
	}
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.at.After(f.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- f.now
	}
	f.waiters = kept
}

// TestInjectedClockDrivesTheCoordinator: a restarted one-member set elects itself on its tick
// once the election timeout has passed — on the coordinator's clock. With a fake clock
// that does not move, real time passing changes nothing; advancing it elects the node.
func TestInjectedClockDrivesTheCoordinator(t *testing.T) {
	self := "127.0.0.1:1"
	cfg := topology.NewDefaultConfig("rs0", self)
	store := &memStore{docs: map[string]bsoncore.Document{coord.ConfigNS: coord.ConfigDocument(cfg)}}
	clk := newFakeClock()
	rc := coord.New(coord.Options{SetName: "rs0", Self: self, Store: store, Clock: clk, TickInterval: 50 * time.Millisecond})
	if err := rc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer rc.Close()

	time.Sleep(300 * time.Millisecond) // six ticks of real time
	if rc.IsWritablePrimary() {
		t.Fatal("elected without the coordinator's clock moving")
	}
	// Well past the election timeout (10 s by default, plus its random offset), one tick at a
	// time so the ticker goroutine sees each.
	for i := 0; i < 600 && !rc.IsWritablePrimary(); i++ {
		clk.Advance(50 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !rc.IsWritablePrimary() {
		if time.Now().After(deadline) {
			t.Fatalf("not primary after 30 s of coordinator time: %v", rc.Hello())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
