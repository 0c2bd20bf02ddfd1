package query

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dlclark/regexp2"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
)

// Kind is the kind of a MatchExpression node, as the planner sees it.
type Kind int

// Node kinds. $ne, $nin and {$exists: false} parse as Not over Eq, In and Exists, as in
// MongoDB, so index bounds are derived from the positive form.
const (
	KindAlwaysTrue Kind = iota
	KindAlwaysFalse
	KindAnd
	KindOr
	KindNor
	KindNot
	KindEq
	KindLt
	KindLte
	KindGt
	KindGte
	KindIn
	KindExists
	KindType
	KindRegex
	KindMod
	KindSize
	KindBitsAllSet
	KindBitsAllClear
	KindBitsAnySet
	KindBitsAnyClear
	KindElemMatchObject
	KindElemMatchValue
	KindExpr
	KindJSONSchema
)

var kindNames = [...]string{
	KindAlwaysTrue: "$alwaysTrue", KindAlwaysFalse: "$alwaysFalse", KindAnd: "$and", KindOr: "$or",
	KindNor: "$nor", KindNot: "$not", KindEq: "$eq", KindLt: "$lt", KindLte: "$lte", KindGt: "$gt",
	KindGte: "$gte", KindIn: "$in", KindExists: "$exists", KindType: "$type", KindRegex: "$regex",
	KindMod: "$mod", KindSize: "$size", KindBitsAllSet: "$bitsAllSet", KindBitsAllClear: "$bitsAllClear",
	KindBitsAnySet: "$bitsAnySet", KindBitsAnyClear: "$bitsAnyClear",
	KindElemMatchObject: "$elemMatch", KindElemMatchValue: "$elemMatch", KindExpr: "$expr",
	KindJSONSchema: "$jsonSchema",
}

// String returns the operator name of the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// MatchExpression is a node of a parsed filter. Path and Value are what index bounds are
// built from: Path is "" for logical and pathless nodes; Value is the operand (the comparison
// value, the $in array, the $regex as a regex value, ...) or the zero Value.
type MatchExpression interface {
	Kind() Kind
	Path() string
	Value() bsoncore.Value
	Children() []MatchExpression
	// String is a short debugging form ("a $gt 5"), used in error messages.
	String() string
	match(doc []byte, d *MatchDetails) (bool, error)
}

// MatchDetails receives, from MatchesWithDetails, the index of the array element through
// which the filter matched (MongoDB's MatchDetails::elemMatchKey), for the positional $
// operator of updates and projections.
type MatchDetails struct {
	// ElemMatchKey is the array index (as a decimal string) in the first array traversed by
	// the last path predicate that matched through an array; "" with HasElemMatchKey false
	// when no array was involved.
	ElemMatchKey    string
	HasElemMatchKey bool

	// Interrupt, when set, is the operation's context: matching one document against a
	// filter of many clauses (a large $and, $or, $nor or $all) checks it every
	// interruptEvery clauses and fails with its cause, so killOp, maxTimeMS and shutdown
	// stop even a single long match.
	Interrupt context.Context

	// Vars and Now, when Vars is set, are the variables and $$NOW a $expr evaluates with
	// (ParseOptions.VarNames; an aggregation passes its run's variables). The map is the
	// caller's, used only during the call (binding operators add and remove names in it).
	Vars map[string]bsoncore.Value
	Now  time.Time

	key   []byte // into the document being matched, converted once at the end
	ticks uint32
}

// interruptEvery is how many clauses a match evaluates between checks of its Interrupt.
const interruptEvery = 256

// checkInterrupt counts one clause and, every interruptEvery, returns the cause if the
// operation was interrupted.
func (d *MatchDetails) checkInterrupt() error {
	if d == nil || d.Interrupt == nil {
		return nil
	}
	if d.ticks++; d.ticks%interruptEvery != 0 {
		return nil
	}
	if d.Interrupt.Err() != nil {
		return context.Cause(d.Interrupt)
	}
	return nil
}

// matchNoKey matches e without recording an elemMatchKey (under a negation a key means
// nothing) but keeping d's interrupt checks.
func matchNoKey(e MatchExpression, doc []byte, d *MatchDetails) (bool, error) {
	if d == nil {
		return e.match(doc, nil)
	}
	saved := d.key
	m, err := e.match(doc, d)
	d.key = saved
	return m, err
}

func (d *MatchDetails) record(k []byte) {
	if d != nil && k != nil {
		d.key = k
	}
}

// pathNode is the common part of the path-based leaves.
type pathNode struct {
	path string
}

func (p *pathNode) Path() string                { return p.path }
func (p *pathNode) Children() []MatchExpression { return nil }

// ---- comparison ----

// cmpNode is $eq, $lt, $lte, $gt, $gte (ComparisonMatchExpression).
type cmpNode struct {
	pathNode
	kind    Kind
	rhs     bsoncore.Value
	rank    int
	rhsNaN  bool
	rhsNull bool
	coll    Collator // nil: binary string comparison
}

func newCmp(kind Kind, path string, rhs bsoncore.Value) *cmpNode {
	return &cmpNode{pathNode: pathNode{path}, kind: kind, rhs: rhs,
		rank: bsonutil.CanonicalTypeOrder(rhs.Type), rhsNaN: isNaN(rhs), rhsNull: rhs.Type == bsoncore.TypeNull}
}

func (n *cmpNode) Kind() Kind            { return n.kind }
func (n *cmpNode) Value() bsoncore.Value { return n.rhs }
func (n *cmpNode) String() string        { return fmt.Sprintf("%s %s %s", n.path, n.kind, n.rhs) }
func (n *cmpNode) expandsLeafArray() bool {
	return true
}
func (n *cmpNode) match(doc []byte, d *MatchDetails) (bool, error) {
	return matchPath(doc, n.path, n, d), nil
}

// isNullish reports the values that equality to null matches: missing, null and (MongoDB
// before 8.0, so 7.0 which we follow) undefined.
func isNullish(v bsoncore.Value) bool {
	return v.Type == 0 || v.Type == bsoncore.TypeNull || v.Type == bsoncore.TypeUndefined
}

func (n *cmpNode) matchesSingle(v bsoncore.Value, _ *MatchDetails) bool {
	if n.rhsNull {
		// {a: null}, {$gte: null}, {$lte: null} match missing, null and undefined; $gt/$lt null
		// match nothing (no value of null's type is above or below null).
		return isNullish(v) && n.kind != KindLt && n.kind != KindGt
	}
	if v.Type == 0 || bsonutil.CanonicalTypeOrder(v.Type) != n.rank {
		// Type bracketing: values of another type never compare, except that everything is
		// above MinKey and below MaxKey.
		switch n.rhs.Type {
		case bsoncore.TypeMaxKey:
			return n.kind == KindLt || n.kind == KindLte
		case bsoncore.TypeMinKey:
			return n.kind == KindGt || n.kind == KindGte
		}
		return false
	}
	if n.rank == numberRank && (n.rhsNaN || isNaN(v)) {
		// NaN equals NaN and is otherwise unordered.
		both := n.rhsNaN && isNaN(v)
		switch n.kind {
		case KindLt, KindGt:
			return false
		default:
			return both
		}
	}
	c := bsonutil.CompareWithCollator(v, n.rhs, n.coll)
	switch n.kind {
	case KindEq:
		return c == 0
	case KindLt:
		return c < 0
	case KindLte:
		return c <= 0
	case KindGt:
		return c > 0
	default:
		return c >= 0
	}
}

var numberRank = bsonutil.CanonicalTypeOrder(bsoncore.TypeInt32)

// isNaN reports whether v is a double or decimal NaN, without allocating.
func isNaN(v bsoncore.Value) bool {
	switch v.Type {
	case bsoncore.TypeDouble:
		return len(v.Data) >= 8 && math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(v.Data)))
	case bsoncore.TypeDecimal128:
		// The combination field 11111 in the high word's top bits marks NaN (IEEE 754-2008).
		return len(v.Data) >= 16 && (binary.LittleEndian.Uint64(v.Data[8:])>>58)&0x1f == 0x1f
	}
	return false
}

// ---- $in ----

// inNode is $in: equality to any of a sorted list of values, or a match of any regex.
type inNode struct {
	pathNode
	arr     bsoncore.Value   // the original operand array
	vals    []bsoncore.Value // sorted by bsonutil.Compare, regexes excluded
	regexes []*regexNode
	hasNull bool
	coll    Collator // nil: binary; vals are sorted under it
}

func (n *inNode) Kind() Kind             { return KindIn }
func (n *inNode) Value() bsoncore.Value  { return n.arr }
func (n *inNode) String() string         { return fmt.Sprintf("%s $in %s", n.path, n.arr) }
func (n *inNode) expandsLeafArray() bool { return true }
func (n *inNode) match(doc []byte, d *MatchDetails) (bool, error) {
	return matchPath(doc, n.path, n, d), nil
}

func (n *inNode) matchesSingle(v bsoncore.Value, _ *MatchDetails) bool {
	if isNullish(v) {
		if n.hasNull {
			return true
		}
		if v.Type == 0 {
			return false
		}
	}
	if n.coll == nil {
		if _, found := slices.BinarySearchFunc(n.vals, v, bsonutil.Compare); found {
			return true
		}
	} else if _, found := slices.BinarySearchFunc(n.vals, v, func(a, b bsoncore.Value) int {
		return bsonutil.CompareWithCollator(a, b, n.coll)
	}); found {
		return true
	}
	for _, re := range n.regexes {
		if re.matchesSingle(v, nil) {
			return true
		}
	}
	return false
}

// ---- $exists, $type, $size, $mod ----

type existsNode struct{ pathNode }

func (n *existsNode) Kind() Kind             { return KindExists }
func (n *existsNode) Value() bsoncore.Value  { return bsoncore.Value{} }
func (n *existsNode) String() string         { return n.path + " $exists true" }
func (n *existsNode) expandsLeafArray() bool { return false }
func (n *existsNode) match(doc []byte, d *MatchDetails) (bool, error) {
	return matchPath(doc, n.path, n, d), nil
}
func (n *existsNode) matchesSingle(v bsoncore.Value, _ *MatchDetails) bool { return v.Type != 0 }

type typeNode struct {
	pathNode
	operand bsoncore.Value
	types   [256]bool // by BSON type byte
	number  bool      // "number": any numeric type
}

func (n *typeNode) Kind() Kind             { return KindType }
func (n *typeNode) Value() bsoncore.Value  { return n.operand }
func (n *typeNode) String() string         { return fmt.Sprintf("%s $type %s", n.path, n.operand) }
func (n *typeNode) expandsLeafArray() bool { return true }
func (n *typeNode) match(doc []byte, d *MatchDetails) (bool, error) {
	return matchPath(doc, n.path, n, d), nil
}
func (n *typeNode) matchesSingle(v bsoncore.Value, _ *MatchDetails) bool {
	if v.Type == 0 {
		return false
	}
	return n.types[byte(v.Type)] || (n.number && bsonutil.IsNumber(v.Type))
}

// Types returns the BSON types $type accepts ("number" expanded).
func (n *typeNode) Types() []bsoncore.Type {
	var ts []bsoncore.Type
	for i, ok := range n.types {
		if ok || (n.number && bsonutil.IsNumber(bsoncore.Type(i))) {
			ts = append(ts, bsoncore.Type(i))
		}
	}
	return ts
}

type sizeNode struct {
	pathNode
	operand bsoncore.Value
	n       int
}

func (n *sizeNode) Kind() Kind             { return KindSize }
func (n *sizeNode) Value() bsoncore.Value  { return n.operand }
func (n *sizeNode) String() string         { return fmt.Sprintf("%s $size %d", n.path, n.n) }
func (n *sizeNode) expandsLeafArray() bool { return false }
func (n *sizeNode) match(doc []byte, d *MatchDetails) (bool, error) {
	return matchPath(doc, n.path, n, d), nil
}
func (n *sizeNode) matchesSingle(v bsoncore.Value, _ *MatchDetails) bool {
	if v.Type != bsoncore.TypeArray || n.n < 0 {
		return false
	}
	count := 0
	it := newElemIter(v.Data)
	for {
		if _, _, ok := it.next(); !ok {
			break
		}
		count++
	}
	return count == n.n
}

type modNode struct {
	pathNode
	operand  bsoncore.Value
	div, rem int64
}

func (n *modNode) Kind() Kind             { return KindMod }
func (n *modNode) Value() bsoncore.Value  { return n.operand }
func (n *modNode) String() string         { return fmt.Sprintf("%s $mod [%d, %d]", n.path, n.div, n.rem) }
func (n *modNode) expandsLeafArray() bool { return true }
func (n *modNode) match(doc []byte, d *MatchDetails) (bool, error) {
	return matchPath(doc, n.path, n, d), nil
}
func (n *modNode) matchesSingle(v bsoncore.Value, _ *MatchDetails) bool {
	x, ok := truncInt64(v)
	if !ok {
		return false
	}
	// Go's % truncates toward zero like C++, and MinInt64 % -1 is 0 without a panic.
	return x%n.div == n.rem
}

// truncInt64 converts a number to int64 by truncation toward zero, saturating out-of-range
// doubles (as BSONElement::numberLong does); NaN and non-numbers are not convertible.
func truncInt64(v bsoncore.Value) (int64, bool) {
	if i, ok := bsonutil.ToInt64Exact(v); ok {
		return i, true
	}
	f, ok := bsonutil.ToFloat64(v)
	if !ok || math.IsNaN(f) {
		return 0, false
	}
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64, true
	case f <= math.MinInt64:
		return math.MinInt64, true
	}
	return int64(f), true
}

// ---- bit tests ----

type bitsNode struct {
	pathNode
	kind      Kind
	operand   bsoncore.Value
	positions []uint32
}

func (n *bitsNode) Kind() Kind             { return n.kind }
func (n *bitsNode) Value() bsoncore.Value  { return n.operand }
func (n *bitsNode) String() string         { return fmt.Sprintf("%s %s %v", n.path, n.kind, n.positions) }
func (n *bitsNode) expandsLeafArray() bool { return true }
func (n *bitsNode) match(doc []byte, d *MatchDetails) (bool, error) {
	return matchPath(doc, n.path, n, d), nil
}

func (n *bitsNode) matchesSingle(v bsoncore.Value, _ *MatchDetails) bool {
	var bit func(p uint32) bool
	switch {
	case v.Type == bsoncore.TypeBinary:
		_, data, ok := v.BinaryOK()
		if !ok {
			return false
		}
		bit = func(p uint32) bool { return int(p/8) < len(data) && data[p/8]>>(p%8)&1 == 1 }
	case bsonutil.IsNumber(v.Type):
		// Only integral numbers representable as int64 take part; negatives are two's
		// complement, sign-extended past bit 63.
		x, ok := bsonutil.ToInt64Exact(v)
		if !ok {
			return false
		}
		bit = func(p uint32) bool {
			if p >= 64 {
				return x < 0
			}
			return (x>>p)&1 == 1
		}
	default:
		return false
	}
	switch n.kind {
	case KindBitsAllSet, KindBitsAllClear:
		want := n.kind == KindBitsAllSet
		for _, p := range n.positions {
			if bit(p) != want {
				return false
			}
		}
		return true
	default:
		want := n.kind == KindBitsAnySet
		for _, p := range n.positions {
			if bit(p) == want {
				return true
			}
		}
		return false
	}
}

// ---- $regex ----

type regexNode struct {
	pathNode
	pattern, flags string
	re             *regexp2.Regexp
}

func (n *regexNode) Kind() Kind { return KindRegex }
func (n *regexNode) Value() bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeRegex, Data: bsoncore.AppendRegex(nil, n.pattern, n.flags)}
}
func (n *regexNode) String() string {
	return fmt.Sprintf("%s $regex /%s/%s", n.path, n.pattern, n.flags)
}
func (n *regexNode) expandsLeafArray() bool { return true }
func (n *regexNode) match(doc []byte, d *MatchDetails) (bool, error) {
	return matchPath(doc, n.path, n, d), nil
}
func (n *regexNode) matchesSingle(v bsoncore.Value, _ *MatchDetails) bool {
	switch v.Type {
	case bsoncore.TypeString, bsoncore.TypeSymbol:
		s, ok := v.StringValueOK()
		if v.Type == bsoncore.TypeSymbol {
			s, ok = v.SymbolOK()
		}
		if !ok {
			return false
		}
		m, err := n.re.MatchString(s)
		return err == nil && m
	case bsoncore.TypeRegex:
		// A stored regex matches only the identical regex.
		p, f, ok := v.RegexOK()
		return ok && p == n.pattern && f == n.flags
	}
	return false
}

// ---- $elemMatch ----

type elemMatchObjectNode struct {
	pathNode
	operand bsoncore.Value
	sub     MatchExpression
}

func (n *elemMatchObjectNode) Kind() Kind                  { return KindElemMatchObject }
func (n *elemMatchObjectNode) Value() bsoncore.Value       { return n.operand }
func (n *elemMatchObjectNode) Children() []MatchExpression { return []MatchExpression{n.sub} }
func (n *elemMatchObjectNode) String() string {
	return fmt.Sprintf("%s $elemMatch (%s)", n.path, n.sub)
}
func (n *elemMatchObjectNode) expandsLeafArray() bool { return false }

// match: an evaluation error inside the sub-filter ($expr) counts as a non-match of that
// element, because the leaf interface returns only a bool.
func (n *elemMatchObjectNode) match(doc []byte, d *MatchDetails) (bool, error) {
	return matchPath(doc, n.path, n, d), nil
}
func (n *elemMatchObjectNode) matchesSingle(v bsoncore.Value, d *MatchDetails) bool {
	return anyElem(v, d, func(e bsoncore.Value) bool {
		if !isArrayOrDoc(e) {
			return false
		}
		m, err := n.sub.match(e.Data, nil)
		return err == nil && m
	})
}

// anyElem reports whether v is an array with an element for which elemOK holds, recording
// the first such element's position as the match's elemMatchKey.
func anyElem(v bsoncore.Value, d *MatchDetails, elemOK func(e bsoncore.Value) bool) bool {
	if v.Type != bsoncore.TypeArray {
		return false
	}
	it := newElemIter(v.Data)
	for {
		key, e, ok := it.next()
		if !ok {
			return false
		}
		if elemOK(e) {
			d.record(key)
			return true
		}
	}
}

type elemMatchValueNode struct {
	pathNode
	operand  bsoncore.Value
	children []MatchExpression // each also a leaf
}

func (n *elemMatchValueNode) Kind() Kind                  { return KindElemMatchValue }
func (n *elemMatchValueNode) Value() bsoncore.Value       { return n.operand }
func (n *elemMatchValueNode) Children() []MatchExpression { return n.children }
func (n *elemMatchValueNode) String() string {
	parts := make([]string, len(n.children))
	for i, c := range n.children {
		parts[i] = c.String()
	}
	return fmt.Sprintf("%s $elemMatch [%s]", n.path, strings.Join(parts, ", "))
}
func (n *elemMatchValueNode) expandsLeafArray() bool { return false }
func (n *elemMatchValueNode) match(doc []byte, d *MatchDetails) (bool, error) {
	return matchPath(doc, n.path, n, d), nil
}
func (n *elemMatchValueNode) matchesSingle(v bsoncore.Value, d *MatchDetails) bool {
	return anyElem(v, d, func(e bsoncore.Value) bool {
		for _, c := range n.children {
			if !c.(leaf).matchesSingle(e, nil) {
				return false
			}
		}
		return true
	})
}

// ---- logical ----

type logicalNode struct {
	kind     Kind // KindAnd, KindOr, KindNor
	children []MatchExpression
}

func (n *logicalNode) Kind() Kind                  { return n.kind }
func (n *logicalNode) Path() string                { return "" }
func (n *logicalNode) Value() bsoncore.Value       { return bsoncore.Value{} }
func (n *logicalNode) Children() []MatchExpression { return n.children }
func (n *logicalNode) String() string {
	parts := make([]string, len(n.children))
	for i, c := range n.children {
		parts[i] = "(" + c.String() + ")"
	}
	return fmt.Sprintf("%s [%s]", n.kind, strings.Join(parts, ", "))
}

func (n *logicalNode) match(doc []byte, d *MatchDetails) (bool, error) {
	switch n.kind {
	case KindAnd:
		for _, c := range n.children {
			if err := d.checkInterrupt(); err != nil {
				return false, err
			}
			if m, err := c.match(doc, d); err != nil || !m {
				return false, err
			}
		}
		return true, nil
	case KindOr:
		for _, c := range n.children {
			if err := d.checkInterrupt(); err != nil {
				return false, err
			}
			if m, err := c.match(doc, d); err != nil || m {
				return m, err
			}
		}
		return false, nil
	default: // Nor
		for _, c := range n.children {
			if err := d.checkInterrupt(); err != nil {
				return false, err
			}
			if m, err := matchNoKey(c, doc, d); err != nil || m {
				return false, err
			}
		}
		return true, nil
	}
}

// The logical nodes are also leaves when they combine leaves (inside $elemMatch's value form
// and $not), e.g. {$elemMatch: {$not: {$gt: 5}}}.
func (n *logicalNode) expandsLeafArray() bool { return true }
func (n *logicalNode) matchesSingle(v bsoncore.Value, d *MatchDetails) bool {
	for _, c := range n.children {
		l, ok := c.(leaf)
		m := ok && l.matchesSingle(v, d)
		switch {
		case n.kind == KindAnd && !m:
			return false
		case n.kind == KindOr && m:
			return true
		case n.kind == KindNor && m:
			return false
		}
	}
	return n.kind != KindOr
}

type notNode struct{ child MatchExpression }

func (n *notNode) Kind() Kind                  { return KindNot }
func (n *notNode) Path() string                { return n.child.Path() }
func (n *notNode) Value() bsoncore.Value       { return bsoncore.Value{} }
func (n *notNode) Children() []MatchExpression { return []MatchExpression{n.child} }
func (n *notNode) String() string              { return "$not (" + n.child.String() + ")" }
func (n *notNode) match(doc []byte, d *MatchDetails) (bool, error) {
	m, err := matchNoKey(n.child, doc, d)
	return !m && err == nil, err
}
func (n *notNode) expandsLeafArray() bool { return true }
func (n *notNode) matchesSingle(v bsoncore.Value, _ *MatchDetails) bool {
	l, ok := n.child.(leaf)
	return ok && !l.matchesSingle(v, nil)
}

type constNode struct{ val bool }

func (n *constNode) Kind() Kind {
	if n.val {
		return KindAlwaysTrue
	}
	return KindAlwaysFalse
}
func (n *constNode) Path() string                                     { return "" }
func (n *constNode) Value() bsoncore.Value                            { return bsoncore.Value{} }
func (n *constNode) Children() []MatchExpression                      { return nil }
func (n *constNode) String() string                                   { return n.Kind().String() }
func (n *constNode) match([]byte, *MatchDetails) (bool, error)        { return n.val, nil }
func (n *constNode) expandsLeafArray() bool                           { return true }
func (n *constNode) matchesSingle(bsoncore.Value, *MatchDetails) bool { return n.val }
