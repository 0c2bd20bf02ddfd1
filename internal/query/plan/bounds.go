package plan

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/query"
)

// interval is a range of values in BSON order (value order, not index key order).
type interval struct {
	low, high       bsoncore.Value
	lowInc, highInc bool
}

// oil is an ordered list of disjoint intervals (MongoDB's OrderedIntervalList), ascending.
type oil []interval

var (
	minKey = bsoncore.Value{Type: bsoncore.TypeMinKey}
	maxKey = bsoncore.Value{Type: bsoncore.TypeMaxKey}
	full   = oil{{low: minKey, high: maxKey, lowInc: true, highInc: true}}
)

func (o oil) isFull() bool {
	return len(o) == 1 && o[0].low.Type == bsoncore.TypeMinKey && o[0].high.Type == bsoncore.TypeMaxKey
}

func (iv interval) isPoint() bool {
	return iv.lowInc && iv.highInc && bsonutil.Compare(iv.low, iv.high) == 0
}

func (o oil) allPoints() bool {
	for _, iv := range o {
		if !iv.isPoint() {
			return false
		}
	}
	return len(o) > 0
}

// contains reports whether v lies in one of the intervals.
func (o oil) contains(v bsoncore.Value) bool {
	for _, iv := range o {
		cl := bsonutil.Compare(v, iv.low)
		if cl < 0 || (cl == 0 && !iv.lowInc) {
			continue
		}
		ch := bsonutil.Compare(v, iv.high)
		if ch > 0 || (ch == 0 && !iv.highInc) {
			continue
		}
		return true
	}
	return false
}

func point(v bsoncore.Value) interval { return interval{low: v, high: v, lowInc: true, highInc: true} }

func dbl(f float64) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, f)}
}

func str(s string) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, s)}
}

var (
	emptyDocVal = bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: []byte{5, 0, 0, 0, 0}}
	emptyArrVal = bsoncore.Value{Type: bsoncore.TypeArray, Data: []byte{5, 0, 0, 0, 0}}
)

// typeBracket returns the interval of all values of v's canonical type (MongoDB's
// type-bracketed bounds: {$gt: 5} is (5, inf.0], never a string). ok is false for types
// without a simple bracket (the caller then uses the full range).
func typeBracket(v bsoncore.Value) (lo, hi bsoncore.Value, hiInc bool, ok bool) {
	switch v.Type {
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		return dbl(math.Inf(-1)), dbl(math.Inf(1)), true, true
	case bsoncore.TypeString, bsoncore.TypeSymbol:
		return str(""), emptyDocVal, false, true
	case bsoncore.TypeEmbeddedDocument:
		return emptyDocVal, emptyArrVal, false, true
	case bsoncore.TypeDateTime:
		return bsoncore.Value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, math.MinInt64)},
			bsoncore.Value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, math.MaxInt64)}, true, true
	case bsoncore.TypeObjectID:
		var lo, hi bson.ObjectID
		for i := range hi {
			hi[i] = 0xff
		}
		return bsoncore.Value{Type: bsoncore.TypeObjectID, Data: bsoncore.AppendObjectID(nil, lo)},
			bsoncore.Value{Type: bsoncore.TypeObjectID, Data: bsoncore.AppendObjectID(nil, hi)}, true, true
	case bsoncore.TypeBoolean:
		return bsoncore.Value{Type: bsoncore.TypeBoolean, Data: []byte{0}},
			bsoncore.Value{Type: bsoncore.TypeBoolean, Data: []byte{1}}, true, true
	case bsoncore.TypeTimestamp:
		return bsoncore.Value{Type: bsoncore.TypeTimestamp, Data: bsoncore.AppendTimestamp(nil, 0, 0)},
			bsoncore.Value{Type: bsoncore.TypeTimestamp, Data: bsoncore.AppendTimestamp(nil, math.MaxUint32, math.MaxUint32)}, true, true
	}
	return bsoncore.Value{}, bsoncore.Value{}, false, false
}

// leafBounds returns the bounds a predicate puts on its path. exact reports whether the
// bounds alone decide the predicate for a non-multikey field (used to decide coverage);
// ok false means the predicate cannot bound an index (no index use from it).
func leafBounds(e query.MatchExpression) (b oil, exact, ok bool) {
	v := e.Value()
	switch e.Kind() {
	case query.KindEq:
		switch v.Type {
		case bsoncore.TypeArray:
			// {a: [1, 2]}: keys hold the elements; also the whole array for nested arrays.
			o := oil{point(v)}
			if first, err := bsoncore.Array(v.Data).IndexErr(0); err == nil {
				o = union(o, oil{point(first)})
			} else {
				o = union(o, oil{point(bsoncore.Value{Type: bsoncore.TypeUndefined})})
			}
			return o, false, true
		case bsoncore.TypeNull:
			return oil{point(v), point(bsoncore.Value{Type: bsoncore.TypeUndefined})}, false, true
		case bsoncore.TypeEmbeddedDocument:
			return oil{point(v)}, false, true
		case bsoncore.TypeMinKey, bsoncore.TypeMaxKey:
			return oil{point(v)}, false, true
		}
		return oil{point(v)}, true, true
	case query.KindLt, query.KindLte, query.KindGt, query.KindGte:
		if v.Type == bsoncore.TypeNull || v.Type == bsoncore.TypeMinKey || v.Type == bsoncore.TypeMaxKey ||
			v.Type == bsoncore.TypeArray {
			return full, false, true
		}
		if f, isNum := bsonutil.ToFloat64(v); isNum && math.IsNaN(f) {
			return oil{point(v)}, false, true
		}
		lo, hi, hiInc, ok := typeBracket(v)
		if !ok {
			return full, false, true
		}
		exact := v.Type != bsoncore.TypeEmbeddedDocument
		switch e.Kind() {
		case query.KindLt:
			return oil{{low: lo, high: v, lowInc: true, highInc: false}}, exact, true
		case query.KindLte:
			return oil{{low: lo, high: v, lowInc: true, highInc: true}}, exact, true
		case query.KindGt:
			return oil{{low: v, high: hi, lowInc: false, highInc: hiInc}}, exact, true
		default:
			return oil{{low: v, high: hi, lowInc: true, highInc: hiInc}}, exact, true
		}
	case query.KindIn:
		vals, err := bsoncore.Array(v.Data).Values()
		if err != nil {
			return nil, false, false
		}
		// Collect every value's intervals and normalize once (sort + merge): a large $in
		// must not cost a merge per value.
		o := make(oil, 0, len(vals))
		exact := true
		for _, x := range vals {
			switch x.Type {
			case bsoncore.TypeRegex:
				rb, _, _ := regexBounds(x)
				o = append(o, rb...)
				exact = false
			case bsoncore.TypeArray, bsoncore.TypeNull, bsoncore.TypeEmbeddedDocument:
				sub, _, _ := leafBounds(eqExpr{v: x})
				o = append(o, sub...)
				exact = false
			default:
				o = append(o, point(x))
			}
		}
		o = normalize(o)
		if len(o) == 0 {
			// $in: [] matches nothing; an empty OIL scans nothing.
			return oil{}, true, true
		}
		return o, exact, true
	case query.KindRegex:
		o, exact, ok := regexBounds(v)
		return o, exact, ok
	case query.KindExists:
		return full, false, true
	case query.KindType:
		return full, false, true
	}
	return nil, false, false
}

// boundable is leafBounds's exact and ok without building the bounds, which for a $in of
// many values costs a sort: the planner asks it of every predicate, and of a $in more than once.
func boundable(e query.MatchExpression) (exact, ok bool) {
	if e.Kind() != query.KindIn {
		_, exact, ok = leafBounds(e)
		return exact, ok
	}
	vals, err := bsoncore.Array(e.Value().Data).Values()
	if err != nil {
		return false, false
	}
	for _, x := range vals {
		switch x.Type {
		case bsoncore.TypeRegex, bsoncore.TypeArray, bsoncore.TypeNull, bsoncore.TypeEmbeddedDocument:
			return false, true
		}
	}
	return true, true
}

// eqExpr adapts a value to an equality leaf for leafBounds.
type eqExpr struct {
	query.MatchExpression
	v bsoncore.Value
}

func (e eqExpr) Kind() query.Kind      { return query.KindEq }
func (e eqExpr) Value() bsoncore.Value { return e.v }

// regexBounds: /^prefix/ without options bounds [prefix, prefix+1) plus the regex itself;
// other regexes scan all strings and regexes (the filter decides).
func regexBounds(v bsoncore.Value) (oil, bool, bool) {
	if v.Type != bsoncore.TypeRegex {
		return full, false, true
	}
	pattern, opts := v.Regex()
	self := point(v)
	if prefix, ok := simplePrefix(pattern, opts); ok && prefix != "" {
		// The upper end is the prefix with its last byte incremented (exclusive).
		up := []byte(prefix)
		for len(up) > 0 && up[len(up)-1] == 0xff {
			up = up[:len(up)-1]
		}
		if len(up) > 0 {
			up[len(up)-1]++
			o := oil{{low: str(prefix), high: str(string(up)), lowInc: true, highInc: false}}
			return union(o, oil{self}), false, true
		}
	}
	return union(oil{{low: str(""), high: emptyDocVal, lowInc: true, highInc: false}}, oil{self}), false, true
}

// simplePrefix returns the literal prefix of a regex anchored with ^ (or \A) whose options
// do not change literal matching (no i, no x; m changes ^ meaning so it disqualifies).
func simplePrefix(pattern, opts string) (string, bool) {
	if strings.ContainsAny(opts, "imx") {
		return "", false
	}
	var rest string
	switch {
	case strings.HasPrefix(pattern, "^"):
		rest = pattern[1:]
	case strings.HasPrefix(pattern, `\A`):
		rest = pattern[2:]
	default:
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if strings.IndexByte(`.[]()*+?{}|^$\`, c) >= 0 {
			// A quantifier applies to the previous character: drop it from the prefix.
			if (c == '*' || c == '?' || c == '{') && b.Len() > 0 {
				s := b.String()
				return s[:len(s)-1], true
			}
			break
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// union merges two OILs.
func union(a, b oil) oil {
	return normalize(append(append(make(oil, 0, len(a)+len(b)), a...), b...))
}

// normalize sorts intervals by their low end and merges those that overlap or touch, in
// place: O(n log n), so that bounds for a $in of many values stay cheap.
func normalize(all oil) oil {
	if len(all) <= 1 {
		return all
	}
	byLow := func(a, b interval) int {
		if lowLess(a, b) {
			return -1
		}
		if lowLess(b, a) {
			return 1
		}
		return 0
	}
	if !slices.IsSortedFunc(all, byLow) {
		slices.SortFunc(all, byLow)
	}
	out := all[:1]
	for _, iv := range all[1:] {
		last := &out[len(out)-1]
		c := bsonutil.Compare(iv.low, last.high)
		if c < 0 || (c == 0 && (iv.lowInc || last.highInc)) {
			hc := bsonutil.Compare(iv.high, last.high)
			if hc > 0 || (hc == 0 && iv.highInc) {
				last.high, last.highInc = iv.high, iv.highInc
			}
			continue
		}
		out = append(out, iv)
	}
	return out
}

func lowLess(a, b interval) bool {
	c := bsonutil.Compare(a.low, b.low)
	return c < 0 || (c == 0 && a.lowInc && !b.lowInc)
}

// intersect intersects two OILs. Both are normalized first (sorted, disjoint) so one merge
// pass suffices: O(n log n) rather than a comparison of every pair.
func intersect(a, b oil) oil {
	a = normalize(slices.Clone(a))
	b = normalize(slices.Clone(b))
	var out oil
	for i, j := 0, 0; i < len(a) && j < len(b); {
		x, y := a[i], b[j]
		lo, loInc := x.low, x.lowInc
		if c := bsonutil.Compare(y.low, lo); c > 0 || (c == 0 && !y.lowInc) {
			lo, loInc = y.low, y.lowInc
		}
		hi, hiInc := x.high, x.highInc
		if c := bsonutil.Compare(y.high, hi); c < 0 || (c == 0 && !y.highInc) {
			hi, hiInc = y.high, y.highInc
		}
		c := bsonutil.Compare(lo, hi)
		if c < 0 || (c == 0 && loInc && hiInc) {
			out = append(out, interval{low: lo, high: hi, lowInc: loInc, highInc: hiInc})
		}
		// Advance the interval that ends first; the other may still overlap the next one.
		if hc := bsonutil.Compare(x.high, y.high); hc < 0 || (hc == 0 && !x.highInc) {
			i++
		} else {
			j++
		}
	}
	return out
}

// formatBound renders an OIL as explain's indexBounds strings ("[5, 5]", "(3, inf.0]"),
// in scan order for a field of direction dir (descending fields list high to low).
func formatOIL(o oil, reversed bool) []string {
	out := make([]string, 0, len(o))
	add := func(iv interval) {
		l, r := "(", ")"
		if iv.lowInc {
			l = "["
		}
		if iv.highInc {
			r = "]"
		}
		if reversed {
			l2, r2 := "(", ")"
			if iv.highInc {
				l2 = "["
			}
			if iv.lowInc {
				r2 = "]"
			}
			out = append(out, l2+formatValue(iv.high)+", "+formatValue(iv.low)+r2)
			return
		}
		out = append(out, l+formatValue(iv.low)+", "+formatValue(iv.high)+r)
	}
	if reversed {
		for i := len(o) - 1; i >= 0; i-- {
			add(o[i])
		}
	} else {
		for _, iv := range o {
			add(iv)
		}
	}
	return out
}

// formatValue renders a bound value the way explain does.
func formatValue(v bsoncore.Value) string {
	switch v.Type {
	case bsoncore.TypeMinKey:
		return "MinKey"
	case bsoncore.TypeMaxKey:
		return "MaxKey"
	case bsoncore.TypeDouble:
		f := v.Double()
		switch {
		case math.IsInf(f, 1):
			return "inf.0"
		case math.IsInf(f, -1):
			return "-inf.0"
		case math.IsNaN(f):
			return "nan.0"
		case f == math.Trunc(f) && math.Abs(f) < 1e15:
			return strconv.FormatFloat(f, 'f', 1, 64)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	case bsoncore.TypeInt32:
		return strconv.Itoa(int(v.Int32()))
	case bsoncore.TypeInt64:
		return strconv.FormatInt(v.Int64(), 10)
	case bsoncore.TypeString:
		return strconv.Quote(v.StringValue())
	case bsoncore.TypeNull:
		return "null"
	case bsoncore.TypeUndefined:
		return "undefined"
	case bsoncore.TypeBoolean:
		return strconv.FormatBool(v.Boolean())
	case bsoncore.TypeEmbeddedDocument:
		if len(v.Data) == 5 {
			return "{}"
		}
	case bsoncore.TypeArray:
		if len(v.Data) == 5 {
			return "[]"
		}
	case bsoncore.TypeObjectID:
		return fmt.Sprintf("ObjectId('%s')", bson.ObjectID(v.ObjectID()).Hex())
	case bsoncore.TypeRegex:
		p, o := v.Regex()
		return "/" + p + "/" + o
	}
	return v.String()
}
