package server

import (
	"context"
	"runtime/debug"
	"sync"
	"time"

	"humongo/internal/mongoerr"
)

// DefaultInFlightMessageBytes bounds the bytes of large messages (over wire.LargeMessageBytes)
// whose bodies are read and whose commands run at the same time. A large message costs about
// three times its size while it runs (its buffer or the merged command, the storage engine's
// write batch and its memtable copy), so 128 MB in flight keeps the peak of a burst of 48 MB
// inserts near 0.5 GB of live data however many clients send them. A message bigger than the
// whole budget is admitted alone.
const DefaultInFlightMessageBytes = 128 << 20

// freeOSMemoryEvery rate-limits the return of memory to the OS after large messages: a
// forced collection of the whole heap costs CPU, so it runs at most this often.
const freeOSMemoryEvery = time.Second

// settleAfter is when releaseMemory returns memory a second time after a burst.
const settleAfter = 5 * time.Second

// burstGCPercent is the garbage collector's GOGC while large messages are in flight. Each
// one leaves tens of megabytes of garbage (its buffer, the merged command, the write batch),
// and with the default 100 the heap may grow to twice what is live before a collection: a
// lower value trades some CPU, during bursts only, for a peak close to the live data. The
// previous setting comes back when the last large message ends.
const burstGCPercent = 25

// byteBudget is a FIFO counting semaphore over bytes: the bound on large messages in flight.
// Safe for concurrent use.
type byteBudget struct {
	capacity int64

	mu      sync.Mutex
	used    int64           // guarded by mu
	waiters []*budgetWaiter // guarded by mu; FIFO
	inBurst bool            // guarded by mu; counted in burstGC
	// idle is signalled (capacity 1) when used drops to zero: the releaser then gives the
	// memory of the finished messages back to the OS.
	idle chan struct{}
}

type budgetWaiter struct {
	n       int64
	ch      chan struct{} // closed when granted
	granted bool          // guarded by mu
}

func newByteBudget(capacity int64) *byteBudget {
	return &byteBudget{capacity: capacity, idle: make(chan struct{}, 1)}
}

// acquire waits, in arrival order, until n bytes fit in the budget (n is clamped to the whole
// budget, so one message larger than it runs alone rather than never), or ctx ends. It
// returns the function that gives the bytes back.
func (b *byteBudget) acquire(ctx context.Context, n int64) (func(), error) {
	n = min(n, b.capacity)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.capacity {
		b.admitLocked(n)
		b.mu.Unlock()
		return b.releaser(n), nil
	}
	w := &budgetWaiter{n: n, ch: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ch:
		return b.releaser(n), nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	if w.granted {
		b.mu.Unlock()
		return b.releaser(n), nil
	}
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	b.grantLocked() // a large waiter leaving may let smaller ones behind it through
	b.mu.Unlock()
	if cause := context.Cause(ctx); cause != nil {
		if _, ok := mongoerr.As(cause); ok {
			return nil, cause
		}
	}
	return nil, mongoerr.New(mongoerr.Interrupted, "interrupted while waiting to read a large message")
}

func (b *byteBudget) releaser(n int64) func() {
	var once sync.Once
	return func() { once.Do(func() { b.release(n) }) }
}

// admitLocked counts n more bytes in flight; the first large message of a burst lowers GOGC.
func (b *byteBudget) admitLocked(n int64) {
	if !b.inBurst {
		burstGC.enter()
		b.inBurst = true
	}
	b.used += n
}

// burstGC lowers GOGC to burstGCPercent while any server of the process (tests run several)
// has large messages in flight, and restores the previous setting after the last one.
var burstGC burstGCState

type burstGCState struct {
	mu      sync.Mutex
	n       int  // servers in a burst
	saved   int  // GOGC to restore
	changed bool // whether enter changed GOGC
}

func (g *burstGCState) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	if g.n > 1 {
		return
	}
	prev := debug.SetGCPercent(burstGCPercent)
	if prev < 0 || prev <= burstGCPercent { // GC off, or already eager: the operator's choice
		debug.SetGCPercent(prev)
		g.changed = false
		return
	}
	g.saved, g.changed = prev, true
}

func (g *burstGCState) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 && g.changed {
		debug.SetGCPercent(g.saved)
		g.changed = false
	}
}

func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.grantLocked()
	idle := b.used == 0
	if idle && b.inBurst {
		burstGC.leave()
		b.inBurst = false
	}
	b.mu.Unlock()
	if idle {
		select {
		case b.idle <- struct{}{}:
		default:
		}
	}
}

func (b *byteBudget) grantLocked() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.capacity {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		b.admitLocked(w.n)
		w.granted = true
		close(w.ch)
	}
}

// inUse returns the bytes admitted and the number of messages waiting (for tests).
func (b *byteBudget) inUse() (used int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, len(b.waiters)
}

// releaseMemory runs until stop is closed: each time the large messages in flight have all
// finished it returns the freed heap to the OS (debug.FreeOSMemory), at most once per
// freeOSMemoryEvery, and once more settleAfter later if no large message came meanwhile.
// Without it the Go runtime keeps the pages of a burst of 48 MB inserts for minutes: an idle
// server collects only every two minutes and the scavenger returns memory slowly. The second
// pass is for what the storage engine lets go after the answer: a large write batch stays
// referenced until its memtable is flushed, which happens in the background.
func (b *byteBudget) releaseMemory(stop <-chan struct{}) {
	var last time.Time
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	for {
		select {
		case <-stop:
			return
		case <-b.idle:
		case <-settle.C:
			if used, _ := b.inUse(); used == 0 {
				debug.FreeOSMemory()
			}
			continue
		}
		if wait := freeOSMemoryEvery - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
		if used, _ := b.inUse(); used == 0 {
			debug.FreeOSMemory()
			last = time.Now()
			settle.Reset(settleAfter)
		}
	}
}
