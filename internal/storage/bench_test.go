package storage

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"humongo/internal/optime"
)

const benchKeys = 100_000

func benchKey(i int) []byte { return binary.BigEndian.AppendUint64([]byte("key"), uint64(i)) }

// loadBench fills ident "b" with n keys of 1 KiB values.
func loadBench(b *testing.B, e *Engine, n int) {
	b.Helper()
	mustCreate(b, e, "b", IdentOptions{})
	val := make([]byte, 1024)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	for i := 0; i < n; i += 1000 {
		w := ru.BeginUnitOfWork()
		for j := i; j < min(i+1000, n); j++ {
			must(b, ru.Put("b", benchKey(j), val))
		}
		must(b, w.Commit())
		w.End()
	}
	// Benchmark the steady state: compacted tables, not a pile of L0 flushes.
	must(b, e.db.Flush())
	lo, hi := identBounds(firstIdentPrefixID)
	must(b, e.db.Compact(context.Background(), lo, hi, true))
}

func openBench(b *testing.B) *Engine {
	b.Helper()
	e, err := Open(Options{InMemory: true, Logger: quietLogger()})
	must(b, err)
	b.Cleanup(func() { _ = e.Close() })
	return e
}

// BenchmarkPointGet: random point reads within one snapshot (the unit's iterator is reused).
func BenchmarkPointGet(b *testing.B) {
	e := openBench(b)
	loadBench(b, e, benchKeys)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	cpuStart = cpuTime()
	for b.Loop() {
		if _, ok, err := ru.Get("b", benchKey(rng.IntN(benchKeys))); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
	reportRates(b, "ops/s")
}

// BenchmarkPointGetFreshSnapshot: one snapshot per read (a single-document operation).
func BenchmarkPointGetFreshSnapshot(b *testing.B) {
	e := openBench(b)
	loadBench(b, e, benchKeys)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	cpuStart = cpuTime()
	for b.Loop() {
		if _, ok, err := ru.Get("b", benchKey(rng.IntN(benchKeys))); err != nil || !ok {
			b.Fatal(ok, err)
		}
		ru.AbandonSnapshot()
	}
	reportRates(b, "ops/s")
}

// BenchmarkPut: one unit per 1 KiB write, single-threaded (NoSync commits).
func BenchmarkPut(b *testing.B) {
	e := openBench(b)
	mustCreate(b, e, "b", IdentOptions{})
	val := make([]byte, 1024)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	i := 0
	cpuStart = cpuTime()
	for b.Loop() {
		w := ru.BeginUnitOfWork()
		if err := ru.Put("b", benchKey(i), val); err != nil {
			b.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
		w.End()
		i++
	}
	reportRates(b, "ops/s")
}

// BenchmarkCursorScan100: open a cursor at a random key and read 100 entries.
func BenchmarkCursorScan100(b *testing.B) {
	e := openBench(b)
	loadBench(b, e, benchKeys)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	cpuStart = cpuTime()
	for b.Loop() {
		c, err := ru.NewCursor("b", CursorOptions{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for ok := c.Seek(benchKey(rng.IntN(benchKeys - 100))); ok && n < 100; ok = c.Next() {
			n++
		}
		if n != 100 {
			b.Fatal(n, c.Err())
		}
		c.Close()
	}
	reportRates(b, "scans/s")
}

// The machine is shared, so wall-clock rates are noisy; process CPU time per op (user+sys,
// including Pebble's goroutines) is reported alongside.
var cpuStart time.Duration

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportRates(b *testing.B, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
	b.ReportMetric(float64(cpuTime()-cpuStart)/float64(b.N), "cpu-ns/op")
}

// BenchmarkPointGetWithPrepared: BenchmarkPointGet while a unit holds 100 prepared keys of the
// same ident (the reads miss them): the cost of the prepared-set check.
func BenchmarkPointGetWithPrepared(b *testing.B) {
	e := openBench(b)
	loadBench(b, e, benchKeys)
	pru := e.NewRecoveryUnit()
	defer pru.Close()
	w := pru.BeginUnitOfWork()
	defer w.End()
	for i := range 100 {
		if err := pru.Put("b", append(benchKey(i*97), 'p'), []byte("v")); err != nil {
			b.Fatal(err)
		}
	}
	if err := pru.Prepare(optime.MakeTimestamp(1000, 1)); err != nil {
		b.Fatal(err)
	}
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	cpuStart = cpuTime()
	for b.Loop() {
		if _, ok, err := ru.Get("b", benchKey(rng.IntN(benchKeys))); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
	reportRates(b, "ops/s")
}
