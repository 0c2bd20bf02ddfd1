package expr

import (
	"math"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// This file is the core of the expression language: the parser, the leaves (field paths,
// variables, literals, array and object expressions), the operator table and the core
// operators (comparisons, $and/$or/$not, $add/$subtract/$multiply/$divide, $cond, $ifNull,
// $in, $size, $type, $literal). The other operators are in arith.go, array.go, date.go,
// misc.go and string.go.
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
	Collator bsonutil.StringComparer
}

// ParseContext is what parsing an expression needs. Vars lists the user variables in
// scope (so references to unknown ones fail at parse time, as in MongoDB).
type ParseContext struct {
	Vars map[string]bool
}

// Parser parses the argument of one operator ({$name: args}).
type Parser func(args bsoncore.Value, pc *ParseContext) (Expression, error)

// table maps operator names (with their "$") to parsers.
type table map[string]Parser

// add adds an operator; a name added twice is a programming error.
func (t table) add(name string, p Parser) {
	if _, dup := t[name]; dup {
		panic("expr: operator " + name + " defined twice")
	}
	t[name] = p
}

// operators is the whole operator set. It is built once, when the package is initialised,
// and only read afterwards, so lookups need no lock and every importer (the matcher's $expr,
// find's projection, aggregation) sees the same language.
var operators table

// init builds the table. A variable initialiser cannot: the parsers refer back to Parse,
// which reads the table, and Go rejects that as an initialisation cycle.
func init() { operators = newTable() }

func newTable() table {
	t := table{}
	t.addCore()
	t.addArith()
	t.addArray()
	t.addDate()
	t.addMisc()
	t.addString()
	return t
}

// addCore adds the comparison, logical and basic arithmetic operators.
func (t table) addCore() {
	for _, op := range []string{"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$cmp"} {
		t.add(op, parseCompareExpr(op))
	}
	t.add("$and", parseVariadic("$and", 0, func(vs []bsoncore.Value) (bsoncore.Value, error) {
		for _, v := range vs {
			if !bsonutil.TrueValue(v) {
				return Bool(false), nil
			}
		}
		return Bool(true), nil
	}, true))
	t.add("$or", parseVariadic("$or", 0, func(vs []bsoncore.Value) (bsoncore.Value, error) {
		for _, v := range vs {
			if bsonutil.TrueValue(v) {
				return Bool(true), nil
			}
		}
		return Bool(false), nil
	}, true))
	t.add("$not", parseFixed("$not", 1, func(vs []bsoncore.Value) (bsoncore.Value, error) {
		return Bool(!bsonutil.TrueValue(vs[0])), nil
	}))
	t.add("$add", parseVariadic("$add", 0, evalAdd, false))
	t.add("$multiply", parseVariadic("$multiply", 0, evalMultiply, false))
	t.add("$subtract", parseFixed("$subtract", 2, evalSubtract))
	t.add("$divide", parseFixed("$divide", 2, evalDivide))
	t.add("$size", parseFixed("$size", 1, func(vs []bsoncore.Value) (bsoncore.Value, error) {
		arr, ok := vs[0].ArrayOK()
		if !ok {
			return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location17124,
				"The argument to $size must be an array. Type of argument is: %s", TypeName(vs[0]))
		}
		vals, err := arr.Values()
		if err != nil {
			return bsoncore.Value{}, mongoerr.Newf(mongoerr.InvalidBSON, "invalid array: %v", err)
		}
		return Int32(int32(len(vals))), nil
	}))
	t.add("$type", parseFixed("$type", 1, func(vs []bsoncore.Value) (bsoncore.Value, error) {
		return String(TypeName(vs[0])), nil
	}))
	t.add("$in", parseFixedCtx("$in", 2, func(ctx *EvalContext, vs []bsoncore.Value) (bsoncore.Value, error) {
		arr, ok := vs[1].ArrayOK()
		if !ok {
			return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location40081,
				"$in requires an array as a second argument, found: %s", TypeName(vs[1]))
		}
		vals, _ := arr.Values()
		for _, v := range vals {
			if Compare(vs[0], v, ctx.Collator) == 0 {
				return Bool(true), nil
			}
		}
		return Bool(false), nil
	}))
	t.add("$ifNull", parseIfNull)
	t.add("$cond", parseCond)
	t.add("$literal", func(args bsoncore.Value, _ *ParseContext) (Expression, error) {
		return constExpr{args}, nil
	})
}

// maxDepth bounds expression nesting, as the matcher bounds filters, so hostile input cannot
// exhaust the stack.
const maxDepth = 100

// Parse parses an aggregation expression: a "$field.path", a "$$variable", an
// operator object {$op: args}, an object of expressions, an array of expressions, or a
// literal.
func Parse(v bsoncore.Value, pc *ParseContext) (Expression, error) {
	return parseExpr(v, pc, 0)
}

func parseExpr(v bsoncore.Value, pc *ParseContext, depth int) (Expression, error) {
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

func parseObjectExpr(d bsoncore.Document, pc *ParseContext, depth int) (Expression, error) {
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
		p, ok := operators[name]
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
func argExprs(args bsoncore.Value, pc *ParseContext) ([]Expression, error) {
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
func fixedArgs(name string, n int, args bsoncore.Value, pc *ParseContext) ([]Expression, error) {
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
func parseFixedCtx(name string, n int, fn func(*EvalContext, []bsoncore.Value) (bsoncore.Value, error)) Parser {
	return func(args bsoncore.Value, pc *ParseContext) (Expression, error) {
		xs, err := fixedArgs(name, n, args, pc)
		if err != nil {
			return nil, err
		}
		return funcCtxExpr{args: xs, fn: fn}, nil
	}
}

// parseFixed is an operator taking exactly n arguments.
func parseFixed(name string, n int, fn func([]bsoncore.Value) (bsoncore.Value, error)) Parser {
	return func(args bsoncore.Value, pc *ParseContext) (Expression, error) {
		xs, err := fixedArgs(name, n, args, pc)
		if err != nil {
			return nil, err
		}
		return funcExpr{args: xs, fn: fn}, nil
	}
}

// parseVariadic is an operator taking at least min arguments. shortCircuit operators ($and,
// $or) are evaluated lazily, as MongoDB does, so later arguments' errors are not raised.
func parseVariadic(name string, min int, fn func([]bsoncore.Value) (bsoncore.Value, error), shortCircuit bool) Parser {
	return func(args bsoncore.Value, pc *ParseContext) (Expression, error) {
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
		if bsonutil.TrueValue(v) != s.and {
			return Bool(!s.and), nil
		}
	}
	return Bool(s.and), nil
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

func parseFieldPathExpr(s string, pc *ParseContext) (Expression, error) {
	variable, rest := "CURRENT", s[1:]
	if strings.HasPrefix(s, "$$") {
		name, tail, _ := strings.Cut(s[2:], ".")
		if err := CheckVarNameRead(name); err != nil {
			return nil, err
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
	if strings.HasSuffix(rest, ".") {
		return nil, mongoerr.New(mongoerr.Location40353, "FieldPath must not end with a '.'.")
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
		base = Doc(ctx.Root)
	case "CURRENT":
		if ctx.Current != nil {
			base = Doc(ctx.Current)
		} else {
			base = Doc(ctx.Root)
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

// ---- comparison, logic ----

// Compare is aggregation's Value::compare: BSON order, with missing ranked with undefined
// (below null) instead of with null as in the matcher, and strings compared under sc (nil:
// binary).
func Compare(a, b bsoncore.Value, sc bsonutil.StringComparer) int {
	if a.Type == 0 {
		a = bsoncore.Value{Type: bsoncore.TypeUndefined}
	}
	if b.Type == 0 {
		b = bsoncore.Value{Type: bsoncore.TypeUndefined}
	}
	if sc == nil {
		return bsonutil.Compare(a, b)
	}
	return bsonutil.CompareWithCollator(a, b, sc)
}

func parseCompareExpr(op string) Parser {
	return parseFixedCtx(op, 2, func(ctx *EvalContext, vs []bsoncore.Value) (bsoncore.Value, error) {
		c := Compare(vs[0], vs[1], ctx.Collator)
		switch op {
		case "$eq":
			return Bool(c == 0), nil
		case "$ne":
			return Bool(c != 0), nil
		case "$gt":
			return Bool(c > 0), nil
		case "$gte":
			return Bool(c >= 0), nil
		case "$lt":
			return Bool(c < 0), nil
		case "$lte":
			return Bool(c <= 0), nil
		}
		return Int32(int32(c)), nil // $cmp
	})
}

type condExpr struct{ ifX, thenX, elseX Expression }

func (c condExpr) Eval(ctx *EvalContext) (bsoncore.Value, error) {
	v, err := c.ifX.Eval(ctx)
	if err != nil {
		return bsoncore.Value{}, err
	}
	if bsonutil.TrueValue(v) {
		return c.thenX.Eval(ctx)
	}
	return c.elseX.Eval(ctx)
}

func parseCond(args bsoncore.Value, pc *ParseContext) (Expression, error) {
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
		if !IsNullish(v) || i == len(f)-1 {
			return v, nil
		}
	}
	return bsoncore.Value{}, nil
}

func parseIfNull(args bsoncore.Value, pc *ParseContext) (Expression, error) {
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

// arith applies op (one of + - * /) to two numbers with MongoDB's type promotion: int32
// results that overflow become int64, int64 results that overflow become double.
func arith(op byte, a, b bsoncore.Value) (bsoncore.Value, error) {
	cls := max(numClass(a.Type), numClass(b.Type))
	if op == '/' && cls < 2 {
		cls = 2 // $divide of integers is a double
	}
	switch cls {
	case 3:
		x, err := ToDecimal(a)
		if err != nil {
			return bsoncore.Value{}, err
		}
		y, err := ToDecimal(b)
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
		return FromDecimal(z)
	case 2:
		x, _ := bsonutil.ToFloat64(a)
		y, _ := bsonutil.ToFloat64(b)
		return Double(floatOp(op, x, y)), nil
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
		return Double(floatOp(op, fx, fy)), nil
	}
	if cls == 0 && z >= math.MinInt32 && z <= math.MaxInt32 {
		return Int32(int32(z)), nil
	}
	return Int64(z), nil
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
	acc := Int32(0)
	var date *int64
	for _, v := range vs {
		switch {
		case IsNullish(v):
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
			return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location16554, "$add only supports numeric or date types, not %s", TypeName(v))
		}
	}
	if date != nil {
		f, _ := bsonutil.ToFloat64(acc)
		return bsoncore.Value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, *date+int64(math.Round(f)))}, nil
	}
	return acc, nil
}

func evalMultiply(vs []bsoncore.Value) (bsoncore.Value, error) {
	acc := Int32(1)
	for _, v := range vs {
		switch {
		case IsNullish(v):
			return bsoncore.Value{Type: bsoncore.TypeNull}, nil
		case bsonutil.IsNumber(v.Type):
			var err error
			if acc, err = arith('*', acc, v); err != nil {
				return bsoncore.Value{}, err
			}
		default:
			return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location16555, "$multiply only supports numeric types, not %s", TypeName(v))
		}
	}
	return acc, nil
}

func evalSubtract(vs []bsoncore.Value) (bsoncore.Value, error) {
	a, b := vs[0], vs[1]
	switch {
	case IsNullish(a) || IsNullish(b):
		return bsoncore.Value{Type: bsoncore.TypeNull}, nil
	case bsonutil.IsNumber(a.Type) && bsonutil.IsNumber(b.Type):
		return arith('-', a, b)
	case a.Type == bsoncore.TypeDateTime && b.Type == bsoncore.TypeDateTime:
		return Int64(a.DateTime() - b.DateTime()), nil
	case a.Type == bsoncore.TypeDateTime && bsonutil.IsNumber(b.Type):
		f, _ := bsonutil.ToFloat64(b)
		return bsoncore.Value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, a.DateTime()-int64(math.Round(f)))}, nil
	}
	return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location16556, "can't $subtract %s from %s", TypeName(b), TypeName(a))
}

func evalDivide(vs []bsoncore.Value) (bsoncore.Value, error) {
	a, b := vs[0], vs[1]
	switch {
	case IsNullish(a) || IsNullish(b):
		return bsoncore.Value{Type: bsoncore.TypeNull}, nil
	case !bsonutil.IsNumber(a.Type) || !bsonutil.IsNumber(b.Type):
		return bsoncore.Value{}, mongoerr.Newf(mongoerr.Location16609, "$divide only supports numeric types, not %s and %s", TypeName(a), TypeName(b))
	}
	if f, _ := bsonutil.ToFloat64(b); f == 0 {
		return bsoncore.Value{}, mongoerr.New(mongoerr.Location16608, "can't $divide by zero")
	}
	return arith('/', a, b)
}
