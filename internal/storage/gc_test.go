package storage

import (
	"context"
	"fmt"
	"humongo/internal/optime"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// gcCounters is a snapshot of the GC's work counters.
type gcCounters struct{ swept, visited, removed int64 }

func gcCountersOf(e *Engine) gcCounters {
	return gcCounters{e.gc.sweptVersions.Load(), e.gc.visitedKeys.Load(), e.gc.removed.Load()}
}

// TestGCQueueVisitsOnlyWrittenKeys: once tracking runs, a GC step visits the keys written
// since, not the rest of the data, and still removes their superseded versions.
func TestGCQueueVisitsOnlyWrittenKeys(t *testing.T) {
	e := openMem(t)
	ctx := context.Background()
	mustCreate(t, e, "t", IdentOptions{})
	mustCreate(t, e, "oplog", IdentOptions{Oplog: true})
	const n = 5000
	ru := e.NewRecoveryUnit()
	w := ru.BeginUnitOfWork()
	must(t, ru.SetCommitTimestamp(ts(1)))
	for i := range n {
		must(t, ru.Put("t", fmt.Appendf(nil, "k%05d", i), []byte("v1")))
	}
	must(t, w.Commit())
	w.End()
	ru.Close()
	// Written before any oldest timestamp: not tracked; the first step sweeps once.
	put(t, e, "t", "k00000", "v2", ts(2))
	e.SetOldestTimestamp(ts(3))
	must(t, e.gcStep(ctx))
	c0 := gcCountersOf(e)
	if c0.swept < n {
		t.Fatalf("first step swept %d versions, want the whole ident (%d)", c0.swept, n+1)
	}
	if raw := rawKey(t, e, "t", "k00000"); !slices.Equal(raw, []string{"v2@2"}) {
		t.Fatalf("k00000 after the sweep: %v", raw)
	}

	put(t, e, "t", "k00001", "v2", ts(10))
	put(t, e, "t", "k00001", "v3", ts(11))
	put(t, e, "t", "k00002", "v2", ts(12))
	del(t, e, "t", "k00003", ts(13))
	put(t, e, "t", "k00004", "v2", ts(30)) // above the next oldest: waits
	ru = e.NewRecoveryUnit()
	w = ru.BeginUnitOfWork()
	must(t, ru.SetCommitTimestamp(ts(14)))
	must(t, ru.Put("oplog", []byte("entry"), []byte("x"))) // oplog keys are never queued
	must(t, w.Commit())
	w.End()
	ru.Close()

	e.SetOldestTimestamp(ts(20))
	must(t, e.gcStep(ctx))
	c1 := gcCountersOf(e)
	if c1.swept != c0.swept {
		t.Errorf("queue step swept %d versions; want none", c1.swept-c0.swept)
	}
	if got := c1.visited - c0.visited; got != 3 {
		t.Errorf("queue step visited %d keys, want 3 (k00001, k00002, k00003)", got)
	}
	if got := c1.removed - c0.removed; got != 5 {
		t.Errorf("queue step removed %d versions, want 5 (k00001 v1,v2; k00002 v1; k00003 v1 and its tombstone)", got)
	}
	for k, want := range map[string][]string{
		"k00001": {"v3@11"}, "k00002": {"v2@12"}, "k00003": nil, "k00004": {"v2@30", "v1@1"}, "k00005": {"v1@1"},
	} {
		if got := rawKey(t, e, "t", k); !slices.Equal(got, want) {
			t.Errorf("%s: versions %v, want %v", k, got, want)
		}
	}

	e.SetOldestTimestamp(ts(40))
	must(t, e.gcStep(ctx))
	c2 := gcCountersOf(e)
	if got := c2.visited - c1.visited; got != 1 {
		t.Errorf("third step visited %d keys, want 1 (k00004)", got)
	}
	if got := rawKey(t, e, "t", "k00004"); !slices.Equal(got, []string{"v2@30"}) {
		t.Errorf("k00004: versions %v", got)
	}
}

// rawKey lists key's stored versions as "value@inc", newest first ("-" for a tombstone).
func rawKey(t testing.TB, e *Engine, ident, key string) []string {
	t.Helper()
	raw, err := e.rawVersions(ident)
	must(t, err)
	var out []string
	for _, v := range raw {
		if v.key != key {
			continue
		}
		if v.tomb {
			out = append(out, fmt.Sprintf("-@%d", v.ts.Inc()))
			continue
		}
		out = append(out, fmt.Sprintf("%s@%d", v.val, v.ts.Inc()))
	}
	return out
}

// modelVersion is one write of the GC model.
type modelVersion struct {
	ts  optime.Timestamp
	val string
	del bool
}

// TestGCModelRandom checks the GC against a model through random writes, oldest-timestamp
// moves, GC steps, clean restarts and queue overflows: reads at every timestamp at or above
// oldest are unchanged; after each step (while tracking) no key keeps more than one version
// at or below oldest, nor a tombstone there; and once oldest passes every write, exactly
// the newest live version of each key is left.
func TestGCModelRandom(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { gcModelRun(t, seed) })
	}
}

func gcModelRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	ctx := context.Background()
	fs := vfs.NewMem()
	opts := Options{Dir: "db", Logger: quietLogger(), CacheSize: 8 << 20}
	e, err := openEngine(opts, fs)
	must(t, err)
	defer func() { _ = e.Close() }()
	limit := 0
	if seed%2 == 0 {
		limit = 5 + rng.IntN(20) // overflows now and then
	}
	setLimit := func() {
		e.gc.q.mu.Lock()
		e.gc.q.limit = limit
		e.gc.q.mu.Unlock()
	}
	setLimit()
	mustCreate(t, e, "t", IdentOptions{})
	keys := []string{"a", "b", "c", "d", "e", "f"}
	model := map[string][]modelVersion{} // ascending ts
	var now uint32 = 1
	var oldest uint32

	readModel := func(k string, at optime.Timestamp) (string, bool) {
		vs := model[k]
		for i := len(vs) - 1; i >= 0; i-- {
			if vs[i].ts <= at {
				if vs[i].del {
					return "", false
				}
				return vs[i].val, true
			}
		}
		return "", false
	}
	checkReads := func(step int) {
		t.Helper()
		if oldest == 0 {
			return
		}
		for _, k := range keys {
			for at := oldest; at <= now+1; at++ {
				want, wok := readModel(k, ts(at))
				got, gok := getAt(t, e, "t", k, ts(at))
				if got != want || gok != wok {
					t.Fatalf("step %d: read %s at %d = %q %v, want %q %v", step, k, at, got, gok, want, wok)
				}
			}
		}
	}
	// checkCollected: while tracking, a step leaves at most one version at or below
	// oldest per key, and never a tombstone there.
	checkCollected := func(step int) {
		t.Helper()
		e.gc.q.mu.Lock()
		tracking := e.gc.q.tracking
		e.gc.q.mu.Unlock()
		if !tracking || oldest == 0 {
			return
		}
		raw, err := e.rawVersions("t")
		must(t, err)
		below := map[string]int{}
		for _, v := range raw {
			if v.ts > ts(oldest) {
				continue
			}
			below[v.key]++
			if below[v.key] > 1 || v.tomb {
				t.Fatalf("step %d: %s keeps garbage at or below oldest %d: %+v", step, v.key, oldest, raw)
			}
		}
	}

	for step := range 300 {
		switch r := rng.IntN(100); {
		case r < 55: // a unit writing one or more keys, sometimes at two timestamps
			ru := e.NewRecoveryUnit()
			w := ru.BeginUnitOfWork()
			multi := rng.IntN(4) == 0
			if !multi {
				now++
				must(t, ru.SetCommitTimestamp(ts(now)))
			}
			for range 1 + rng.IntN(3) {
				if multi {
					now++
					must(t, ru.SetTimestamp(ts(now)))
				}
				k := keys[rng.IntN(len(keys))]
				mv := modelVersion{ts: ts(now), val: fmt.Sprint(k, now)}
				if rng.IntN(4) == 0 {
					mv.del = true
					must(t, ru.Delete("t", []byte(k)))
				} else {
					must(t, ru.Put("t", []byte(k), []byte(mv.val)))
				}
				vs := model[k]
				if len(vs) > 0 && vs[len(vs)-1].ts == mv.ts {
					vs[len(vs)-1] = mv // same key twice at one timestamp: the last wins
				} else {
					vs = append(vs, mv)
				}
				model[k] = vs
			}
			must(t, w.Commit())
			w.End()
			ru.Close()
		case r < 75: // oldest moves (never past the newest write + 1)
			if oldest < now {
				oldest += 1 + uint32(rng.IntN(int(now-oldest)))
				e.SetOldestTimestamp(ts(oldest))
			}
		case r < 95:
			must(t, e.gcStep(ctx))
			checkCollected(step)
		default: // clean restart: the queue is lost, a sweep must cover it
			must(t, e.Close())
			e, err = openEngine(opts, fs)
			must(t, err)
			setLimit()
		}
		checkReads(step)
	}
	now++
	oldest = now
	e.SetOldestTimestamp(ts(oldest))
	must(t, e.gcStep(ctx))
	must(t, e.gcStep(ctx)) // after an overflow, tracking restarts with a sweep
	checkReads(-1)
	raw, err := e.rawVersions("t")
	must(t, err)
	var got, want []string
	for _, v := range raw {
		got = append(got, fmt.Sprintf("%s@%d/%v", v.key, v.ts.Inc(), v.tomb))
	}
	for _, k := range keys {
		if vs := model[k]; len(vs) > 0 && !vs[len(vs)-1].del {
			want = append(want, fmt.Sprintf("%s@%d/false", k, vs[len(vs)-1].ts.Inc()))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after oldest passed every write: versions %v, want %v", got, want)
	}
}

// BenchmarkGC: one GC step after 100 keys were updated, on idents holding different numbers
// of keys. The queue step visits the 100 written keys whatever the size of the data; the
// sweep (the only GC before the queue, and still what runs once after Open) examines every
// version, so its cost grows with the data.
func BenchmarkGC(b *testing.B) {
	for _, size := range []int{10_000, 100_000, 400_000} {
		for _, mode := range []string{"queue", "sweep"} {
			b.Run(fmt.Sprintf("%s/keys=%d", mode, size), func(b *testing.B) { benchGC(b, size, mode == "sweep") })
		}
	}
}

func benchGC(b *testing.B, size int, sweep bool) {
	e := openBench(b)
	ctx := context.Background()
	mustCreate(b, e, "b", IdentOptions{})
	val := make([]byte, 100)
	at := uint32(1)
	writeKeys := func(keys func(yield func(int) bool)) {
		ru := e.NewRecoveryUnit()
		defer ru.Close()
		w := ru.BeginUnitOfWork()
		defer w.End()
		at++
		must(b, ru.SetCommitTimestamp(optime.MakeTimestamp(100, at)))
		for i := range keys {
			must(b, ru.Put("b", benchKey(i), val))
		}
		must(b, w.Commit())
	}
	for i := 0; i < size; i += 1000 {
		writeKeys(func(yield func(int) bool) {
			for j := i; j < min(i+1000, size) && yield(j); j++ {
			}
		})
	}
	must(b, e.db.Flush())
	lo, hi := identBounds(firstIdentPrefixID)
	must(b, e.db.Compact(context.Background(), lo, hi, true))
	// Start tracking (the one sweep) before measuring.
	e.SetOldestTimestamp(optime.MakeTimestamp(100, at))
	must(b, e.gcStep(ctx))
	rng := rand.New(rand.NewPCG(1, 2))
	c0 := gcCountersOf(e)
	b.ResetTimer()
	cpuStart = cpuTime()
	for b.Loop() {
		b.StopTimer()
		writeKeys(func(yield func(int) bool) {
			for range 100 {
				if !yield(rng.IntN(size)) {
					return
				}
			}
		})
		// Not SetOldestTimestamp: its kick would let the background loop do the work.
		e.oldest.Store(uint64(optime.MakeTimestamp(100, at)))
		b.StartTimer()
		if sweep {
			for done := false; !done; {
				var err error
				done, err = e.gcPass(gcPassVersions)
				must(b, err)
			}
		}
		must(b, e.gcQueuePass(ctx))
	}
	c1 := gcCountersOf(e)
	b.ReportMetric(float64(c1.visited-c0.visited)/float64(b.N), "keys-visited/op")
	b.ReportMetric(float64(c1.swept-c0.swept)/float64(b.N), "versions-swept/op")
	b.ReportMetric(float64(c1.removed-c0.removed)/float64(b.N), "removed/op")
}

// TestGCNeverResurrectsADeletedKey: a deleted key's tombstone and the versions under it
// leave in one batch, so no reader ever sees the older value come back between two GC
// batches (a routed read on a shard saw a range-deleted document twice: at its old record,
// resurrected, and at the record a migration back had inserted).
func TestGCNeverResurrectsADeletedKey(t *testing.T) {
	for _, path := range []string{"sweep", "queue"} {
		t.Run(path, func(t *testing.T) {
			e := openMem(t)
			ctx := context.Background()
			mustCreate(t, e, "t", IdentOptions{})
			if path == "queue" {
				// Tracking starts with the first step: later writes are queued.
				e.SetOldestTimestamp(ts(1))
				must(t, e.gcStep(ctx))
			}
			keys := []string{"a", "b", "c", "d"}
			for _, k := range keys {
				put(t, e, "t", k, "v1", ts(2))
				put(t, e, "t", k, "v2", ts(3))
				del(t, e, "t", k, ts(4))
			}
			old := gcBatchDeletes
			gcBatchDeletes = 1 // apply a batch at every chance
			checks := 0
			gcAfterFlush = func() {
				checks++
				ru := e.NewRecoveryUnit()
				defer ru.Close()
				for _, k := range keys {
					if v, found, err := ru.Get("t", []byte(k)); err != nil || found {
						t.Errorf("after a GC batch, deleted key %s reads as %q (found %v, %v)", k, v, found, err)
					}
				}
			}
			defer func() { gcBatchDeletes, gcAfterFlush = old, nil }()
			e.SetOldestTimestamp(ts(10))
			if path == "sweep" {
				for done := false; !done; {
					var err error
					done, err = e.gcPass(100)
					must(t, err)
				}
			} else {
				must(t, e.gcStep(ctx))
			}
			if checks < 2 {
				t.Fatalf("%d GC batches, want one per key", checks)
			}
			for _, k := range keys {
				if raw := rawKey(t, e, "t", k); raw != nil {
					t.Errorf("%s: versions %v left, want none", k, raw)
				}
			}
		})
	}
}
