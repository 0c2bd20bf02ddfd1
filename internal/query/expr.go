package query

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/apd/v3"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// This file is the aggregation-expression core that $expr (and, later, projections and the
// aggregation framework) evaluates. It holds a deliberately small operator set; internal/agg
// adds the rest through RegisterExpression, so every expression shares one parser, one value
// model and one set of errors.
//
// Values are bsoncore.Values; the zero Value is "missing", which aggregation distinguishes
// from null (it sorts with undefined, below null, unlike in the matcher).

// Expression is a parsed aggregation expression.
type Expression interface {
	Eval(ctx *EvalContext) (bsoncore.Value, error)
}

// EvalContext is what an expression is evaluated against.
type EvalContext struct {
	Root    bsoncore.Document // $$ROOT
	Current bsoncore.Document // $$CURRENT; nil means Root
	Now     time.Time         // $$NOW
	// Vars are user variables ($let, $map, ...), by name without "$$".
	Vars map[string]bsoncore.Value
	// Collator is the operation's collation for string comparisons ($eq ... $cmp, $in and
	// the aggregation operators that compare); nil is binary comparison.
	Collator Collator
}

// ExprParseContext is what parsing an expression needs. Vars lists the user variables in
// scope (so references to unknown ones fail at parse time, as in MongoDB).
type ExprParseContext struct {
	Vars map[string]bool
}

// ExprParser parses the argument of one operator ({$name: args}).
type ExprParser func(args bsoncore.Value, pc *ExprParseContext) (Expression, error)

var (
	exprMu       sync.RWMutex
	exprRegistry = map[string]ExprParser{}
)

// RegisterExpression adds an expression operator (name with its "$"). It is meant for init
// functions of packages that extend the language; registering a name twice is a programming
// error and panics.
func RegisterExpression(name string, p ExprParser) {
	exprMu.Lock()
	defer exprMu.Unlock()
	if _, dup := exprRegistry[name]; dup {
		panic("query: expression " + name + " registered twice")
	}
	exprRegistry[name] = p
}

func init() {
	for _, op := range []string{"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$cmp"} {
		RegisterExpression(op, parseCompareExpr(op))
	}
	RegisterExpression("$and", parseVariadic("$and", 0, func(vs []bsoncore.Value) (bsoncore.Value, error) {
		for _, v := range vs {
			if !truthy(v) {
				return boolValue(false), nil
			}
		}
		return boolValue(true), nil
	}, true))
	RegisterExpression("$or", parseVariadic("$or", 0, func(vs []bsoncore.Value) (bsoncore.Value, error) {
		for _, v := range vs {
			if truthy(v) {
				return boolValue(true), nil
			}
		}
		return boolValue(false), nil
	}, true))
	RegisterExpression("$not", parseFixed("$not", 1, func(vs []bsoncore.Value) (bsoncore.Value, error) {
		return boolValue(!truthy(vs[0])), nil
	}))
	RegisterExpression("$add", parseVariadic("$add", 0, evalAdd, false))
	RegisterExpression("$multiply", parseVariadic("$multiply", 0, evalMultiply, false))
	RegisterExpression("$subtract", parseFixed("$subtract", 2, evalSubtract))
	RegisterExpression("$divide", parseFixed("$divide", 2, evalDivide))
	RegisterExpression("$size", parseFixed("$size", 1, func(vs []bsoncore.Value) (bsoncore.Value, error) {
		arr, ok := vs[0].ArrayOK()
		if !ok {
			return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location17124,
				"The argument to $size must be an array. Type of argument is: %s", typeName(vs[0]))
		}
		vals, err := arr.Values()
		if err != nil {
			return bsoncore.Value{}, mongoerr.Newf(mongoerr.InvalidBSON, "invalid array: %v", err)
		}
		return int32Value(int32(len(vals))), nil
	}))
	RegisterExpression("$type", parseFixed("$type", 1, func(vs []bsoncore.Value) (bsoncore.Value, error) {
		return stringValue(typeName(vs[0])), nil
	}))
	RegisterExpression("$in", parseFixedCtx("$in", 2, func(ctx *EvalContext, vs []bsoncore.Value) (bsoncore.Value, error) {
		arr, ok := vs[1].ArrayOK()
		if !ok {
			return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location40081,
				"$in requires an array as a second argument, found: %s", typeName(vs[1]))
		}
		vals, _ := arr.Values()
		for _, v := range vals {
			if CompareAgg(vs[0], v, ctx.Collator) == 0 {
				return boolValue(true), nil
			}
		}
		return boolValue(false), nil
	}))
	RegisterExpression("$ifNull", parseIfNull)
	RegisterExpression("$cond", parseCond)
	RegisterExpression("$literal", func(args bsoncore.Value, _ *ExprParseContext) (Expression, error) {
		return constExpr{args}, nil
	})
}

// ParseExpression parses an aggregation expression: a "$field.path", a "$$variable", an
// operator object {$op: args}, an object of expressions, an array of expressions, or a
// literal.
func ParseExpression(v bsoncore.Value, pc *ExprParseContext) (Expression, error) {
	return parseExpr(v, pc, 0)
}

func parseExpr(v bsoncore.Value, pc *ExprParseContext, depth int) (Expression, error) {
	if depth > maxDepth {
		return nil, mongoerr.Newf(mongoerr.BadValue, "exceeded depth limit of %d when parsing expression", maxDepth)
	}
	switch v.Type {
	case bsoncore.TypeString:
		s, ok := v.StringValueOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid string in expression")
		}
		if strings.HasPrefix(s, "$") {
			return parseFieldPathExpr(s, pc)
		}
		return constExpr{v}, nil
	case bsoncore.TypeArray:
		vals, err := v.Array().Values()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid array expression: %v", err)
		}
		a := arrayExpr{}
		for _, e := range vals {
			x, err := parseExpr(e, pc, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, x)
		}
		return a, nil
	case bsoncore.TypeEmbeddedDocument:
		return parseObjectExpr(v.Document(), pc, depth)
	}
	return constExpr{v}, nil
}

func parseObjectExpr(d bsoncore.Document, pc *ExprParseContext, depth int) (Expression, error) {
	elems, err := d.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid expression object: %v", err)
	}
	if len(elems) > 0 && strings.HasPrefix(elems[0].Key(), "$") {
		if len(elems) != 1 {
			return nil, mongoerr.Newf(mongoerr.Location15983,
				"an expression specification must contain exactly one field, the name of the expression. Found %d fields in %s",
				len(elems), d)
		}
		name := elems[0].Key()
		exprMu.RLock()
		p, ok := exprRegistry[name]
		exprMu.RUnlock()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.InvalidPipelineOperator, "Unrecognized expression '%s'", name)
		}
		return p(elems[0].Value(), pc)
	}
	o := objectExpr{}
	for _, el := range elems {
		k := el.Key()
		if strings.HasPrefix(k, "$") {
			return nil, mongoerr.Newf(mongoerr.Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
		if k == "" || strings.Contains(k, ".") {
			return nil, mongoerr.Newf(mongoerr.Location16412, "FieldPath field names may not contain '.'. Consider using $getField or $setField.")
		}
		x, err := parseExpr(el.Value(), pc, depth+1)
		if err != nil {
			return nil, err
		}
		o.names = append(o.names, k)
		o.exprs = append(o.exprs, x)
	}
	return o, nil
}

// argExprs parses an operator's arguments: an array is the argument list, anything else is
// a single argument.
func argExprs(args bsoncore.Value, pc *ExprParseContext) ([]Expression, error) {
	if args.Type != bsoncore.TypeArray {
		x, err := parseExpr(args, pc, 1)
		if err != nil {
			return nil, err
		}
		return []Expression{x}, nil
	}
	a, err := parseExpr(args, pc, 1)
	if err != nil {
		return nil, err
	}
	return a.(arrayExpr), nil
}

// evalArgs evaluates arguments in order.
func evalArgs(xs []Expression, ctx *EvalContext) ([]bsoncore.Value, error) {
	vs := make([]bsoncore.Value, len(xs))
	for i, x := range xs {
		v, err := x.Eval(ctx)
		if err != nil {
			return nil, err
		}
		vs[i] = v
	}
	return vs, nil
}

// funcExpr applies fn to its evaluated arguments.
type funcExpr struct {
	args []Expression
	fn   func([]bsoncore.Value) (bsoncore.Value, error)
}

func (f funcExpr) Eval(ctx *EvalContext) (bsoncore.Value, error) {
	vs, err := evalArgs(f.args, ctx)
	if err != nil {
		return bsoncore.Value{}, err
	}
	return f.fn(vs)
}

// funcCtxExpr is funcExpr for operators that need the context (the collation).
type funcCtxExpr struct {
	args []Expression
	fn   func(*EvalContext, []bsoncore.Value) (bsoncore.Value, error)
}

func (f funcCtxExpr) Eval(ctx *EvalContext) (bsoncore.Value, error) {
	vs, err := evalArgs(f.args, ctx)
	if err != nil {
		return bsoncore.Value{}, err
	}
	return f.fn(ctx, vs)
}

// fixedArgs parses the arguments of an operator taking exactly n.
func fixedArgs(name string, n int, args bsoncore.Value, pc *ExprParseContext) ([]Expression, error) {
	xs, err := argExprs(args, pc)
	if err != nil {
		return nil, err
	}
	if len(xs) != n {
		return nil, mongoerr.Newf(mongoerr.Location16020, "Expression %s takes exactly %d arguments. %d were passed in.", name, n, len(xs))
	}
	return xs, nil
}

// parseFixedCtx is parseFixed for a context-aware fn.
func parseFixedCtx(name string, n int, fn func(*EvalContext, []bsoncore.Value) (bsoncore.Value, error)) ExprParser {
	return func(args bsoncore.Value, pc *ExprParseContext) (Expression, error) {
		xs, err := fixedArgs(name, n, args, pc)
		if err != nil {
			return nil, err
		}
		return funcCtxExpr{args: xs, fn: fn}, nil
	}
}

// parseFixed is an operator taking exactly n arguments.
func parseFixed(name string, n int, fn func([]bsoncore.Value) (bsoncore.Value, error)) ExprParser {
	return func(args bsoncore.Value, pc *ExprParseContext) (Expression, error) {
		xs, err := fixedArgs(name, n, args, pc)
		if err != nil {
			return nil, err
		}
		return funcExpr{args: xs, fn: fn}, nil
	}
}

// parseVariadic is an operator taking at least min arguments. shortCircuit operators ($and,
// $or) are evaluated lazily, as MongoDB does, so later arguments' errors are not raised.
func parseVariadic(name string, min int, fn func([]bsoncore.Value) (bsoncore.Value, error), shortCircuit bool) ExprParser {
	return func(args bsoncore.Value, pc *ExprParseContext) (Expression, error) {
		xs, err := argExprs(args, pc)
		if err != nil {
			return nil, err
		}
		if len(xs) < min {
			return nil, mongoerr.Newf(mongoerr.Location16020, "Expression %s takes at least %d arguments. %d were passed in.", name, min, len(xs))
		}
		if shortCircuit {
			return shortCircuitExpr{and: name == "$and", args: xs}, nil
		}
		return funcExpr{args: xs, fn: fn}, nil
	}
}

type shortCircuitExpr struct {
	and  bool
	args []Expression
}

func (s shortCircuitExpr) Eval(ctx *EvalContext) (bsoncore.Value, error) {
	for _, x := range s.args {
		v, err := x.Eval(ctx)
		if err != nil {
			return bsoncore.Value{}, err
		}
		if truthy(v) != s.and {
			return boolValue(!s.and), nil
		}
	}
	return boolValue(s.and), nil
}

// ---- leaves ----

type constExpr struct{ v bsoncore.Value }

func (c constExpr) Eval(*EvalContext) (bsoncore.Value, error) { return c.v, nil }

type arrayExpr []Expression

func (a arrayExpr) Eval(ctx *EvalContext) (bsoncore.Value, error) {
	vs, err := evalArgs(a, ctx)
	if err != nil {
		return bsoncore.Value{}, err
	}
	// Missing elements become null in an array literal.
	for i := range vs {
		if vs[i].Type == 0 {
			vs[i] = bsoncore.Value{Type: bsoncore.TypeNull}
		}
	}
	return bsoncore.Value{Type: bsoncore.TypeArray, Data: bsoncore.BuildArray(nil, vs...)}, nil
}

type objectExpr struct {
	names []string
	exprs []Expression
}

func (o objectExpr) Eval(ctx *EvalContext) (bsoncore.Value, error) {
	idx, b := bsoncore.AppendDocumentStart(nil)
	for i, x := range o.exprs {
		v, err := x.Eval(ctx)
		if err != nil {
			return bsoncore.Value{}, err
		}
		if v.Type == 0 {
			continue // missing values are left out
		}
		b = bsoncore.AppendValueElement(b, o.names[i], v)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: b}, nil
}

// fieldPathExpr is "$a.b" or "$$var.a.b".
type fieldPathExpr struct {
	variable string // "CURRENT" for "$a.b"
	path     []string
}

func parseFieldPathExpr(s string, pc *ExprParseContext) (Expression, error) {
	variable, rest := "CURRENT", s[1:]
	if strings.HasPrefix(s, "$$") {
		name, tail, _ := strings.Cut(s[2:], ".")
		if name == "" {
			return nil, mongoerr.New(mongoerr.Location16869, "empty variable name")
		}
		switch name {
		case "ROOT", "CURRENT", "NOW", "REMOVE":
		default:
			if pc == nil || !pc.Vars[name] {
				return nil, mongoerr.Newf(mongoerr.Location17276, "Use of undefined variable: %s", name)
			}
		}
		variable, rest = name, tail
		if tail == "" {
			return fieldPathExpr{variable: variable}, nil
		}
	}
	if rest == "" {
		return nil, mongoerr.New(mongoerr.Location16872, "'$' by itself is not a valid FieldPath")
	}
	parts := strings.Split(rest, ".")
	for _, p := range parts {
		if p == "" {
			return nil, mongoerr.New(mongoerr.Location15998, "FieldPath field names may not be empty strings.")
		}
		if strings.HasPrefix(p, "$") {
			return nil, mongoerr.Newf(mongoerr.Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
	}
	return fieldPathExpr{variable: variable, path: parts}, nil
}

func (f fieldPathExpr) Eval(ctx *EvalContext) (bsoncore.Value, error) {
	var base bsoncore.Value
	switch f.variable {
	case "ROOT":
		base = docValue(ctx.Root)
	case "CURRENT":
		if ctx.Current != nil {
			base = docValue(ctx.Current)
		} else {
			base = docValue(ctx.Root)
		}
	case "NOW":
		base = bsoncore.Value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, ctx.Now.UnixMilli())}
	case "REMOVE":
		return bsoncore.Value{}, nil
	default:
		base = ctx.Vars[f.variable]
	}
	return evalPath(base, f.path), nil
}

func docValue(d bsoncore.Document) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d}
}

// evalPath is ExpressionFieldPath's traversal: documents are entered by field; arrays map the
// rest of the path over their elements, keeping the results that are not missing (nested
// arrays are traversed recursively; scalars are dropped).
func evalPath(v bsoncore.Value, path []string) bsoncore.Value {
	for i, p := range path {
		switch v.Type {
		case bsoncore.TypeEmbeddedDocument:
			var ok bool
			if v, ok = getField(v.Data, p); !ok {
				return bsoncore.Value{}
			}
		case bsoncore.TypeArray:
			var out []bsoncore.Value
			it := newElemIter(v.Data)
			for {
				_, e, ok := it.next()
				if !ok {
					break
				}
				if !isArrayOrDoc(e) {
					continue
				}
				if r := evalPath(e, path[i:]); r.Type != 0 {
					out = append(out, r)
				}
			}
			return bsoncore.Value{Type: bsoncore.TypeArray, Data: bsoncore.BuildArray(nil, out...)}
		default:
			return bsoncore.Value{}
		}
	}
	return v
}

// ---- comparison, logic ----

// compareAgg is aggregation's Value::compare: BSON order, with missing ranked with
// undefined (below null) instead of with null as in the matcher.
func compareAgg(a, b bsoncore.Value) int {
	if a.Type == 0 {
		a = bsoncore.Value{Type: bsoncore.TypeUndefined}
	}
	if b.Type == 0 {
		b = bsoncore.Value{Type: bsoncore.TypeUndefined}
	}
	return bsonutil.Compare(a, b)
}

// CompareAgg is compareAgg with strings compared under sc (nil: binary).
func CompareAgg(a, b bsoncore.Value, sc Collator) int {
	if sc == nil {
		return compareAgg(a, b)
	}
	if a.Type == 0 {
		a = bsoncore.Value{Type: bsoncore.TypeUndefined}
	}
	if b.Type == 0 {
		b = bsoncore.Value{Type: bsoncore.TypeUndefined}
	}
	return bsonutil.CompareWithCollator(a, b, sc)
}

func parseCompareExpr(op string) ExprParser {
	return parseFixedCtx(op, 2, func(ctx *EvalContext, vs []bsoncore.Value) (bsoncore.Value, error) {
		c := CompareAgg(vs[0], vs[1], ctx.Collator)
		switch op {
		case "$eq":
			return boolValue(c == 0), nil
		case "$ne":
			return boolValue(c != 0), nil
		case "$gt":
			return boolValue(c > 0), nil
		case "$gte":
			return boolValue(c >= 0), nil
		case "$lt":
			return boolValue(c < 0), nil
		case "$lte":
			return boolValue(c <= 0), nil
		}
		return int32Value(int32(c)), nil // $cmp
	})
}

// truthy is aggregation's coerceToBool: false, null, undefined, missing and zeros are false.
func truthy(v bsoncore.Value) bool { return trueValue(v) }

func isNullOrMissing(v bsoncore.Value) bool { return isNullish(v) }

type condExpr struct{ ifX, thenX, elseX Expression }

func (c condExpr) Eval(ctx *EvalContext) (bsoncore.Value, error) {
	v, err := c.ifX.Eval(ctx)
	if err != nil {
		return bsoncore.Value{}, err
	}
	if truthy(v) {
		return c.thenX.Eval(ctx)
	}
	return c.elseX.Eval(ctx)
}

func parseCond(args bsoncore.Value, pc *ExprParseContext) (Expression, error) {
	if d, ok := args.DocumentOK(); ok {
		var c condExpr
		elems, err := d.Elements()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid $cond: %v", err)
		}
		for _, el := range elems {
			x, err := parseExpr(el.Value(), pc, 1)
			if err != nil {
				return nil, err
			}
			switch el.Key() {
			case "if":
				c.ifX = x
			case "then":
				c.thenX = x
			case "else":
				c.elseX = x
			default:
				return nil, mongoerr.Newf(mongoerr.Location17083, "Unrecognized parameter to $cond: %s", el.Key())
			}
		}
		for _, m := range []struct {
			x    Expression
			name string
			code mongoerr.Code
		}{{c.ifX, "if", 17080}, {c.thenX, "then", 17081}, {c.elseX, "else", 17082}} {
			if m.x == nil {
				return nil, mongoerr.Newf(m.code, "Missing '%s' parameter to $cond", m.name)
			}
		}
		return c, nil
	}
	xs, err := fixedArgs("$cond", 3, args, pc)
	if err != nil {
		return nil, err
	}
	return condExpr{xs[0], xs[1], xs[2]}, nil
}

type ifNullExpr []Expression

func (f ifNullExpr) Eval(ctx *EvalContext) (bsoncore.Value, error) {
	for i, x := range f {
		v, err := x.Eval(ctx)
		if err != nil {
			return bsoncore.Value{}, err
		}
		if !isNullOrMissing(v) || i == len(f)-1 {
			return v, nil
		}
	}
	return bsoncore.Value{}, nil
}

func parseIfNull(args bsoncore.Value, pc *ExprParseContext) (Expression, error) {
	xs, err := argExprs(args, pc)
	if err != nil {
		return nil, err
	}
	if len(xs) < 2 {
		return nil, mongoerr.Newf(mongoerr.Location1257300, "$ifNull needs at least two arguments, had: %d", len(xs))
	}
	return ifNullExpr(xs), nil
}

// ---- arithmetic ----

// numClass orders numeric types by width: the result of arithmetic takes the widest operand
// type (int < long < double < decimal).
func numClass(t bsoncore.Type) int {
	switch t {
	case bsoncore.TypeInt32:
		return 0
	case bsoncore.TypeInt64:
		return 1
	case bsoncore.TypeDouble:
		return 2
	}
	return 3
}

var decCtx = apd.BaseContext.WithPrecision(34)

func toApd(v bsoncore.Value) (*apd.Decimal, error) {
	if v.Type == bsoncore.TypeDecimal128 {
		h, l, ok := v.Decimal128OK()
		if !ok {
			return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid decimal")
		}
		d, _, err := apd.NewFromString(bson.NewDecimal128(h, l).String())
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.BadValue, "unsupported decimal value: %v", err)
		}
		return d, nil
	}
	if i, ok := bsonutil.ToInt64Exact(v); ok && v.Type != bsoncore.TypeDouble {
		return apd.New(i, 0), nil
	}
	f, _ := bsonutil.ToFloat64(v)
	d := new(apd.Decimal)
	if _, err := d.SetFloat64(f); err != nil {
		return nil, mongoerr.Newf(mongoerr.BadValue, "cannot convert %v to decimal", f)
	}
	return d, nil
}

func fromApd(d *apd.Decimal) (bsoncore.Value, error) {
	dec, err := bson.ParseDecimal128(d.Text('E'))
	if err != nil {
		return bsoncore.Value{}, mongoerr.Newf(mongoerr.Overflow, "decimal result out of range: %s", d.Text('E'))
	}
	h, l := dec.GetBytes()
	return bsoncore.Value{Type: bsoncore.TypeDecimal128, Data: bsoncore.AppendDecimal128(nil, h, l)}, nil
}

// arith applies op (one of + - * /) to two numbers with MongoDB's type promotion: int32
// results that overflow become int64, int64 results that overflow become double.
func arith(op byte, a, b bsoncore.Value) (bsoncore.Value, error) {
	cls := max(numClass(a.Type), numClass(b.Type))
	if op == '/' && cls < 2 {
		cls = 2 // $divide of integers is a double
	}
	switch cls {
	case 3:
		x, err := toApd(a)
		if err != nil {
			return bsoncore.Value{}, err
		}
		y, err := toApd(b)
		if err != nil {
			return bsoncore.Value{}, err
		}
		z := new(apd.Decimal)
		switch op {
		case '+':
			_, err = decCtx.Add(z, x, y)
		case '-':
			_, err = decCtx.Sub(z, x, y)
		case '*':
			_, err = decCtx.Mul(z, x, y)
		case '/':
			_, err = decCtx.Quo(z, x, y)
		}
		if err != nil {
			return bsoncore.Value{}, mongoerr.Newf(mongoerr.BadValue, "decimal arithmetic failed: %v", err)
		}
		return fromApd(z)
	case 2:
		x, _ := bsonutil.ToFloat64(a)
		y, _ := bsonutil.ToFloat64(b)
		return doubleValue(floatOp(op, x, y)), nil
	}
	x, _ := bsonutil.ToInt64Exact(a)
	y, _ := bsonutil.ToInt64Exact(b)
	var z int64
	overflow := false
	switch op {
	case '+':
		z = x + y
		overflow = (x >= 0) == (y >= 0) && (z >= 0) != (x >= 0)
	case '-':
		z = x - y
		overflow = (x >= 0) != (y >= 0) && (z >= 0) != (x >= 0)
	case '*':
		z = x * y
		overflow = x != 0 && (z/x != y || (x == -1 && y == math.MinInt64))
	}
	if overflow {
		fx, _ := bsonutil.ToFloat64(a)
		fy, _ := bsonutil.ToFloat64(b)
		return doubleValue(floatOp(op, fx, fy)), nil
	}
	if cls == 0 && z >= math.MinInt32 && z <= math.MaxInt32 {
		return int32Value(int32(z)), nil
	}
	return int64Value(z), nil
}

func floatOp(op byte, x, y float64) float64 {
	switch op {
	case '+':
		return x + y
	case '-':
		return x - y
	case '*':
		return x * y
	}
	return x / y
}

func evalAdd(vs []bsoncore.Value) (bsoncore.Value, error) {
	acc := int32Value(0)
	var date *int64
	for _, v := range vs {
		switch {
		case isNullOrMissing(v):
			return bsoncore.Value{Type: bsoncore.TypeNull}, nil
		case v.Type == bsoncore.TypeDateTime:
			if date != nil {
				return bsoncore.Value{}, mongoerr.New(mongoerr.Location16612, "only one date allowed in an $add expression")
			}
			ms := v.DateTime()
			date = &ms
		case bsonutil.IsNumber(v.Type):
			var err error
			if acc, err = arith('+', acc, v); err != nil {
				return bsoncore.Value{}, err
			}
		default:
			return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location16554, "$add only supports numeric or date types, not %s", typeName(v))
		}
	}
	if date != nil {
		f, _ := bsonutil.ToFloat64(acc)
		return bsoncore.Value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, *date+int64(math.Round(f)))}, nil
	}
	return acc, nil
}

func evalMultiply(vs []bsoncore.Value) (bsoncore.Value, error) {
	acc := int32Value(1)
	for _, v := range vs {
		switch {
		case isNullOrMissing(v):
			return bsoncore.Value{Type: bsoncore.TypeNull}, nil
		case bsonutil.IsNumber(v.Type):
			var err error
			if acc, err = arith('*', acc, v); err != nil {
				return bsoncore.Value{}, err
			}
		default:
			return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location16555, "$multiply only supports numeric types, not %s", typeName(v))
		}
	}
	return acc, nil
}

func evalSubtract(vs []bsoncore.Value) (bsoncore.Value, error) {
	a, b := vs[0], vs[1]
	switch {
	case isNullOrMissing(a) || isNullOrMissing(b):
		return bsoncore.Value{Type: bsoncore.TypeNull}, nil
	case bsonutil.IsNumber(a.Type) && bsonutil.IsNumber(b.Type):
		return arith('-', a, b)
	case a.Type == bsoncore.TypeDateTime && b.Type == bsoncore.TypeDateTime:
		return int64Value(a.DateTime() - b.DateTime()), nil
	case a.Type == bsoncore.TypeDateTime && bsonutil.IsNumber(b.Type):
		f, _ := bsonutil.ToFloat64(b)
		return bsoncore.Value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, a.DateTime()-int64(math.Round(f)))}, nil
	}
	return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location16556, "can't $subtract %s from %s", typeName(b), typeName(a))
}

func evalDivide(vs []bsoncore.Value) (bsoncore.Value, error) {
	a, b := vs[0], vs[1]
	switch {
	case isNullOrMissing(a) || isNullOrMissing(b):
		return bsoncore.Value{Type: bsoncore.TypeNull}, nil
	case !bsonutil.IsNumber(a.Type) || !bsonutil.IsNumber(b.Type):
		return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location16609, "$divide only supports numeric types, not %s and %s", typeName(a), typeName(b))
	}
	if f, _ := bsonutil.ToFloat64(b); f == 0 {
		return bsoncore.Value{}, mongoerr.New(mongoerr.Location16608, "can't $divide by zero")
	}
	return arith('/', a, b)
}

// ---- value constructors ----

func boolValue(b bool) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeBoolean, Data: bsoncore.AppendBoolean(nil, b)}
}
func int32Value(i int32) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, i)}
}
func int64Value(i int64) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, i)}
}
func doubleValue(f float64) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, f)}
}
func stringValue(s string) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, s)}
}

// typeName is the $type alias of v ("missing" for the zero Value).
func typeName(v bsoncore.Value) string { return bsonutil.TypeName(v.Type) }

// ---- $expr in a filter ----

type exprNode struct {
	operand bsoncore.Value
	x       Expression
	now     func() time.Time
	coll    Collator // the query's collation (setCollator)
}

func (n *exprNode) Kind() Kind                  { return KindExpr }
func (n *exprNode) Path() string                { return "" }
func (n *exprNode) Value() bsoncore.Value       { return n.operand }
func (n *exprNode) Children() []MatchExpression { return nil }
func (n *exprNode) String() string              { return fmt.Sprintf("$expr %s", n.operand) }

// Expr returns the parsed expression.
func (n *exprNode) Expr() Expression { return n.x }

func (n *exprNode) match(doc []byte, _ *MatchDetails) (bool, error) {
	ctx := EvalContext{Root: doc, Now: n.now(), Collator: n.coll}
	v, err := n.x.Eval(&ctx)
	if err != nil {
		return false, err
	}
	return truthy(v), nil
}

func (p *parser) parseExprMatch(val bsoncore.Value) (MatchExpression, error) {
	x, err := ParseExpression(val, &ExprParseContext{})
	if err != nil {
		return nil, err
	}
	now := p.opts.Now
	if now == nil {
		now = time.Now
	}
	return &exprNode{operand: val, x: x, now: now}, nil
}
