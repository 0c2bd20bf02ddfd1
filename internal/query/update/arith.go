package update

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/cockroachdb/apd/v3"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// arith computes a+b (op '+') or a*b (op '*') with MongoDB's SafeNum rules:
//
//   - decimal with anything is decimal (doubles converted with 15 significant digits);
//   - otherwise double with anything is double;
//   - otherwise int64 with anything is int64, and int64 overflow fails (the caller reports
//     "Failed to apply $inc operations to current value ..." as BadValue);
//   - int32 with int32 is int32, promoted to int64 when the result overflows int32.
//
// The result's bytes are appended to dst. ok is false on int64 overflow or an unrepresentable
// decimal result.
func arith(dst []byte, op byte, a, b bsoncore.Value) (res bsoncore.Value, out []byte, ok bool) {
	start := len(dst)
	switch {
	case a.Type == bsoncore.TypeDecimal128 || b.Type == bsoncore.TypeDecimal128:
		x, okA := toApd(a)
		y, okB := toApd(b)
		if !okA || !okB {
			return bsoncore.Value{}, dst, false
		}
		var z apd.Decimal
		ctx := apd.BaseContext.WithPrecision(34)
		ctx.MaxExponent, ctx.MinExponent = 6144, -6143
		ctx.Rounding = apd.RoundHalfEven
		ctx.Traps = 0
		if op == '+' {
			_, _ = ctx.Add(&z, x, y)
		} else {
			_, _ = ctx.Mul(&z, x, y)
		}
		d, err := bson.ParseDecimal128(apdString(&z))
		if err != nil {
			return bsoncore.Value{}, dst, false
		}
		h, l := d.GetBytes()
		dst = bsoncore.AppendDecimal128(dst, h, l)
		return bsoncore.Value{Type: bsoncore.TypeDecimal128, Data: dst[start:]}, dst, true
	case a.Type == bsoncore.TypeDouble || b.Type == bsoncore.TypeDouble:
		x, y := toF(a), toF(b)
		r := x + y
		if op == '*' {
			r = x * y
		}
		dst = bsoncore.AppendDouble(dst, r)
		return bsoncore.Value{Type: bsoncore.TypeDouble, Data: dst[start:]}, dst, true
	case a.Type == bsoncore.TypeInt64 || b.Type == bsoncore.TypeInt64:
		x, y := toI(a), toI(b)
		var r int64
		var over bool
		if op == '+' {
			r = x + y
			over = (x >= 0) == (y >= 0) && (r >= 0) != (x >= 0)
		} else {
			r = x * y
			over = x != 0 && (r/x != y || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64))
		}
		if over {
			return bsoncore.Value{}, dst, false
		}
		dst = bsoncore.AppendInt64(dst, r)
		return bsoncore.Value{Type: bsoncore.TypeInt64, Data: dst[start:]}, dst, true
	default:
		x, y := toI(a), toI(b)
		r := x + y
		if op == '*' {
			r = x * y
		}
		if r >= math.MinInt32 && r <= math.MaxInt32 {
			dst = bsoncore.AppendInt32(dst, int32(r))
			return bsoncore.Value{Type: bsoncore.TypeInt32, Data: dst[start:]}, dst, true
		}
		dst = bsoncore.AppendInt64(dst, r)
		return bsoncore.Value{Type: bsoncore.TypeInt64, Data: dst[start:]}, dst, true
	}
}

func toI(v bsoncore.Value) int64 {
	switch v.Type {
	case bsoncore.TypeInt32:
		return int64(int32(binary.LittleEndian.Uint32(v.Data)))
	case bsoncore.TypeInt64:
		return int64(binary.LittleEndian.Uint64(v.Data))
	}
	return 0
}

func toF(v bsoncore.Value) float64 {
	if v.Type == bsoncore.TypeDouble {
		return math.Float64frombits(binary.LittleEndian.Uint64(v.Data))
	}
	return float64(toI(v))
}

// toApd converts a number to a decimal the way MongoDB's SafeNum does (doubles rounded to 15
// significant digits, Decimal128(double, kRoundTo15Digits)).
func toApd(v bsoncore.Value) (*apd.Decimal, bool) {
	var s string
	switch v.Type {
	case bsoncore.TypeInt32, bsoncore.TypeInt64:
		return apd.New(toI(v), 0), true
	case bsoncore.TypeDouble:
		f := toF(v)
		switch {
		case math.IsNaN(f):
			s = "NaN"
		case math.IsInf(f, 1):
			s = "Infinity"
		case math.IsInf(f, -1):
			s = "-Infinity"
		default:
			// Exactly 15 significant digits, trailing zeros kept: Decimal128(0.1) is
			// 0.100000000000000, as in MongoDB.
			s = strconv.FormatFloat(f, 'e', 14, 64)
		}
	case bsoncore.TypeDecimal128:
		h, l, ok := v.Decimal128OK()
		if !ok {
			return nil, false
		}
		s = bson.NewDecimal128(h, l).String()
	default:
		return nil, false
	}
	d, _, err := apd.NewFromString(s)
	if err != nil {
		return nil, false
	}
	return d, true
}

func apdString(d *apd.Decimal) string {
	switch d.Form {
	case apd.NaN, apd.NaNSignaling:
		return "NaN"
	case apd.Infinite:
		if d.Negative {
			return "-Infinity"
		}
		return "Infinity"
	}
	return d.String()
}

// bitApply applies $bit operations to an int32/int64 current value (SafeNum bitAnd/Or/Xor:
// int32 with int32 stays int32, anything with int64 is int64).
func bitApply(dst []byte, cur bsoncore.Value, ops []bitOp) (bsoncore.Value, []byte) {
	typ := cur.Type
	x := toI(cur)
	for _, op := range ops {
		y := toI(op.val)
		if op.val.Type == bsoncore.TypeInt64 {
			typ = bsoncore.TypeInt64
		}
		switch op.kind {
		case 'a':
			x &= y
		case 'o':
			x |= y
		case 'x':
			x ^= y
		}
	}
	start := len(dst)
	if typ == bsoncore.TypeInt32 {
		dst = bsoncore.AppendInt32(dst, int32(x))
	} else {
		dst = bsoncore.AppendInt64(dst, x)
	}
	return bsoncore.Value{Type: typ, Data: dst[start:]}, dst
}
