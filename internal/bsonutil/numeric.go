package bsonutil

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/big"

	"github.com/cockroachdb/apd/v3"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// IsNumber reports whether t is one of the four numeric BSON types.
func IsNumber(t bsoncore.Type) bool {
	switch t {
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		return true
	}
	return false
}

// ToFloat64 converts a numeric value to the nearest float64 (decimal128 is rounded, NaN and
// infinities carried over). ok is false for non-numbers and malformed data.
func ToFloat64(v bsoncore.Value) (float64, bool) {
	switch v.Type {
	case bsoncore.TypeInt32:
		if len(v.Data) < 4 {
			return 0, false
		}
		return float64(int32(binary.LittleEndian.Uint32(v.Data))), true
	case bsoncore.TypeInt64:
		if len(v.Data) < 8 {
			return 0, false
		}
		return float64(int64(binary.LittleEndian.Uint64(v.Data))), true
	case bsoncore.TypeDouble:
		if len(v.Data) < 8 {
			return 0, false
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(v.Data)), true
	case bsoncore.TypeDecimal128:
		d, ok := decodeDecimal(v.Data)
		if !ok {
			return 0, false
		}
		switch d.kind {
		case decNaN:
			return math.NaN(), true
		case decInf:
			if d.neg {
				return math.Inf(-1), true
			}
			return math.Inf(1), true
		}
		var x apd.Decimal
		d.toApd(&x)
		f, err := x.Float64()
		if err != nil {
			// apd reports out-of-range conversions as errors; saturate like a float would.
			if x.Negative {
				return math.Inf(-1), true
			}
			return math.Inf(1), true
		}
		return f, true
	}
	return 0, false
}

// ToInt64Exact returns v as an int64 if v is a number whose value is an integer representable
// in int64 (so 3.0 and NumberDecimal("3.00") convert; 3.5, NaN, 2^63 do not).
func ToInt64Exact(v bsoncore.Value) (int64, bool) {
	switch v.Type {
	case bsoncore.TypeInt32:
		if len(v.Data) < 4 {
			return 0, false
		}
		return int64(int32(binary.LittleEndian.Uint32(v.Data))), true
	case bsoncore.TypeInt64:
		if len(v.Data) < 8 {
			return 0, false
		}
		return int64(binary.LittleEndian.Uint64(v.Data)), true
	case bsoncore.TypeDouble:
		if len(v.Data) < 8 {
			return 0, false
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(v.Data))
		// -2^63 is exactly representable; 2^63 is not an int64.
		if f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
			return 0, false
		}
		return int64(f), true
	case bsoncore.TypeDecimal128:
		d, ok := decodeDecimal(v.Data)
		if !ok || d.kind != decFinite {
			return 0, false
		}
		var x apd.Decimal
		d.toApd(&x)
		// Int64 rejects fractional parts and out-of-range values.
		n, err := x.Int64()
		if err != nil {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// compareNumbers compares two numeric values of any of the four types by exact value.
func compareNumbers(at bsoncore.Type, ad []byte, bt bsoncore.Type, bd []byte) (int, fault) {
	if f := sideFault(valueLen(at, ad) >= 0, valueLen(bt, bd) >= 0); f != 0 {
		return 0, f
	}
	if at == bsoncore.TypeDecimal128 || bt == bsoncore.TypeDecimal128 {
		return compareWithDecimal(at, ad, bt, bd), 0
	}
	aInt, bInt := at != bsoncore.TypeDouble, bt != bsoncore.TypeDouble
	switch {
	case aInt && bInt:
		return cmp.Compare(readInt(at, ad), readInt(bt, bd)), 0
	case aInt:
		return compareLongDouble(readInt(at, ad), readDouble(bd)), 0
	case bInt:
		return -compareLongDouble(readInt(bt, bd), readDouble(ad)), 0
	}
	return compareDoubles(readDouble(ad), readDouble(bd)), 0
}

func readInt(t bsoncore.Type, d []byte) int64 {
	if t == bsoncore.TypeInt32 {
		return int64(int32(binary.LittleEndian.Uint32(d)))
	}
	return int64(binary.LittleEndian.Uint64(d))
}

func readDouble(d []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(d)) }

// compareDoubles is MongoDB's compareDoubles: NaN equals NaN and is below everything else;
// -0 == 0 falls out of IEEE comparison.
func compareDoubles(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case a == b:
		return 0
	case a != a:
		if b != b {
			return 0
		}
		return -1
	}
	return 1
}

// compareLongDouble compares an int64 and a float64 exactly. Converting the int64 to float64
// would round (2^53+1 == 2^53 as doubles), so instead compare against floor(d), which is an
// exactly representable integer, and use the fractional part to break ties.
func compareLongDouble(l int64, d float64) int {
	switch {
	case d != d:
		return 1 // NaN is below every number
	case d >= 1<<63: // also +Inf
		return -1
	case d < -(1 << 63): // also -Inf
		return 1
	}
	f := math.Floor(d)
	fi := int64(f) // exact: f is integral and in [-2^63, 2^63)
	switch {
	case l < fi:
		return -1
	case l > fi:
		return 1
	case d > f:
		return -1
	}
	return 0
}

// decimal128 number classes.
const (
	decFinite = iota
	decInf
	decNaN
)

// dec128 is a decoded IEEE 754-2008 BID decimal128.
type dec128 struct {
	kind     int
	neg      bool
	hi, lo   uint64 // coefficient, at most 10^34-1 (non-canonical coefficients decode as 0)
	exponent int32
}

// decodeDecimal decodes the 16 bytes of a decimal128 (low word first, little endian).
func decodeDecimal(d []byte) (dec128, bool) {
	if len(d) < 16 {
		return dec128{}, false
	}
	lo := binary.LittleEndian.Uint64(d)
	hi := binary.LittleEndian.Uint64(d[8:])
	r := dec128{neg: hi>>63 == 1}
	switch comb := (hi >> 58) & 0x1f; {
	case comb == 0x1f:
		r.kind = decNaN // quiet or signalling, any sign: all NaNs are equal
		return r, true
	case comb == 0x1e:
		r.kind = decInf
		return r, true
	case (hi>>61)&3 == 3:
		// The "11" combination form implies a coefficient >= 2^113 > 10^34-1, which is
		// non-canonical and therefore zero, as in the Intel library MongoDB uses.
		r.exponent = int32((hi>>47)&0x3fff) - 6176
		return r, true
	}
	r.exponent = int32((hi>>49)&0x3fff) - 6176
	r.hi, r.lo = hi&(1<<49-1), lo
	// 10^34-1 = 0x1ed09bead87c0_378d8e63ffffffff
	const maxHi, maxLo = 0x1ed09bead87c0, 0x378d8e63ffffffff
	if r.hi > maxHi || (r.hi == maxHi && r.lo > maxLo) {
		r.hi, r.lo = 0, 0
	}
	return r, true
}

// toApd sets x to the finite value or infinity d (not NaN).
func (d dec128) toApd(x *apd.Decimal) {
	x.Negative = d.neg
	if d.kind == decInf {
		x.Form = apd.Infinite
		return
	}
	x.Form = apd.Finite
	x.Exponent = d.exponent
	if d.hi == 0 {
		x.Coeff.SetUint64(d.lo)
		return
	}
	var lo apd.BigInt
	lo.SetUint64(d.lo)
	x.Coeff.SetUint64(d.hi)
	x.Coeff.Lsh(&x.Coeff, 64)
	x.Coeff.Or(&x.Coeff, &lo)
}

// numToApd converts a numeric value to an exact apd.Decimal. isNaN reports NaN (x untouched).
// Data has been length-checked by the caller.
func numToApd(t bsoncore.Type, d []byte, x *apd.Decimal) (isNaN bool) {
	switch t {
	case bsoncore.TypeInt32, bsoncore.TypeInt64:
		x.SetInt64(readInt(t, d))
	case bsoncore.TypeDouble:
		return float64ToApdExact(readDouble(d), x)
	default:
		dd, _ := decodeDecimal(d)
		if dd.kind == decNaN {
			return true
		}
		dd.toApd(x)
	}
	return false
}

// float64ToApdExact sets x to exactly f. apd's SetFloat64 goes through the shortest decimal
// string, which is not the double's exact value (0.1 would equal NumberDecimal("0.1")).
// f = m * 2^e; for e < 0 that is m*5^-e / 10^-e, an exact decimal.
func float64ToApdExact(f float64, x *apd.Decimal) (isNaN bool) {
	switch {
	case f != f:
		return true
	case math.IsInf(f, 0):
		*x = apd.Decimal{Form: apd.Infinite, Negative: f < 0}
		return false
	}
	x.Form = apd.Finite
	x.Negative = math.Signbit(f)
	frac, exp := math.Frexp(math.Abs(f))
	// frac in [0.5, 1): scale to a 53-bit integer mantissa.
	m := uint64(math.Ldexp(frac, 53))
	exp -= 53
	if m == 0 {
		x.Coeff.SetUint64(0)
		x.Exponent = 0
		return false
	}
	// Drop trailing zero bits so small integers stay small.
	for m&1 == 0 && exp < 0 {
		m >>= 1
		exp++
	}
	x.Coeff.SetUint64(m)
	if exp >= 0 {
		x.Coeff.Lsh(&x.Coeff, uint(exp))
		x.Exponent = 0
		return false
	}
	var p big.Int
	p.Exp(big.NewInt(5), big.NewInt(int64(-exp)), nil)
	var pb apd.BigInt
	pb.SetMathBigInt(&p)
	x.Coeff.Mul(&x.Coeff, &pb)
	x.Exponent = int32(exp)
	return false
}

// compareWithDecimal compares two numbers at least one of which is a decimal128.
func compareWithDecimal(at bsoncore.Type, ad []byte, bt bsoncore.Type, bd []byte) int {
	var x, y apd.Decimal
	nanA, nanB := numToApd(at, ad, &x), numToApd(bt, bd, &y)
	switch {
	case nanA && nanB:
		return 0
	case nanA:
		return -1
	case nanB:
		return 1
	}
	return x.Cmp(&y)
}
