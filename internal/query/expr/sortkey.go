package expr

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/collation"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
)

// SortKey turns a document into a memcmp-ordered key for a sort pattern, using KeyString
// with the pattern's Ordering. Array values sort by their smallest element ascending and
// their largest descending, as MongoDB's sort does; missing sorts as null.
//
// A SortKey is immutable after construction and safe for concurrent use (expressions
// such as $sortArray and accumulators such as $topN share one across evaluations).
type SortKey struct {
	paths [][]string
	desc  []bool
	ord   keystring.Ordering
}

// NewSortKey parses a sort pattern ({a: 1, b: -1}) with $sort's errors.
func NewSortKey(pattern bsoncore.Document) (*SortKey, error) {
	els, err := DocElems(pattern)
	if err != nil {
		return nil, err
	}
	if len(els) == 0 {
		return nil, mongoerr.New(mongoerr.Location15976, "$sort stage must have at least one sort key")
	}
	if len(els) > 32 {
		return nil, mongoerr.New(mongoerr.BadValue, "too many compound keys")
	}
	g := &SortKey{}
	for i, el := range els {
		v := el.Value()
		n, ok := v.AsInt64OK()
		if !ok {
			if f, isF := v.DoubleOK(); isF {
				n, ok = int64(f), f == float64(int64(f))
			}
		}
		if !ok || (n != 1 && n != -1) {
			if IsOperatorDoc(v) {
				return nil, mongoerr.Newf(mongoerr.Location17312, "$meta sort keys are not supported: %s", el.Key())
			}
			return nil, mongoerr.Newf(mongoerr.Location15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		path, err := SplitFieldPath(el.Key())
		if err != nil {
			return nil, err
		}
		g.paths = append(g.paths, path)
		g.desc = append(g.desc, n == -1)
		if n == -1 {
			g.ord |= 1 << uint(i)
		}
	}
	return g, nil
}

// Paths are the pattern's field paths, in order.
func (g *SortKey) Paths() [][]string { return g.paths }

// Key returns a freshly allocated key; strings order under c (nil: binary), by their
// collation sort keys, as a collated index orders them.
func (g *SortKey) Key(doc bsoncore.Document, c *collation.Collator) []byte {
	var kb keystring.Builder
	kb.Reset(g.ord)
	for i, p := range g.paths {
		kb.AppendValue(CollKey(c, sortValue(GetPath(doc, p), g.desc[i], c)))
	}
	return kb.Bytes()
}

func sortValue(v value, desc bool, c *collation.Collator) value {
	if v.Type == 0 {
		return Null
	}
	if v.Type != bsoncore.TypeArray {
		return v
	}
	vals, _ := ArrayValues(v)
	var flat []value
	var walk func([]value)
	walk = func(vs []value) {
		for _, e := range vs {
			if e.Type == bsoncore.TypeArray {
				sub, _ := ArrayValues(e)
				walk(sub)
				continue
			}
			flat = append(flat, e)
		}
	}
	walk(vals)
	if len(flat) == 0 {
		return value{Type: bsoncore.TypeUndefined} // [] sorts below null
	}
	best := flat[0]
	for _, e := range flat[1:] {
		if c := Compare(e, best, ComparerOf(c)); (c < 0 && !desc) || (c > 0 && desc) {
			best = e
		}
	}
	return best
}
