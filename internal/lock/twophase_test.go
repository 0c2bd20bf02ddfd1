package lock

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestTwoPhaseTransfersKeepTotal is the checklist's two-phase locking scenario. Each transfer
// opens a write unit of work, takes the collection in X through a scope that ends at once
// (the RAII scope closing early, as in MongoDB code), and only then does a non-atomic
// read-modify-write of two balances. Auditors sum all balances under S. Because the X release
// is deferred to the end of the unit, no auditor sees a half-done transfer and no update is
// lost; without two-phase locking both happen within a few iterations.
func TestTwoPhaseTransfersKeepTotal(t *testing.T) {
	const (
		accounts = 8
		initial  = 100
		workers  = 6
	)
	iters := 400
	if raceEnabled {
		iters = 150
	}
	m := NewManager()
	var bal [accounts]atomic.Int64 // atomics only to keep the race detector quiet; the
	// read-modify-write below is deliberately not atomic.
	for i := range bal {
		bal[i].Store(initial)
	}
	var badSums atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			l := m.NewLocker()
			for i := 0; i < iters; i++ {
				if seed%3 == 0 { // auditor
					s, err := l.CollectionLock(ctx, "bank.accounts", ModeS)
					if err != nil {
						t.Error(err)
						return
					}
					var sum int64
					for j := range bal {
						sum += bal[j].Load()
						runtime.Gosched()
					}
					if sum != accounts*initial {
						badSums.Add(1)
					}
					_ = s.Release()
					continue
				}
				from, to := rng.IntN(accounts), rng.IntN(accounts)
				l.BeginWriteUnitOfWork()
				s, err := l.CollectionLock(ctx, "bank.accounts", ModeX)
				if err != nil {
					t.Error(err)
					return
				}
				_ = s.Release() // deferred: still held until EndWriteUnitOfWork
				f := bal[from].Load()
				runtime.Gosched()
				bal[from].Store(f - 1)
				tt := bal[to].Load()
				runtime.Gosched()
				bal[to].Store(tt + 1)
				if err := l.EndWriteUnitOfWork(); err != nil {
					t.Error(err)
					return
				}
			}
		}(uint64(w))
	}
	wg.Wait()
	var total int64
	for i := range bal {
		total += bal[i].Load()
	}
	if total != accounts*initial || badSums.Load() != 0 {
		t.Fatalf("total %d (want %d), %d audits saw a partial transfer", total, accounts*initial, badSums.Load())
	}
	if n := m.Busy(); n != 0 {
		t.Fatalf("%d heads busy", n)
	}
}
