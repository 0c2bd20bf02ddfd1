package bench

import (
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
)

// ZipfianConstant is YCSB's default skew (ZipfianGenerator.ZIPFIAN_CONSTANT).
const ZipfianConstant = 0.99

// Constants of YCSB's ScrambledZipfianGenerator: with the default constant it draws from a
// fixed, very large item space whose zeta is precomputed, then folds the drawn item onto the
// key range with an FNV hash. The fixed space is what makes the popular keys independent of
// the record count and spread over the key space instead of clustered at its start.
const (
	scrambledItemCount = 10_000_000_000
	scrambledZetan     = 26.46902820178302
)

// fnvOffset64 and fnvPrime64 are the FNV-1 64-bit parameters YCSB's Utils.fnvhash64 uses.
const (
	fnvOffset64 = 0xCBF29CE484222325
	fnvPrime64  = 1099511628211
)

// FNVHash64 is YCSB's Utils.fnvhash64: FNV-1 over the eight little-endian bytes of v, made
// non-negative as Java's Math.abs does (Math.abs(Long.MIN_VALUE) stays negative; YCSB never
// meets it in practice, and we map it to 0 so the result is always a valid non-negative index).
func FNVHash64(v int64) int64 {
	h := uint64(fnvOffset64)
	u := uint64(v)
	for i := 0; i < 8; i++ {
		h ^= u & 0xff
		u >>= 8
		h *= fnvPrime64
	}
	s := int64(h)
	if s < 0 {
		s = -s
	}
	if s < 0 {
		return 0
	}
	return s
}

// KeyName is YCSB's CoreWorkload.buildKeyName with the default orderedinserts=false: "user"
// followed by the decimal FNV hash of the key number, so consecutive inserts land at scattered
// positions of the key order.
func KeyName(keynum int64) string {
	return "user" + strconv.FormatInt(FNVHash64(keynum), 10)
}

// appendKeyName appends KeyName(keynum) to dst without an intermediate string.
func appendKeyName(dst []byte, keynum int64) []byte {
	dst = append(dst, "user"...)
	return strconv.AppendInt(dst, FNVHash64(keynum), 10)
}

// zeta returns sum_{i=from+1}^{to} 1/i^theta added to initial: the incremental form of YCSB's
// ZipfianGenerator.zeta(st, n, theta, initialsum).
func zeta(from, to int64, theta, initial float64) float64 {
	sum := initial
	for i := from; i < to; i++ {
		sum += 1 / math.Pow(float64(i+1), theta)
	}
	return sum
}

// zipfState is the part of a Zipfian generator that depends on the item count; it is immutable
// once published so that concurrent drawers read it without locking.
type zipfState struct {
	items int64
	zetan float64
	eta   float64
}

// Zipfian draws integers in [base, base+items) with P(base+i) proportional to 1/(i+1)^theta, by
// the method of Gray et al., "Quickly Generating Billion-Record Synthetic Databases" (SIGMOD
// 1994), as YCSB's ZipfianGenerator. The item count may grow between draws (NextN): zeta is then
// extended incrementally, which is how YCSB's "latest" distribution follows inserts. Safe for
// concurrent use; each caller supplies its own *rand.Rand.
type Zipfian struct {
	base       int64
	theta      float64
	alpha      float64
	zeta2theta float64

	mu    sync.Mutex // serialises growth of the item count (zeta extension)
	state atomic.Pointer[zipfState]
}

// NewZipfian returns a generator over [min, max] with the given constant (theta, 0 < theta < 1).
func NewZipfian(min, max int64, theta float64) *Zipfian {
	return newZipfianZetan(min, max, theta, zeta(0, max-min+1, theta, 0))
}

// newZipfianZetan is NewZipfian with a precomputed zeta(items), for very large item counts.
func newZipfianZetan(min, max int64, theta, zetan float64) *Zipfian {
	z := &Zipfian{base: min, theta: theta, alpha: 1 / (1 - theta), zeta2theta: zeta(0, 2, theta, 0)}
	items := max - min + 1
	z.state.Store(&zipfState{items: items, zetan: zetan, eta: z.eta(items, zetan)})
	return z
}

func (z *Zipfian) eta(items int64, zetan float64) float64 {
	return (1 - math.Pow(2/float64(items), 1-z.theta)) / (1 - z.zeta2theta/zetan)
}

// Next draws over the current item count.
func (z *Zipfian) Next(r *rand.Rand) int64 {
	return z.draw(r, z.state.Load())
}

// NextN draws over items items, extending zeta first if the count grew. A smaller count than
// the generator has seen is served from the larger state's constants with the result clamped,
// since YCSB's default (allowitemcountdecrease=false) never recomputes downwards either.
func (z *Zipfian) NextN(r *rand.Rand, items int64) int64 {
	st := z.state.Load()
	if items > st.items {
		st = z.grow(items)
	}
	v := z.drawN(r, st, items)
	return v
}

func (z *Zipfian) grow(items int64) *zipfState {
	z.mu.Lock()
	defer z.mu.Unlock()
	st := z.state.Load()
	if items <= st.items {
		return st
	}
	zetan := zeta(st.items, items, z.theta, st.zetan)
	nst := &zipfState{items: items, zetan: zetan, eta: z.eta(items, zetan)}
	z.state.Store(nst)
	return nst
}

func (z *Zipfian) draw(r *rand.Rand, st *zipfState) int64 {
	return z.drawN(r, st, st.items)
}

// drawN is YCSB's ZipfianGenerator.nextLong(itemcount).
func (z *Zipfian) drawN(r *rand.Rand, st *zipfState, items int64) int64 {
	u := r.Float64()
	uz := u * st.zetan
	if uz < 1 {
		return z.base
	}
	if uz < 1+math.Pow(0.5, z.theta) {
		return z.base + 1
	}
	off := int64(float64(items) * math.Pow(st.eta*u-st.eta+1, z.alpha))
	// Float rounding can reach items itself when u is within an ulp of 1.
	if off >= items {
		off = items - 1
	}
	return z.base + off
}

// ScrambledZipfian is YCSB's ScrambledZipfianGenerator: Zipfian popularity, but the popular
// items are scattered over [min, max] by hashing instead of being the smallest numbers.
type ScrambledZipfian struct {
	min, items int64
	gen        *Zipfian
}

// NewScrambledZipfian returns a scrambled Zipfian generator over [min, max] with constant 0.99.
func NewScrambledZipfian(min, max int64) *ScrambledZipfian {
	return &ScrambledZipfian{
		min: min, items: max - min + 1,
		gen: newZipfianZetan(0, scrambledItemCount, ZipfianConstant, scrambledZetan),
	}
}

// Next draws one value.
func (s *ScrambledZipfian) Next(r *rand.Rand) int64 {
	return s.min + FNVHash64(s.gen.Next(r))%s.items
}

// AckCounter hands out insert key numbers in order and tracks which have been acknowledged, as
// YCSB's AcknowledgedCounterGenerator: Last is the highest number below which every number has
// been acknowledged. Readers choose keys only up to Last, so they never ask for a record whose
// insert is still in flight (or failed). Safe for concurrent use.
type AckCounter struct {
	next atomic.Int64 // the next number to hand out
	last atomic.Int64 // highest contiguous acknowledged number

	mu      sync.Mutex
	pending map[int64]struct{} // acknowledged numbers above last+1
}

// NewAckCounter returns a counter whose first handed-out number is start; numbers below start
// (the loaded records) count as acknowledged.
func NewAckCounter(start int64) *AckCounter {
	c := &AckCounter{pending: make(map[int64]struct{})}
	c.next.Store(start)
	c.last.Store(start - 1)
	return c
}

// Next hands out the next number.
func (c *AckCounter) Next() int64 { return c.next.Add(1) - 1 }

// Last is the highest number n such that every number <= n is acknowledged.
func (c *AckCounter) Last() int64 { return c.last.Load() }

// Ack marks n as acknowledged (its insert succeeded). A failed insert is never acknowledged,
// which holds Last back: that matches YCSB, whose readers must not see a hole.
func (c *AckCounter) Ack(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.last.Load()
	if n != last+1 {
		c.pending[n] = struct{}{}
		return
	}
	last = n
	for {
		if _, ok := c.pending[last+1]; !ok {
			break
		}
		delete(c.pending, last+1)
		last++
	}
	c.last.Store(last)
}

// SkewedLatest is YCSB's SkewedLatestGenerator: the most recently acknowledged insert is the most
// popular key, with Zipfian popularity falling off towards older records.
type SkewedLatest struct {
	basis *AckCounter
	zipf  *Zipfian
}

// NewSkewedLatest returns a latest generator following basis.
func NewSkewedLatest(basis *AckCounter) *SkewedLatest {
	n := basis.Last() + 1
	if n < 1 {
		n = 1
	}
	return &SkewedLatest{basis: basis, zipf: NewZipfian(0, n-1, ZipfianConstant)}
}

// Next draws one key number in [0, basis.Last()]. (YCSB draws over Last items, so record 0 is
// never chosen; drawing over Last+1 items makes every acknowledged record reachable.)
func (g *SkewedLatest) Next(r *rand.Rand) int64 {
	max := g.basis.Last()
	if max < 1 {
		return 0
	}
	return max - g.zipf.NextN(r, max+1)
}

// ZipfianKeys is CoreWorkload's zipfian key chooser: a ScrambledZipfian sized for the loaded
// records plus twice the expected inserts (YCSB's fudge factor), with draws above the last
// acknowledged insert rejected.
type ZipfianKeys struct {
	basis *AckCounter
	gen   *ScrambledZipfian
}

// NewZipfianKeys returns the chooser for records loaded records and about expectedInserts
// inserts during the run.
func NewZipfianKeys(basis *AckCounter, records, expectedInserts int64) *ZipfianKeys {
	return &ZipfianKeys{basis: basis, gen: NewScrambledZipfian(0, records+2*expectedInserts)}
}

// maxRejections bounds ZipfianKeys' rejection loop: with few acknowledged records in a large
// range, rejection could spin for long; after this many draws the key is folded into range.
const maxRejections = 64

// Next draws one key number in [0, basis.Last()].
func (g *ZipfianKeys) Next(r *rand.Rand) int64 {
	last := g.basis.Last()
	if last < 1 {
		return 0
	}
	var k int64
	for i := 0; i < maxRejections; i++ {
		if k = g.gen.Next(r); k <= last {
			return k
		}
	}
	return k % (last + 1)
}

// KeyChooser picks the key number of the next operation on an existing record.
type KeyChooser interface {
	Next(r *rand.Rand) int64
}

// Uniform draws uniformly from [0, basis.Last()], so inserted records become eligible as soon as
// they are acknowledged. (YCSB's uniform chooser keeps the loaded range only; following the
// counter is the same for read-only workloads and fairer with inserts.)
type Uniform struct{ basis *AckCounter }

// Next draws one key number.
func (g Uniform) Next(r *rand.Rand) int64 {
	max := g.basis.Last()
	if max < 1 {
		return 0
	}
	return r.Int64N(max + 1)
}
