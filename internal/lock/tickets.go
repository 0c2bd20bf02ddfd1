package lock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"humongo/internal/mongoerr"
)

// Admission control (MongoDB's TicketHolder and AdmissionContext, spec/execution.md
// "Concurrency Control"): an operation takes a read ticket before it first takes the Global
// lock in IS or S, a write ticket before Global IX, and none for Global X (which excludes
// everyone anyway). It gives the ticket back when the Global lock is released for good. The
// pool sizes are storageEngineConcurrentReadTransactions / WriteTransactions (128 each, as
// mongod 7.0 when they are set; the dynamic throughput-probing of 7.0 is not implemented).
//
// Tickets belong to a request, not to one Locker: the Lockers of one command that share an
// Admission (operation.Request carries one) share its tickets, so a command that starts a
// nested operation while it holds a ticket does not wait for a second one (with small pools
// that would deadlock).

// DefaultTickets is the size of each ticket pool unless the parameters say otherwise.
const DefaultTickets = 128

// TicketHolder is one pool of tickets: a FIFO counting semaphore whose size can change at
// run time. Safe for concurrent use.
type TicketHolder struct {
	mu      sync.Mutex
	total   int             // guarded by mu
	out     int             // guarded by mu
	waiters []*ticketWaiter // guarded by mu; FIFO

	addedToQueue, removedFromQueue atomic.Int64
	started, finished, canceled    atomic.Int64
	newAdmissions                  atomic.Int64
	queuedMicros                   atomic.Int64
}

type ticketWaiter struct {
	ch      chan struct{} // closed when granted
	granted bool          // guarded by the holder's mu
}

// NewTicketHolder returns a pool of n tickets.
func NewTicketHolder(n int) *TicketHolder { return &TicketHolder{total: n} }

// Acquire takes a ticket, waiting in FIFO order until one is free or ctx is done. The error
// follows the lock waits' rules (see the package comment): ctx's *mongoerr.Error cause as is,
// Interrupted when cancelled, MaxTimeMSExpired or LockTimeout at the deadline per kind.
func (t *TicketHolder) Acquire(ctx context.Context, kind DeadlineKind) error {
	t.newAdmissions.Add(1)
	t.mu.Lock()
	if t.out < t.total && len(t.waiters) == 0 {
		t.out++
		t.mu.Unlock()
		t.started.Add(1)
		return nil
	}
	w := &ticketWaiter{ch: make(chan struct{})}
	t.waiters = append(t.waiters, w)
	t.mu.Unlock()
	t.addedToQueue.Add(1)
	start := time.Now()
	defer func() {
		t.removedFromQueue.Add(1)
		t.queuedMicros.Add(time.Since(start).Microseconds())
	}()

	select {
	case <-w.ch:
		t.started.Add(1)
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	if w.granted { // granted while giving up: keep it
		t.mu.Unlock()
		t.started.Add(1)
		return nil
	}
	for i, x := range t.waiters {
		if x == w {
			t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
			break
		}
	}
	t.mu.Unlock()
	t.canceled.Add(1)

	cause := context.Cause(ctx)
	if _, ok := mongoerr.As(cause); ok {
		return cause
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return mongoerr.New(mongoerr.Interrupted, "operation was interrupted while waiting for a ticket")
	}
	if kind == DeadlineMaxTimeMS {
		return mongoerr.New(mongoerr.MaxTimeMSExpired, "operation exceeded time limit while waiting for a ticket")
	}
	return mongoerr.Newf(mongoerr.LockTimeout, "Unable to acquire ticket within %dms", time.Since(start).Milliseconds())
}

// Release gives a ticket back and hands free tickets to waiters in order.
func (t *TicketHolder) Release() {
	t.finished.Add(1)
	t.mu.Lock()
	t.out--
	t.grantLocked()
	t.mu.Unlock()
}

// Resize sets the pool's size. Growing wakes waiters at once; shrinking below the tickets
// out takes effect as they come back (none is revoked).
func (t *TicketHolder) Resize(n int) {
	t.mu.Lock()
	t.total = n
	t.grantLocked()
	t.mu.Unlock()
}

func (t *TicketHolder) grantLocked() {
	for t.out < t.total && len(t.waiters) > 0 {
		w := t.waiters[0]
		t.waiters[0] = nil
		t.waiters = t.waiters[1:]
		t.out++
		w.granted = true
		close(w.ch)
	}
}

// TicketStats is one pool's serverStatus figures (wiredTiger.concurrentTransactions.<read|write>
// in mongod 7.0).
type TicketStats struct {
	Out, Available, Total                int
	AddedToQueue, RemovedFromQueue       int64
	QueueLength                          int64
	StartedProcessing, Processing        int64
	FinishedProcessing, Canceled         int64
	NewAdmissions, TotalTimeQueuedMicros int64
}

// Stats returns the pool's current figures.
func (t *TicketHolder) Stats() TicketStats {
	t.mu.Lock()
	s := TicketStats{Out: t.out, Available: max(t.total-t.out, 0), Total: t.total}
	t.mu.Unlock()
	s.AddedToQueue, s.RemovedFromQueue = t.addedToQueue.Load(), t.removedFromQueue.Load()
	s.QueueLength = max(s.AddedToQueue-s.RemovedFromQueue, 0)
	s.StartedProcessing, s.FinishedProcessing = t.started.Load(), t.finished.Load()
	s.Processing = max(s.StartedProcessing-s.FinishedProcessing, 0)
	s.Canceled, s.NewAdmissions = t.canceled.Load(), t.newAdmissions.Load()
	s.TotalTimeQueuedMicros = t.queuedMicros.Load()
	return s
}

// Tickets are a server's two pools.
type Tickets struct {
	Read, Write *TicketHolder
}

// holderFor is the pool a Global acquisition in mode draws from (nil: none, for X).
func (ts *Tickets) holderFor(mode Mode) (*TicketHolder, ticketKind) {
	switch mode {
	case ModeIS, ModeS:
		return ts.Read, ticketRead
	case ModeIX:
		return ts.Write, ticketWrite
	}
	return nil, ticketNone
}

type ticketKind uint8

const (
	ticketNone ticketKind = iota
	ticketRead
	ticketWrite
)

// Admission is the ticket state of one request, shared by its Lockers (see SetAdmission).
// The zero value holds nothing. Safe for concurrent use.
type Admission struct {
	mu    sync.Mutex
	refs  [3]int // per ticketKind: Lockers of the request relying on a ticket of that kind
	owned [3]*TicketHolder
}

// acquire makes the request hold a ticket good for kind, waiting for one if it holds none: a
// write ticket also covers reads. It returns the kind whose reference the caller now holds.
func (a *Admission) acquire(ctx context.Context, ts *Tickets, mode Mode, dk DeadlineKind) (ticketKind, error) {
	h, kind := ts.holderFor(mode)
	if h == nil {
		return ticketNone, nil
	}
	a.mu.Lock()
	switch {
	case a.refs[ticketWrite] > 0:
		a.refs[ticketWrite]++
		a.mu.Unlock()
		return ticketWrite, nil
	case kind == ticketRead && a.refs[ticketRead] > 0:
		a.refs[ticketRead]++
		a.mu.Unlock()
		return ticketRead, nil
	}
	a.mu.Unlock()
	// Wait without a.mu: another Locker of the request may release meanwhile.
	if err := h.Acquire(ctx, dk); err != nil {
		return ticketNone, err
	}
	a.mu.Lock()
	a.refs[kind]++
	if a.refs[kind] > 1 { // a sibling got one of this kind meanwhile: keep a single ticket
		a.mu.Unlock()
		h.Release()
		return kind, nil
	}
	a.owned[kind] = h
	a.mu.Unlock()
	return kind, nil
}

// release drops one reference taken by acquire and gives the ticket back with the last.
func (a *Admission) release(kind ticketKind) {
	if kind == ticketNone {
		return
	}
	a.mu.Lock()
	a.refs[kind]--
	var h *TicketHolder
	if a.refs[kind] == 0 {
		h, a.owned[kind] = a.owned[kind], nil
	}
	a.mu.Unlock()
	if h != nil {
		h.Release()
	}
}

// Tickets returns the manager's ticket pools, created with DefaultTickets each on first use.
func (m *Manager) Tickets() *Tickets {
	m.ticketsOnce.Do(func() {
		m.tickets = &Tickets{Read: NewTicketHolder(DefaultTickets), Write: NewTicketHolder(DefaultTickets)}
	})
	return m.tickets
}

// SetAdmission makes the Locker take tickets from its manager's pools under admission a (a
// request's shared state; nil: the Locker takes none, as internal work that must not queue
// behind user operations). Call it before the Locker takes any lock.
func (l *Locker) SetAdmission(a *Admission) { l.adm = a }
