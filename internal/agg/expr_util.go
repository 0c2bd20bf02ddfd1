package agg

import (
	"math"

	"github.com/cockroachdb/apd/v3"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
)

// This file holds the plumbing shared by the operator files: argument parsing for
// positional and named operators, variable binding, and numeric conversion.

type epc = query.ExprParseContext
type ectx = query.EvalContext

func parseOne(v value, pc *epc) (expr, error) { return query.ParseExpression(v, pc) }

// argList parses an operator's arguments: an array literal is the argument list, anything
// else one argument.
func argList(args value, pc *epc) ([]expr, error) {
	if args.Type != bsoncore.TypeArray {
		x, err := parseOne(args, pc)
		if err != nil {
			return nil, err
		}
		return []expr{x}, nil
	}
	vals, err := arrValues(args)
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
			return missing, err
		}
		vs = append(vs, v)
	}
	return f.fn(ec, vs)
}

// register adds an operator taking between min and max positional arguments (max < 0:
// unbounded).
func register(name string, min, max int, fn func(vs []value) (value, error)) {
	registerCtx(name, min, max, func(_ *ectx, vs []value) (value, error) { return fn(vs) })
}

func registerCtx(name string, min, max int, fn func(ec *ectx, vs []value) (value, error)) {
	query.RegisterExpression(name, func(args value, pc *epc) (query.Expression, error) {
		xs, err := argList(args, pc)
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
func registerNamed(op string, required, optional []string, fn func(n *named, ec *ectx) (value, error)) {
	query.RegisterExpression(op, func(args value, pc *epc) (query.Expression, error) {
		n, err := parseNamed(op, args, pc, required, optional)
		if err != nil {
			return nil, err
		}
		return &fnX{fn: func(ec *ectx, _ []value) (value, error) { return fn(n, ec) }}, nil
	})
}

// named parses an operator whose argument is an object of named parameters.
type named struct {
	op string
	x  map[string]expr
	// raw keeps the unparsed values (for parameters that are not expressions, like "as").
	raw map[string]value
}

func parseNamed(op string, args value, pc *epc, required, optional []string, literal ...string) (*named, error) {
	d, ok := args.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.Location40523, "%s only supports an object as its argument", op)
	}
	els, err := docElems(d)
	if err != nil {
		return nil, err
	}
	n := &named{op: op, x: map[string]expr{}, raw: map[string]value{}}
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
		n.raw[k] = el.Value()
		if lit[k] {
			continue
		}
		if n.x[k], err = parseOne(el.Value(), pc); err != nil {
			return nil, err
		}
	}
	for _, r := range required {
		if _, ok := n.raw[r]; !ok {
			return nil, mongoerr.Newf(mongoerr.Location40524, "Missing '%s' parameter to %s", r, op)
		}
	}
	return n, nil
}

// eval evaluates a named parameter (missing when absent).
func (n *named) eval(k string, ec *ectx) (value, error) {
	x, ok := n.x[k]
	if !ok {
		return missing, nil
	}
	return x.Eval(ec)
}

func (n *named) has(k string) bool { _, ok := n.raw[k]; return ok }

// evalParam evaluates parameter k when it is given; null reports that it is given but null
// or missing, which makes most operators' result null. An absent k gives missing.
func (n *named) evalParam(k string, ec *ectx) (v value, null bool, err error) {
	if !n.has(k) {
		return missing, false, nil
	}
	if v, err = n.eval(k, ec); err != nil {
		return missing, false, err
	}
	return v, isNullish(v), nil
}

// onNull is the result for a null or missing input: the "onNull" parameter when given, else
// null.
func (n *named) onNull(ec *ectx) (value, error) {
	if n.has("onNull") {
		return n.eval("onNull", ec)
	}
	return nullV, nil
}

// onError is the result for a failed conversion: the "onError" parameter when given, else
// err.
func (n *named) onError(ec *ectx, err error) (value, error) {
	if n.has("onError") {
		return n.eval("onError", ec)
	}
	return missing, err
}

// nullOr is the result of an operator that stops early: the error when there is one, else
// null (an argument was null or missing).
func nullOr(err error) (value, error) {
	if err != nil {
		return missing, err
	}
	return nullV, nil
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

func toDec(v value) (*apd.Decimal, error) {
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
	if x, err = toDec(a); err != nil {
		return nil, nil, err
	}
	if y, err = toDec(b); err != nil {
		return nil, nil, err
	}
	return x, y, nil
}

func fromDec(d *apd.Decimal) (value, error) {
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
		return missing, mongoerr.Newf(mongoerr.Overflow, "decimal result out of range: %s", s)
	}
	h, l := dec.GetBytes()
	return value{Type: bsoncore.TypeDecimal128, Data: bsoncore.AppendDecimal128(nil, h, l)}, nil
}

func toF(v value) float64 {
	f, _ := bsonutil.ToFloat64(v)
	return f
}

// evalArith applies $add/$subtract/$multiply to two values through the registered
// operators (one code path for type promotion).
func evalArith(op string, a, b value) (value, error) {
	x, err := query.ParseExpression(docV(docOf(op, arrV([]value{literalV(a), literalV(b)}))), nil)
	if err != nil {
		return missing, err
	}
	return x.Eval(&ectx{Root: emptyDoc})
}

func literalV(v value) value { return docV(docOf("$literal", v)) }
