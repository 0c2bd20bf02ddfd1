package lock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"humongo/internal/mongoerr"
)

// ErrLockOrder is wrapped (inside an InternalError) by every hierarchy violation: a Database
// lock without a covering Global lock, a Collection lock without its Database lock, or a
// Global-type resource taken after one that comes later in PBWM → RSTL → Global → Database.
// These are programming errors; they are returned rather than panicking.
var ErrLockOrder = errors.New("lock hierarchy violation")

// ErrMisuse is wrapped by other API misuse: unlocking what is not held, an invalid mode or
// resource, an unbalanced EndWriteUnitOfWork, an upward Downgrade.
var ErrMisuse = errors.New("lock API misuse")

// DeadlineKind says what a context deadline means to a Locker.
type DeadlineKind uint8

const (
	// DeadlineLockTimeout: the deadline bounds lock acquisition; expiry yields LockTimeout (24).
	DeadlineLockTimeout DeadlineKind = iota
	// DeadlineMaxTimeMS: the deadline is the operation's maxTimeMS; expiry yields
	// MaxTimeMSExpired (50), which is what MongoDB reports when maxTimeMS runs out while an
	// operation waits for a lock.
	DeadlineMaxTimeMS
)

// Options change how one request is queued.
type Options struct {
	// EnqueueAtFront puts the request at the front of the wait queue (behind earlier
	// front-of-queue requests). Applied automatically to X and S requests on Global-type
	// resources.
	EnqueueAtFront bool
	// CompatibleFirst puts the head in compatible-first mode while this request is granted:
	// compatible requests are then granted ahead of the queue, which may starve it.
	CompatibleFirst bool
}

// Locker holds the locks of one operation. It is not safe for concurrent use, except
// IsWaiting, which currentOp may call from elsewhere.
type Locker struct {
	m      *Manager
	stripe *statCounters
	// notify carries one token per grant of a request this Locker waits for.
	notify chan struct{}
	timer  *time.Timer // reused for the per-request cap

	held       []*request // granted requests, in acquisition order
	free       []*request // released requests for reuse
	heldByType [numResourceTypes]int32

	wuowDepth      int
	pendingUnlocks int // held requests with unlockPending > 0

	deadlineKind   DeadlineKind
	reqTimeout     time.Duration
	hasReqTimeout  bool
	sharedTwoPhase bool
	noPBWM         bool // reads at a timestamp do not conflict with batch application

	adm       *Admission // nil: no tickets (SetAdmission)
	admTicket ticketKind // the ticket kind this Locker holds a reference on while it holds Global

	waiting atomic.Bool
	stats   [numStatCategories][numModes]ModeStats
	// heldModes is the strongest mode held per lock type, readable from any goroutine for
	// currentOp; heldShadow is the owner's plain copy.
	heldModes  [numStatCategories]atomic.Uint32
	heldShadow [numStatCategories]Mode
}

// NewLocker returns a Locker for one operation.
func (m *Manager) NewLocker() *Locker {
	id := m.lockerID.Add(1)
	return &Locker{
		m:      m,
		stripe: &m.stats[id%numStatStripes],
		notify: make(chan struct{}, 1),
		held:   make([]*request, 0, 6),
	}
}

// SetDeadlineKind sets what a context deadline means (default DeadlineLockTimeout).
func (l *Locker) SetDeadlineKind(k DeadlineKind) { l.deadlineKind = k }

// SetLockRequestTimeout caps how long any single acquisition waits, whatever the context
// says; expiry yields LockTimeout. Zero means never wait (fail unless granted at once), a
// negative value removes the cap. This is maxTransactionLockRequestTimeoutMillis.
func (l *Locker) SetLockRequestTimeout(d time.Duration) {
	l.reqTimeout, l.hasReqTimeout = d, d >= 0
}

// SetSharedLocksTwoPhase makes releases of IS and S locks inside a write unit of work deferred
// too (MongoDB does this for prepared transactions and snapshot reads in transactions).
func (l *Locker) SetSharedLocksTwoPhase(on bool) { l.sharedTwoPhase = on }

// SetShouldConflictWithSecondaryBatchApplication controls whether GlobalLock takes the PBWM
// lock (default true). Readers at an explicit timestamp turn it off so that secondary batch
// application does not block them.
func (l *Locker) SetShouldConflictWithSecondaryBatchApplication(on bool) { l.noPBWM = !on }

// IsWaiting reports whether the Locker is blocked in Lock (for currentOp's waitingForLock).
// Safe to call from any goroutine.
func (l *Locker) IsWaiting() bool { return l.waiting.Load() }

func (l *Locker) signal() {
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

func (l *Locker) find(id uint64) (int, *request) {
	for i, r := range l.held {
		if r.res.id == id {
			return i, r
		}
	}
	return -1, nil
}

func (l *Locker) newRequest(res ResourceID, mode Mode, opts Options) *request {
	var r *request
	if n := len(l.free); n > 0 {
		r = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		r = &request{locker: l}
	}
	r.res, r.mode = res, mode
	r.enqueueAtFront = opts.EnqueueAtFront ||
		(res.Type() == TypeGlobal && (mode == ModeX || mode == ModeS))
	r.compatFirst = opts.CompatibleFirst
	return r
}

func (l *Locker) freeRequest(r *request) {
	*r = request{locker: l}
	l.free = append(l.free, r)
}

// Lock acquires res in mode, waiting until it is granted or ctx is done (see the package
// comment for the errors). Acquiring a resource already held in a covering mode only counts
// a recursion; in a weaker mode it converts the lock to the weakest mode covering both. Each
// successful Lock must be matched by an Unlock (or UnlockAll). With a context that is already
// done Lock is a try-lock.
func (l *Locker) Lock(ctx context.Context, res ResourceID, mode Mode) error {
	return l.LockWith(ctx, res, mode, Options{})
}

// LockWith is Lock with queueing options; they apply only when the request is new.
func (l *Locker) LockWith(ctx context.Context, res ResourceID, mode Mode, opts Options) error {
	if !validMode(mode) {
		return mongoerr.Newf(mongoerr.InternalError, "%w: invalid lock mode %d", ErrMisuse, mode)
	}
	if res.Type() == TypeInvalid {
		return mongoerr.Newf(mongoerr.InternalError, "%w: invalid resource %v", ErrMisuse, res)
	}
	cat := res.statCategory()
	l.stats[cat][mode].AcquireCount++
	l.stripe.c[cat][mode].acquire.Add(1)

	if _, r := l.find(res.id); r != nil {
		if covers(r.mode, mode) {
			if r.unlockPending > 0 {
				// Re-acquired before the deferred release happened: cancel one release
				// rather than counting another recursion.
				r.unlockPending--
				if r.unlockPending == 0 {
					l.pendingUnlocks--
				}
				return nil
			}
			r.recursive++
			return nil
		}
		target := supremum(r.mode, mode)
		if err := l.checkHierarchy(res, target, false); err != nil {
			return err
		}
		if !l.m.convert(r, target) {
			if err := l.wait(ctx, r, res, target, cat, mode); err != nil {
				return err
			}
		}
		r.recursive++
		l.raiseHeld(cat, r.mode)
		return nil
	}

	if err := l.checkHierarchy(res, mode, true); err != nil {
		return err
	}
	r := l.newRequest(res, mode, opts)
	if !l.m.lockNew(r) {
		if err := l.wait(ctx, r, res, mode, cat, mode); err != nil {
			l.freeRequest(r)
			return err
		}
	}
	r.recursive = 1
	l.held = append(l.held, r)
	l.heldByType[res.Type()]++
	l.raiseHeld(cat, r.mode)
	return nil
}

// wait blocks until r (new, or converting to target) is granted, ctx is done or the request
// cap expires. On failure r is withdrawn from its head.
func (l *Locker) wait(ctx context.Context, r *request, res ResourceID, target Mode, cat statCategory, statMode Mode) error {
	start := time.Now()
	l.waiting.Store(true)
	granted, capped := false, false
	switch {
	case l.hasReqTimeout && l.reqTimeout == 0:
		capped = true
	case l.hasReqTimeout:
		if l.timer == nil {
			l.timer = time.NewTimer(l.reqTimeout)
		} else {
			l.timer.Reset(l.reqTimeout)
		}
		select {
		case <-l.notify:
			granted = true
		case <-ctx.Done():
		case <-l.timer.C:
			capped = true
		}
		l.timer.Stop() // since Go 1.23 no stale tick can be received after Stop
	default:
		select {
		case <-l.notify:
			granted = true
		case <-ctx.Done():
		}
	}
	if !granted && l.m.cancelWait(r) {
		// Granted while we were giving up: keep it, and consume the token sent with the grant
		// (under the shard mutex, so it is already there) so the next wait does not see it.
		select {
		case <-l.notify:
		default:
		}
		granted = true
	}
	l.waiting.Store(false)

	micros := time.Since(start).Microseconds()
	l.stats[cat][statMode].AcquireWaitCount++
	l.stats[cat][statMode].TimeAcquiringMicros += micros
	l.stripe.c[cat][statMode].wait.Add(1)
	l.stripe.c[cat][statMode].micros.Add(micros)

	if granted {
		return nil
	}
	if !capped {
		cause := context.Cause(ctx)
		if _, ok := mongoerr.As(cause); ok {
			return cause
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			return mongoerr.Newf(mongoerr.Interrupted,
				"operation was interrupted while waiting for %s lock on '%v'", target, res)
		}
		if l.deadlineKind == DeadlineMaxTimeMS {
			return mongoerr.Newf(mongoerr.MaxTimeMSExpired,
				"operation exceeded time limit while waiting for %s lock on '%v'", target, res)
		}
	}
	return mongoerr.Newf(mongoerr.LockTimeout,
		"Unable to acquire %s lock on '%v' within %dms", target, res, time.Since(start).Milliseconds())
}

// checkHierarchy enforces top-down acquisition for res in mode. isNew is false for a
// conversion of a lock already held.
func (l *Locker) checkHierarchy(res ResourceID, mode Mode, isNew bool) error {
	switch res.Type() {
	case TypeGlobal:
		if !isNew {
			return nil
		}
		below := l.heldByType[TypeDatabase] + l.heldByType[TypeCollection]
		var later bool
		switch res {
		case ResourcePBWM:
			later = l.holds(ResourceRSTL) || l.holds(ResourceGlobal)
		case ResourceRSTL:
			later = l.holds(ResourceGlobal)
		}
		if below > 0 || later {
			return mongoerr.Newf(mongoerr.InternalError,
				"%w: %v must be locked before RSTL/Global/Database/Collection locks", ErrLockOrder, res)
		}
	case TypeDatabase:
		need := intentMode(mode)
		if _, g := l.find(ResourceGlobal.id); g == nil || !covers(g.mode, need) {
			return mongoerr.Newf(mongoerr.InternalError,
				"%w: %s lock on %v requires the Global lock in %s or stronger", ErrLockOrder, mode, res, need)
		}
	case TypeCollection:
		need := intentMode(mode)
		if _, d := l.find(res.parent); d == nil || !covers(d.mode, need) {
			return mongoerr.Newf(mongoerr.InternalError,
				"%w: %s lock on %v requires its Database lock in %s or stronger", ErrLockOrder, mode, res, need)
		}
	}
	return nil
}

func (l *Locker) holds(res ResourceID) bool {
	_, r := l.find(res.id)
	return r != nil
}

// shouldDelayUnlock is MongoDB's rule for two-phase locking: inside a write unit of work,
// releases of IX and X locks (and of IS and S ones when SetSharedLocksTwoPhase is on) wait
// for the end of the unit. Mutexes are outside two-phase locking.
func (l *Locker) shouldDelayUnlock(r *request) bool {
	if l.wuowDepth == 0 || r.res.Type() == TypeMutex {
		return false
	}
	return r.mode == ModeIX || r.mode == ModeX || l.sharedTwoPhase
}

// Unlock undoes one Lock of res. The lock is released when its recursion count reaches zero;
// inside a write unit of work the release of an IX or X lock is deferred to the end of the
// outermost unit.
func (l *Locker) Unlock(res ResourceID) error {
	i, r := l.find(res.id)
	if r == nil || r.recursive-r.unlockPending <= 0 {
		return mongoerr.Newf(mongoerr.InternalError, "%w: unlock of %v, which is not locked", ErrMisuse, res)
	}
	if l.shouldDelayUnlock(r) {
		if r.unlockPending == 0 {
			l.pendingUnlocks++
		}
		r.unlockPending++
		return nil
	}
	r.recursive--
	if r.recursive == 0 {
		l.release(i, r)
	}
	return nil
}

// release gives up held request r at index i of l.held, whatever its counts.
func (l *Locker) release(i int, r *request) {
	if r.res == ResourceGlobal {
		l.releaseTicket() // admission ends with the Global lock
	}
	if r.unlockPending > 0 {
		l.pendingUnlocks--
	}
	l.m.unlock(r)
	l.held = append(l.held[:i], l.held[i+1:]...)
	l.heldByType[r.res.Type()]--
	c := r.res.statCategory()
	l.freeRequest(r)
	l.recomputeHeld(c)
}

// releaseTicket drops the Locker's ticket reference (the Global lock is gone for good).
func (l *Locker) releaseTicket() {
	if l.admTicket != ticketNone {
		l.adm.release(l.admTicket)
		l.admTicket = ticketNone
	}
}

// UnlockAll releases every lock, deferred or not, bottom-up, and closes any open write unit
// of work (an operation that ends, successfully or not, must not keep locks).
func (l *Locker) UnlockAll() {
	for i := len(l.held) - 1; i >= 0; i-- {
		l.release(i, l.held[i])
	}
	l.wuowDepth, l.pendingUnlocks = 0, 0
}

// BeginWriteUnitOfWork opens a (possibly nested) write unit of work: from now until the
// matching outermost EndWriteUnitOfWork, IX and X locks are not released (two-phase locking).
func (l *Locker) BeginWriteUnitOfWork() { l.wuowDepth++ }

// EndWriteUnitOfWork closes a write unit of work; closing the outermost one performs the
// deferred releases, bottom-up.
func (l *Locker) EndWriteUnitOfWork() error {
	if l.wuowDepth == 0 {
		return mongoerr.Newf(mongoerr.InternalError, "%w: EndWriteUnitOfWork without Begin", ErrMisuse)
	}
	l.wuowDepth--
	if l.wuowDepth > 0 || l.pendingUnlocks == 0 {
		return nil
	}
	for i := len(l.held) - 1; i >= 0; i-- {
		r := l.held[i]
		if r.unlockPending == 0 {
			continue
		}
		r.recursive -= r.unlockPending
		r.unlockPending = 0
		l.pendingUnlocks--
		if r.recursive <= 0 {
			l.release(i, r)
		}
	}
	return nil
}

// InWriteUnitOfWork reports whether a write unit of work is open.
func (l *Locker) InWriteUnitOfWork() bool { return l.wuowDepth > 0 }

// Downgrade lowers a held lock to mode, which its current mode must cover (e.g. X→IX when an
// index build finishes its exclusive phase), and wakes waiters that now fit.
func (l *Locker) Downgrade(res ResourceID, mode Mode) error {
	_, r := l.find(res.id)
	if r == nil || !validMode(mode) || !covers(r.mode, mode) {
		return mongoerr.Newf(mongoerr.InternalError, "%w: cannot downgrade %v to %s", ErrMisuse, res, mode)
	}
	if r.mode != mode {
		l.m.downgrade(r, mode)
		l.recomputeHeld(res.statCategory())
	}
	return nil
}

// Mode returns the mode in which res is held, or ModeNone.
func (l *Locker) Mode(res ResourceID) Mode {
	if _, r := l.find(res.id); r != nil {
		return r.mode
	}
	return ModeNone
}

// IsLocked reports whether res is held in a mode covering mode (any mode for ModeNone).
func (l *Locker) IsLocked(res ResourceID, mode Mode) bool {
	_, r := l.find(res.id)
	return r != nil && covers(r.mode, mode)
}

// IsDBLockedForMode reports whether the locks held give mode on database db: the Global lock
// in X (or S for shared modes) covers every database, as in MongoDB.
func (l *Locker) IsDBLockedForMode(db string, mode Mode) bool {
	if l.globalCovers(mode) {
		return true
	}
	return l.IsLocked(DatabaseResource(db), mode)
}

// IsCollectionLockedForMode is IsDBLockedForMode for collection ns, where a Database lock in
// X (or S for shared modes) also covers the collection.
func (l *Locker) IsCollectionLockedForMode(ns string, mode Mode) bool {
	if l.globalCovers(mode) {
		return true
	}
	res := CollectionResource(ns)
	if l.IsLocked(ResourceID{id: res.parent}, ModeX) ||
		(intentMode(mode) == ModeIS && l.IsLocked(ResourceID{id: res.parent}, ModeS)) {
		return true
	}
	return l.IsLocked(res, mode)
}

func (l *Locker) globalCovers(mode Mode) bool {
	return l.IsLocked(ResourceGlobal, ModeX) ||
		(intentMode(mode) == ModeIS && l.IsLocked(ResourceGlobal, ModeS))
}

// HeldLock describes one lock a Locker holds (for currentOp and diagnostics).
type HeldLock struct {
	Resource  ResourceID
	Mode      Mode
	Recursive int
}

// Held appends the locks held, in acquisition order, to dst.
func (l *Locker) Held(dst []HeldLock) []HeldLock {
	for _, r := range l.held {
		dst = append(dst, HeldLock{Resource: r.res, Mode: r.mode, Recursive: int(r.recursive - r.unlockPending)})
	}
	return dst
}

// Stats returns this operation's own lock statistics (the "locks" field of slow-op logs and
// the profiler).
func (l *Locker) Stats() Stats {
	var out Stats
	for c := range out.Categories {
		out.Categories[c].Name = statCategoryNames[c]
		out.Categories[c].Modes = l.stats[c]
	}
	return out
}
