package storage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// interleave runs n × (Put + open cursor + Seek) in one unit: the pattern of unique-index
// inserts inside a large vectored insert and of index-build drains.
func interleave(tb testing.TB, e *Engine, ident string, n int, rng *rand.Rand) {
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	defer w.End()
	for i := 0; i < n; i++ {
		k := benchKey(rng.IntN(1 << 30))
		if err := ru.Put(ident, k, k); err != nil {
			tb.Fatal(err)
		}
		c, err := ru.NewCursor(ident, CursorOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		if !c.Seek(k) || string(c.Key()) != string(k) {
			tb.Fatalf("seek %x: %v %x %v", k, c.Valid(), c.Key(), c.Err())
		}
		c.Close()
	}
}

// TestBufferCursorMatchesModel checks the buffer side of cursors (both directions, bounds,
// tombstones, inclusive and exclusive seeks) against a sorted-slice model while the buffer grows.
func TestBufferCursorMatchesModel(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "m", IdentOptions{})
	rng := rand.New(rand.NewPCG(7, 8))
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	defer w.End()
	live := map[string]bool{}
	key := func() string { return fmt.Sprintf("k%03d", rng.IntN(400)) }
	for step := 0; step < 3000; step++ {
		k := key()
		if rng.IntN(4) == 0 {
			must(t, ru.Delete("m", []byte(k)))
			delete(live, k)
		} else {
			must(t, ru.Put("m", []byte(k), []byte(k)))
			live[k] = true
		}
		if step%7 != 0 {
			continue
		}
		lo, hi := key(), key()
		if lo > hi {
			lo, hi = hi, lo
		}
		var want []string
		for k := range live {
			if k >= lo && k < hi {
				want = append(want, k+"="+k)
			}
		}
		slices.Sort(want)
		reverse := rng.IntN(2) == 0
		if reverse {
			slices.Reverse(want)
		}
		got := scan(t, ru, "m", CursorOptions{Lower: []byte(lo), Upper: []byte(hi), Reverse: reverse})
		if !slices.Equal(got, want) {
			t.Fatalf("step %d [%s,%s) reverse=%v: got %v want %v", step, lo, hi, reverse, got, want)
		}
		// Seek semantics: first key >= s (forward) or last key <= s (reverse).
		s := key()
		c, err := ru.NewCursor("m", CursorOptions{Lower: []byte(lo), Upper: []byte(hi), Reverse: reverse})
		must(t, err)
		var exp string
		for _, kv := range want {
			k := kv[:len(kv)/2]
			if (!reverse && k >= s) || (reverse && k <= s) {
				exp = k
				break
			}
		}
		ok := c.Seek([]byte(s))
		if (exp != "") != ok || (ok && string(c.Key()) != exp) {
			t.Fatalf("step %d seek %s in [%s,%s) reverse=%v: got %v %q want %q", step, s, lo, hi, reverse, ok, c.Key(), exp)
		}
		c.Close()
	}
}

// BenchmarkBufferInterleaved: one unit doing 10,000 × (Put + open cursor + Seek); reported
// per step. Before the ordered buffer, every cursor open after a write re-sorted the buffer.
func BenchmarkBufferInterleaved(b *testing.B) {
	e := openBench(b)
	mustCreate(b, e, "b", IdentOptions{})
	rng := rand.New(rand.NewPCG(1, 2))
	const steps = 10_000
	cpuStart = cpuTime()
	for b.Loop() {
		interleave(b, e, "b", steps, rng)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
	b.ReportMetric(float64(cpuTime()-cpuStart)/float64(b.N), "cpu-ns/op")
}

// TestCommitToDroppedIdentFails: a unit that wrote to an ident dropped before its commit fails
// with WriteConflict and leaves nothing under the dead prefix; its other writes are rolled
// back with it.
func TestCommitToDroppedIdentFails(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "keep", IdentOptions{})
	mustCreate(t, e, "gone", IdentOptions{})
	ii, err := e.lookupIdent("gone")
	must(t, err)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	must(t, ru.Put("keep", []byte("a"), []byte("1")))
	must(t, ru.Put("gone", []byte("b"), []byte("2")))
	must(t, e.DropIdent("gone"))
	err = w.Commit()
	w.End()
	if !IsWriteConflict(err) {
		t.Fatalf("commit after drop: %v, want WriteConflict", err)
	}
	lo, hi := identBounds(ii.id)
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	must(t, err)
	if it.First() {
		t.Fatalf("version left under the dropped ident's prefix: %s", keyFormatter(it.Key()))
	}
	must(t, it.Close())
	if v, ok := getAt(t, e, "keep", "a", 0); ok {
		t.Fatalf("the failed unit's other write committed: %q", v)
	}
	// The unit is usable again and the engine accepts new writes to live idents.
	w = ru.BeginUnitOfWork()
	must(t, ru.Put("keep", []byte("a"), []byte("3")))
	must(t, w.Commit())
	w.End()
}
