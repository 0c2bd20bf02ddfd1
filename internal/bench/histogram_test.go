package bench

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestHistogramBuckets(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	check := func(v int64) {
		i := bucketOf(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("bucketOf(%d) = %d out of range", v, i)
		}
		hi := bucketHigh(i)
		if hi < v || (i > 0 && bucketHigh(i-1) >= v) {
			t.Fatalf("value %d in bucket %d whose range ends at %d (previous ends at %d)", v, i, hi, bucketHigh(i-1))
		}
		if v > 0 && float64(hi-v)/float64(v) >= 1.0/128 {
			t.Fatalf("bucket of %d spans to %d: relative error %.5f", v, hi, float64(hi-v)/float64(v))
		}
	}
	for v := int64(0); v < 70000; v++ {
		check(v)
	}
	for i := 0; i < 200000; i++ {
		check(int64(math.Exp(r.Float64() * math.Log(math.MaxInt64))))
	}
	check(math.MaxInt64)
	if bucketOf(math.MaxInt64) != histBuckets-1 {
		t.Fatalf("MaxInt64 in bucket %d, want the last (%d)", bucketOf(math.MaxInt64), histBuckets-1)
	}
}

func TestHistogramAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	// Three shapes: log-uniform from 1 µs to 10 s, a tight normal-ish cluster, and bimodal.
	shapes := map[string]func() int64{
		"loguniform": func() int64 { return int64(math.Exp(math.Log(1e3) + r.Float64()*(math.Log(1e10)-math.Log(1e3)))) },
		"cluster":    func() int64 { return int64(250_000 + r.NormFloat64()*5_000) },
		"bimodal": func() int64 {
			if r.IntN(10) == 0 {
				return 5_000_000 + r.Int64N(1_000_000)
			}
			return 80_000 + r.Int64N(20_000)
		},
	}
	for name, gen := range shapes {
		h := NewHistogram()
		vals := make([]int64, 100_000)
		var sum float64
		for i := range vals {
			vals[i] = gen()
			h.Record(vals[i])
			sum += float64(vals[i])
		}
		sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
		for _, q := range []float64{0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1} {
			rank := int(math.Ceil(q * float64(len(vals))))
			if rank < 1 {
				rank = 1
			}
			exact := vals[rank-1]
			got := h.Quantile(q)
			if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 0.01 {
				t.Errorf("%s: q%.4f = %d, exact %d, relative error %.4f > 1%%", name, q, got, exact, rel)
			}
		}
		if h.Min() != vals[0] || h.Max() != vals[len(vals)-1] || h.Count() != uint64(len(vals)) {
			t.Errorf("%s: min/max/count %d/%d/%d, want %d/%d/%d", name, h.Min(), h.Max(), h.Count(), vals[0], vals[len(vals)-1], len(vals))
		}
		if math.Abs(h.Mean()-sum/float64(len(vals))) > 1e-6*h.Mean() {
			t.Errorf("%s: mean %f, want %f", name, h.Mean(), sum/float64(len(vals)))
		}
	}
}

func TestHistogramMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	all, a, b := NewHistogram(), NewHistogram(), NewHistogram()
	for i := 0; i < 10000; i++ {
		v := r.Int64N(1e9)
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b)
	a.Merge(NewHistogram()) // merging an empty histogram must not disturb min
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("q%.2f: merged %d, single %d", q, a.Quantile(q), all.Quantile(q))
		}
	}
	if a.Min() != all.Min() || a.Max() != all.Max() || a.Count() != all.Count() {
		t.Errorf("merged min/max/count differ")
	}
	e := NewHistogram()
	if e.Quantile(0.5) != 0 || e.Min() != 0 || e.Max() != 0 || e.Mean() != 0 {
		t.Errorf("empty histogram reports non-zero values")
	}
	e.Record(-5)
	if e.Min() != 0 || e.Count() != 1 {
		t.Errorf("negative value not recorded as 0")
	}
}
