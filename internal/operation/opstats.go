package operation

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"humongo/internal/lock"
	"humongo/internal/query/plan"
)

// OpStats is what other goroutines (currentOp, serverStatus.globalLock) may read of a running
// command: how often its plans yielded and whether one of its lockers is waiting for a lock.
// The command's operation contexts (NewOp under a ctx carrying it) register their lockers.
type OpStats struct {
	Yields atomic.Int64

	mu      sync.Mutex
	lockers []*lock.Locker
}

type opStatsKey struct{}

// WithOpStats returns ctx carrying s, for the operations and plans run under it.
func WithOpStats(ctx context.Context, s *OpStats) context.Context {
	return plan.WithYieldCounter(context.WithValue(ctx, opStatsKey{}, s), &s.Yields)
}

func opStatsOf(ctx context.Context) *OpStats {
	s, _ := ctx.Value(opStatsKey{}).(*OpStats)
	return s
}

// WaitingForLock reports whether one of the command's lockers is blocked in a lock request.
func (s *OpStats) WaitingForLock() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lockers {
		if l.IsWaiting() {
			return true
		}
	}
	return false
}

func (s *OpStats) add(l *lock.Locker) {
	s.mu.Lock()
	s.lockers = append(s.lockers, l)
	s.mu.Unlock()
}

func (s *OpStats) remove(l *lock.Locker) {
	s.mu.Lock()
	if i := slices.Index(s.lockers, l); i >= 0 {
		s.lockers = slices.Delete(s.lockers, i, i+1)
	}
	s.mu.Unlock()
}

// HeldLocks returns the lock types the command's lockers hold now, each with the strongest
// mode any of them holds it in (currentOp's "locks").
func (s *OpStats) HeldLocks() []lock.HeldMode {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []lock.HeldMode
	for _, l := range s.lockers {
		for _, h := range l.HeldModes() {
			i := slices.IndexFunc(out, func(o lock.HeldMode) bool { return o.Name == h.Name })
			switch {
			case i < 0:
				out = append(out, h)
			case h.Mode > out[i].Mode:
				out[i].Mode = h.Mode
			}
		}
	}
	return out
}
