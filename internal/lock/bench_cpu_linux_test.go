//go:build linux

package lock

import (
	"context"
	"runtime"
	"syscall"
	"testing"
)

// threadCPU returns the CPU time consumed by the calling OS thread. On a shared, overloaded
// machine wall-clock ns/op mostly measures the run queue; thread CPU time does not.
func threadCPU() int64 {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkCollectionChainIXCPU is BenchmarkCollectionChainIX reporting thread CPU ns per
// chain (cpu-ns/op) alongside wall time.
func BenchmarkCollectionChainIXCPU(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m := NewManager()
	l := m.NewLocker()
	coll := CollectionResource("bench.c")
	ctx := context.Background()
	start := threadCPU()
	n := 0
	for b.Loop() {
		s, err := l.CollectionLockID(ctx, coll, ModeIX)
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Release()
		n++
	}
	b.ReportMetric(float64(threadCPU()-start)/float64(n), "cpu-ns/op")
}

// BenchmarkLockUnlockMutexCPU is one Lock/Unlock pair on a Mutex resource, in thread CPU time.
func BenchmarkLockUnlockMutexCPU(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m := NewManager()
	l := m.NewLocker()
	res := NewMutexResource("bench")
	ctx := context.Background()
	start := threadCPU()
	n := 0
	for b.Loop() {
		_ = l.Lock(ctx, res, ModeX)
		_ = l.Unlock(res)
		n++
	}
	b.ReportMetric(float64(threadCPU()-start)/float64(n), "cpu-ns/op")
}
