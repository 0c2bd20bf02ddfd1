package plan

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/query"
)

// Hashed index fields store NumberLong(Hash64(value)) instead of the value (index keygen,
// ExpressionKeysPrivate::getHashKeys), so only equality-like predicates bound them: each
// value becomes a point interval on its hash. Distinct values may share a hash (3 and 3.5
// both hash as 3), so the plan always FETCHes and re-applies the whole filter.

// hashOf returns the index key value a hashed field stores for v.
func hashOf(v bsoncore.Value) (bsoncore.Value, bool) {
	// The key generator always hashes with the default seed (spec field "seed" is not
	// supported by hashed indexes in MongoDB 7.0 either).
	h, err := index.Hash64(v, index.DefaultHashSeed)
	if err != nil {
		return bsoncore.Value{}, false
	}
	return bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, h)}, true
}

// hashedNull is the key of a document whose hashed field is null or missing.
var hashedNull, _ = hashOf(bsoncore.Value{Type: bsoncore.TypeNull})

// hashedBounds returns the point intervals (in the hash space, ascending) a predicate puts on
// a hashed field; ok is false when the predicate cannot use the hash (ranges, regexes,
// arrays — hashed fields never hold arrays, so an array operand is answered by the filter).
func hashedBounds(e query.MatchExpression) (oil, bool) {
	var vals []bsoncore.Value
	switch e.Kind() {
	case query.KindEq:
		vals = []bsoncore.Value{e.Value()}
	case query.KindIn:
		vs, err := bsoncore.Array(e.Value().Data).Values()
		if err != nil {
			return nil, false
		}
		vals = vs
	default:
		return nil, false
	}
	o := oil{}
	for _, v := range vals {
		switch v.Type {
		case bsoncore.TypeArray, bsoncore.TypeRegex:
			return nil, false
		case bsoncore.TypeNull:
			// {h: null} matches missing and null (both keyed as hash(null)) and undefined.
			undef, _ := hashOf(bsoncore.Value{Type: bsoncore.TypeUndefined})
			o = append(o, point(hashedNull), point(undef))
			continue
		}
		hv, ok := hashOf(v)
		if !ok {
			return nil, false
		}
		o = append(o, point(hv))
	}
	return normalize(o), true
}
