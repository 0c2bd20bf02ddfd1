package lock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"humongo/internal/mongoerr"
)

// holderTable counts, per resource and mode, the Lockers that currently believe they hold it.
// Every holder increments its own counter and then reads the others (sequentially consistent
// atomics), so of two conflicting holders overlapping in time at least one sees the other.
type holderTable struct {
	counts     map[ResourceID]*[numModes]atomic.Int32 // read-only after setup
	violations atomic.Int64
	firstMu    sync.Mutex
	first      string
}

// specCompatible is the spec's matrix written out independently of conflictTable, so the
// stress test also catches a wrong table.
var specCompatible = [numModes][numModes]bool{
	ModeIS: {ModeNone: true, ModeIS: true, ModeIX: true, ModeS: true},
	ModeIX: {ModeNone: true, ModeIS: true, ModeIX: true},
	ModeS:  {ModeNone: true, ModeIS: true, ModeS: true},
	ModeX:  {ModeNone: true},
}

func newHolderTable(res []ResourceID) *holderTable {
	t := &holderTable{counts: make(map[ResourceID]*[numModes]atomic.Int32)}
	for _, r := range res {
		t.counts[r] = new([numModes]atomic.Int32)
	}
	return t
}

func (t *holderTable) enter(held []HeldLock) {
	for _, h := range held {
		c := t.counts[h.Resource]
		c[h.Mode].Add(1)
		for g := ModeIS; g < numModes; g++ {
			n := c[g].Load()
			if g == h.Mode {
				n-- // ourselves
			}
			if n > 0 && !specCompatible[h.Mode][g] {
				t.violations.Add(1)
				t.firstMu.Lock()
				if t.first == "" {
					t.first = fmt.Sprintf("%v held in %s while %d holder(s) have %s", h.Resource, h.Mode, n, g)
				}
				t.firstMu.Unlock()
			}
		}
	}
}

func (t *holderTable) leave(held []HeldLock) {
	for _, h := range held {
		t.counts[h.Resource][h.Mode].Add(-1)
	}
}

// TestStressHierarchy runs 16 goroutines taking random Global/Database/Collection chains in
// hierarchy order with random modes (plus conversions at the leaf, two-phase locking, mutexes
// and short deadlines), checks mutual exclusion on every resource, and requires the run to
// finish (no deadlock), leave every head empty and leave no goroutine behind.
//
// The run without deadlines proves deadlock freedom outright (any cycle would hang and trip the
// watchdog); the run with short deadlines exercises withdrawal from queues under load.
func TestStressHierarchy(t *testing.T) {
	t.Run("no-deadlines", func(t *testing.T) { stressHierarchy(t, false) })
	t.Run("short-deadlines", func(t *testing.T) { stressHierarchy(t, true) })
}

func stressHierarchy(t *testing.T, deadlines bool) {
	const workers = 16
	ops := 5000
	if raceEnabled {
		ops = 800
	}
	if testing.Short() {
		ops = 200
	}
	m := NewManager()
	dbs := []string{"a", "b", "c"}
	var colls []string
	for _, d := range dbs {
		colls = append(colls, d+".x", d+".y")
	}
	mutex := NewMutexResource("stress")
	all := []ResourceID{ResourcePBWM, ResourceRSTL, ResourceGlobal, mutex}
	for _, d := range dbs {
		all = append(all, DatabaseResource(d))
	}
	for _, c := range colls {
		all = append(all, CollectionResource(c))
	}
	table := newHolderTable(all)

	baseline := runtime.NumGoroutine()
	var (
		wg        sync.WaitGroup
		granted   atomic.Int64
		timeouts  atomic.Int64
		failMu    sync.Mutex
		failFirst error
	)
	fail := func(err error) {
		failMu.Lock()
		if failFirst == nil {
			failFirst = err
		}
		failMu.Unlock()
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 42))
			l := m.NewLocker()
			var held []HeldLock
			for i := 0; i < ops; i++ {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if deadlines && rng.IntN(10) == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(500))*time.Microsecond)
				}
				db := dbs[rng.IntN(len(dbs))]
				coll := colls[rng.IntN(len(colls))]
				wuow := false
				var s Scope
				var err error
				switch op := rng.IntN(100); {
				case op < 2:
					s, err = l.GlobalLock(ctx, ModeX)
				case op < 5:
					s, err = l.GlobalLock(ctx, ModeS)
				case op < 10:
					s, err = l.DBLock(ctx, db, ModeX)
				case op < 15:
					s, err = l.DBLock(ctx, db, ModeS)
				case op < 25:
					s, err = l.CollectionLock(ctx, coll, ModeX)
				case op < 35:
					s, err = l.CollectionLock(ctx, coll, ModeS)
				case op < 60:
					// A write in a unit of work: the release is deferred, and re-taking the
					// same chain inside the unit cancels the deferral.
					wuow = true
					l.BeginWriteUnitOfWork()
					s, err = l.CollectionLock(ctx, coll, ModeIX)
					if err == nil {
						_ = s.Release()
						s, err = l.CollectionLock(ctx, coll, ModeIX)
					}
				case op < 80:
					s, err = l.CollectionLock(ctx, coll, ModeIS)
				case op < 92:
					// Conversion at the leaf: IS then IX on the collection under a DB IX.
					s, err = l.DBLock(ctx, dbOf(coll), ModeIX)
					if err == nil {
						err = l.Lock(ctx, CollectionResource(coll), ModeIS)
					}
					if err == nil {
						err = l.Lock(ctx, CollectionResource(coll), ModeIX)
					}
				case op < 96:
					// Several collections across databases, in (level, id) order.
					s, err = l.LockCollections(ctx, Mode(1+rng.IntN(4)),
						colls[rng.IntN(len(colls))], colls[rng.IntN(len(colls))], coll)
				default:
					err = l.Lock(ctx, mutex, Mode(1+rng.IntN(4)))
				}
				cancel()
				if err != nil {
					if !mongoerr.Is(err, mongoerr.LockTimeout) {
						fail(fmt.Errorf("unexpected error: %w", err))
					}
					timeouts.Add(1)
					l.UnlockAll()
					continue
				}
				granted.Add(1)
				held = l.Held(held[:0])
				table.enter(held)
				if rng.IntN(4) == 0 {
					runtime.Gosched()
				}
				table.leave(held)
				if wuow {
					_ = s.Release()
					if err := l.EndWriteUnitOfWork(); err != nil {
						fail(err)
					}
				}
				l.UnlockAll()
				if n := len(l.Held(held[:0])); n != 0 {
					fail(fmt.Errorf("%d locks left after UnlockAll", n))
				}
			}
		}(uint64(w))
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		t.Fatal("stress run did not finish: deadlock or livelock")
	}
	if failFirst != nil {
		t.Fatal(failFirst)
	}
	if v := table.violations.Load(); v != 0 {
		t.Fatalf("%d mutual-exclusion violations; first: %s", v, table.first)
	}
	if n := m.Busy(); n != 0 {
		t.Fatalf("%d lock heads busy after all workers finished", n)
	}
	t.Logf("%d chains granted, %d timed out", granted.Load(), timeouts.Load())
	if granted.Load() == 0 || (timeouts.Load() == 0) == deadlines {
		t.Errorf("granted %d, timeouts %d (deadlines %v)", granted.Load(), timeouts.Load(), deadlines)
	}
	assertNoGoroutineLeak(t, baseline)

	st := m.Stats()
	if st.Category("Global").Modes[ModeX].AcquireCount == 0 || st.Category("Collection").Modes[ModeIX].AcquireWaitCount == 0 {
		t.Errorf("stats did not record the run: %+v", st)
	}
}

// assertNoGoroutineLeak waits briefly for goroutines that are exiting, then requires the count
// to be back at baseline. The package starts no goroutines of its own, so any excess is a
// waiter stuck in Lock.
func assertNoGoroutineLeak(t *testing.T, baseline int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			t.Fatalf("goroutines: %d, baseline %d", runtime.NumGoroutine(), baseline)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFsyncLockPattern is the checklist's fsyncLock scenario: with the Global lock held in S,
// reads proceed and writes block until it is released.
func TestFsyncLockPattern(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	fsync := h.m.NewLocker()
	fs, err := fsync.GlobalLock(ctx, ModeS)
	if err != nil {
		t.Fatal(err)
	}
	reader := h.m.NewLocker()
	reader.SetLockRequestTimeout(0)
	rs, err := reader.CollectionLock(ctx, "app.c", ModeIS)
	if err != nil {
		t.Fatalf("read during fsyncLock: %v", err)
	}
	_ = rs.Release()

	writer := h.m.NewLocker()
	done := make(chan error, 1)
	go func() {
		s, err := writer.CollectionLock(ctx, "app.c", ModeIX)
		if err == nil {
			err = s.Release()
		}
		done <- err
	}()
	h.expectQueued(ResourceGlobal, ModeIX)
	mustBePending(t, done, "write during fsyncLock")
	_ = fs.Release()
	mustGrant(t, done, "write after fsyncUnlock")
}

// TestRSTLStepDownExcludesWriters: a step-down (RSTL X, enqueued at the front) waits for
// in-flight writers, and writers arriving later wait for it.
func TestRSTLStepDownExcludesWriters(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	w1 := h.m.NewLocker()
	s1, err := w1.CollectionLock(ctx, "app.c", ModeIX)
	if err != nil {
		t.Fatal(err)
	}
	stepdown := h.m.NewLocker()
	sd := lockAsync(ctx, stepdown, ResourceRSTL, ModeX, Options{})
	h.expectQueued(ResourceRSTL, ModeX)

	w2 := h.m.NewLocker()
	w2.SetLockRequestTimeout(0)
	if _, err := w2.CollectionLock(ctx, "app.c", ModeIX); !mongoerr.Is(err, mongoerr.LockTimeout) {
		t.Fatalf("writer passed a pending step-down: %v", err)
	}
	<-h.queued
	_ = s1.Release()
	mustGrant(t, sd, "RSTL X after the writer left")
	stepdown.UnlockAll()
}
