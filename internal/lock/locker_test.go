package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"humongo/internal/mongoerr"
)

// harness is a Manager whose queueing events are observable, so tests know a request is
// waiting without sleeping.
type harness struct {
	t      *testing.T
	m      *Manager
	queued chan queuedEvent
}

type queuedEvent struct {
	res  ResourceID
	mode Mode
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, m: NewManager(), queued: make(chan queuedEvent, 64)}
	h.m.hookQueued = func(res ResourceID, mode Mode) { h.queued <- queuedEvent{res, mode} }
	t.Cleanup(func() {
		if n := h.m.Busy(); n != 0 {
			t.Errorf("%d lock heads still busy at the end of the test", n)
		}
	})
	return h
}

// expectQueued waits until the next request starts waiting and checks what it asked for.
func (h *harness) expectQueued(res ResourceID, mode Mode) {
	h.t.Helper()
	select {
	case ev := <-h.queued:
		if ev.res != res || ev.mode != mode {
			h.t.Fatalf("queued %v %s, want %v %s", ev.res, ev.mode, res, mode)
		}
	case <-time.After(10 * time.Second):
		h.t.Fatalf("timed out waiting for a %s request on %v to queue", mode, res)
	}
}

// lockAsync runs l.LockWith in a goroutine; the result arrives on the returned channel.
func lockAsync(ctx context.Context, l *Locker, res ResourceID, mode Mode, opts Options) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- l.LockWith(ctx, res, mode, opts) }()
	return ch
}

func mustGrant(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not granted", what)
	}
}

func mustBePending(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s: returned early (%v)", what, err)
	default:
	}
}

func mustLock(t *testing.T, l *Locker, res ResourceID, mode Mode) {
	t.Helper()
	if err := l.Lock(context.Background(), res, mode); err != nil {
		t.Fatalf("lock %v %s: %v", res, mode, err)
	}
}

func mustUnlock(t *testing.T, l *Locker, res ResourceID) {
	t.Helper()
	if err := l.Unlock(res); err != nil {
		t.Fatalf("unlock %v: %v", res, err)
	}
}

// doneCtx is an expired context: Lock with it is a try-lock.
func doneCtx() context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	cancel()
	return ctx
}

// tryLock reports whether res can be granted in mode right now (the attempt leaves nothing
// behind; a granted lock is released again).
func tryLock(t *testing.T, l *Locker, res ResourceID, mode Mode) bool {
	t.Helper()
	err := l.Lock(doneCtx(), res, mode)
	if err == nil {
		mustUnlock(t, l, res)
		return true
	}
	if !mongoerr.Is(err, mongoerr.LockTimeout) {
		t.Fatalf("try-lock %v %s: %v, want LockTimeout", res, mode, err)
	}
	return false
}

func TestRecursiveAcquisition(t *testing.T) {
	h := newHarness(t)
	a, b := h.m.NewLocker(), h.m.NewLocker()
	mu := NewMutexResource("t")
	mustLock(t, a, mu, ModeX)
	mustLock(t, a, mu, ModeX)
	mustLock(t, a, mu, ModeS) // covered by X: a recursion, not a conversion
	if a.Mode(mu) != ModeX {
		t.Fatalf("mode %s", a.Mode(mu))
	}
	for i := 0; i < 2; i++ {
		mustUnlock(t, a, mu)
		if tryLock(t, b, mu, ModeIS) {
			t.Fatalf("released after %d of 3 unlocks", i+1)
		}
	}
	mustUnlock(t, a, mu)
	if !tryLock(t, b, mu, ModeX) {
		t.Fatal("not released after 3 unlocks")
	}
	if err := a.Unlock(mu); !errors.Is(err, ErrMisuse) || !mongoerr.Is(err, mongoerr.InternalError) {
		t.Fatalf("extra unlock: %v", err)
	}
}

// TestFIFOWriterNotStarved: a queued X blocks later IS requests even though they are
// compatible with the granted IS, and is granted as soon as the holder leaves.
func TestFIFOWriterNotStarved(t *testing.T) {
	for _, res := range []ResourceID{ResourceGlobal, NewMutexResource("fifo")} {
		t.Run(res.Type().String(), func(t *testing.T) {
			h := newHarness(t)
			a, b, c := h.m.NewLocker(), h.m.NewLocker(), h.m.NewLocker()
			mustLock(t, a, res, ModeIS)
			bx := lockAsync(context.Background(), b, res, ModeX, Options{})
			h.expectQueued(res, ModeX)

			// A later IS must not overtake the queued writer, and a failed attempt leaves no
			// residue.
			if tryLock(t, c, res, ModeIS) {
				t.Fatal("IS granted past a queued X")
			}
			if st := h.m.State(res); st.Waiting[ModeIS] != 0 || st.Waiting[ModeX] != 1 {
				t.Fatalf("state after failed try: %+v", st)
			}
			cis := lockAsync(context.Background(), c, res, ModeIS, Options{})
			h.expectQueued(res, ModeIS)

			mustUnlock(t, a, res)
			mustGrant(t, bx, "X after IS holder left")
			mustBePending(t, cis, "IS while X held")
			mustUnlock(t, b, res)
			mustGrant(t, cis, "IS after X left")
			mustUnlock(t, c, res)
		})
	}
}

// TestFIFOBatches: compatible requests at the head of the queue are granted together, but no
// request passes a queued conflicting one.
func TestFIFOBatches(t *testing.T) {
	h := newHarness(t)
	res := NewMutexResource("batches")
	holder := h.m.NewLocker()
	mustLock(t, holder, res, ModeX)
	ls := make([]*Locker, 4)
	chs := make([]<-chan error, 4)
	modes := []Mode{ModeS, ModeS, ModeX, ModeIS}
	for i, md := range modes {
		ls[i] = h.m.NewLocker()
		chs[i] = lockAsync(context.Background(), ls[i], res, md, Options{})
		h.expectQueued(res, md)
	}
	mustUnlock(t, holder, res)
	mustGrant(t, chs[0], "S #1")
	mustGrant(t, chs[1], "S #2")
	mustBePending(t, chs[2], "X behind granted S")
	// IS is compatible with the granted S, but a queued X is ahead of it.
	if st := h.m.State(res); st.Waiting[ModeIS] != 1 || st.Granted[ModeS] != 2 {
		t.Fatalf("state: %+v", st)
	}
	mustBePending(t, chs[3], "IS behind queued X")
	mustUnlock(t, ls[0], res)
	mustBePending(t, chs[2], "X while one S remains")
	mustUnlock(t, ls[1], res)
	mustGrant(t, chs[2], "X")
	mustUnlock(t, ls[2], res)
	mustGrant(t, chs[3], "IS")
	mustUnlock(t, ls[3], res)
}

// TestFIFONonExclusiveConflict: a queued IX keeps a later S waiting even though that S is
// compatible with the S already granted (FIFO is not only about X).
func TestFIFONonExclusiveConflict(t *testing.T) {
	h := newHarness(t)
	res := NewMutexResource("s-ix-s")
	holder := h.m.NewLocker()
	mustLock(t, holder, res, ModeX)
	ls := []*Locker{h.m.NewLocker(), h.m.NewLocker(), h.m.NewLocker()}
	modes := []Mode{ModeS, ModeIX, ModeS}
	chs := make([]<-chan error, len(ls))
	for i, md := range modes {
		chs[i] = lockAsync(context.Background(), ls[i], res, md, Options{})
		h.expectQueued(res, md)
	}
	mustUnlock(t, holder, res)
	mustGrant(t, chs[0], "first S")
	if st := h.m.State(res); st.Granted[ModeS] != 1 || st.Waiting[ModeIX] != 1 || st.Waiting[ModeS] != 1 {
		t.Fatalf("second S passed the queued IX: %+v", st)
	}
	// A new S is held back the same way.
	if tryLock(t, h.m.NewLocker(), res, ModeS) {
		t.Fatal("new S passed the queued IX")
	}
	mustUnlock(t, ls[0], res)
	mustGrant(t, chs[1], "IX")
	mustBePending(t, chs[2], "S while IX held")
	mustUnlock(t, ls[1], res)
	mustGrant(t, chs[2], "second S")
	mustUnlock(t, ls[2], res)
}

// TestEnqueueAtFront: X and S on Global-type resources jump the queue automatically; other
// requests can ask for it; front-of-queue requests keep FIFO order among themselves.
func TestEnqueueAtFront(t *testing.T) {
	t.Run("automatic on RSTL", func(t *testing.T) {
		h := newHarness(t)
		a, b, c := h.m.NewLocker(), h.m.NewLocker(), h.m.NewLocker()
		mustLock(t, a, ResourceRSTL, ModeX)
		bix := lockAsync(context.Background(), b, ResourceRSTL, ModeIX, Options{})
		h.expectQueued(ResourceRSTL, ModeIX)
		cs := lockAsync(context.Background(), c, ResourceRSTL, ModeS, Options{})
		h.expectQueued(ResourceRSTL, ModeS)
		mustUnlock(t, a, ResourceRSTL)
		mustGrant(t, cs, "S enqueued at front")
		mustBePending(t, bix, "IX queued first but behind the at-front S")
		mustUnlock(t, c, ResourceRSTL)
		mustGrant(t, bix, "IX")
		mustUnlock(t, b, ResourceRSTL)
	})
	t.Run("option on a mutex, FIFO among front requests", func(t *testing.T) {
		h := newHarness(t)
		res := NewMutexResource("front")
		holder := h.m.NewLocker()
		mustLock(t, holder, res, ModeX)
		normal, front1, front2 := h.m.NewLocker(), h.m.NewLocker(), h.m.NewLocker()
		n := lockAsync(context.Background(), normal, res, ModeX, Options{})
		h.expectQueued(res, ModeX)
		f1 := lockAsync(context.Background(), front1, res, ModeX, Options{EnqueueAtFront: true})
		h.expectQueued(res, ModeX)
		f2 := lockAsync(context.Background(), front2, res, ModeX, Options{EnqueueAtFront: true})
		h.expectQueued(res, ModeX)
		mustUnlock(t, holder, res)
		mustGrant(t, f1, "first front request")
		mustBePending(t, f2, "second front request")
		mustBePending(t, n, "normal request")
		mustUnlock(t, front1, res)
		mustGrant(t, f2, "second front request")
		mustUnlock(t, front2, res)
		mustGrant(t, n, "normal request")
		mustUnlock(t, normal, res)
	})
}

// TestCompatibleFirst: while a compatible-first request is granted, compatible requests jump
// a queued conflicting one (which may starve); FIFO returns once it is released.
func TestCompatibleFirst(t *testing.T) {
	h := newHarness(t)
	res := NewMutexResource("cf")
	a, w, c := h.m.NewLocker(), h.m.NewLocker(), h.m.NewLocker()
	if err := a.LockWith(context.Background(), res, ModeS, Options{CompatibleFirst: true}); err != nil {
		t.Fatal(err)
	}
	wx := lockAsync(context.Background(), w, res, ModeX, Options{})
	h.expectQueued(res, ModeX)
	for i := 0; i < 3; i++ { // starvation: readers keep coming past the writer
		if !tryLock(t, c, res, ModeS) || !tryLock(t, c, res, ModeIS) {
			t.Fatal("compatible request not granted in compatible-first mode")
		}
	}
	mustLock(t, c, res, ModeS)
	mustUnlock(t, a, res)
	// Head is back to FIFO: the queued X now blocks new readers.
	if tryLock(t, h.m.NewLocker(), res, ModeIS) {
		t.Fatal("IS jumped the queue after compatible-first holder left")
	}
	mustBePending(t, wx, "X while S held")
	mustUnlock(t, c, res)
	mustGrant(t, wx, "X")
	mustUnlock(t, w, res)
}

// TestTimeoutLeavesNoResidue: a request that times out returns LockTimeout, is removed from
// the queue, and requests it was holding back are granted.
func TestTimeoutLeavesNoResidue(t *testing.T) {
	h := newHarness(t)
	res := NewMutexResource("timeout")
	a, b, c := h.m.NewLocker(), h.m.NewLocker(), h.m.NewLocker()
	mustLock(t, a, res, ModeS)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	bx := lockAsync(ctx, b, res, ModeX, Options{})
	h.expectQueued(res, ModeX)
	cs := lockAsync(context.Background(), c, res, ModeS, Options{})
	h.expectQueued(res, ModeS) // compatible with the holder, but behind the X

	select {
	case err := <-bx:
		if !mongoerr.Is(err, mongoerr.LockTimeout) {
			t.Fatalf("timed-out lock: %v, want LockTimeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lock did not time out")
	}
	mustGrant(t, cs, "S once the timed-out X left the queue")
	if b.IsLocked(res, ModeNone) || b.IsWaiting() {
		t.Fatal("timed-out locker holds or waits")
	}
	if st := h.m.State(res); st.Waiting != [numModes]int{} || st.Granted[ModeS] != 2 {
		t.Fatalf("residue: %+v", st)
	}
	mustUnlock(t, a, res)
	mustUnlock(t, c, res)
	// b's Locker is reusable after the failure.
	mustLock(t, b, res, ModeX)
	mustUnlock(t, b, res)
	st := h.m.Stats()
	if got := st.Category("Mutex").Modes[ModeX].AcquireWaitCount; got != 1 {
		t.Errorf("Mutex W acquireWaitCount = %d, want 1", got)
	}
}

func TestDeadlineKindsAndCauses(t *testing.T) {
	h := newHarness(t)
	res := NewMutexResource("deadline")
	holder := h.m.NewLocker()
	mustLock(t, holder, res, ModeX)
	defer mustUnlock(t, holder, res)

	shortCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 20*time.Millisecond)
	}
	l := h.m.NewLocker()

	ctx, cancel := shortCtx()
	err := l.Lock(ctx, res, ModeS)
	cancel()
	if !mongoerr.Is(err, mongoerr.LockTimeout) {
		t.Errorf("default deadline: %v, want LockTimeout", err)
	}
	<-h.queued

	l.SetDeadlineKind(DeadlineMaxTimeMS)
	ctx, cancel = shortCtx()
	err = l.Lock(ctx, res, ModeS)
	cancel()
	if !mongoerr.Is(err, mongoerr.MaxTimeMSExpired) {
		t.Errorf("maxTimeMS deadline: %v, want MaxTimeMSExpired", err)
	}
	<-h.queued

	// The per-request cap wins over a far deadline and always means LockTimeout.
	l.SetLockRequestTimeout(20 * time.Millisecond)
	err = l.Lock(context.Background(), res, ModeS)
	if !mongoerr.Is(err, mongoerr.LockTimeout) {
		t.Errorf("request cap: %v, want LockTimeout", err)
	}
	<-h.queued
	l.SetLockRequestTimeout(0) // never wait
	if err := l.Lock(context.Background(), res, ModeS); !mongoerr.Is(err, mongoerr.LockTimeout) {
		t.Errorf("zero cap: %v, want LockTimeout", err)
	}
	<-h.queued
	l.SetLockRequestTimeout(-1)

	// Cancellation: Interrupted, or the caller's own cause.
	ctx, cancelCause := context.WithCancelCause(context.Background())
	ch := lockAsync(ctx, l, res, ModeS, Options{})
	h.expectQueued(res, ModeS)
	cancelCause(nil)
	if err := <-ch; !mongoerr.Is(err, mongoerr.Interrupted) {
		t.Errorf("cancel: %v, want Interrupted", err)
	}
	ctx, cancelCause = context.WithCancelCause(context.Background())
	ch = lockAsync(ctx, l, res, ModeS, Options{})
	h.expectQueued(res, ModeS)
	cancelCause(mongoerr.New(mongoerr.ClientDisconnect, "client went away"))
	if err := <-ch; !mongoerr.Is(err, mongoerr.ClientDisconnect) {
		t.Errorf("cancel with cause: %v, want ClientDisconnect", err)
	}
	if st := h.m.State(res); st.Waiting != [numModes]int{} {
		t.Fatalf("residue: %+v", st)
	}
}

func TestUpgrade(t *testing.T) {
	h := newHarness(t)
	res := NewMutexResource("upgrade")
	a, b, c := h.m.NewLocker(), h.m.NewLocker(), h.m.NewLocker()

	// Immediate IS→IX, counted as a recursion.
	mustLock(t, a, res, ModeIS)
	mustLock(t, a, res, ModeIX)
	if a.Mode(res) != ModeIX || h.m.State(res).Granted[ModeIX] != 1 || h.m.State(res).Granted[ModeIS] != 0 {
		t.Fatalf("after IS→IX: mode %s, state %+v", a.Mode(res), h.m.State(res))
	}
	// IX + S converts to X, the weakest mode covering both.
	mustLock(t, a, res, ModeS)
	if a.Mode(res) != ModeX {
		t.Fatalf("IX+S gave %s, want X", a.Mode(res))
	}
	for i := 0; i < 3; i++ {
		mustUnlock(t, a, res)
	}
	if a.IsLocked(res, ModeNone) {
		t.Fatal("still locked after 3 unlocks")
	}

	// A conversion waits for other holders, not for the queue (the queue waits for us).
	mustLock(t, a, res, ModeIS)
	mustLock(t, b, res, ModeS)
	up := lockAsync(context.Background(), a, res, ModeIX, Options{})
	h.expectQueued(res, ModeIX)
	if st := h.m.State(res); st.Converting != 1 {
		t.Fatalf("state: %+v", st)
	}
	// While the conversion is pending, a new S would conflict with it: it must queue.
	cs := lockAsync(context.Background(), c, res, ModeS, Options{})
	h.expectQueued(res, ModeS)
	mustUnlock(t, b, res)
	mustGrant(t, up, "IS→IX after the S holder left")
	mustBePending(t, cs, "S while IX held")
	mustUnlock(t, a, res)
	mustBePending(t, cs, "S while IX still held once")
	mustUnlock(t, a, res)
	mustGrant(t, cs, "S")

	// A conversion that times out reverts to the old mode and leaves no residue.
	mustLock(t, a, res, ModeIS)
	if err := a.Lock(doneCtx(), res, ModeX); !mongoerr.Is(err, mongoerr.LockTimeout) {
		t.Fatalf("conversion try: %v", err)
	}
	<-h.queued
	if a.Mode(res) != ModeIS || h.m.State(res).Converting != 0 {
		t.Fatalf("after failed conversion: %s %+v", a.Mode(res), h.m.State(res))
	}
	mustUnlock(t, a, res)
	mustUnlock(t, c, res)

	// A conversion is not blocked by a queued request that waits for the converter.
	mustLock(t, a, res, ModeIS)
	bx := lockAsync(context.Background(), b, res, ModeX, Options{})
	h.expectQueued(res, ModeX)
	if err := a.Lock(doneCtx(), res, ModeIX); err != nil {
		t.Fatalf("IS→IX with a queued X: %v", err)
	}
	a.UnlockAll()
	mustGrant(t, bx, "X")
	b.UnlockAll()
}

// TestPendingConversionIsAhead: a pending conversion counts as ahead of every queued request,
// so a queued S compatible with the granted modes still waits for a pending IS→IX.
func TestPendingConversionIsAhead(t *testing.T) {
	h := newHarness(t)
	res := NewMutexResource("conv-ahead")
	a, b, d, c := h.m.NewLocker(), h.m.NewLocker(), h.m.NewLocker(), h.m.NewLocker()
	mustLock(t, a, res, ModeIS)
	mustLock(t, b, res, ModeS)
	mustLock(t, d, res, ModeS)
	up := lockAsync(context.Background(), a, res, ModeIX, Options{})
	h.expectQueued(res, ModeIX)
	cs := lockAsync(context.Background(), c, res, ModeS, Options{})
	h.expectQueued(res, ModeS)
	mustUnlock(t, b, res) // rescan: the conversion is still blocked by d
	if st := h.m.State(res); st.Waiting[ModeS] != 1 || st.Converting != 1 {
		t.Fatalf("queued S passed a pending conversion: %+v", st)
	}
	mustUnlock(t, d, res)
	mustGrant(t, up, "conversion")
	a.UnlockAll()
	mustGrant(t, cs, "S")
	c.UnlockAll()
}

func TestDowngrade(t *testing.T) {
	h := newHarness(t)
	res := NewMutexResource("down")
	a, b := h.m.NewLocker(), h.m.NewLocker()
	mustLock(t, a, res, ModeX)
	bix := lockAsync(context.Background(), b, res, ModeIX, Options{})
	h.expectQueued(res, ModeIX)
	if err := a.Downgrade(res, ModeIX); err != nil {
		t.Fatal(err)
	}
	mustGrant(t, bix, "IX after X→IX downgrade")
	if err := a.Downgrade(res, ModeX); !errors.Is(err, ErrMisuse) {
		t.Fatalf("upward downgrade: %v", err)
	}
	a.UnlockAll()
	b.UnlockAll()
}

func TestHierarchy(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	db, coll := DatabaseResource("d"), CollectionResource("d.c")
	isOrder := func(err error) bool {
		return errors.Is(err, ErrLockOrder) && mongoerr.Is(err, mongoerr.InternalError)
	}

	l := h.m.NewLocker()
	if err := l.Lock(ctx, db, ModeIS); !isOrder(err) {
		t.Errorf("Database without Global: %v", err)
	}
	if err := l.Lock(ctx, coll, ModeIS); !isOrder(err) {
		t.Errorf("Collection without Database: %v", err)
	}
	mustLock(t, l, ResourceGlobal, ModeIS)
	if err := l.Lock(ctx, db, ModeIX); !isOrder(err) {
		t.Errorf("Database IX under Global IS: %v", err)
	}
	mustLock(t, l, db, ModeIS)
	if err := l.Lock(ctx, coll, ModeX); !isOrder(err) {
		t.Errorf("Collection X under Database IS: %v", err)
	}
	// Upgrading the Database to IX through a conversion is checked too.
	if err := l.Lock(ctx, db, ModeX); !isOrder(err) {
		t.Errorf("Database IS→X under Global IS: %v", err)
	}
	mustLock(t, l, coll, ModeS)
	if err := l.Lock(ctx, ResourceRSTL, ModeIX); !isOrder(err) {
		t.Errorf("RSTL after Global: %v", err)
	}
	// Mutexes are outside the hierarchy.
	mustLock(t, l, NewMutexResource("m"), ModeX)
	if n := len(l.Held(nil)); n != 4 {
		t.Errorf("held %d locks, want 4", n)
	}
	l.UnlockAll()

	mustLock(t, l, ResourceRSTL, ModeIX)
	if err := l.Lock(ctx, ResourcePBWM, ModeIX); !isOrder(err) {
		t.Errorf("PBWM after RSTL: %v", err)
	}
	l.UnlockAll()

	// Global X or S covers the databases and collections for the Is*LockedForMode queries.
	mustLock(t, l, ResourceGlobal, ModeS)
	if !l.IsDBLockedForMode("d", ModeS) || !l.IsCollectionLockedForMode("d.c", ModeIS) || l.IsCollectionLockedForMode("d.c", ModeIX) {
		t.Error("Global S coverage")
	}
	l.UnlockAll()

	if err := l.Lock(ctx, ResourceID{}, ModeX); !errors.Is(err, ErrMisuse) {
		t.Errorf("zero resource: %v", err)
	}
	if err := l.Lock(ctx, ResourceGlobal, ModeNone); !errors.Is(err, ErrMisuse) {
		t.Errorf("mode NONE: %v", err)
	}
	if _, err := l.CollectionLockID(ctx, db, ModeIS); !errors.Is(err, ErrMisuse) {
		t.Errorf("CollectionLockID on a database: %v", err)
	}
}

func TestHelpersChain(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	l := h.m.NewLocker()
	s, err := l.CollectionLock(ctx, "app.users", ModeX)
	if err != nil {
		t.Fatal(err)
	}
	want := []HeldLock{
		{ResourcePBWM, ModeIX, 1}, {ResourceRSTL, ModeIX, 1}, {ResourceGlobal, ModeIX, 1},
		{DatabaseResource("app"), ModeIX, 1}, {CollectionResource("app.users"), ModeX, 1},
	}
	got := l.Held(nil)
	if len(got) != len(want) {
		t.Fatalf("held %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("held[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	// A nested scope re-acquires recursively and releases only its own acquisitions.
	inner, err := l.DBLock(ctx, "app", ModeIS)
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Release(); err != nil {
		t.Fatal(err)
	}
	if err := inner.Release(); err != nil { // idempotent
		t.Fatal(err)
	}
	if !l.IsCollectionLockedForMode("app.users", ModeX) {
		t.Fatal("outer scope lost its lock")
	}
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if len(l.Held(nil)) != 0 {
		t.Fatalf("left %+v", l.Held(nil))
	}

	// Timestamped readers skip PBWM; a PBWM X holder (batch application) does not block them.
	applier := h.m.NewLocker()
	mustLock(t, applier, ResourcePBWM, ModeX)
	l.SetShouldConflictWithSecondaryBatchApplication(false)
	l.SetLockRequestTimeout(0)
	s, err = l.CollectionLock(ctx, "app.users", ModeIS)
	if err != nil {
		t.Fatalf("timestamped read blocked by PBWM X: %v", err)
	}
	_ = s.Release()
	l.SetShouldConflictWithSecondaryBatchApplication(true)
	if _, err := l.CollectionLock(ctx, "app.users", ModeIS); !mongoerr.Is(err, mongoerr.LockTimeout) {
		t.Fatalf("untimestamped read during batch application: %v", err)
	}
	<-h.queued
	if len(l.Held(nil)) != 0 {
		t.Fatalf("failed chain left %+v", l.Held(nil))
	}
	applier.UnlockAll()

	st := h.m.Stats()
	if c := st.Category("Collection"); c.Modes[ModeX].AcquireCount != 1 || c.Modes[ModeIS].AcquireCount != 1 {
		t.Errorf("Collection stats %+v", c.Modes)
	}
	if c := st.Category("ReplicationStateTransition"); c.Modes[ModeIX].AcquireCount != 2 { // the nested DBLock reuses the outer RSTL
		t.Errorf("RSTL stats %+v", c.Modes)
	}
	if c := st.Category("ParallelBatchWriterMode"); c.Modes[ModeIS].AcquireWaitCount != 1 {
		t.Errorf("PBWM stats %+v", c.Modes)
	}
	ls := l.Stats()
	if own := ls.Category("Global"); own.Modes[ModeIX].AcquireCount != 1 || own.Modes[ModeIS].AcquireCount != 2 {
		t.Errorf("locker's own Global stats %+v", own.Modes)
	}
}

// TestTwoPhaseLocking: inside a write unit of work IX/X releases wait for the end of the
// outermost unit; IS/S releases do not.
func TestTwoPhaseLocking(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	l, other := h.m.NewLocker(), h.m.NewLocker()
	coll := CollectionResource("bank.accounts")
	readColl := CollectionResource("bank.audit")

	l.BeginWriteUnitOfWork()
	s, err := l.CollectionLock(ctx, "bank.accounts", ModeIX)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.CollectionLock(ctx, "bank.audit", ModeIS)
	if err != nil {
		t.Fatal(err)
	}
	l.BeginWriteUnitOfWork() // nested
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	if l.IsLocked(readColl, ModeNone) {
		t.Error("IS lock released late inside a WUOW")
	}
	if !l.IsLocked(coll, ModeIX) || !l.IsLocked(ResourceGlobal, ModeIX) {
		t.Fatal("IX locks released inside the WUOW")
	}
	other.SetLockRequestTimeout(0)
	if _, err := other.CollectionLock(ctx, "bank.accounts", ModeX); !mongoerr.Is(err, mongoerr.LockTimeout) {
		t.Fatalf("X granted while the WUOW holds IX: %v", err)
	}
	<-h.queued
	if err := l.EndWriteUnitOfWork(); err != nil {
		t.Fatal(err)
	}
	if !l.IsLocked(coll, ModeIX) {
		t.Fatal("released at the end of the inner WUOW")
	}
	if err := l.EndWriteUnitOfWork(); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Held(nil)); n != 0 {
		t.Fatalf("%d locks held after the outermost WUOW", n)
	}
	o, err := other.CollectionLock(ctx, "bank.accounts", ModeX)
	if err != nil {
		t.Fatalf("X after the WUOW: %v", err)
	}
	_ = o.Release()

	// Re-acquiring in the WUOW cancels a deferred release instead of stacking a recursion.
	l.BeginWriteUnitOfWork()
	mustLock(t, l, NewMutexResource("ignored"), ModeX) // mutexes are not two-phase
	l.UnlockAll()
	if l.InWriteUnitOfWork() {
		t.Fatal("UnlockAll left the WUOW open")
	}
	l.BeginWriteUnitOfWork()
	mustLock(t, l, ResourceGlobal, ModeX)
	mustUnlock(t, l, ResourceGlobal)
	mustLock(t, l, ResourceGlobal, ModeIX)
	if err := l.EndWriteUnitOfWork(); err != nil {
		t.Fatal(err)
	}
	if !l.IsLocked(ResourceGlobal, ModeX) {
		t.Fatal("re-acquired lock dropped at WUOW end")
	}
	mustUnlock(t, l, ResourceGlobal)
	if l.IsLocked(ResourceGlobal, ModeNone) {
		t.Fatal("lock kept after final unlock")
	}
	if err := l.EndWriteUnitOfWork(); !errors.Is(err, ErrMisuse) {
		t.Fatalf("unbalanced End: %v", err)
	}
	// Shared locks are two-phase on request.
	l.SetSharedLocksTwoPhase(true)
	l.BeginWriteUnitOfWork()
	mustLock(t, l, ResourceGlobal, ModeIS)
	mustUnlock(t, l, ResourceGlobal)
	if !l.IsLocked(ResourceGlobal, ModeIS) {
		t.Fatal("IS released inside a WUOW with shared two-phase locking")
	}
	if err := l.EndWriteUnitOfWork(); err != nil {
		t.Fatal(err)
	}
	if l.IsLocked(ResourceGlobal, ModeNone) {
		t.Fatal("IS kept after WUOW")
	}
}

func TestLockCollections(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	l, other := h.m.NewLocker(), h.m.NewLocker()
	nss := []string{"b.y", "a.x", "b.z", "a.x", "c.w"}
	s, err := l.LockCollections(ctx, ModeX, nss...)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss {
		if !l.IsCollectionLockedForMode(ns, ModeX) || !l.IsLocked(DatabaseResource(dbOf(ns)), ModeIX) {
			t.Fatalf("%s not locked", ns)
		}
	}
	// 3 global-type + 3 databases + 4 distinct collections
	if n := len(l.Held(nil)); n != 10 {
		t.Fatalf("held %d locks, want 10", n)
	}
	other.SetLockRequestTimeout(0)
	if _, err := other.CollectionLock(ctx, "b.z", ModeIS); !mongoerr.Is(err, mongoerr.LockTimeout) {
		t.Fatalf("IS on an X-locked collection: %v", err)
	}
	<-h.queued
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Held(nil)); n != 0 {
		t.Fatalf("held %d after release", n)
	}
}
