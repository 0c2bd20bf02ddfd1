package lock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkCollectionChainIX is the uncontended cost of an operation's locking: PBWM, RSTL,
// Global, Database and Collection in IX (CollectionLockID with a cached id), then release.
func BenchmarkCollectionChainIX(b *testing.B) {
	m := NewManager()
	l := m.NewLocker()
	coll := CollectionResource("bench.c")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := l.CollectionLockID(ctx, coll, ModeIX)
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Release()
	}
}

// BenchmarkCollectionChainIXByName adds hashing the namespace on every call.
func BenchmarkCollectionChainIXByName(b *testing.B) {
	m := NewManager()
	l := m.NewLocker()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := l.CollectionLock(ctx, "bench.collection", ModeIX)
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Release()
	}
}

// BenchmarkCollectionChainIXWUOW is the chain inside a write unit of work (release deferred to
// the end of the unit).
func BenchmarkCollectionChainIXWUOW(b *testing.B) {
	m := NewManager()
	l := m.NewLocker()
	coll := CollectionResource("bench.c")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l.BeginWriteUnitOfWork()
		s, err := l.CollectionLockID(ctx, coll, ModeIX)
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Release()
		_ = l.EndWriteUnitOfWork()
	}
}

// BenchmarkLockUnlockMutex is one Lock/Unlock pair on a single head.
func BenchmarkLockUnlockMutex(b *testing.B) {
	m := NewManager()
	l := m.NewLocker()
	res := NewMutexResource("bench")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = l.Lock(ctx, res, ModeX)
		_ = l.Unlock(res)
	}
}

// BenchmarkCollectionChainIXParallel: every goroutine its own Locker and collection; they
// share the Global-type heads, which is where contention shows.
func BenchmarkCollectionChainIXParallel(b *testing.B) {
	m := NewManager()
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		l := m.NewLocker()
		coll := CollectionResource(fmt.Sprintf("db%d.c", n.Add(1)))
		for pb.Next() {
			s, err := l.CollectionLockID(ctx, coll, ModeIX)
			if err != nil {
				b.Error(err)
				return
			}
			_ = s.Release()
		}
	})
}

// BenchmarkBaselineFiveMutexPairs is a reference for the chain benchmarks on a noisy machine:
// five uncontended sync.Mutex Lock/Unlock pairs, the floor of any design with one mutex per
// lock head.
func BenchmarkBaselineFiveMutexPairs(b *testing.B) {
	var mus [5]struct {
		sync.Mutex
		_ [56]byte
	}
	for b.Loop() {
		for i := range mus {
			mus[i].Lock()
		}
		for i := len(mus) - 1; i >= 0; i-- {
			mus[i].Unlock()
		}
	}
}
