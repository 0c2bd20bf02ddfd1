package filtering

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"humongo/internal/operation"
	"humongo/internal/sharding/routing"
)

// moveFirstAway gives the chunk [MinKey, 10) to shard1 at the next major version: shard0
// owns nothing any more.
func (f *fakeConfig) moveFirstAway() routing.ChunkVersion {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := routing.ChunkVersion{Major: 2, Generation: f.coll.Gen}
	f.chunks[0].Shard, f.chunks[0].Version = "shard1", v
	return v
}

// A read that got its filter before a migration keeps seeing the moved range as owned, and
// the range deleter's wait for [MinKey, 10) lasts until the read (its operation and its plan,
// as a cursor holds it) is over; a range the old metadata never owned does not wait.
func TestRangePreserver(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	var aware atomic.Bool
	aware.Store(true)
	rt := newRuntime(f, &aware)
	v11 := routing.ChunkVersion{Major: 1, Minor: 1, Generation: f.coll.Gen}
	if _, err := rt.RefreshCollection(ctx, "test.c"); err != nil {
		t.Fatal(err)
	}
	filter, err := rt.Check(versioned("test.c", v11), "test.c")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := filter.(operation.PinnedFilter)
	if !ok {
		t.Fatalf("the filter of a sharded collection is not pinned: %T", filter)
	}
	unpinPlan := p.Pin() // the plan (a cursor) built over it
	p.Release()          // the operation that opened the cursor ends
	if n := rt.InFlightUses("test.c"); n != 1 {
		t.Fatalf("in-flight uses %d, want 1", n)
	}

	// The migration of [MinKey, 10) commits and this shard refreshes.
	f.moveFirstAway()
	if _, err := rt.RefreshCollection(ctx, "test.c"); err != nil {
		t.Fatal(err)
	}
	if !filter.KeyBelongs(key(5)) {
		t.Fatal("the old read lost the moved document")
	}
	m, _ := rt.Collection("test.c")
	if m.Filter().KeyBelongs(key(5)) {
		t.Fatal("a new read sees the moved document")
	}
	uuid := f.coll.UUID
	min, max := m.Table.Pattern().GlobalMin(), key(10)

	// The range [10, MaxKey) was never owned by the old metadata: nothing to wait for.
	if err := rt.WaitForRangeQueries(ctx, "test.c", uuid, key(10), m.Table.Pattern().GlobalMax()); err != nil {
		t.Fatal(err)
	}
	// The moved range waits for the cursor.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = rt.WaitForRangeQueries(short, "test.c", uuid, min, max)
	cancel()
	if err == nil {
		t.Fatal("the wait ended while a read of the old metadata was in flight")
	}
	done := make(chan error, 1)
	go func() { done <- rt.WaitForRangeQueries(ctx, "test.c", uuid, min, max) }()
	unpinPlan() // the cursor is exhausted
	unpinPlan() // a second Close does nothing
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end after the cursor closed")
	}
	if n := rt.InFlightUses("test.c"); n != 0 {
		t.Fatalf("in-flight uses %d after the read ended", n)
	}
	// The current metadata does not own the moved range.
	if m.OwnsOverlapping(uuid, min, max) {
		t.Fatal("the current metadata owns the moved range")
	}
}

// Reads pin and release while refreshes install new metadata: every use is counted on the
// metadata the read checked against, and once all reads end nothing is left in flight.
func TestRangePreserverConcurrent(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	var aware atomic.Bool
	aware.Store(true)
	rt := newRuntime(f, &aware)
	if _, err := rt.RefreshCollection(ctx, "test.c"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var pinned atomic.Int64
	var readers, refresher sync.WaitGroup
	refresher.Add(1)
	go func() {
		defer refresher.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rt.ClearCollection("test.c")
			_, _ = rt.RefreshCollection(ctx, "test.c")
		}
	}()
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			// Until the readers have pinned a few hundred times: the refresher clears the
			// metadata all the time, and on a loaded machine (the race detector) it can win
			// hundreds of rounds in a row.
			for i := 0; i < 500 || pinned.Load() < 200 && i < 200000; i++ {
				if i%64 == 63 {
					runtime.Gosched()
				}
				m, ok := rt.Collection("test.c")
				if !ok {
					continue
				}
				filter, err := rt.Check(versioned("test.c", m.ShardVersion()), "test.c")
				if err != nil || filter == nil {
					continue // refreshed in between: the version was cleared or replaced
				}
				p := filter.(operation.PinnedFilter)
				pinned.Add(1)
				unpin := p.Pin()
				p.Release()
				unpin()
			}
		}()
	}
	readers.Wait()
	close(stop)
	refresher.Wait()
	if pinned.Load() == 0 {
		t.Fatal("no read got a filter")
	}
	if n := rt.InFlightUses("test.c"); n != 0 {
		t.Fatalf("%d uses left after every read ended", n)
	}
	m, _ := rt.Collection("test.c")
	if err := rt.WaitForRangeQueries(ctx, "test.c", f.coll.UUID, m.Table.Pattern().GlobalMin(), m.Table.Pattern().GlobalMax()); err != nil {
		t.Fatal(err)
	}
}
