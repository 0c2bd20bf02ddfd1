package expr

import (
	"math"

	"github.com/cockroachdb/apd/v3"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// This file holds the plumbing shared by the operator files: argument parsing for
// positional and named operators, variable binding, and numeric conversion.

type epc = ParseContext
type ectx = EvalContext

func parseOne(v value, pc *epc) (expr, error) { return Parse(v, pc) }

// ArgList parses an operator's arguments: an array literal is the argument list, anything
// else one argument.
func ArgList(args value, pc *epc) ([]expr, error) {
	if args.Type != bsoncore.TypeArray {
		x, err := parseOne(args, pc)
		if err != nil {
			return nil, err
		}
		return []expr{x}, nil
	}
	vals, err := ArrayValues(args)
	if err != nil {
		return nil, err
	}
	xs := make([]expr, len(vals))
	for i, v := range vals {
		if xs[i], err = parseOne(v, pc); err != nil {
			return nil, err
		}
	}
	return xs, nil
}

type fnX struct {
	args []expr
	fn   func(ec *ectx, vs []value) (value, error)
}

func (f *fnX) Eval(ec *ectx) (value, error) {
	var buf [4]value
	vs := buf[:0]
	for _, x := range f.args {
		v, err := x.Eval(ec)
		if err != nil {
			return Missing, err
		}
		vs = append(vs, v)
	}
	return f.fn(ec, vs)
}

// register adds an operator taking between min and max positional arguments (max < 0:
// unbounded).
func (t table) register(name string, min, max int, fn func(vs []value) (value, error)) {
	t.registerCtx(name, min, max, func(_ *ectx, vs []value) (value, error) { return fn(vs) })
}

func (t table) registerCtx(name string, min, max int, fn func(ec *ectx, vs []value) (value, error)) {
	t.add(name, func(args value, pc *epc) (Expression, error) {
		xs, err := ArgList(args, pc)
		if err != nil {
			return nil, err
		}
		if len(xs) < min || (max >= 0 && len(xs) > max) {
			switch {
			case min == max:
				return nil, mongoerr.Newf(mongoerr.Location16020, "Expression %s takes exactly %d arguments. %d were passed in.", name, min, len(xs))
			case len(xs) < min:
				return nil, mongoerr.Newf(mongoerr.Location16020, "Expression %s takes at least %d arguments, and at most %d, but %d were passed in.", name, min, max, len(xs))
			}
			return nil, mongoerr.Newf(mongoerr.Location16020, "Expression %s takes at most %d arguments, but %d were passed in.", name, max, len(xs))
		}
		return &fnX{args: xs, fn: fn}, nil
	})
}

// registerNamed adds an operator whose argument is an object of named parameters, all of
// them expressions; fn evaluates it.
func (t table) registerNamed(op string, required, optional []string, fn func(n *Named, ec *ectx) (value, error)) {
	t.add(op, func(args value, pc *epc) (Expression, error) {
		n, err := ParseNamed(op, args, pc, required, optional)
		if err != nil {
			return nil, err
		}
		return &fnX{fn: func(ec *ectx, _ []value) (value, error) { return fn(n, ec) }}, nil
	})
}

// Named is the parsed argument of an operator that takes an object of named parameters.
type Named struct {
	Op string
	// X holds the parsed parameters; literal ones (see ParseNamed) are not in it.
	X map[string]expr
	// Raw keeps the unparsed values (for parameters that are not expressions, like "as").
	Raw map[string]value
}

// ParseNamed parses the object argument of op: required and optional parameters are
// expressions, literal ones are kept unparsed (in Raw only); unknown or missing ones fail.
func ParseNamed(op string, args value, pc *epc, required, optional []string, literal ...string) (*Named, error) {
	d, ok := args.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.Location40523, "%s only supports an object as its argument", op)
	}
	els, err := DocElems(d)
	if err != nil {
		return nil, err
	}
	n := &Named{Op: op, X: map[string]expr{}, Raw: map[string]value{}}
	allowed := map[string]bool{}
	for _, r := range required {
		allowed[r] = true
	}
	for _, r := range optional {
		allowed[r] = true
	}
	lit := map[string]bool{}
	for _, l := range literal {
		lit[l] = true
		allowed[l] = true
	}
	for _, el := range els {
		k := el.Key()
		if !allowed[k] {
			return nil, mongoerr.Newf(mongoerr.Location40525, "Unrecognized parameter to %s: %s", op, k)
		}
		n.Raw[k] = el.Value()
		if lit[k] {
			continue
		}
		if n.X[k], err = parseOne(el.Value(), pc); err != nil {
			return nil, err
		}
	}
	for _, r := range required {
		if _, ok := n.Raw[r]; !ok {
			return nil, mongoerr.Newf(mongoerr.Location40524, "Missing '%s' parameter to %s", r, op)
		}
	}
	return n, nil
}

// eval evaluates a named parameter (missing when absent).
func (n *Named) eval(k string, ec *ectx) (value, error) {
	x, ok := n.X[k]
	if !ok {
		return Missing, nil
	}
	return x.Eval(ec)
}

// Has reports whether parameter k was given.
func (n *Named) Has(k string) bool { _, ok := n.Raw[k]; return ok }

// evalParam evaluates parameter k when it is given; null reports that it is given but null
// or missing, which makes most operators' result null. An absent k gives missing.
func (n *Named) evalParam(k string, ec *ectx) (v value, null bool, err error) {
	if !n.Has(k) {
		return Missing, false, nil
	}
	if v, err = n.eval(k, ec); err != nil {
		return Missing, false, err
	}
	return v, IsNullish(v), nil
}

// onNull is the result for a null or missing input: the "onNull" parameter when given, else
// null.
func (n *Named) onNull(ec *ectx) (value, error) {
	if n.Has("onNull") {
		return n.eval("onNull", ec)
	}
	return Null, nil
}

// onError is the result for a failed conversion: the "onError" parameter when given, else
// err.
func (n *Named) onError(ec *ectx, err error) (value, error) {
	if n.Has("onError") {
		return n.eval("onError", ec)
	}
	return Missing, err
}

// nullOr is the result of an operator that stops early: the error when there is one, else
// null (an argument was null or missing).
func nullOr(err error) (value, error) {
	if err != nil {
		return Missing, err
	}
	return Null, nil
}

// withVars evaluates x with extra variables bound, restoring the previous bindings after.
func withVars(ec *ectx, names []string, vals []value, x expr) (value, error) {
	if ec.Vars == nil {
		ec.Vars = map[string]value{}
	}
	old := make([]value, len(names))
	had := make([]bool, len(names))
	for i, n := range names {
		old[i], had[i] = ec.Vars[n]
		ec.Vars[n] = vals[i]
	}
	v, err := x.Eval(ec)
	for i, n := range names {
		if had[i] {
			ec.Vars[n] = old[i]
		} else {
			delete(ec.Vars, n)
		}
	}
	return v, err
}

// scope returns a parse context with more variables.
func scope(pc *epc, names ...string) *epc {
	vars := map[string]bool{}
	if pc != nil {
		for k := range pc.Vars {
			vars[k] = true
		}
	}
	for _, n := range names {
		vars[n] = true
	}
	return &epc{Vars: vars}
}

// ---- numbers ----

var decCtx = apd.BaseContext.WithPrecision(34)

// ToDecimal converts a number to an apd decimal (NaN and infinities included).
func ToDecimal(v value) (*apd.Decimal, error) {
	if v.Type == bsoncore.TypeDecimal128 {
		h, l, ok := v.Decimal128OK()
		if !ok {
			return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid decimal")
		}
		s := bson.NewDecimal128(h, l).String()
		switch s {
		case "NaN":
			return &apd.Decimal{Form: apd.NaN}, nil
		case "Infinity":
			return &apd.Decimal{Form: apd.Infinite}, nil
		case "-Infinity":
			return &apd.Decimal{Form: apd.Infinite, Negative: true}, nil
		}
		d, _, err := apd.NewFromString(s)
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.BadValue, "unsupported decimal value: %v", err)
		}
		return d, nil
	}
	if v.Type == bsoncore.TypeInt32 || v.Type == bsoncore.TypeInt64 {
		i, _ := bsonutil.ToInt64Exact(v)
		return apd.New(i, 0), nil
	}
	f, _ := bsonutil.ToFloat64(v)
	d := new(apd.Decimal)
	if math.IsNaN(f) {
		return &apd.Decimal{Form: apd.NaN}, nil
	}
	if math.IsInf(f, 0) {
		return &apd.Decimal{Form: apd.Infinite, Negative: f < 0}, nil
	}
	if _, err := d.SetFloat64(f); err != nil {
		return nil, mongoerr.Newf(mongoerr.BadValue, "cannot convert %v to decimal", f)
	}
	return d, nil
}

// toDecs converts both operands of a binary operator to decimals.
func toDecs(a, b value) (x, y *apd.Decimal, err error) {
	if x, err = ToDecimal(a); err != nil {
		return nil, nil, err
	}
	if y, err = ToDecimal(b); err != nil {
		return nil, nil, err
	}
	return x, y, nil
}

// FromDecimal converts back to a Decimal128 value; Overflow when it does not fit.
func FromDecimal(d *apd.Decimal) (value, error) {
	var s string
	switch d.Form {
	case apd.NaN, apd.NaNSignaling:
		s = "NaN"
	case apd.Infinite:
		s = "Infinity"
		if d.Negative {
			s = "-Infinity"
		}
	default:
		s = d.Text('E')
	}
	dec, err := bson.ParseDecimal128(s)
	if err != nil {
		return Missing, mongoerr.Newf(mongoerr.Overflow, "decimal result out of range: %s", s)
	}
	h, l := dec.GetBytes()
	return value{Type: bsoncore.TypeDecimal128, Data: bsoncore.AppendDecimal128(nil, h, l)}, nil
}

// ToFloat is v as a double (0 for non-numbers).
func ToFloat(v value) float64 {
	f, _ := bsonutil.ToFloat64(v)
	return f
}

// Arith applies $add/$subtract/$multiply to two values through the table's
// operators (one code path for type promotion).
func Arith(op string, a, b value) (value, error) {
	x, err := Parse(Doc(DocOf(op, Array([]value{literalV(a), literalV(b)}))), nil)
	if err != nil {
		return Missing, err
	}
	return x.Eval(&ectx{Root: EmptyDoc})
}

func literalV(v value) value { return Doc(DocOf("$literal", v)) }
