package keystring

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Numbers of all four BSON types share one encoding of their exact mathematical value; see the
// "Numbers" section of doc.go for the layout and why it is order-preserving.

// contLen is the length of a decimal continuation: a 2-byte biased exponent and a 15-byte
// coefficient normalized to 34 digits.
const contLen = 17

// contExpBias keeps the normalized exponent (>= -6176-33) positive in the uint16.
const contExpBias = 6400

// Decimal128 field limits.
const (
	decExpBias = 6176
	decMaxExp  = 6111
	decMinExp  = -6176
)

func (b *Builder) appendNumber(t bsoncore.Type, d []byte) error {
	switch t {
	case bsoncore.TypeDouble:
		if len(d) < 8 {
			return malformed(t)
		}
		b.appendDouble(binary.LittleEndian.Uint64(d))
	case bsoncore.TypeInt32:
		if len(d) < 4 {
			return malformed(t)
		}
		b.appendTypeBits(tbInt32, nil)
		b.appendInt(int64(int32(binary.LittleEndian.Uint32(d))))
	case bsoncore.TypeInt64:
		if len(d) < 8 {
			return malformed(t)
		}
		b.appendTypeBits(tbInt64, nil)
		b.appendInt(int64(binary.LittleEndian.Uint64(d)))
	case bsoncore.TypeDecimal128:
		if len(d) < 16 {
			return malformed(t)
		}
		// The key holds the value; the exact representation (cohort member such as 42.00, the
		// sign and exponent of a zero, NaN payloads, non-canonical encodings) is in TypeBits.
		b.appendTypeBits(tbDecimal, d[:16])
		b.appendDecimal(binary.LittleEndian.Uint64(d[8:]), binary.LittleEndian.Uint64(d))
	}
	return nil
}

func (b *Builder) appendDouble(fb uint64) {
	f := math.Float64frombits(fb)
	switch {
	case f != f:
		b.buf = append(b.buf, ctNumNaN)
		if fb == canonicalNaN {
			b.appendTypeBits(tbDouble, nil)
		} else {
			var raw [8]byte
			binary.LittleEndian.PutUint64(raw[:], fb)
			b.appendTypeBits(tbDoubleBits, raw[:])
		}
	case f == 0:
		b.buf = append(b.buf, ctNumZero)
		if fb>>63 != 0 {
			b.appendTypeBits(tbNegZero, nil)
		} else {
			b.appendTypeBits(tbDouble, nil)
		}
	default:
		b.appendTypeBits(tbDouble, nil)
		neg, a := f < 0, math.Abs(f)
		switch {
		case a < 1:
			b.writeSmallLarge(neg, false, math.Float64bits(a), nil)
		case a < 1<<63:
			i := uint64(a)
			frac := a - float64(i) // exact: a and i share their high bits
			if frac == 0 {
				b.writeIntRange(neg, i, false, 0, nil)
				return
			}
			n := intRangeLen(i, true)
			// Exact: a double >= 1 has at most 61-8n fractional bits (see doc.go).
			w := uint64(math.Ldexp(frac, fracBits(n)))
			b.writeIntRange(neg, i, true, w, nil)
		default:
			b.writeSmallLarge(neg, true, math.Float64bits(a), nil)
		}
	}
}

func (b *Builder) appendInt(i int64) {
	switch {
	case i == 0:
		b.buf = append(b.buf, ctNumZero)
	case i == math.MinInt64:
		// |i| = 2^63 is outside the integer range; it is the double -2^63 exactly.
		b.writeSmallLarge(true, true, math.Float64bits(1<<63), nil)
	case i < 0:
		b.writeIntRange(true, uint64(-i), false, 0, nil)
	default:
		b.writeIntRange(false, uint64(i), false, 0, nil)
	}
}

// intRangeLen is the number of bytes (1..8) of the integer word i<<1|hasFrac, for 1 <= i < 2^63.
func intRangeLen(i uint64, hasFrac bool) int {
	v := i << 1
	if hasFrac {
		v |= 1
	}
	return (bits.Len64(v) + 7) / 8
}

// fracBits is the number of fraction bits stored after an n-byte integer word: the fraction
// takes the remaining 8-n bytes of a 64-bit total, less the continuation flag bit.
func fracBits(n int) int { return 8*(8-n) - 1 }

// writeIntRange writes a number with magnitude in [1, 2^63): CType by integer word length, the
// word i<<1|hasFrac, then (if hasFrac and n < 8) the fraction word frac<<1|hasCont in 8-n
// bytes, then the continuation. With n == 8 a fraction cannot be a double's, so hasFrac implies
// a continuation there. Negative numbers have their magnitude bytes inverted.
func (b *Builder) writeIntRange(neg bool, i uint64, hasFrac bool, frac uint64, cont []byte) {
	v := i << 1
	if hasFrac {
		v |= 1
	}
	n := (bits.Len64(v) + 7) / 8
	if neg {
		b.buf = append(b.buf, byte(ctNumNegSmall-n))
	} else {
		b.buf = append(b.buf, byte(ctNumPosSmall+n))
	}
	start := len(b.buf)
	b.buf = appendUintN(b.buf, v, n)
	if hasFrac {
		if n < 8 {
			w := frac << 1
			if cont != nil {
				w |= 1
			}
			b.buf = appendUintN(b.buf, w, 8-n)
		}
		b.buf = append(b.buf, cont...)
	}
	if neg {
		invert(b.buf[start:])
	}
}

// writeSmallLarge writes a number with magnitude in (0, 1) (large false) or >= 2^63 (large
// true) as the IEEE bits of the double d <= |x| nearest |x| (the top bit is always clear, so it
// is shifted out to make room for the continuation flag), then the continuation.
func (b *Builder) writeSmallLarge(neg, large bool, dbits uint64, cont []byte) {
	var ct byte
	switch {
	case large && neg:
		ct = ctNumNegLarg
	case large:
		ct = ctNumPosLarge
	case neg:
		ct = ctNumNegSmall
	default:
		ct = ctNumPosSmall
	}
	b.buf = append(b.buf, ct)
	start := len(b.buf)
	w := dbits << 1
	if cont != nil {
		w |= 1
	}
	b.buf = binary.BigEndian.AppendUint64(b.buf, w)
	b.buf = append(b.buf, cont...)
	if neg {
		invert(b.buf[start:])
	}
}

// appendUintN appends the low n bytes of v big-endian.
func appendUintN(dst []byte, v uint64, n int) []byte {
	for s := 8 * (n - 1); s >= 0; s -= 8 {
		dst = append(dst, byte(v>>uint(s)))
	}
	return dst
}

// decimalParts decodes a BID decimal128: kind, sign, coefficient (hi 49 bits, lo) and unbiased
// exponent. Non-canonical coefficients (> 10^34-1, including the "11" combination form) are
// zero, as in IEEE 754-2008 and bsonutil.
func decimalParts(hi, lo uint64) (kind int, neg bool, chi, clo uint64, exp int) {
	neg = hi>>63 != 0
	switch comb := (hi >> 58) & 0x1f; {
	case comb == 0x1f:
		return decKindNaN, neg, 0, 0, 0
	case comb == 0x1e:
		return decKindInf, neg, 0, 0, 0
	case (hi>>61)&3 == 3:
		return decKindFinite, neg, 0, 0, int((hi>>47)&0x3fff) - decExpBias
	}
	exp = int((hi>>49)&0x3fff) - decExpBias
	chi, clo = hi&(1<<49-1), lo
	const maxHi, maxLo = 0x1ed09bead87c0, 0x378d8e63ffffffff // 10^34-1
	if chi > maxHi || (chi == maxHi && clo > maxLo) {
		chi, clo = 0, 0
	}
	return decKindFinite, neg, chi, clo, exp
}

const (
	decKindFinite = iota
	decKindInf
	decKindNaN
)

// appendDecimal writes the key of a decimal128. Finite non-zero decimals go through math/big
// (they are rare in keys; this is the only allocating path of the encoder).
func (b *Builder) appendDecimal(hi, lo uint64) {
	kind, neg, chi, clo, exp := decimalParts(hi, lo)
	switch {
	case kind == decKindNaN:
		b.buf = append(b.buf, ctNumNaN)
		return
	case kind == decKindInf:
		b.writeSmallLarge(neg, true, math.Float64bits(math.Inf(1)), nil)
		return
	case chi == 0 && clo == 0:
		b.buf = append(b.buf, ctNumZero)
		return
	}
	// Fast path: integer coefficient with a non-negative exponent that stays below 2^63.
	if chi == 0 && exp >= 0 && exp <= 18 {
		p := pow10u64[exp]
		if h, l := bits.Mul64(clo, p); h == 0 && l < 1<<63 {
			b.writeIntRange(neg, l, false, 0, nil)
			return
		}
	}
	// Fast path: a 64-bit coefficient with up to 19 fractional digits and an integer part >= 1.
	if chi == 0 && exp < 0 && exp >= -19 {
		p := pow10u64[-exp]
		if i, rem := clo/p, clo%p; i > 0 {
			if rem == 0 {
				b.writeIntRange(neg, i, false, 0, nil)
				return
			}
			n := intRangeLen(i, true)
			if n == 8 {
				b.writeIntRange(neg, i, true, 0, contBytes(chi, clo, exp))
				return
			}
			// rem < p, so the high word of rem*2^fracBits is below p and Div64 cannot overflow.
			h, l := bits.Mul64(rem, 1<<uint(fracBits(n)))
			f, r := bits.Div64(h, l, p)
			b.writeIntRange(neg, i, true, f, contIf(r != 0, chi, clo, exp))
			return
		}
	}
	var c, num, den big.Int
	c.SetUint64(chi)
	c.Lsh(&c, 64)
	c.Or(&c, new(big.Int).SetUint64(clo))
	num.Set(&c)
	den.SetInt64(1)
	if exp >= 0 {
		num.Mul(&num, pow10(exp))
	} else {
		den.Set(pow10(-exp))
	}
	var ip, rem big.Int
	ip.QuoRem(&num, &den, &rem)
	switch {
	case ip.Sign() == 0:
		d, exact := truncToDouble(&num, &den)
		b.writeSmallLarge(neg, false, math.Float64bits(d), contIf(!exact, chi, clo, exp))
	case ip.IsUint64() && ip.Uint64() < 1<<63:
		i := ip.Uint64()
		if rem.Sign() == 0 {
			b.writeIntRange(neg, i, false, 0, nil)
			return
		}
		n := intRangeLen(i, true)
		if n == 8 {
			b.writeIntRange(neg, i, true, 0, contBytes(chi, clo, exp))
			return
		}
		var f, r2 big.Int
		f.Lsh(&rem, uint(fracBits(n)))
		f.QuoRem(&f, &den, &r2)
		b.writeIntRange(neg, i, true, f.Uint64(), contIf(r2.Sign() != 0, chi, clo, exp))
	default:
		d, exact := truncToDouble(&num, &den)
		b.writeSmallLarge(neg, true, math.Float64bits(d), contIf(!exact, chi, clo, exp))
	}
}

// contIf returns the continuation of the decimal (chi:clo) * 10^exp when cond holds.
func contIf(cond bool, chi, clo uint64, exp int) []byte {
	if !cond {
		return nil
	}
	return contBytes(chi, clo, exp)
}

// contBytes is the continuation of a decimal that is not exactly the value its key prefix
// stands for: its exact value as a coefficient normalized to 34 digits and the matching
// exponent, which orders every decimal sharing that prefix (and gives cohort members one key).
func contBytes(chi, clo uint64, exp int) []byte {
	// Multiply by 10 until the coefficient has 34 digits (>= 10^33); it stays < 10^34 < 2^113.
	for chi < pow10_33hi || chi == pow10_33hi && clo < pow10_33lo {
		h1, l := bits.Mul64(clo, 10)
		chi, clo = chi*10+h1, l
		exp--
	}
	out := make([]byte, contLen)
	binary.BigEndian.PutUint16(out, uint16(exp+contExpBias))
	for i := 8; i >= 2; i-- { // low 7 bytes of chi
		out[i] = byte(chi)
		chi >>= 8
	}
	binary.BigEndian.PutUint64(out[9:], clo)
	return out
}

// 10^33 as a 128-bit number.
var pow10_33hi, pow10_33lo = func() (hi, lo uint64) {
	lo = 1
	for i := 0; i < 33; i++ {
		h1, l := bits.Mul64(lo, 10)
		hi, lo = hi*10+h1, l
	}
	return hi, lo
}()

// truncToDouble returns the largest double <= num/den (> 0) and whether it is exact. Values
// above MaxFloat64 give MaxFloat64, values below the smallest subnormal give 0.
func truncToDouble(num, den *big.Int) (float64, bool) {
	e := num.BitLen() - den.BitLen()
	// num/den is in (2^(e-1), 2^(e+1)): find E with 2^E <= num/den < 2^(E+1).
	var t big.Int
	if e >= 0 {
		t.Lsh(den, uint(e))
		if num.Cmp(&t) < 0 {
			e--
		}
	} else {
		t.Lsh(num, uint(-e))
		if t.Cmp(den) < 0 {
			e--
		}
	}
	switch {
	case e > 1023:
		return math.MaxFloat64, false
	case e < -1074:
		return 0, false
	}
	p := 53
	if e < -1022 {
		p = e + 1075 // subnormal: fewer mantissa bits
	}
	s := p - 1 - e // m = floor(x * 2^s) has exactly p bits
	var n2, d2, m, r big.Int
	n2.Set(num)
	d2.Set(den)
	if s >= 0 {
		n2.Lsh(&n2, uint(s))
	} else {
		d2.Lsh(&d2, uint(-s))
	}
	m.QuoRem(&n2, &d2, &r)
	return math.Ldexp(float64(m.Uint64()), -s), r.Sign() == 0
}

var pow10u64 = func() (t [20]uint64) {
	t[0] = 1
	for i := 1; i < len(t); i++ {
		t[i] = t[i-1] * 10
	}
	return t
}()

var smallPow10 = func() (t [40]*big.Int) {
	for i := range t {
		t[i] = new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(i)), nil)
	}
	return t
}()

// pow10 returns 10^n (n >= 0); the result must not be modified.
func pow10(n int) *big.Int {
	if n < len(smallPow10) {
		return smallPow10[n]
	}
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}
