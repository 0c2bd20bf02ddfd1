package bsontest

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// RandomValue returns a random BSON value of any type. depth bounds nesting: at depth <= 0
// documents, arrays and code-with-scope scopes are empty. Values are drawn from small pools so
// that random pairs are often equal or nearly equal across types (Int32(42), Int64(42),
// Double(42), Decimal("42.00")), share string prefixes, or sit on numeric edges (2^53+1, 2^63,
// NaN, -0, decimal NaN/Inf/extreme exponents, non-canonical decimals), which is where
// order bugs hide.
func RandomValue(r *rand.Rand, depth int) bsoncore.Value {
	switch k := r.IntN(100); {
	case k < 35:
		return RandomNumber(r)
	case k < 47:
		return String(randString(r))
	case k < 50:
		return Symbol(randString(r))
	case k < 58:
		return Doc(randFields(r, depth)...)
	case k < 66:
		return Arr(randElems(r, depth)...)
	case k < 70:
		return Binary(pick(r, []byte{0x00, 0x02, 0x04, 0x05, 0x80}), randBytes(r, 4))
	case k < 73:
		return ObjectID(randOID(r))
	case k < 76:
		return Bool(r.IntN(2) == 1)
	case k < 79:
		return Date(pick(r, intPool))
	case k < 82:
		return Timestamp(pick(r, u32Pool), pick(r, u32Pool))
	case k < 85:
		return Regex(pick(r, []string{"", "a", "ab", "a.", "b", "\xff", "é"}), pick(r, []string{"", "i", "im", "s"}))
	case k < 87:
		return DBPointer(pick(r, []string{"", "db.c", "db.d"}), randOID(r))
	case k < 89:
		return Code(randString(r))
	case k < 91:
		return CodeWithScope(randString(r), D(randFields(r, depth)...))
	case k < 93:
		return Null()
	case k < 95:
		return Undefined()
	case k < 97:
		return MinKey()
	default:
		return MaxKey()
	}
}

// RandomNumber returns a random int32, int64, double or decimal128, often one equal in value
// to a number of another type.
func RandomNumber(r *rand.Rand) bsoncore.Value {
	switch r.IntN(8) {
	case 0, 1, 2, 3:
		// An integer in any type that can hold it exactly (or a double that rounds it, which
		// is an interesting neighbour too). Half the time from a small hot set, so that two
		// draws are often the same number in different types.
		n := pick(r, intPool)
		if r.IntN(2) == 0 {
			n = pick(r, hotInts)
		}
		switch r.IntN(4) {
		case 0:
			if int64(int32(n)) == n {
				return Int32(int32(n))
			}
			return Int64(n)
		case 1:
			return Int64(n)
		case 2:
			return Double(float64(n))
		default:
			return decimalFromInt(r, n)
		}
	case 4:
		return Double(pick(r, doublePool))
	case 5:
		return Decimal(pick(r, decimalPool))
	case 6:
		// Neighbours of a double: the double itself, its exact decimal expansion, and
		// one unit of the last decimal place either side.
		f := pick(r, doublePool)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return Double(f)
		}
		return Decimal(doubleNeighbour(r, f))
	default:
		hi, lo := pick(r, decimalBitsPool[:]), r.Uint64()
		return DecimalBits(hi, lo)
	}
}

// doubleNeighbour returns a decimal string close to f: f rounded to 34 significant digits
// (decimal128's precision, usually exact), that with its last digit nudged by one, or the
// 17-digit round-trip form (which usually differs from f's exact value).
func doubleNeighbour(r *rand.Rand, f float64) string {
	s := big.NewFloat(f).Text('e', 33)
	switch r.IntN(3) {
	case 0:
		return s
	case 1:
		e := strings.IndexByte(s, 'e')
		b := []byte(s)
		if b[e-1] < '9' {
			b[e-1]++
		} else {
			b[e-1]--
		}
		return string(b)
	}
	return big.NewFloat(f).Text('g', 17)
}

// decimalFromInt writes n as a decimal128 with a random number of trailing fractional zeros
// or a positive exponent, so equal values come in different representations.
func decimalFromInt(r *rand.Rand, n int64) bsoncore.Value {
	bi := big.NewInt(n)
	exp := 0
	switch r.IntN(3) {
	case 0:
		z := r.IntN(5)
		bi.Mul(bi, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(z)), nil))
		exp = -z
	case 1:
		for bi.Sign() != 0 && new(big.Int).Rem(bi, big.NewInt(10)).Sign() == 0 {
			bi.Quo(bi, big.NewInt(10))
			exp++
		}
	}
	d, ok := bson.ParseDecimal128FromBigInt(bi, exp)
	if !ok {
		return Int64(n)
	}
	h, l := d.GetBytes()
	return DecimalBits(h, l)
}

var hotInts = []int64{0, 1, -1, 42, 1 << 53, 1<<53 + 1, math.MaxInt64, math.MinInt64}

var intPool = []int64{
	0, 1, -1, 2, -2, 3, 42, -42, 100, 255, 256,
	math.MaxInt32, math.MinInt32, math.MaxInt32 + 1, math.MinInt32 - 1,
	1 << 53, 1<<53 + 1, 1<<53 - 1, -(1 << 53), -(1 << 53) - 1,
	1 << 62, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1,
	1234567890123456789,
}

var doublePool = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 0.1, 1.5, 2.5, 42, 42.5, 1e-300, -1e-300,
	math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, math.MaxFloat64, -math.MaxFloat64,
	math.Inf(1), math.Inf(-1), math.NaN(), -math.NaN(),
	1 << 53, 1<<53 + 2, 1 << 63, -(1 << 63), 1 << 64, 1e18, 1e19, 1e20, 1e100,
	9223372036854774784, // largest double below 2^63
	math.MaxInt32, math.MaxInt32 + 0.5, math.MinInt32 - 0.5, 4503599627370495.5,
}

var decimalPool = []string{
	"0", "-0", "0E-6176", "-0E+6111", "0.0", "1", "-1", "1.0", "1.00", "1E+0", "10E-1", "0.1",
	"0.10", "0.5", "2.5", "42", "42.00", "4.2E+1", "-42.0", "1E+6144", "-1E+6144",
	"9.999999999999999999999999999999999E+6144", "-9.999999999999999999999999999999999E+6144",
	"1E-6176", "-1E-6176", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
	"-9223372036854775809", "9007199254740993", "9007199254740992", "9007199254740992.5",
	"2147483647", "2147483648", "1E+308", "1.797693134862315708145274237317044E+308",
	"4.9E-324", "5E-324", "1E-400", "1E+400", "123456789012345678901234567890.1234",
	"NaN", "-NaN", "Infinity", "-Infinity",
}

// High words of decimal128 special and edge encodings (low word random): quiet and signalling
// NaN, both infinities, non-canonical "11" combination forms (which are zero), and ordinary
// values with large and small exponents.
var decimalBitsPool = [...]uint64{
	0x7c00000000000000, 0xfc00000000000000, 0x7e00000000000000, 0xfe00000000000000,
	0x7800000000000000, 0xf800000000000000,
	0x6000000000000000, 0xe000000000000000, 0x6c00000000000000,
	0x3040000000000000, 0xb040000000000000, 0x3040000000000001, 0x5ffe000000000000,
	0x0000000000000000, 0x8000000000000000, 0x0001ed09bead87c0, 0x3041ed09bead87c0,
	0x3041ed09bead87c1, // coefficient just above 10^34-1: non-canonical, reads as zero
}

var u32Pool = []uint32{0, 1, 2, 1 << 31, math.MaxUint32 - 1, math.MaxUint32}

// smallStrings share prefixes and include an embedded NUL and high bytes, which matter to
// bytewise order and to KeyString's NUL escaping.
var smallStrings = []string{"", "a", "ab", "abc", "b", "a\x00", "a\x00b", "\x00", "\x01", "\xff", "é", "A", "ab\xff"}

func randString(r *rand.Rand) string { return pick(r, smallStrings) }

var keyPool = []string{"a", "b", "", "ab", "_id", "0", "1"}

func randFields(r *rand.Rand, depth int) []any {
	if depth <= 0 {
		return nil
	}
	n := r.IntN(4)
	kv := make([]any, 0, 2*n)
	for range n {
		kv = append(kv, pick(r, keyPool), RandomValue(r, depth-1))
	}
	return kv
}

func randElems(r *rand.Rand, depth int) []bsoncore.Value {
	if depth <= 0 {
		return nil
	}
	n := r.IntN(4)
	vs := make([]bsoncore.Value, n)
	for i := range vs {
		vs[i] = RandomValue(r, depth-1)
	}
	return vs
}

func randBytes(r *rand.Rand, max int) []byte {
	b := make([]byte, r.IntN(max+1))
	for i := range b {
		b[i] = pick(r, []byte{0, 1, 0x7f, 0x80, 0xff})
	}
	return b
}

func randOID(r *rand.Rand) [12]byte {
	var id [12]byte
	id[11] = byte(r.IntN(3))
	id[0] = pick(r, []byte{0, 0x7f, 0xff})
	return id
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }
