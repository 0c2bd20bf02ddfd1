package query

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlclark/regexp2"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// Collator compares strings under a collation (a *collation.Collator). Equality, ranges and
// $in on strings (also nested in documents and arrays) follow it; $regex, $type, $size and
// field names do not, as in MongoDB. A nil Collator is binary comparison, MongoDB's default.
type Collator = bsonutil.StringComparer

// ParseOptions are the context a filter is parsed in: which features the command allows
// (MongoDB's AllowedFeatureSet) and the inputs of expressions.
type ParseOptions struct {
	// AllowExpr permits $expr (find, update, delete, aggregate $match; not partial indexes).
	AllowExpr bool
	// AllowJSONSchema permits $jsonSchema (find and validators; not partial indexes).
	AllowJSONSchema bool
	// Collator is the query's collation; nil means binary comparison.
	Collator Collator
	// Now supplies $$NOW for $expr; nil means time.Now.
	Now func() time.Time
	// Vars are the command's "let" variables (already evaluated: they are constants), by
	// name without "$$". $expr and computed projection fields may reference them as
	// $$name; a reference to any other user variable fails to parse with 17276.
	Vars map[string]bsoncore.Value
	// VarNames declares variables bound per match rather than at parse time (an aggregation's
	// $lookup let, its pipeline's variables): $expr may reference them and reads their
	// values from MatchDetails.Vars; a match without MatchDetails.Vars sees them missing.
	VarNames []string
}

// Matcher is a parsed filter. It is immutable and safe for concurrent use.
type Matcher struct {
	root MatchExpression
	vars map[string]bsoncore.Value // ParseOptions.Vars, for the projection (ParseProjection)
}

// maxDepth bounds filter nesting (MongoDB: BSONDepth and the parser's depth check), so hostile
// filters cannot exhaust the stack.
const maxDepth = 100

// parser carries the options through the recursive descent.
type parser struct {
	opts ParseOptions
}

// Parse parses a query filter (find's filter, a $match stage, an update's or delete's q).
func Parse(filter bsoncore.Document, opts ParseOptions) (*Matcher, error) {
	// Validating once up front lets the parser use bsoncore's panicking accessors safely.
	if err := filter.Validate(); err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid filter: %v", err)
	}
	p := &parser{opts: opts}
	root, err := p.parseFilter(filter, true, 0)
	if err != nil {
		return nil, err
	}
	if opts.Collator != nil {
		setCollator(root, opts.Collator)
	}
	return &Matcher{root: root, vars: opts.Vars}, nil
}

// Matches reports whether doc satisfies the filter. Errors come only from $expr evaluation
// (MongoDB aborts the query on them too).
func (m *Matcher) Matches(doc bsoncore.Document) (bool, error) {
	return m.root.match(doc, nil)
}

// MatchesWithDetails is Matches that also reports the elemMatchKey into d.
func (m *Matcher) MatchesWithDetails(doc bsoncore.Document, d *MatchDetails) (bool, error) {
	if d == nil {
		return m.Matches(doc)
	}
	d.key = nil
	ok, err := m.root.match(doc, d)
	d.ElemMatchKey, d.HasElemMatchKey = "", false
	if ok && err == nil && d.key != nil {
		d.ElemMatchKey, d.HasElemMatchKey = string(d.key), true
	}
	d.key = nil
	return ok, err
}

// Expression returns the parsed tree, for the planner.
func (m *Matcher) Expression() MatchExpression { return m.root }

func depthErr() error {
	return mongoerr.Newf(mongoerr.BadValue, "exceeded depth limit of %d when parsing match expression", maxDepth)
}

// parseFilter parses a document of field predicates and top-level operators, ANDed.
// topLevel is false inside $elemMatch, where pathless operators other than the logical ones
// are not allowed.
func (p *parser) parseFilter(doc bsoncore.Document, topLevel bool, depth int) (MatchExpression, error) {
	if depth > maxDepth {
		return nil, depthErr()
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid filter: %v", err)
	}
	and := &logicalNode{kind: KindAnd}
	for _, el := range elems {
		key, val := el.Key(), el.Value()
		var child MatchExpression
		if strings.HasPrefix(key, "$") {
			child, err = p.parseTopOperator(key, val, topLevel, depth)
		} else {
			child, err = p.parseField(key, val, depth)
		}
		if err != nil {
			return nil, err
		}
		if child != nil {
			and.children = append(and.children, child)
		}
	}
	if len(and.children) == 1 {
		return and.children[0], nil
	}
	return and, nil
}

func (p *parser) parseTopOperator(key string, val bsoncore.Value, topLevel bool, depth int) (MatchExpression, error) {
	switch key {
	case "$and", "$or", "$nor":
		return p.parseLogical(key, val, topLevel, depth)
	case "$comment":
		return nil, nil
	case "$alwaysTrue", "$alwaysFalse":
		if !bsonutil.IsNumber(val.Type) {
			return nil, mongoerr.Newf(mongoerr.FailedToParse, "%s must be an integer value of 1", key)
		}
		return &constNode{val: key == "$alwaysTrue"}, nil
	case "$expr":
		if !topLevel {
			return nil, mongoerr.New(mongoerr.BadValue, "$expr can only be applied to the top-level document")
		}
		if !p.opts.AllowExpr {
			return nil, mongoerr.New(mongoerr.QueryFeatureNotAllowed, "$expr is not allowed in this context")
		}
		return p.parseExprMatch(val)
	case "$jsonSchema":
		if !p.opts.AllowJSONSchema {
			return nil, mongoerr.New(mongoerr.QueryFeatureNotAllowed, "$jsonSchema is not allowed in this context")
		}
		return parseJSONSchemaMatch(val)
	case "$where":
		// Humongo has no JavaScript engine: this is what mongod says when it has none.
		return nil, mongoerr.New(mongoerr.BadValue, "no globalScriptEngine in $where parsing")
	case "$text":
		// No text indexes exist, so this is the error mongod gives a collection without one.
		return nil, mongoerr.New(mongoerr.IndexNotFound, "text index required for $text query")
	}
	return nil, mongoerr.Newf(mongoerr.BadValue,
		"unknown top level operator: %s. If you have a field name that starts with a '$' symbol, consider using $getField or $setField.", key)
}

func (p *parser) parseLogical(key string, val bsoncore.Value, topLevel bool, depth int) (MatchExpression, error) {
	arr, ok := val.ArrayOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, key+" must be an array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s: %v", key, err)
	}
	if len(vals) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "$and/$or/$nor must be a nonempty array")
	}
	kind := map[string]Kind{"$and": KindAnd, "$or": KindOr, "$nor": KindNor}[key]
	n := &logicalNode{kind: kind}
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.BadValue, "$or/$and/$nor entries need to be full objects")
		}
		child, err := p.parseFilter(d, topLevel, depth+1)
		if err != nil {
			return nil, err
		}
		n.children = append(n.children, child)
	}
	return n, nil
}

// isOperatorDocument is MongoDB's isExpressionDocument: an object whose first field starts
// with '$' and is not a DBRef field ($ref, $id, $db), which compare as plain values.
func isOperatorDocument(v bsoncore.Value) bool {
	d, ok := v.DocumentOK()
	if !ok {
		return false
	}
	el, err := d.IndexErr(0)
	if err != nil {
		return false
	}
	k := el.Key()
	return strings.HasPrefix(k, "$") && k != "$ref" && k != "$id" && k != "$db"
}

// parseField parses {path: value}.
func (p *parser) parseField(path string, val bsoncore.Value, depth int) (MatchExpression, error) {
	switch {
	case val.Type == bsoncore.TypeRegex:
		return newRegexFromValue(path, val, "")
	case isOperatorDocument(val):
		return p.parseOperators(path, val.Document(), depth+1)
	}
	return newEq(path, val)
}

func newEq(path string, val bsoncore.Value) (MatchExpression, error) {
	if val.Type == bsoncore.TypeUndefined {
		return nil, mongoerr.New(mongoerr.BadValue, "cannot compare to undefined")
	}
	return newCmp(KindEq, path, val), nil
}

// parseOperators parses an operator document {$gt: 1, $lt: 5} applied to path (path is "" in
// $elemMatch's value form); the operators are ANDed.
func (p *parser) parseOperators(path string, ops bsoncore.Document, depth int) (MatchExpression, error) {
	if depth > maxDepth {
		return nil, depthErr()
	}
	elems, err := ops.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid filter: %v", err)
	}
	and := &logicalNode{kind: KindAnd}
	var regex, options *bsoncore.Value
	for _, el := range elems {
		key, val := el.Key(), el.Value()
		switch key {
		case "$regex":
			regex = &val
			continue
		case "$options":
			options = &val
			continue
		}
		child, err := p.parseOperator(path, key, val, depth)
		if err != nil {
			return nil, err
		}
		if child != nil {
			and.children = append(and.children, child)
		}
	}
	if regex != nil || options != nil {
		re, err := newRegexFromOperators(path, regex, options)
		if err != nil {
			return nil, err
		}
		and.children = append(and.children, re)
	}
	if len(and.children) == 1 {
		return and.children[0], nil
	}
	return and, nil
}

var cmpKinds = map[string]Kind{"$eq": KindEq, "$lt": KindLt, "$lte": KindLte, "$gt": KindGt, "$gte": KindGte}

var bitKinds = map[string]Kind{"$bitsAllSet": KindBitsAllSet, "$bitsAllClear": KindBitsAllClear,
	"$bitsAnySet": KindBitsAnySet, "$bitsAnyClear": KindBitsAnyClear}

func (p *parser) parseOperator(path, op string, val bsoncore.Value, depth int) (MatchExpression, error) {
	if k, ok := cmpKinds[op]; ok {
		if val.Type == bsoncore.TypeUndefined {
			return nil, mongoerr.New(mongoerr.BadValue, "cannot compare to undefined")
		}
		// expression_parser.cpp's parseComparison: only $eq may take a regex operand.
		if k != KindEq && val.Type == bsoncore.TypeRegex {
			return nil, mongoerr.Newf(mongoerr.BadValue, "Can't have RegEx as arg to predicate over field '%s'.", path)
		}
		return newCmp(k, path, val), nil
	}
	if k, ok := bitKinds[op]; ok {
		return parseBits(path, op, k, val)
	}
	switch op {
	case "$ne":
		if val.Type == bsoncore.TypeRegex {
			return nil, mongoerr.New(mongoerr.BadValue, "Can't have regex as arg to $ne.")
		}
		eq, err := newEq(path, val)
		if err != nil {
			return nil, err
		}
		return &notNode{child: eq}, nil
	case "$in", "$nin":
		in, err := parseIn(path, op, val)
		if err != nil {
			return nil, err
		}
		if op == "$nin" {
			return &notNode{child: in}, nil
		}
		return in, nil
	case "$exists":
		ex := &existsNode{pathNode{path}}
		if bsonutil.TrueValue(val) {
			return ex, nil
		}
		return &notNode{child: ex}, nil
	case "$type":
		return parseType(path, val)
	case "$size":
		return parseSize(path, val)
	case "$mod":
		return parseMod(path, val)
	case "$all":
		return p.parseAll(path, val, depth)
	case "$elemMatch":
		return p.parseElemMatch(path, val, depth)
	case "$not":
		return p.parseNot(path, val, depth)
	case "$near", "$nearSphere", "$geoWithin", "$geoIntersects", "$within":
		return nil, mongoerr.Newf(mongoerr.NotImplemented, "geospatial query operator %s is not supported", op)
	}
	return nil, mongoerr.Newf(mongoerr.BadValue, "unknown operator: %s", op)
}

func (p *parser) parseNot(path string, val bsoncore.Value, depth int) (MatchExpression, error) {
	switch {
	case val.Type == bsoncore.TypeRegex:
		re, err := newRegexFromValue(path, val, "")
		if err != nil {
			return nil, err
		}
		return &notNode{child: re}, nil
	case val.Type == bsoncore.TypeEmbeddedDocument:
		d := val.Document()
		if len(d) <= 5 {
			return nil, mongoerr.New(mongoerr.BadValue, "$not cannot be empty")
		}
		child, err := p.parseOperators(path, d, depth+1)
		if err != nil {
			return nil, err
		}
		return &notNode{child: child}, nil
	}
	return nil, mongoerr.New(mongoerr.BadValue, "$not needs a regex or a document")
}

func parseIn(path, op string, val bsoncore.Value) (MatchExpression, error) {
	arr, ok := val.ArrayOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, op+" needs an array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s: %v", op, err)
	}
	n := &inNode{pathNode: pathNode{path}, arr: val}
	for _, v := range vals {
		switch {
		case v.Type == bsoncore.TypeRegex:
			re, err := newRegexFromValue(path, v, "")
			if err != nil {
				return nil, err
			}
			n.regexes = append(n.regexes, re)
			continue
		case v.Type == bsoncore.TypeUndefined:
			return nil, mongoerr.New(mongoerr.BadValue, "InMatchExpression equality cannot be undefined")
		case isOperatorDocument(v):
			return nil, mongoerr.New(mongoerr.BadValue, "cannot nest $ under "+op)
		case v.Type == bsoncore.TypeNull:
			n.hasNull = true
		}
		n.vals = append(n.vals, v)
	}
	n.vals = sortedSet(n.vals, bsonutil.Compare)
	return n, nil
}

// sortedSet sorts vals under cmp and drops duplicates (values cmp finds equal match the same
// documents): $in matching is then a binary search, whatever the operand's size.
func sortedSet(vals []bsoncore.Value, cmp func(a, b bsoncore.Value) int) []bsoncore.Value {
	slices.SortFunc(vals, cmp)
	return slices.CompactFunc(vals, func(a, b bsoncore.Value) bool { return cmp(a, b) == 0 })
}

// setCollator makes the comparison leaves of a parsed tree compare strings under c. It runs
// once after parsing so the many constructors of leaves stay collation-free.
func setCollator(e MatchExpression, c Collator) {
	switch n := e.(type) {
	case *cmpNode:
		n.coll = c
	case *exprNode:
		n.coll = c
	case *inNode:
		n.coll = c
		n.vals = sortedSet(n.vals, func(a, b bsoncore.Value) int { return bsonutil.CompareWithCollator(a, b, c) })
	}
	for _, ch := range e.Children() {
		setCollator(ch, c)
	}
}

// parseTypeSet reads one $type operand element into types/number.
func addTypeSpec(v bsoncore.Value, types *[256]bool, number *bool) error {
	switch {
	case v.Type == bsoncore.TypeString:
		s := v.StringValue()
		if s == "number" {
			*number = true
			return nil
		}
		t, ok := bsonutil.TypeByName(s)
		if !ok {
			return mongoerr.Newf(mongoerr.BadValue, "Unknown type name alias: %s", s)
		}
		types[byte(t)] = true
		return nil
	case bsonutil.IsNumber(v.Type):
		code, ok := bsonutil.ToInt64Exact(v)
		if !ok {
			f, _ := bsonutil.ToFloat64(v)
			return mongoerr.Newf(mongoerr.BadValue, "Invalid numerical type code: %v", f)
		}
		t := bsoncore.Type(byte(code))
		if t == 0 || bsonutil.TypeName(t) == "invalid" || (code != -1 && code != int64(byte(code))) {
			return mongoerr.Newf(mongoerr.BadValue, "Invalid numerical type code: %d", code)
		}
		if code == -1 {
			t = bsoncore.TypeMinKey
		}
		types[byte(t)] = true
		return nil
	}
	return mongoerr.New(mongoerr.TypeMismatch, "type must be represented as a number or a string")
}

func parseType(path string, val bsoncore.Value) (MatchExpression, error) {
	n := &typeNode{pathNode: pathNode{path}, operand: val}
	if arr, ok := val.ArrayOK(); ok {
		vals, err := arr.Values()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid $type: %v", err)
		}
		for _, v := range vals {
			if err := addTypeSpec(v, &n.types, &n.number); err != nil {
				return nil, err
			}
		}
		return n, nil
	}
	if err := addTypeSpec(val, &n.types, &n.number); err != nil {
		return nil, err
	}
	return n, nil
}

func parseSize(path string, val bsoncore.Value) (MatchExpression, error) {
	if !bsonutil.IsNumber(val.Type) {
		return nil, mongoerr.New(mongoerr.BadValue, "$size needs a number")
	}
	n := &sizeNode{pathNode: pathNode{path}, operand: val}
	i, ok := bsonutil.ToInt64Exact(val)
	switch {
	case !ok:
		return nil, mongoerr.New(mongoerr.BadValue, "$size must be a whole number")
	case i < 0:
		return nil, mongoerr.New(mongoerr.BadValue, "$size may not be negative")
	case i > math.MaxInt32:
		return nil, mongoerr.New(mongoerr.BadValue, "$size must be representable as a 32-bit integer")
	default:
		n.n = int(i)
	}
	return n, nil
}

func parseMod(path string, val bsoncore.Value) (MatchExpression, error) {
	arr, ok := val.ArrayOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, needs to be an array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid $mod: %v", err)
	}
	switch {
	case len(vals) < 2:
		return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, not enough elements")
	case len(vals) > 2:
		return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, too many elements")
	case !bsonutil.IsNumber(vals[0].Type):
		return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, divisor not a number")
	case !bsonutil.IsNumber(vals[1].Type):
		return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, remainder not a number")
	}
	// Since 5.0 both operands are truncated toward zero; NaN and infinities are rejected.
	conv := func(v bsoncore.Value, what string) (int64, error) {
		if f, _ := bsonutil.ToFloat64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, mongoerr.Newf(mongoerr.BadValue,
				"malformed mod, %s value is invalid :: caused by :: Unable to coerce NaN/Inf to integral type", what)
		}
		i, _ := truncInt64(v)
		return i, nil
	}
	div, err := conv(vals[0], "divisor")
	if err != nil {
		return nil, err
	}
	rem, err := conv(vals[1], "remainder")
	if err != nil {
		return nil, err
	}
	if div == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "divisor cannot be 0")
	}
	return &modNode{pathNode: pathNode{path}, operand: val, div: div, rem: rem}, nil
}

func parseBits(path, op string, kind Kind, val bsoncore.Value) (MatchExpression, error) {
	n := &bitsNode{pathNode: pathNode{path}, kind: kind, operand: val}
	switch {
	case bsonutil.IsNumber(val.Type):
		mask, ok := bsonutil.ToInt64Exact(val)
		if !ok {
			return nil, mongoerr.Newf(mongoerr.FailedToParse, "Expected an integer: %s: %s", op, shellString(val))
		}
		if mask < 0 {
			return nil, mongoerr.Newf(mongoerr.FailedToParse, "Expected a positive number in: %s: %s", op, shellString(val))
		}
		for p := uint32(0); p < 63; p++ {
			if mask>>p&1 == 1 {
				n.positions = append(n.positions, p)
			}
		}
	case val.Type == bsoncore.TypeBinary:
		_, data, ok := val.BinaryOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid BinData bitmask")
		}
		for i, b := range data {
			for j := uint32(0); j < 8; j++ {
				if b>>j&1 == 1 {
					n.positions = append(n.positions, uint32(i)*8+j)
				}
			}
		}
	case val.Type == bsoncore.TypeArray:
		elems, err := bsoncore.Document(val.Array()).Elements()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s: %v", op, err)
		}
		for _, e := range elems {
			// parseBitPositionsArray prints the offending element with its array index
			// ("bit positions must be >= 0 but got: 0: -1").
			v := e.Value()
			shown := bsonutil.FormatElement(e.Key(), v)
			if !bsonutil.IsNumber(v.Type) {
				return nil, mongoerr.Newf(mongoerr.BadValue,
					"bit positions must be an integer but got: %s", shown)
			}
			i, ok := bsonutil.ToInt64Exact(v)
			switch {
			case !ok:
				return nil, mongoerr.Newf(mongoerr.BadValue, "bit positions must be an integer but got: %s", shown)
			case i < 0:
				return nil, mongoerr.Newf(mongoerr.BadValue, "bit positions must be >= 0 but got: %s", shown)
			case i > math.MaxInt32:
				return nil, mongoerr.Newf(mongoerr.BadValue,
					"bit positions cannot be represented as a 32-bit signed integer: %s", shown)
			}
			n.positions = append(n.positions, uint32(i))
		}
	default:
		return nil, mongoerr.Newf(mongoerr.BadValue,
			"%s takes an Array, a number, or a BinData but received: %s: %s", path, op, shellString(val))
	}
	return n, nil
}

func (p *parser) parseAll(path string, val bsoncore.Value, depth int) (MatchExpression, error) {
	arr, ok := val.ArrayOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "$all needs an array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid $all: %v", err)
	}
	if len(vals) == 0 {
		return &constNode{val: false}, nil
	}
	and := &logicalNode{kind: KindAnd}
	isElemMatch := func(v bsoncore.Value) bool {
		if !isOperatorDocument(v) {
			return false
		}
		el, _ := v.Document().IndexErr(0)
		return el.Key() == "$elemMatch"
	}
	if isElemMatch(vals[0]) {
		for _, v := range vals {
			if !isElemMatch(v) {
				return nil, mongoerr.New(mongoerr.BadValue, "$all/$elemMatch has to be consistent")
			}
			child, err := p.parseOperators(path, v.Document(), depth+1)
			if err != nil {
				return nil, err
			}
			and.children = append(and.children, child)
		}
		return and, nil
	}
	for _, v := range vals {
		var child MatchExpression
		var err error
		switch {
		case v.Type == bsoncore.TypeRegex:
			child, err = newRegexFromValue(path, v, "")
		case isOperatorDocument(v):
			return nil, mongoerr.New(mongoerr.BadValue, "no $ expressions in $all")
		default:
			child, err = newEq(path, v)
		}
		if err != nil {
			return nil, err
		}
		and.children = append(and.children, child)
	}
	return and, nil
}

// pathlessOperators are the operators whose presence first in an $elemMatch makes it the
// object form (they apply to a whole document, not to one value).
var pathlessOperators = map[string]bool{"$and": true, "$or": true, "$nor": true, "$where": true,
	"$expr": true, "$text": true, "$comment": true, "$jsonSchema": true, "$alwaysTrue": true,
	"$alwaysFalse": true}

func (p *parser) parseElemMatch(path string, val bsoncore.Value, depth int) (MatchExpression, error) {
	d, ok := val.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "$elemMatch needs an Object")
	}
	if isOperatorDocument(val) {
		el, _ := d.IndexErr(0)
		if !pathlessOperators[el.Key()] {
			// Value form: {$elemMatch: {$gte: 80, $lt: 85}}.
			sub, err := p.parseOperators("", d, depth+1)
			if err != nil {
				return nil, err
			}
			children := []MatchExpression{sub}
			if l, ok := sub.(*logicalNode); ok && l.kind == KindAnd {
				children = l.children
			}
			return &elemMatchValueNode{pathNode: pathNode{path}, operand: val, children: children}, nil
		}
	}
	sub, err := p.parseFilter(d, false, depth+1)
	if err != nil {
		return nil, err
	}
	return &elemMatchObjectNode{pathNode: pathNode{path}, operand: val, sub: sub}, nil
}

// ---- regex ----

// newRegexFromValue builds a regex predicate from a BSON regex; extraFlags come from $options.
func newRegexFromValue(path string, v bsoncore.Value, extraFlags string) (*regexNode, error) {
	pattern, flags, ok := v.RegexOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid regex value")
	}
	return newRegex(path, pattern, flags+extraFlags)
}

func newRegexFromOperators(path string, regex, options *bsoncore.Value) (*regexNode, error) {
	if regex == nil {
		return nil, mongoerr.New(mongoerr.BadValue, "$options needs a $regex")
	}
	opts := ""
	if options != nil {
		s, ok := options.StringValueOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.BadValue, "$options has to be a string")
		}
		opts = s
	}
	switch regex.Type {
	case bsoncore.TypeString:
		return newRegex(path, regex.StringValue(), opts)
	case bsoncore.TypeRegex:
		_, flags, _ := regex.RegexOK()
		if flags != "" && opts != "" {
			return nil, mongoerr.New(mongoerr.BadValue, "options set in both $regex and $options")
		}
		return newRegexFromValue(path, *regex, opts)
	}
	return nil, mongoerr.New(mongoerr.BadValue, "$regex has to be a string")
}

// newRegex compiles a pattern with MongoDB's (PCRE) flags: i, m, s, x, and u (UTF-8, always
// on here). regexp2 gives PCRE-like syntax (lookaround, backreferences) that RE2 lacks.
func newRegex(path, pattern, flags string) (*regexNode, error) {
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, mongoerr.New(mongoerr.Location51109, "Regular expression cannot contain an embedded null byte")
	}
	if strings.IndexByte(flags, 0) >= 0 {
		return nil, mongoerr.New(mongoerr.Location51110, "Regular expression options string cannot contain an embedded null byte")
	}
	re, err := compileRegex(pattern, flags)
	if err != nil {
		return nil, err
	}
	return &regexNode{pathNode: pathNode{path}, pattern: pattern, flags: flags, re: re}, nil
}

// compileRegex is shared with $jsonSchema's pattern and $regexMatch-like expressions.
func compileRegex(pattern, flags string) (*regexp2.Regexp, error) {
	var opts regexp2.RegexOptions
	for _, f := range flags {
		switch f {
		case 'i':
			opts |= regexp2.IgnoreCase
		case 'm':
			opts |= regexp2.Multiline
		case 's':
			opts |= regexp2.Singleline
		case 'x':
			opts |= regexp2.IgnorePatternWhitespace
		case 'u':
		default:
			return nil, mongoerr.Newf(mongoerr.Location51108, "invalid flag in regex options: %c", f)
		}
	}
	re, err := regexp2.Compile(pattern, opts)
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.Location51091, "Regular expression is invalid: %v", err)
	}
	return re, nil
}

// shellString formats a value for an error message the way the server's BSONElement::toString
// prints scalars (1.2, -1, "abc"); other values use Extended JSON.
func shellString(v bsoncore.Value) string {
	switch v.Type {
	case bsoncore.TypeInt32, bsoncore.TypeInt64:
		i, _ := bsonutil.ToInt64Exact(v)
		return strconv.FormatInt(i, 10)
	case bsoncore.TypeDouble:
		f, _ := bsonutil.ToFloat64(v)
		return strconv.FormatFloat(f, 'g', -1, 64)
	case bsoncore.TypeString:
		s, _ := v.StringValueOK()
		return strconv.Quote(s)
	}
	return v.String()
}
