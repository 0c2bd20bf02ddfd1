package keystring

import (
	"bytes"
	"cmp"
	"math"
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/bsonutil/bsontest"
	"humongo/internal/recordid"
)

func sign(x int) int { return cmp.Compare(x, 0) }

// checkRoundTrip decodes ks and requires the exact original values back.
func checkRoundTrip(t *testing.T, ks, tb []byte, ord Ordering, want []bsoncore.Value) {
	t.Helper()
	got, err := Decode(ks, ord, tb)
	if err != nil {
		t.Fatalf("Decode(%x, %b, %x): %v (values %v)", ks, ord, tb, err, want)
	}
	if len(got) != len(want) {
		t.Fatalf("Decode: %d values, want %d (%v)", len(got), len(want), want)
	}
	for i := range want {
		if got[i].Type != want[i].Type || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("Decode component %d: got %s %x, want %s %x (key %x tb %x)",
				i, got[i].Type, got[i].Data, want[i].Type, want[i].Data, ks, tb)
		}
	}
}

func randomPairs() int {
	if testing.Short() {
		return 20_000
	}
	return 100_000
}

// TestOrderMatchesBSONCompare is the acceptance property: for random pairs of single values
// (nested objects and arrays, numbers equal across types, edge values), the KeyString order is
// bsonutil.Compare's, ascending and (inverted) descending, and every key decodes to the exact
// original bytes.
func TestOrderMatchesBSONCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var ba, bb Builder
	n := randomPairs()
	for i := 0; i < n; i++ {
		a, b := bsontest.RandomValue(r, 3), bsontest.RandomValue(r, 3)
		if i%4 == 0 {
			// Numbers against numbers often, where most of the encoding's cases are.
			a, b = bsontest.RandomNumber(r), bsontest.RandomNumber(r)
		}
		want := bsonutil.Compare(a, b)
		for _, ord := range []Ordering{0, 1} {
			ba.Reset(ord)
			ba.AppendValue(a)
			bb.Reset(ord)
			bb.AppendValue(b)
			if ba.Err() != nil || bb.Err() != nil {
				t.Fatalf("encode: %v / %v", ba.Err(), bb.Err())
			}
			got := sign(bytes.Compare(ba.Bytes(), bb.Bytes()))
			w := want
			if ord == 1 {
				w = -want
			}
			if got != w {
				t.Fatalf("pair %d ord %b: %s vs %s: KeyString order %d, BSON order %d\n%x\n%x",
					i, ord, a, b, got, w, ba.Bytes(), bb.Bytes())
			}
			checkRoundTrip(t, ba.Bytes(), ba.TypeBits(), ord, []bsoncore.Value{a})
		}
	}
}

// TestCompoundOrder checks 2-3 component keys with mixed orderings and RecordId suffixes: key
// order is lexicographic over components (each inverted if descending), then RecordId order.
func TestCompoundOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	n := randomPairs() / 2
	var ba, bb Builder
	randRID := func() recordid.ID {
		switch r.IntN(4) {
		case 0:
			return recordid.Long([]int64{math.MinInt64, -257, -256, -1, 0, 1, 255, 256, math.MaxInt64}[r.IntN(9)])
		case 1:
			return recordid.Long(r.Int64N(1000) - 500)
		case 2:
			return recordid.Binary([][]byte{{}, {0}, {0, 0}, {0, 0xFF}, {1}, {0xFF}, {1, 0}}[r.IntN(7)])
		}
		return recordid.Long(int64(r.Uint64()))
	}
	for i := 0; i < n; i++ {
		k := 2 + r.IntN(2)
		ord := Ordering(r.IntN(1 << k))
		va := make([]bsoncore.Value, k)
		vb := make([]bsoncore.Value, k)
		for j := range va {
			va[j] = bsontest.RandomValue(r, 2)
			if r.IntN(2) == 0 {
				vb[j] = va[j] // share prefixes often so later components and RecordIds matter
			} else {
				vb[j] = bsontest.RandomValue(r, 2)
			}
		}
		ra, rb := randRID(), randRID()
		want := 0
		for j := range va {
			if c := bsonutil.Compare(va[j], vb[j]); c != 0 {
				want = c
				if ord.descending(j) {
					want = -c
				}
				break
			}
		}
		if want == 0 {
			want = recordid.Compare(ra, rb)
		}
		for _, x := range []struct {
			b  *Builder
			vs []bsoncore.Value
			id recordid.ID
		}{{&ba, va, ra}, {&bb, vb, rb}} {
			x.b.Reset(ord)
			for _, v := range x.vs {
				x.b.AppendValue(v)
			}
			x.b.AppendRecordID(x.id)
		}
		if got := sign(bytes.Compare(ba.Bytes(), bb.Bytes())); got != want {
			t.Fatalf("case %d ord %b: %v %v vs %v %v: KeyString order %d, want %d\n%x\n%x",
				i, ord, va, ra, vb, rb, got, want, ba.Bytes(), bb.Bytes())
		}
		checkRoundTrip(t, ba.Bytes(), ba.TypeBits(), ord, va)
		id, keyLen, err := DecodeRecordIDAtEnd(ba.Bytes())
		if err != nil || recordid.Compare(id, ra) != 0 || id.IsLong() != ra.IsLong() {
			t.Fatalf("DecodeRecordIDAtEnd(%x) = %v, %v; want %v", ba.Bytes(), id, err, ra)
		}
		if keyLen == 0 || ba.Bytes()[keyLen-1] != kEnd {
			t.Fatalf("DecodeRecordIDAtEnd key length %d does not end at kEnd in %x", keyLen, ba.Bytes())
		}
	}
}
