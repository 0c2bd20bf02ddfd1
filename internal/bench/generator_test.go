package bench

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
)

// YCSB's first keys, computed by YCSB's own Utils.fnvhash64 in Java (Math.abs of the FNV-1 hash).
func TestKeyNameMatchesYCSB(t *testing.T) {
	for n, want := range map[int64]string{
		0: "user6284781860667377211",
		1: "user8517097267634966620",
		2: "user1820151046732198393",
	} {
		if got := KeyName(n); got != want {
			t.Errorf("KeyName(%d) = %s, want %s", n, got, want)
		}
		if got := string(appendKeyName([]byte("x"), n)); got != "x"+want {
			t.Errorf("appendKeyName(%d) = %s", n, got)
		}
	}
	if got := FNVHash64(-5); got != 8164698058649250233 {
		t.Errorf("FNVHash64(-5) = %d", got)
	}
	if got := FNVHash64(123456789012); got != 2556987882972209844 {
		t.Errorf("FNVHash64(123456789012) = %d", got)
	}
}

// exactZipf returns the exact Zipfian probabilities over n items.
func exactZipf(n int, theta float64) []float64 {
	p := make([]float64, n)
	var sum float64
	for i := range p {
		p[i] = 1 / math.Pow(float64(i+1), theta)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

func TestZipfianShape(t *testing.T) {
	const n, draws = 1000, 400_000
	z := NewZipfian(0, n-1, ZipfianConstant)
	r := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, n)
	for i := 0; i < draws; i++ {
		v := z.Next(r)
		if v < 0 || v >= n {
			t.Fatalf("draw %d out of [0,%d)", v, n)
		}
		counts[v]++
	}
	p := exactZipf(n, ZipfianConstant)
	// Gray et al.'s method is exact for the first two items and an approximation after, whose
	// probabilities follow from inverting its formula: X >= x iff u >= ((x/n)^(1/alpha)-1)/eta+1.
	// Check the head against the method's own distribution (this pins the port of YCSB's
	// arithmetic), and the overall shape against true Zipf by cumulative mass.
	st := z.state.Load()
	uAt := func(x float64) float64 { return (math.Pow(x/n, 1-ZipfianConstant)-1)/st.eta + 1 }
	model := func(i int) float64 {
		switch i {
		case 0, 1:
			return p[i]
		case 2:
			return uAt(3) - (1+math.Pow(0.5, ZipfianConstant))/st.zetan
		}
		return uAt(float64(i+1)) - uAt(float64(i))
	}
	for i := 0; i < 10; i++ {
		got := float64(counts[i]) / draws
		if want := model(i); math.Abs(got-want) > 0.05*want+0.001 {
			t.Errorf("item %d: frequency %.4f, the method gives %.4f (exact Zipf %.4f)", i, got, want, p[i])
		}
	}
	for _, k := range []int{10, 100, 500} {
		var got, want float64
		for i := 0; i < k; i++ {
			got += float64(counts[i]) / draws
			want += p[i]
		}
		if math.Abs(got-want) > 0.03 {
			t.Errorf("mass of the first %d items: %.3f, Zipf(0.99) gives %.3f", k, got, want)
		}
	}
}

// A uniform-looking sample must fail the shape check: the test can fail.
func TestZipfianShapeDetectsUniform(t *testing.T) {
	p := exactZipf(1000, ZipfianConstant)
	if uniformMass := 10.0 / 1000; math.Abs(uniformMass-(p[0]+p[1]+p[2]+p[3]+p[4]+p[5]+p[6]+p[7]+p[8]+p[9])) <= 0.03 {
		t.Fatal("the cumulative-mass check would not tell uniform from Zipfian")
	}
}

func TestZipfianGrowMatchesFresh(t *testing.T) {
	grown := NewZipfian(0, 99, ZipfianConstant)
	fresh := NewZipfian(0, 4999, ZipfianConstant)
	// Grow through NextN and compare the constants with a generator built at the final size.
	r := rand.New(rand.NewPCG(3, 4))
	for n := int64(100); n <= 5000; n += 7 {
		if v := grown.NextN(r, n); v < 0 || v >= n {
			t.Fatalf("NextN(%d) = %d", n, v)
		}
	}
	grown.NextN(r, 5000)
	g, f := grown.state.Load(), fresh.state.Load()
	if g.items != f.items || math.Abs(g.zetan-f.zetan) > 1e-9 || math.Abs(g.eta-f.eta) > 1e-9 {
		t.Fatalf("grown state %+v, fresh %+v", *g, *f)
	}
}

func TestScrambledZipfian(t *testing.T) {
	const n, draws = 1000, 200_000
	s := NewScrambledZipfian(0, n-1)
	r := rand.New(rand.NewPCG(5, 6))
	counts := make([]int, n)
	for i := 0; i < draws; i++ {
		v := s.Next(r)
		if v < 0 || v >= n {
			t.Fatalf("draw %d out of range", v)
		}
		counts[v]++
	}
	// The hottest key is item 0 of the 10^10-item Zipfian, hashed: not key 0.
	hottest := 0
	for i, c := range counts {
		if c > counts[hottest] {
			hottest = i
		}
	}
	if want := int(FNVHash64(0) % n); hottest != want {
		t.Errorf("hottest key %d, want fnv(0) mod n = %d", hottest, want)
	}
	// Item 0 has probability 1/zeta(10^10) = 3.8%; collisions can only add to it.
	if f := float64(counts[hottest]) / draws; f < 0.035 {
		t.Errorf("hottest key frequency %.4f, want >= 0.035", f)
	}
	// Skewed: the hottest 10% of keys take far more than 10% of draws; scattered: the hot keys
	// are not clustered at the start of the range.
	sorted := append([]int(nil), counts...)
	sort.Sort(sort.Reverse(sort.IntSlice(sorted)))
	top := 0
	for _, c := range sorted[:n/10] {
		top += c
	}
	// Expected about 0.29: the 10^10-item Zipfian's head (~0.19) plus a tenth of its long tail,
	// which the hash spreads evenly; uniform would give 0.10.
	if f := float64(top) / draws; f < 0.25 {
		t.Errorf("hottest 10%% of keys get %.3f of draws, want a Zipfian skew (> 0.25)", f)
	}
	firstTenth := 0
	for _, c := range counts[:n/10] {
		firstTenth += c
	}
	if f := float64(firstTenth) / draws; f > 0.3 {
		t.Errorf("the first 10%% of the key range gets %.3f of draws: hot keys not scrambled", f)
	}
}

func TestAckCounter(t *testing.T) {
	c := NewAckCounter(10)
	if c.Last() != 9 {
		t.Fatalf("Last = %d, want 9", c.Last())
	}
	a, b, d := c.Next(), c.Next(), c.Next()
	if a != 10 || b != 11 || d != 12 {
		t.Fatalf("Next gave %d %d %d", a, b, d)
	}
	c.Ack(12)
	c.Ack(11)
	if c.Last() != 9 {
		t.Fatalf("Last = %d with 10 unacknowledged", c.Last())
	}
	c.Ack(10)
	if c.Last() != 12 {
		t.Fatalf("Last = %d, want 12", c.Last())
	}

	// Concurrent: every handed-out number acknowledged in some order ends at the top.
	c = NewAckCounter(0)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				c.Ack(c.Next())
			}
		}()
	}
	wg.Wait()
	if c.Last() != 7999 || len(c.pending) != 0 {
		t.Fatalf("Last = %d, pending %d", c.Last(), len(c.pending))
	}
}

func TestSkewedLatest(t *testing.T) {
	c := NewAckCounter(1000)
	g := NewSkewedLatest(c)
	r := rand.New(rand.NewPCG(7, 8))
	count := func() map[int64]int {
		m := map[int64]int{}
		for i := 0; i < 100_000; i++ {
			v := g.Next(r)
			if v < 0 || v > c.Last() {
				t.Fatalf("draw %d outside [0, %d]", v, c.Last())
			}
			m[v]++
		}
		return m
	}
	m := count()
	p := exactZipf(1000, ZipfianConstant)
	for i := int64(0); i < 2; i++ { // the two items Gray's method draws exactly
		if f := float64(m[999-i]) / 100_000; math.Abs(f-p[i]) > 0.1*p[i] {
			t.Errorf("key last-%d frequency %.4f, want about %.4f", i, f, p[i])
		}
	}
	if m[999] <= m[998] || m[998] <= m[990] {
		t.Errorf("latest not most popular: %d %d %d", m[999], m[998], m[990])
	}
	// New acknowledged inserts become the hottest keys.
	for i := 0; i < 50; i++ {
		c.Ack(c.Next())
	}
	m = count()
	if m[1049] <= m[999] {
		t.Errorf("after inserts the newest key (%d draws) should beat the old latest (%d)", m[1049], m[999])
	}
}

func TestUniform(t *testing.T) {
	c := NewAckCounter(100)
	g := Uniform{c}
	r := rand.New(rand.NewPCG(9, 10))
	counts := make([]int, 100)
	const draws = 100_000
	for i := 0; i < draws; i++ {
		counts[g.Next(r)]++
	}
	// Chi-square with 99 degrees of freedom: 99.9th percentile is about 148.
	var chi float64
	for _, o := range counts {
		e := float64(draws) / 100
		chi += (float64(o) - e) * (float64(o) - e) / e
	}
	if chi > 148 {
		t.Errorf("chi-square %.1f: not uniform", chi)
	}
}

func TestZipfianKeysStayInAcknowledgedRange(t *testing.T) {
	c := NewAckCounter(1000)
	g := NewZipfianKeys(c, 1000, 500)
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 50_000; i++ {
		if v := g.Next(r); v < 0 || v > c.Last() {
			t.Fatalf("draw %d outside [0, %d]", v, c.Last())
		}
	}
}
