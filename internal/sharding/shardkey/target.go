package shardkey

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/query/plan"
)

// MaxFlattenedInCombinations is ShardKeyPattern::kMaxFlattenedInCombinations: the most
// ranges a compound $in may expand into before targeting fails with 17439.
const MaxFlattenedInCombinations = 4000000

// Range is an inclusive range of shard keys [Min, Max], an entry of MongoDB's BoundList.
// Both are documents with the pattern's fields in order; hashed fields hold hashes.
type Range struct {
	Min, Max bsoncore.Document
}

// FullRange is [GlobalMin, GlobalMax]: every chunk.
func (p *Pattern) FullRange() Range { return Range{Min: p.GlobalMin(), Max: p.GlobalMax()} }

// Ranges parses filter and returns the shard key ranges a matching document's key can lie in
// (RangesForExpr). collated says the query has a non-simple collation.
func (p *Pattern) Ranges(filter bsoncore.Document, collated bool) ([]Range, error) {
	m, err := query.Parse(filter, query.ParseOptions{AllowExpr: true, AllowJSONSchema: true})
	if err != nil {
		return nil, err
	}
	return p.RangesForExpr(m.Expression(), collated)
}

// RangesForExpr is MongoDB's getShardKeyRanges (shard_key_pattern_query_util.cpp): the
// planner's bounds for an index on the shard key (plan.KeyBounds; hashed fields bounded by
// equalities only), flattened as flattenBounds does: leading single points are appended to
// every range, the first field with several intervals or a range splits into one range per
// interval, and later fields contribute only their overall low and high ends. A top-level
// $or is the union of its branches' ranges. Every document the filter matches has its shard
// key in one of the ranges (the ranges may hold more); no range means nothing can match.
func (p *Pattern) RangesForExpr(root query.MatchExpression, collated bool) ([]Range, error) {
	if root.Kind() == query.KindOr && len(root.Children()) > 1 {
		var out []Range
		for _, c := range root.Children() {
			rs, err := p.RangesForExpr(c, collated)
			if err != nil {
				return nil, err
			}
			out = append(out, rs...)
			if len(out) > MaxFlattenedInCombinations {
				return nil, errCombinations()
			}
		}
		return out, nil
	}
	hashed := make([]bool, len(p.fields))
	if p.hashed >= 0 {
		hashed[p.hashed] = true
	}
	return p.flatten(plan.KeyBounds(root, p.fields, hashed, collated))
}

func errCombinations() error {
	return mongoerr.New(mongoerr.Location17439, "combinatorial limit of $in partitioning of results exceeded")
}

// flatten is ShardKeyPattern::flattenBounds.
func (p *Pattern) flatten(bounds [][]plan.Interval) ([]Range, error) {
	for _, b := range bounds {
		if len(b) == 0 {
			return nil, nil
		}
	}
	type builder struct{ lo, hi []bsoncore.Value }
	builders := []builder{{}}
	equalityOnly := true
	for _, ivs := range bounds {
		switch {
		case equalityOnly && len(ivs) == 1 && ivs[0].IsPoint():
			for i := range builders {
				builders[i].lo = append(builders[i].lo, ivs[0].Low)
				builders[i].hi = append(builders[i].hi, ivs[0].High)
			}
		case equalityOnly:
			equalityOnly = false
			if len(builders)*len(ivs) > MaxFlattenedInCombinations {
				return nil, errCombinations()
			}
			next := make([]builder, 0, len(builders)*len(ivs))
			for _, b := range builders {
				for _, iv := range ivs {
					next = append(next, builder{
						lo: append(append([]bsoncore.Value(nil), b.lo...), iv.Low),
						hi: append(append([]bsoncore.Value(nil), b.hi...), iv.High),
					})
				}
			}
			builders = next
		default:
			for i := range builders {
				builders[i].lo = append(builders[i].lo, ivs[0].Low)
				builders[i].hi = append(builders[i].hi, ivs[len(ivs)-1].High)
			}
		}
	}
	out := make([]Range, len(builders))
	for i, b := range builders {
		out[i] = Range{Min: p.keyDoc(b.lo), Max: p.keyDoc(b.hi)}
	}
	return out, nil
}

// keyDoc builds a shard key document from values in pattern order.
func (p *Pattern) keyDoc(vals []bsoncore.Value) bsoncore.Document {
	idx, d := bsoncore.AppendDocumentStart(nil)
	for i, f := range p.fields {
		d = bsoncore.AppendValueElement(d, f, vals[i])
	}
	d, _ = bsoncore.AppendDocumentEnd(d, idx)
	return d
}

// KeyFromValues builds a shard key document from values in pattern order (no hashing).
func (p *Pattern) KeyFromValues(vals ...bsoncore.Value) bsoncore.Document { return p.keyDoc(vals) }

// KeyFromEqualities is MongoDB's extractShardKeyFromQuery: the shard key a filter pins by
// equality on every shard key field (`field: value`, `field: {$eq: value}`, also inside a
// top-level $and), hashed fields hashed; false when a field has no such equality, or its
// value cannot be a shard key (an array, a regular expression, a document with $-fields) or
// compares under a non-simple collation (collated: strings and what holds them). Unlike the
// index bounds of the filter, an equality to null is an exact key: a missing shard key field
// is stored as null.
func (p *Pattern) KeyFromEqualities(filter bsoncore.Document, collated bool) (bsoncore.Document, bool) {
	vals := make([]bsoncore.Value, len(p.fields))
	for i, f := range p.fields {
		v, ok := equality(filter, f)
		if !ok || v.Type == bsoncore.TypeArray || v.Type == bsoncore.TypeRegex || v.Type == bsoncore.TypeUndefined {
			return nil, false
		}
		if d, isDoc := v.DocumentOK(); isDoc && hasDollarField(d) {
			return nil, false
		}
		if collated && collationSensitive(v) {
			return nil, false
		}
		if i == p.hashed {
			h, err := HashValue(v)
			if err != nil {
				return nil, false
			}
			v = h
		}
		vals[i] = v
	}
	return p.keyDoc(vals), true
}

// equality finds field's equality value in filter's top level or its top-level $and.
func equality(filter bsoncore.Document, field string) (bsoncore.Value, bool) {
	elems, err := filter.Elements()
	if err != nil {
		return bsoncore.Value{}, false
	}
	for _, e := range elems {
		switch e.Key() {
		case field:
			v := e.Value()
			if d, ok := v.DocumentOK(); ok {
				first, err := d.IndexErr(0)
				if err == nil && first.Key() == "$eq" {
					if n, _ := d.Elements(); len(n) == 1 {
						return first.Value(), true
					}
					return bsoncore.Value{}, false
				}
				if err == nil && len(first.Key()) > 0 && first.Key()[0] == '$' {
					return bsoncore.Value{}, false
				}
			}
			return v, true
		case "$and":
			arr, ok := e.Value().ArrayOK()
			if !ok {
				continue
			}
			vals, _ := arr.Values()
			for _, c := range vals {
				if d, ok := c.DocumentOK(); ok {
					if v, ok := equality(d, field); ok {
						return v, true
					}
				}
			}
		}
	}
	return bsoncore.Value{}, false
}

// collationSensitive reports whether a value compares differently under a non-simple
// collation: strings, symbols, and documents or arrays that hold them.
func collationSensitive(v bsoncore.Value) bool {
	switch v.Type {
	case bsoncore.TypeString, bsoncore.TypeSymbol:
		return true
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
		vals, _ := bsoncore.Document(v.Data).Values()
		for _, c := range vals {
			if collationSensitive(c) {
				return true
			}
		}
	}
	return false
}
