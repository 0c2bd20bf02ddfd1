package recordid

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

func TestKeyOrderMatchesCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() ID {
		switch r.IntN(4) {
		case 0:
			return Long([]int64{math.MinInt64, -1, 0, 1, math.MaxInt64}[r.IntN(5)])
		case 1:
			return Long(r.Int64() - math.MaxInt64/2)
		case 2:
			b := make([]byte, r.IntN(4))
			for i := range b {
				b[i] = byte(r.IntN(3)) * 0x7F
			}
			return Binary(b)
		}
		return Long(int64(r.Uint64()))
	}
	for i := 0; i < 20000; i++ {
		a, b := gen(), gen()
		if got, want := bytes.Compare(a.Key(), b.Key()), Compare(a, b); got != want {
			t.Fatalf("%v vs %v: key order %d, Compare %d", a, b, got, want)
		}
		back, err := FromKey(a.Key())
		if err != nil || Compare(back, a) != 0 || back.IsLong() != a.IsLong() {
			t.Fatalf("round trip %v -> %v (%v)", a, back, err)
		}
	}
}

func TestMalformedKey(t *testing.T) {
	for _, k := range [][]byte{nil, {0x10}, {0x10, 1, 2}, {0x30, 1}} {
		if _, err := FromKey(k); err == nil {
			t.Errorf("FromKey(%x) accepted a malformed key", k)
		}
	}
}
