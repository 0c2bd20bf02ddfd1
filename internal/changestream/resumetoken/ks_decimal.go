package resumetoken

import (
	"encoding/binary"
	"math"
	"math/big"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// KeyString V1's decimal128 encoding (key_string.cpp's _appendNumberDecimal and the decimal
// branches of toBsonValue). A decimal is stored as the double it truncates to, followed, when
// that double does not say enough, by a "decimal continuation": 8 more bytes holding the
// difference between the decimal and the double rounded to 34 digits. The low 6 bits of the
// exponent go to the type bits so that 1.0 and 1.00 decode as written.
//
// MongoDB does this arithmetic with the Intel decimal library; here it is exact big-integer
// arithmetic rounded the same way (every rounding MongoDB uses here is directed, so rounding
// twice, as the library sometimes does, gives the same result as rounding once).

// decimal128 is a decimal128 in its IEEE 754-2008 BID bits.
type decimal128 struct{ hi, lo uint64 }

var decimalPositiveNaN = decimal128{hi: 0x7c00000000000000}

const (
	decimalSignBit    = uint64(1) << 63
	decimalMinExp     = -6176 // of the coefficient (biased 0)
	decimalMaxExp     = 6111  // of the coefficient (biased 12287)
	decimalMaxDigits  = 34
	decimalCombInf    = 0x1e
	decimalCombNaN    = 0x1f
	decimalExpShift   = 49
	decimalExpShift11 = 47
)

func decimalFromBSON(d []byte) decimal128 {
	return decimal128{lo: binary.LittleEndian.Uint64(d), hi: binary.LittleEndian.Uint64(d[8:])}
}

func decimalValue(d decimal128) bsoncore.Value {
	var p [16]byte
	binary.LittleEndian.PutUint64(p[:], d.lo)
	binary.LittleEndian.PutUint64(p[8:], d.hi)
	return bsoncore.Value{Type: bsoncore.TypeDecimal128, Data: p[:]}
}

// makeDecimal builds a decimal from sign, biased exponent and a coefficient below 2^113.
func makeDecimal(negative bool, biasedExp uint32, chi, clo uint64) decimal128 {
	d := decimal128{hi: uint64(biasedExp)<<decimalExpShift | chi&(1<<49-1), lo: clo}
	if negative {
		d.hi |= decimalSignBit
	}
	return d
}

func (d decimal128) negative() bool { return d.hi&decimalSignBit != 0 }
func (d decimal128) negate() decimal128 {
	d.hi ^= decimalSignBit
	return d
}
func (d decimal128) comb() uint64   { return (d.hi >> 58) & 0x1f }
func (d decimal128) isNaN() bool    { return d.comb() == decimalCombNaN }
func (d decimal128) isInf() bool    { return d.comb() == decimalCombInf }
func (d decimal128) isFinite() bool { return !d.isNaN() && !d.isInf() }

// biasedExponent is the stored exponent of a finite decimal.
func (d decimal128) biasedExponent() uint32 {
	if (d.hi>>61)&3 == 3 {
		return uint32((d.hi >> decimalExpShift11) & 0x3fff)
	}
	return uint32((d.hi >> decimalExpShift) & 0x3fff)
}

// coefficient returns the coefficient of a finite decimal; non-canonical ones (at least
// 10^34, or in the "11" combination form) are zero, as in the Intel library.
func (d decimal128) coefficient() (hi, lo uint64) {
	if (d.hi>>61)&3 == 3 {
		return 0, 0
	}
	hi, lo = d.hi&(1<<49-1), d.lo
	const maxHi, maxLo = 0x1ed09bead87c0, 0x378d8e63ffffffff // 10^34-1
	if hi > maxHi || hi == maxHi && lo > maxLo {
		return 0, 0
	}
	return hi, lo
}

func (d decimal128) isZero() bool {
	hi, lo := d.coefficient()
	return d.isFinite() && hi == 0 && lo == 0
}

// dec is an exact finite decimal: (-1)^neg * c * 10^e.
type dec struct {
	neg bool
	c   *big.Int
	e   int
}

func (d decimal128) toDec() dec {
	hi, lo := d.coefficient()
	c := new(big.Int).SetUint64(hi)
	c.Lsh(c, 64)
	c.Or(c, new(big.Int).SetUint64(lo))
	return dec{neg: d.negative(), c: c, e: int(d.biasedExponent()) + decimalMinExp}
}

// toDecimal128 encodes x, whose coefficient has at most 34 digits, clamping an exponent above
// the largest by padding the coefficient with zeros (IEEE's clamp).
func (x dec) toDecimal128() decimal128 {
	c, e := new(big.Int).Set(x.c), x.e
	for e > decimalMaxExp && numDigits(c) < decimalMaxDigits {
		c.Mul(c, big.NewInt(10))
		e--
	}
	lo := new(big.Int).And(c, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	hi := new(big.Int).Rsh(c, 64).Uint64()
	return makeDecimal(x.neg, uint32(e-decimalMinExp), hi, lo)
}

var bigTen = big.NewInt(10)

func pow10(n int) *big.Int { return new(big.Int).Exp(bigTen, big.NewInt(int64(n)), nil) }

func numDigits(c *big.Int) int {
	if c.Sign() == 0 {
		return 1
	}
	n := int(float64(c.BitLen()) * 0.30102999566398114)
	if n < 1 {
		n = 1
	}
	for c.CmpAbs(pow10(n-1)) < 0 {
		n--
	}
	for c.CmpAbs(pow10(n)) >= 0 {
		n++
	}
	return n
}

type roundingMode int

const (
	roundTowardZero roundingMode = iota
	roundTowardPositive
	roundTowardNegative
)

func awayFromZero(negative bool) roundingMode {
	if negative {
		return roundTowardNegative
	}
	return roundTowardPositive
}

// round rounds x to at most digits significant digits, reporting whether it was inexact.
func (x dec) round(digits int, mode roundingMode) (dec, bool) {
	n := numDigits(x.c)
	if n <= digits {
		return x, false
	}
	k := n - digits
	q, r := new(big.Int).QuoRem(x.c, pow10(k), new(big.Int))
	inexact := r.Sign() != 0
	if inexact && (mode == roundTowardPositive && !x.neg || mode == roundTowardNegative && x.neg) {
		q.Add(q, big.NewInt(1))
		if numDigits(q) > digits {
			q.Quo(q, bigTen)
			k++
		}
	}
	return dec{neg: x.neg, c: q, e: x.e + k}, inexact
}

// normalize pads the coefficient to 34 digits, not going below the smallest exponent
// (Decimal128::normalize).
func (x dec) normalize() dec {
	if x.c.Sign() == 0 {
		return x
	}
	shift := decimalMaxDigits - numDigits(x.c)
	if x.e-shift < decimalMinExp {
		shift = x.e - decimalMinExp
	}
	if shift <= 0 {
		return x
	}
	return dec{neg: x.neg, c: new(big.Int).Mul(x.c, pow10(shift)), e: x.e - shift}
}

// rat returns x as an exact rational.
func (x dec) rat() *big.Rat {
	r := new(big.Rat)
	if x.e >= 0 {
		r.SetInt(new(big.Int).Mul(x.c, pow10(x.e)))
	} else {
		r.SetFrac(x.c, pow10(-x.e))
	}
	if x.neg {
		r.Neg(r)
	}
	return r
}

func (x dec) cmp(y dec) int { return x.rat().Cmp(y.rat()) }

// decFromFloat returns f (finite) exactly.
func decFromFloat(f float64) dec {
	neg := math.Signbit(f)
	frac, exp := math.Frexp(math.Abs(f))
	m := uint64(math.Ldexp(frac, 53))
	exp -= 53
	c := new(big.Int).SetUint64(m)
	if m == 0 {
		return dec{neg: neg, c: c}
	}
	for m&1 == 0 && exp < 0 {
		m >>= 1
		exp++
	}
	c.SetUint64(m)
	if exp >= 0 {
		return dec{neg: neg, c: c.Lsh(c, uint(exp))}
	}
	c.Mul(c, new(big.Int).Exp(big.NewInt(5), big.NewInt(int64(-exp)), nil))
	return dec{neg: neg, c: c, e: exp}
}

// decimalFromDouble is Decimal128(double, kRoundTo34Digits or kRoundTo15Digits, mode): f
// rounded to digits significant digits; with 15 digits the coefficient has exactly 15.
func decimalFromDouble(f float64, digits int, mode roundingMode) decimal128 {
	switch {
	case math.IsNaN(f):
		return decimalPositiveNaN
	case math.IsInf(f, 0):
		d := decimal128{hi: 0x7800000000000000}
		if f < 0 {
			d = d.negate()
		}
		return d
	}
	x, _ := decFromFloat(f).round(digits, mode)
	if digits == 15 && x.c.Sign() != 0 {
		if n := numDigits(x.c); n < 15 {
			x = dec{neg: x.neg, c: new(big.Int).Mul(x.c, pow10(15-n)), e: x.e - (15 - n)}
		}
	}
	return x.toDecimal128()
}

func decimalFromInt64(i int64) decimal128 {
	neg := i < 0
	u := uint64(i)
	if neg {
		u = -u
	}
	return makeDecimal(neg, uint32(-decimalMinExp), 0, u)
}

// multiply returns d*o rounded to 34 digits.
func (d decimal128) multiply(o decimal128, mode roundingMode) decimal128 {
	x, y := d.toDec(), o.toDec()
	p := dec{neg: x.neg != y.neg, c: new(big.Int).Mul(x.c, y.c), e: x.e + y.e}
	p, _ = p.round(decimalMaxDigits, mode)
	return p.toDecimal128()
}

// The 34-digit underestimates of 2^256 and 2^-256 MongoDB scales tiny decimals by.
func tinyDoubleExponentUpshiftFactorAsDecimal() decimal128 {
	return decimalFromDouble(kTinyDoubleExponentUpshift, 34, roundTowardZero)
}

func tinyDoubleExponentDownshiftFactorAsDecimal() decimal128 {
	return decimalFromDouble(kTinyDoubleExponentDownshft, 34, roundTowardZero)
}

// toDoubleTowardZero converts x to the double it truncates to, reporting whether that was
// inexact and whether x was beyond the largest double (then the result is ±MaxFloat64).
func (x dec) toDoubleTowardZero() (f float64, inexact, overflow bool) {
	if x.c.Sign() == 0 {
		if x.neg {
			return math.Copysign(0, -1), false, false
		}
		return 0, false, false
	}
	num := new(big.Int).Set(x.c)
	den := big.NewInt(1)
	if x.e >= 0 {
		num.Mul(num, pow10(x.e))
	} else {
		den = pow10(-x.e)
	}
	// Find s with floor(num*2^s/den) of exactly 53 bits, or s = 1074 (subnormals).
	s := 53 - (num.BitLen() - den.BitLen())
	var q, r big.Int
	quo := func(s int) {
		if s >= 0 {
			q.QuoRem(new(big.Int).Lsh(num, uint(s)), den, &r)
		} else {
			q.QuoRem(num, new(big.Int).Lsh(den, uint(-s)), &r)
		}
	}
	for {
		if s > 1074 {
			s = 1074
		}
		quo(s)
		if q.BitLen() > 53 {
			s--
			continue
		}
		if q.BitLen() < 53 && s < 1074 {
			s++
			continue
		}
		break
	}
	inexact = r.Sign() != 0
	if q.BitLen()-s > 1024 {
		f, inexact, overflow = math.MaxFloat64, true, true
	} else {
		f = math.Ldexp(float64(q.Uint64()), -s)
	}
	if x.neg {
		f = -f
	}
	return f, inexact, overflow
}

// appendDecimal encodes a decimal128 with its type bits (_appendNumberDecimal).
func (b *ksBuilder) appendDecimal(d decimal128) {
	negative := d.negative()
	switch {
	case d.isNaN():
		b.appendByte(ctNumericNaN, false)
		b.tb.appendNumeric(tbDecimal)
		return
	case d.isInf():
		if negative {
			b.appendByte(ctNumericNegLargeMagnitude, false)
		} else {
			b.appendByte(ctNumericPosLargeMagnitude, false)
		}
		b.appendU64(^uint64(0), negative)
		b.tb.appendNumeric(tbDecimal)
		return
	case d.isZero():
		zeroExp := d.biasedExponent()
		if zeroExp > decimalMaxBiasedExponent {
			zeroExp = decimalMaxBiasedExponent // non-canonical: no such zero in the encoding
		}
		if negative {
			zeroExp += decimalMaxBiasedExponent + 1
		}
		b.tb.appendDecimalZero(zeroExp)
		b.appendByte(ctNumericZero, false)
		return
	}
	exp := d.biasedExponent()
	b.tb.appendNumeric(tbDecimal)
	b.tb.appendBits(exp&storedDecimalExponentMask, storedDecimalExponentBits)

	x := d.toDec()
	bin, inexact, overflow := x.toDoubleTowardZero()
	if !inexact && !overflow {
		// The decimal is a double (1, 1.5, ...).
		b.appendDoubleWithoutTypeBits(bin, dcmEqualToDouble)
		return
	}
	absBin := math.Abs(bin)
	if absBin < 0x1p-1022 {
		b.appendTinyDecimal(x, bin)
		return
	}
	if absBin >= math.MaxFloat64 {
		b.appendHugeDecimal(x)
		return
	}
	away := awayFromZero(negative)
	var stored dec
	switch {
	case absBin >= kMinLargeDouble:
		// Only one DCM bit here: any inexact decimal needs a continuation.
		b.appendLargeDouble(bin, dcmHasContinuationLargerThanDouble)
		stored, _ = decFromFloat(bin).round(34, away)
	case absBin < kTiniestDoubleWith2BitDCM:
		b.appendSmallDouble(bin, dcmHasContinuationLargerThanDouble)
		stored, _ = decFromFloat(bin).round(34, away)
	case absBin >= kMaxIntForDouble:
		// The double may have lost integer digits: store the integer part exactly.
		ip, hasFraction := dec{neg: x.neg, c: x.c, e: x.e}.truncateToInteger()
		integerPart := ip.Uint64()
		preshifted := integerPart << 1
		if hasFraction {
			preshifted |= 1
		}
		b.appendPreshiftedIntegerPortion(preshifted, negative)
		if !hasFraction {
			return
		}
		if integerPart < 1<<55 {
			// The 7 integer bytes already hold 53 bits of coefficient: a byte for the DCM.
			b.appendByte(dcmHasContinuationLargerThanDouble, negative)
		}
		stored = dec{neg: negative, c: new(big.Int).SetUint64(integerPart)}
	default:
		chi, clo := d.coefficient()
		if chi == 0 && clo < 1e15 {
			// At most 15 digits: the double rounded up to 15 digits is the decimal.
			b.appendDoubleWithoutTypeBits(bin, dcmEqualToDoubleRoundedUpTo15Digits)
			return
		}
		fromBin := decimalFromDouble(bin, 15, away).toDec()
		c := x.cmp(fromBin)
		if c == 0 {
			b.appendDoubleWithoutTypeBits(bin, dcmEqualToDoubleRoundedUpTo15Digits)
			return
		}
		dcm := dcmHasContinuationLargerThanDouble
		if (c < 0) != negative {
			dcm = dcmHasContinuationLessThanDoubleRounded15
		}
		b.appendDoubleWithoutTypeBits(bin, dcm)
		stored, _ = decFromFloat(bin).round(34, away)
	}
	b.appendU64(continuation(x, stored.normalize()), negative)
}

// truncateToInteger returns |x| without its fraction and whether it had one.
func (x dec) truncateToInteger() (*big.Int, bool) {
	if x.e >= 0 {
		return new(big.Int).Mul(x.c, pow10(x.e)), false
	}
	q, r := new(big.Int).QuoRem(x.c, pow10(-x.e), new(big.Int))
	return q, r.Sign() != 0
}

// continuation is the coefficient of |x| - |stored| at stored's exponent: what the decoder
// adds back to the normalized stored value.
func continuation(x, stored dec) uint64 {
	diff := new(big.Rat).Sub(new(big.Rat).Abs(x.rat()), new(big.Rat).Abs(stored.rat()))
	scale := new(big.Rat)
	if stored.e >= 0 {
		scale.SetInt(pow10(stored.e))
	} else {
		scale.SetFrac(big.NewInt(1), pow10(-stored.e))
	}
	diff.Quo(diff, scale)
	return new(big.Int).Quo(diff.Num(), diff.Denom()).Uint64()
}

// appendTinyDecimal encodes a decimal below the smallest normal double in magnitude
// (_appendTinyDecimalWithoutTypeBits).
func (b *ksBuilder) appendTinyDecimal(x dec, bin float64) {
	negative := x.neg
	mag := dec{c: x.c, e: x.e}
	if negative {
		b.appendByte(ctNumericNegSmallMagnitude, false)
	} else {
		b.appendByte(ctNumericPosSmallMagnitude, false)
	}
	if bin == 0 {
		// Below the smallest subnormal: the normalized decimal itself.
		n := mag.normalize().toDecimal128()
		b.appendU64(n.hi, negative)
		b.appendU64(n.lo, negative)
		return
	}
	scaledDec := mag.toDecimal128().multiply(tinyDoubleExponentUpshiftFactorAsDecimal(), roundTowardZero)
	scaledBin, _, _ := scaledDec.toDec().toDoubleTowardZero()
	scaledBin = math.Max(scaledBin, math.Abs(bin)*kTinyDoubleExponentUpshift)
	encoded := math.Float64bits(scaledBin)<<1 | 1 // never equal to a double
	encoded += 1 << 62
	b.appendU64(encoded, negative)
	stored := decimalFromDouble(scaledBin, 34, roundTowardZero).
		multiply(tinyDoubleExponentDownshiftFactorAsDecimal(), roundTowardZero).toDec()
	b.appendU64(continuation(mag, stored.normalize()), negative)
}

// appendHugeDecimal encodes a decimal beyond the largest double: the normalized magnitude
// with its high bit set, between the largest double and infinity.
func (b *ksBuilder) appendHugeDecimal(x dec) {
	negative := x.neg
	n := dec{c: x.c, e: x.e}.normalize().toDecimal128()
	if negative {
		b.appendByte(ctNumericNegLargeMagnitude, false)
	} else {
		b.appendByte(ctNumericPosLargeMagnitude, false)
	}
	b.appendU64(n.hi|1<<63, negative)
	b.appendU64(n.lo, negative)
}

// readDecimalContinuation adds the 8-byte continuation to num normalized to 34 digits.
func readDecimalContinuation(r *ksReader, inverted bool, num decimal128) (decimal128, error) {
	c, err := r.readU64(inverted)
	if err != nil {
		return decimal128{}, err
	}
	x := num.toDec().normalize()
	sum := dec{neg: x.neg, c: new(big.Int).Add(x.c, new(big.Int).SetUint64(c)), e: x.e}
	sum, inexact := sum.round(decimalMaxDigits, roundTowardZero)
	if inexact {
		return decimal128{}, ksErr(mongoerr.Location50815, "Unexpected inexact flag set after Decimal addition.")
	}
	return sum.toDecimal128(), nil
}

// adjustDecimalExponent gives num (non-zero) the exponent whose low 6 bits the type bits hold,
// scaling its coefficient exactly.
func adjustDecimalExponent(tb *typeBitsReader, num decimal128) (decimal128, error) {
	const maxExpAdjust, maxExpIncrementForZeroHighCoefficient = 33, 19
	if num.isZero() {
		return decimal128{}, ksErr(mongoerr.Location50829, "Expected non-zero number for decimal.")
	}
	origExp := num.biasedExponent()
	stored, err := tb.readBits(storedDecimalExponentBits)
	if err != nil {
		return decimal128{}, err
	}
	highExp := origExp&^storedDecimalExponentMask | stored
	if highExp < origExp {
		highExp += 1 << storedDecimalExponentBits
	}
	if highExp == origExp {
		return num, nil
	}
	x := num.toDec()
	chi, _ := num.coefficient()
	var out dec
	if highExp <= origExp+maxExpAdjust && (chi != 0 || highExp <= origExp+maxExpIncrementForZeroHighCoefficient) {
		if highExp > decimalMaxBiasedExponent {
			return decimal128{}, ksErr(mongoerr.Location50845, "Unexpected exponent values after adjusting Decimal.")
		}
		k := int(highExp - origExp)
		q, r := new(big.Int).QuoRem(x.c, pow10(k), new(big.Int))
		if r.Sign() != 0 {
			return decimal128{}, ksErr(mongoerr.Location50813, "Unexpected signaling flag for Decimal quantization.")
		}
		out = dec{neg: x.neg, c: q, e: x.e + k}
	} else {
		lowExp := highExp - 1<<storedDecimalExponentBits // uint32: wraps as MongoDB's does
		if !(lowExp >= origExp-maxExpAdjust && lowExp <= decimalMaxBiasedExponent) {
			return decimal128{}, ksErr(mongoerr.Location50814, "Unexpected exponent values after adjusting Decimal.")
		}
		// num + 0E(lowExp): the smaller exponent, as far as 34 digits allow.
		shift := int(origExp) - int(lowExp)
		if room := decimalMaxDigits - numDigits(x.c); shift > room {
			shift = room
		}
		if shift < 0 {
			shift = 0
		}
		out = dec{neg: x.neg, c: new(big.Int).Mul(x.c, pow10(shift)), e: x.e - shift}
	}
	res := out.toDecimal128()
	if res.biasedExponent()&storedDecimalExponentMask != highExp&storedDecimalExponentMask {
		return decimal128{}, ksErr(mongoerr.Location50830, "Unexpected biased exponent in decimal.")
	}
	return res, nil
}
