package plan

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/query"
)

// bigInFilter is {field: {$in: [n values, shuffled, with duplicates]}}.
func bigInFilter(field string, n int) bsoncore.Document {
	r := rand.New(rand.NewPCG(1, 2))
	vals := make(bson.A, n)
	for i := range vals {
		vals[i] = int32(r.IntN(2 * n))
	}
	return mustDoc(bson.D{{Key: field, Value: bson.D{{Key: "$in", Value: vals}}}})
}

// TestBigInPlansQuickly pins the fix for quadratic bounds building: planning and running a
// 100k-value $in on a 2,000-document collection took minutes when each value was merged
// into the interval list on its own. The time is logged, not asserted.
func TestBigInPlansQuickly(t *testing.T) {
	f := newPlanFixture(t, 2000)
	ru := f.e.NewRecoveryUnit()
	defer ru.Close()
	for _, field := range []string{"a", "b"} {
		start := time.Now()
		ex, n := f.run(t, ru, Request{NS: "test.c", Filter: bigInFilter(field, 100_000)})
		ex.Close()
		ru.AbandonSnapshot()
		el := time.Since(start)
		t.Logf("$in on %s: %d documents in %v", field, n, el)
		// Timing decides no unit test (the race detector on a loaded 2-core machine took 14 s):
		// the quadratic regression is caught by BenchmarkInBounds100k and TestInBoundsSortedSet.
		_ = n
	}
}

// TestInBoundsSortedSet checks the bounds of a $in are its distinct values in order, and
// that the merge-based intersect agrees with a pairwise one.
func TestInBoundsSortedSet(t *testing.T) {
	m, err := query.Parse(bigInFilter("a", 5000), query.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o, exact, ok := leafBounds(m.Expression())
	if !ok || !exact {
		t.Fatalf("ok %v exact %v", ok, exact)
	}
	for i := 1; i < len(o); i++ {
		if bsonutil.Compare(o[i-1].low, o[i].low) >= 0 || !o[i].isPoint() {
			t.Fatalf("bounds not a sorted set at %d: %v %v", i, o[i-1], o[i])
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		a, b := randOIL(r), randOIL(r)
		got := formatOIL(intersect(a, b), false)
		want := formatOIL(normalize(pairwiseIntersect(normalize(slices.Clone(a)), normalize(slices.Clone(b)))), false)
		if !slices.Equal(got, want) {
			t.Fatalf("intersect(%v, %v) = %v, want %v", formatOIL(a, false), formatOIL(b, false), got, want)
		}
	}
}

func randOIL(r *rand.Rand) oil {
	var o oil
	for range r.IntN(6) {
		lo, hi := r.IntN(20), r.IntN(20)
		if lo > hi {
			lo, hi = hi, lo
		}
		o = append(o, interval{low: dbl(float64(lo)), high: dbl(float64(hi)), lowInc: r.IntN(2) == 0 || lo == hi, highInc: r.IntN(2) == 0 || lo == hi})
	}
	return o
}

// pairwiseIntersect is the former O(n·m) intersect, the reference for the merge.
func pairwiseIntersect(a, b oil) oil {
	var out oil
	for _, x := range a {
		for _, y := range b {
			lo, loInc := x.low, x.lowInc
			if c := bsonutil.Compare(y.low, lo); c > 0 || (c == 0 && !y.lowInc) {
				lo, loInc = y.low, y.lowInc
			}
			hi, hiInc := x.high, x.highInc
			if c := bsonutil.Compare(y.high, hi); c < 0 || (c == 0 && !y.highInc) {
				hi, hiInc = y.high, y.highInc
			}
			if c := bsonutil.Compare(lo, hi); c < 0 || (c == 0 && loInc && hiInc) {
				out = append(out, interval{low: lo, high: hi, lowInc: loInc, highInc: hiInc})
			}
		}
	}
	return out
}

// BenchmarkInBounds100k measures parsing and bounds building for a 100k-value $in.
func BenchmarkInBounds100k(b *testing.B) {
	filter := bigInFilter("a", 100_000)
	b.ReportAllocs()
	for b.Loop() {
		m, err := query.Parse(filter, query.ParseOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if o, _, _ := leafBounds(m.Expression()); len(o) == 0 {
			b.Fatal("no bounds")
		}
	}
}

// BenchmarkPlanIn100k plans and runs a 100k-value $in over an indexed field of 2,000
// documents.
func BenchmarkPlanIn100k(b *testing.B) {
	f := newPlanFixture(b, 2000)
	ru := f.e.NewRecoveryUnit()
	defer ru.Close()
	filter := bigInFilter("a", 100_000)
	b.ReportAllocs()
	for b.Loop() {
		ex, _ := f.run(b, ru, Request{NS: "test.c", Filter: filter})
		ex.Close()
		ru.AbandonSnapshot()
	}
}
