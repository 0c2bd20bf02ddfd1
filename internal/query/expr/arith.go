package expr

import (
	"math"

	"github.com/cockroachdb/apd/v3"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// Arithmetic operators beyond core.go's $add/$subtract/$multiply/$divide. Integers keep their
// type where MongoDB does, decimals are computed with apd at 34 digits.

func numArg(op string, v value, code int) error {
	return mongoerr.Newf(mongoerr.Code(code), "%s only supports numeric types, not %s", op, TypeName(v))
}

// unaryMath adds an operator of one numeric argument. fi handles integers (nil: use
// the float path and return a double), ff doubles, fd decimals.
func (t table) unaryMath(op string, code int, fi func(int64, bsoncore.Type) (value, error), ff func(float64) (value, error), fd func(*apd.Decimal) (*apd.Decimal, error)) {
	t.register(op, 1, 1, func(vs []value) (value, error) {
		v := vs[0]
		switch {
		case IsNullish(v):
			return Null, nil
		case !IsNumber(v):
			return Missing, numArg(op, v, code)
		case v.Type == bsoncore.TypeDecimal128:
			d, err := ToDecimal(v)
			if err != nil {
				return Missing, err
			}
			r, err := fd(d)
			if err != nil {
				return Missing, err
			}
			return FromDecimal(r)
		case (v.Type == bsoncore.TypeInt32 || v.Type == bsoncore.TypeInt64) && fi != nil:
			i, _ := bsonutil.ToInt64Exact(v)
			return fi(i, v.Type)
		}
		return ff(ToFloat(v))
	})
}

func intOfType(i int64, t bsoncore.Type) value {
	if t == bsoncore.TypeInt32 && i >= math.MinInt32 && i <= math.MaxInt32 {
		return Int32(int32(i))
	}
	return Int64(i)
}

func dec1(f func(z, x *apd.Decimal) (apd.Condition, error)) func(*apd.Decimal) (*apd.Decimal, error) {
	return func(x *apd.Decimal) (*apd.Decimal, error) {
		z := new(apd.Decimal)
		_, err := f(z, x)
		return z, err
	}
}

func identityInt(i int64, t bsoncore.Type) (value, error) { return intOfType(i, t), nil }

func (t table) addArith() {
	t.unaryMath("$abs", 28765, func(i int64, t bsoncore.Type) (value, error) {
		if i == math.MinInt64 {
			return Missing, mongoerr.New(mongoerr.Location28680, "can't take $abs of long long min")
		}
		if i < 0 {
			i = -i
		}
		if t == bsoncore.TypeInt32 && i > math.MaxInt32 {
			return Int64(i), nil
		}
		return intOfType(i, t), nil
	}, func(f float64) (value, error) { return Double(math.Abs(f)), nil }, dec1(decCtx.Abs))
	t.unaryMath("$ceil", 28765, identityInt, func(f float64) (value, error) { return Double(math.Ceil(f)), nil }, dec1(decCtx.Ceil))
	t.unaryMath("$floor", 28765, identityInt, func(f float64) (value, error) { return Double(math.Floor(f)), nil }, dec1(decCtx.Floor))
	t.unaryMath("$exp", 28765, nil, func(f float64) (value, error) { return Double(math.Exp(f)), nil }, dec1(decCtx.Exp))
	t.unaryMath("$sqrt", 28765, nil, func(f float64) (value, error) {
		if f < 0 {
			return Missing, mongoerr.New(mongoerr.Location28714, "$sqrt's argument must be greater than or equal to 0")
		}
		return Double(math.Sqrt(f)), nil
	}, func(x *apd.Decimal) (*apd.Decimal, error) {
		if x.Negative && !x.IsZero() {
			return nil, mongoerr.New(mongoerr.Location28714, "$sqrt's argument must be greater than or equal to 0")
		}
		z, err := dec1(decCtx.Sqrt)(x)
		if err == nil {
			z.Reduce(z) // an exact root has the preferred (smallest) exponent, as IEEE 754
		}
		return z, err
	})
	// Logarithms of one argument, which must be positive.
	for _, l := range []struct {
		op   string
		code mongoerr.Code
		ff   func(float64) float64
		fd   func(z, x *apd.Decimal) (apd.Condition, error)
	}{
		{"$ln", mongoerr.Location28766, math.Log, decCtx.Ln},
		{"$log10", mongoerr.Location28761, math.Log10, decCtx.Log10},
	} {
		t.unaryMath(l.op, 28765, nil, func(f float64) (value, error) {
			if f <= 0 {
				return Missing, mongoerr.Newf(l.code, "%s's argument must be a positive number, but is %v", l.op, f)
			}
			return Double(l.ff(f)), nil
		}, func(x *apd.Decimal) (*apd.Decimal, error) {
			if x.Sign() <= 0 {
				return nil, mongoerr.Newf(l.code, "%s's argument must be a positive number", l.op)
			}
			return dec1(l.fd)(x)
		})
	}
	t.register("$log", 2, 2, func(vs []value) (value, error) {
		a, b := vs[0], vs[1]
		if IsNullish(a) || IsNullish(b) {
			return Null, nil
		}
		if !IsNumber(a) {
			return Missing, mongoerr.Newf(mongoerr.Location28756, "$log's argument must be numeric, not %s", TypeName(a))
		}
		if !IsNumber(b) {
			return Missing, mongoerr.Newf(mongoerr.Location28757, "$log's base must be numeric, not %s", TypeName(b))
		}
		if a.Type == bsoncore.TypeDecimal128 || b.Type == bsoncore.TypeDecimal128 {
			x, y, err := toDecs(a, b)
			if err != nil {
				return Missing, err
			}
			if x.Sign() <= 0 {
				return Missing, mongoerr.New(mongoerr.Location28758, "$log's argument must be a positive number")
			}
			lx, ly := new(apd.Decimal), new(apd.Decimal)
			decCtx.Ln(lx, x)
			decCtx.Ln(ly, y)
			z := new(apd.Decimal)
			decCtx.Quo(z, lx, ly)
			return FromDecimal(z)
		}
		x, y := ToFloat(a), ToFloat(b)
		if x <= 0 {
			return Missing, mongoerr.Newf(mongoerr.Location28758, "$log's argument must be a positive number, but is %v", x)
		}
		if y <= 0 || y == 1 {
			return Missing, mongoerr.Newf(mongoerr.Location28759, "$log's base must be a positive number not equal to 1, but is %v", y)
		}
		return Double(math.Log(x) / math.Log(y)), nil
	})
	t.register("$pow", 2, 2, Pow)
	t.register("$mod", 2, 2, evalMod)
	t.register("$round", 1, 2, func(vs []value) (value, error) { return roundTrunc("$round", vs, true) })
	t.register("$trunc", 1, 2, func(vs []value) (value, error) { return roundTrunc("$trunc", vs, false) })
}

// Pow is $pow of vs[0] and vs[1], with its integer, double and decimal results.
func Pow(vs []value) (value, error) {
	a, b := vs[0], vs[1]
	if IsNullish(a) || IsNullish(b) {
		return Null, nil
	}
	if !IsNumber(a) {
		return Missing, mongoerr.Newf(mongoerr.Location28762, "$pow's base must be numeric, not %s", TypeName(a))
	}
	if !IsNumber(b) {
		return Missing, mongoerr.Newf(mongoerr.Location28763, "$pow's exponent must be numeric, not %s", TypeName(b))
	}
	if ToFloat(a) == 0 && ToFloat(b) < 0 {
		return Missing, mongoerr.New(mongoerr.Location28764, "$pow cannot take a base of 0 and a negative exponent")
	}
	if a.Type == bsoncore.TypeDecimal128 || b.Type == bsoncore.TypeDecimal128 {
		x, y, err := toDecs(a, b)
		if err != nil {
			return Missing, err
		}
		z := new(apd.Decimal)
		if _, err := decCtx.Pow(z, x, y); err != nil {
			return Missing, mongoerr.Newf(mongoerr.BadValue, "$pow: %v", err)
		}
		return FromDecimal(z)
	}
	isInt := func(v value) bool { return v.Type == bsoncore.TypeInt32 || v.Type == bsoncore.TypeInt64 }
	if isInt(a) && isInt(b) {
		base, _ := bsonutil.ToInt64Exact(a)
		exp, _ := bsonutil.ToInt64Exact(b)
		if exp >= 0 {
			r, ok := int64(1), true
			for i := int64(0); i < exp && ok; i++ {
				n := r * base
				if base != 0 && n/base != r {
					ok = false
				}
				r = n
				if r == 0 || r == 1 && base == 1 {
					break
				}
				if base == -1 {
					if exp%2 == 0 {
						r = 1
					} else {
						r = -1
					}
					break
				}
			}
			if ok {
				t := bsoncore.TypeInt32
				if a.Type == bsoncore.TypeInt64 || b.Type == bsoncore.TypeInt64 {
					t = bsoncore.TypeInt64
				}
				if t == bsoncore.TypeInt32 && (r > math.MaxInt32 || r < math.MinInt32) {
					t = bsoncore.TypeInt64
				}
				return intOfType(r, t), nil
			}
		}
	}
	return Double(math.Pow(ToFloat(a), ToFloat(b))), nil
}

func evalMod(vs []value) (value, error) {
	a, b := vs[0], vs[1]
	if IsNullish(a) || IsNullish(b) {
		return Null, nil
	}
	if !IsNumber(a) || !IsNumber(b) {
		return Missing, mongoerr.Newf(mongoerr.Location16611, "$mod only supports numeric types, not %s and %s", TypeName(a), TypeName(b))
	}
	if ToFloat(b) == 0 && b.Type != bsoncore.TypeDecimal128 {
		return Missing, mongoerr.New(mongoerr.Location16610, "can't $mod by zero")
	}
	if a.Type == bsoncore.TypeDecimal128 || b.Type == bsoncore.TypeDecimal128 {
		x, y, err := toDecs(a, b)
		if err != nil {
			return Missing, err
		}
		if y.IsZero() {
			return Missing, mongoerr.New(mongoerr.Location16610, "can't $mod by zero")
		}
		z := new(apd.Decimal)
		decCtx.Rem(z, x, y)
		return FromDecimal(z)
	}
	if a.Type == bsoncore.TypeDouble || b.Type == bsoncore.TypeDouble {
		return Double(math.Mod(ToFloat(a), ToFloat(b))), nil
	}
	x, _ := bsonutil.ToInt64Exact(a)
	y, _ := bsonutil.ToInt64Exact(b)
	if y == -1 {
		return intOfType(0, maxIntType(a, b)), nil
	}
	return intOfType(x%y, maxIntType(a, b)), nil
}

func maxIntType(a, b value) bsoncore.Type {
	if a.Type == bsoncore.TypeInt64 || b.Type == bsoncore.TypeInt64 {
		return bsoncore.TypeInt64
	}
	return bsoncore.TypeInt32
}

// roundTrunc is $round (half to even, as MongoDB) and $trunc with an optional place in
// [-20, 100).
func roundTrunc(op string, vs []value, round bool) (value, error) {
	v := vs[0]
	place := int64(0)
	if len(vs) == 2 {
		if IsNullish(vs[1]) {
			return Null, nil
		}
		p, ok := bsonutil.ToInt64Exact(vs[1])
		if !ok || !IsNumber(vs[1]) {
			return Missing, mongoerr.Newf(mongoerr.Location51081, "%s requires \"place\" argument to be an integer", op)
		}
		if p < -20 || p >= 100 {
			return Missing, mongoerr.Newf(mongoerr.Location51083, "cannot apply %s with precision value %d value must be in [-20, 100]", op, p)
		}
		place = p
	}
	if IsNullish(v) {
		return Null, nil
	}
	if !IsNumber(v) {
		return Missing, mongoerr.Newf(mongoerr.Location51081, "%s only supports numeric types, not %s", op, TypeName(v))
	}
	rounder := apd.RoundHalfEven
	if !round {
		rounder = apd.RoundDown
	}
	d, err := ToDecimal(v)
	if err != nil {
		return Missing, err
	}
	if d.Form != apd.Finite {
		return v, nil
	}
	c := decCtx
	c.Rounding = rounder
	z := new(apd.Decimal)
	if _, err := c.Quantize(z, d, int32(-place)); err != nil {
		return Missing, err
	}
	if place < 0 {
		// Quantize to a positive exponent; normalise back to an integer value.
		z.Reduce(z)
	}
	switch v.Type {
	case bsoncore.TypeDecimal128:
		return FromDecimal(z)
	case bsoncore.TypeDouble:
		f, _ := z.Float64()
		return Double(f), nil
	}
	i, err := z.Int64()
	if err != nil {
		return Double(ToFloat(v)), nil
	}
	return intOfType(i, v.Type), nil
}
