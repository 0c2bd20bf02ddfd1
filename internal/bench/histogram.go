package bench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram layout (log-linear, as HdrHistogram): values below 2^histExactBits are counted
// exactly, one bucket each; above, every power-of-two range [2^e, 2^(e+1)) is split into
// histSubBuckets linear buckets of width 2^(e-histSubBits). A bucket's width is then at most
// 1/histSubBuckets = 1/128 of any value in it, so reporting a bucket's highest value is off by
// less than 0.79% — the ≤1% relative error the benchmark promises — at a fixed cost of 7,424
// counters for the whole int64 range, independent of how many values are recorded.
const (
	histSubBits    = 7
	histSubBuckets = 1 << histSubBits   // linear buckets per power of two
	histExactBits  = histSubBits + 1    // values < 256 are exact
	histExact      = 1 << histExactBits // number of exact buckets
	histBuckets    = histExact + (63-histExactBits)*histSubBuckets
)

// Histogram records non-negative int64 values (latencies in nanoseconds) with bounded relative
// error. The zero value is not ready; use NewHistogram. Not safe for concurrent use: each
// benchmark thread owns its histograms, and Merge combines them after the threads stop.
type Histogram struct {
	counts   []uint64
	total    uint64
	min, max int64
	sum      float64 // for the mean; float64 cannot overflow where an int64 sum of nanoseconds could
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{counts: make([]uint64, histBuckets), min: math.MaxInt64}
}

// bucketOf maps a value to its bucket index.
func bucketOf(v int64) int {
	if v < histExact {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - 1 // 2^e <= v < 2^(e+1), e >= histExactBits
	shift := e - histSubBits
	sub := int(v>>shift) - histSubBuckets // in [0, histSubBuckets)
	return histExact + (e-histExactBits)*histSubBuckets + sub
}

// bucketHigh is the highest value that maps to bucket i.
func bucketHigh(i int) int64 {
	if i < histExact {
		return int64(i)
	}
	j := i - histExact
	e := j/histSubBuckets + histExactBits
	sub := int64(j%histSubBuckets + histSubBuckets)
	shift := e - histSubBits
	lo := sub << shift
	return lo + (int64(1) << shift) - 1
}

// Record adds one value; negative values count as 0.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)]++
	h.total++
	h.sum += float64(v)
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// RecordDuration records d in nanoseconds.
func (h *Histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Merge adds o's values into h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.total }

// Min is the smallest recorded value (exact), 0 if empty.
func (h *Histogram) Min() int64 {
	if h.total == 0 {
		return 0
	}
	return h.min
}

// Max is the largest recorded value (exact), 0 if empty.
func (h *Histogram) Max() int64 { return h.max }

// Mean is the exact mean, 0 if empty.
func (h *Histogram) Mean() float64 {
	if h.total == 0 {
		return 0
	}
	return h.sum / float64(h.total)
}

// Quantile returns the value at quantile q in [0, 1]: the highest value of the bucket holding
// the ceil(q·n)-th smallest recorded value, clamped to the exact min and max. Its relative error
// against the exact order statistic is below 1/128.
func (h *Histogram) Quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.total)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(max(bucketHigh(i), h.min), h.max)
		}
	}
	return h.max
}
