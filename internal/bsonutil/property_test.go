package bsonutil

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil/bsontest"
)

// TestCompareTotalOrder checks on random values that Compare is reflexive and antisymmetric
// (100k pairs), transitive (100k triples), and that sorting with it yields a sequence that is
// ordered pairwise (a strong transitivity check that catches cycles the triples miss).
func TestCompareTotalOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const pairs = 100_000
	for i := range pairs {
		a, b := bsontest.RandomValue(r, 3), bsontest.RandomValue(r, 3)
		ab, err := CompareErr(a, b)
		if err != nil {
			t.Fatalf("pair %d: generator produced malformed value: %v (%v, %v)", i, err, a, b)
		}
		if ba := Compare(b, a); ab != -ba || ab < -1 || ab > 1 {
			t.Fatalf("antisymmetry: Compare(%v, %v) = %d, reverse %d", a, b, ab, ba)
		}
		if Compare(a, a) != 0 {
			t.Fatalf("reflexivity: Compare(%v, itself) != 0", a)
		}
	}
	checked := 0
	for checked < pairs {
		x := [3]bsoncore.Value{bsontest.RandomValue(r, 2), bsontest.RandomValue(r, 2), bsontest.RandomValue(r, 2)}
		slices.SortFunc(x[:], Compare)
		ab, bc, ac := Compare(x[0], x[1]), Compare(x[1], x[2]), Compare(x[0], x[2])
		if ab > 0 || bc > 0 || ac > 0 || (ab == 0 && bc == 0 && ac != 0) {
			t.Fatalf("transitivity: %v, %v, %v: %d %d %d", x[0], x[1], x[2], ab, bc, ac)
		}
		checked++
	}
	// Numbers only, so many values tie across types.
	for _, gen := range []func() bsoncore.Value{
		func() bsoncore.Value { return bsontest.RandomValue(r, 2) },
		func() bsoncore.Value { return bsontest.RandomNumber(r) },
	} {
		vals := make([]bsoncore.Value, 400)
		for i := range vals {
			vals[i] = gen()
		}
		slices.SortFunc(vals, Compare)
		for i := range vals {
			for j := i + 1; j < len(vals); j++ {
				if c := Compare(vals[i], vals[j]); c > 0 {
					t.Fatalf("sorted sequence out of order at %d,%d: %v > %v", i, j, vals[i], vals[j])
				}
			}
		}
	}
}

// TestCompareNumbersOracle checks the numeric comparison against an independent exact
// implementation on big.Rat.
func TestCompareNumbersOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50_000 {
		a, b := bsontest.RandomNumber(r), bsontest.RandomNumber(r)
		want := ratCompare(t, a, b)
		if got := Compare(a, b); got != want {
			t.Fatalf("Compare(%v, %v) = %d, oracle %d", a, b, got, want)
		}
	}
}

// ratCompare: NaN < -Inf < finite (exact rational) < +Inf.
func ratCompare(t *testing.T, a, b bsoncore.Value) int {
	ca, ra := ratOf(t, a)
	cb, rb := ratOf(t, b)
	if ca != cb || ca != 2 {
		switch {
		case ca < cb:
			return -1
		case ca > cb:
			return 1
		}
		return 0
	}
	return ra.Cmp(rb)
}

// ratOf returns a class (0 NaN, 1 -Inf, 2 finite, 3 +Inf) and the exact value.
func ratOf(t *testing.T, v bsoncore.Value) (int, *big.Rat) {
	switch v.Type {
	case bsoncore.TypeInt32:
		return 2, new(big.Rat).SetInt64(int64(v.Int32()))
	case bsoncore.TypeInt64:
		return 2, new(big.Rat).SetInt64(v.Int64())
	case bsoncore.TypeDouble:
		f := v.Double()
		switch {
		case math.IsNaN(f):
			return 0, nil
		case math.IsInf(f, -1):
			return 1, nil
		case math.IsInf(f, 1):
			return 3, nil
		}
		return 2, new(big.Rat).SetFloat64(f)
	case bsoncore.TypeDecimal128:
		h, l := v.Decimal128()
		d := bson.NewDecimal128(h, l)
		switch {
		case d.IsNaN():
			return 0, nil
		case d.IsInf() < 0:
			return 1, nil
		case d.IsInf() > 0:
			return 3, nil
		}
		bi, exp, err := d.BigInt()
		if err != nil {
			t.Fatalf("BigInt(%v): %v", d, err)
		}
		// IEEE 754-2008: a coefficient above 10^34-1 is non-canonical and means zero. The
		// driver's BigInt returns it unchanged.
		if new(big.Int).Abs(bi).Cmp(maxCoeff) > 0 {
			bi.SetInt64(0)
		}
		rt := new(big.Rat).SetInt(bi)
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
		if exp >= 0 {
			return 2, rt.Mul(rt, new(big.Rat).SetInt(p))
		}
		return 2, rt.Quo(rt, new(big.Rat).SetInt(p))
	}
	t.Fatalf("not a number: %v", v)
	return 0, nil
}

var maxCoeff = new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(34), nil), big.NewInt(1))

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestGeneratorFindsCrossTypeTies guards the usefulness of bsontest.RandomNumber: a good share
// of random pairs must be equal numbers of different types, or the property tests above (and
// KeyString's) would never exercise cross-type equality.
func TestGeneratorFindsCrossTypeTies(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ties := 0
	const n = 20_000
	for range n {
		a, b := bsontest.RandomNumber(r), bsontest.RandomNumber(r)
		if a.Type != b.Type && Compare(a, b) == 0 {
			ties++
		}
	}
	if ties < n/200 {
		t.Errorf("only %d of %d random number pairs are cross-type ties", ties, n)
	}
	t.Logf("%d of %d pairs are cross-type ties", ties, n)
}
