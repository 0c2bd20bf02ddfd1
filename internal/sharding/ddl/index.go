package ddl

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/shardkey"
)

// IndexSpec is what the shard key rules read of one listIndexes entry.
type IndexSpec struct {
	Name      string
	Key       bsoncore.Document
	Unique    bool
	Sparse    bool
	Partial   bool
	Hidden    bool
	Collation bsoncore.Document // nil: the simple collation
	Raw       bsoncore.Document
}

// ParseIndexSpec reads a listIndexes entry.
func ParseIndexSpec(d bsoncore.Document) IndexSpec {
	s := IndexSpec{Raw: d}
	s.Name, _ = d.Lookup("name").StringValueOK()
	s.Key, _ = d.Lookup("key").DocumentOK()
	s.Unique = truthy(d.Lookup("unique"))
	s.Sparse = truthy(d.Lookup("sparse"))
	s.Hidden = truthy(d.Lookup("hidden"))
	_, s.Partial = d.Lookup("partialFilterExpression").DocumentOK()
	if c, ok := d.Lookup("collation").DocumentOK(); ok && !IsSimpleCollation(c) {
		s.Collation = c
	}
	return s
}

func truthy(v bsoncore.Value) bool {
	switch v.Type {
	case 0, bsoncore.TypeNull, bsoncore.TypeUndefined:
		return false
	case bsoncore.TypeBoolean:
		return v.Boolean()
	}
	if f, ok := bsonutil.ToFloat64(v); ok {
		return f != 0
	}
	return true
}

// IsSimpleCollation reports {locale: "simple"} (the binary comparison).
func IsSimpleCollation(c bsoncore.Document) bool {
	l, ok := c.Lookup("locale").StringValueOK()
	return ok && l == "simple"
}

// hasPrefix reports whether the index key starts with the shard key's fields with the
// same kinds (a hashed shard key field needs a hashed index field; a ranged field any
// ascending or descending one: MongoDB's isIndexPrefixOf... here as
// ShardKeyPattern::isUniqueIndexCompatible / isPrefixOf over field names and "hashed").
func hasPrefix(p *shardkey.Pattern, key bsoncore.Document) bool {
	pe, _ := p.Doc().Elements()
	ke, err := key.Elements()
	if err != nil || len(ke) < len(pe) {
		return false
	}
	for i, e := range pe {
		if ke[i].Key() != e.Key() {
			return false
		}
		if isHashedValue(e.Value()) != isHashedValue(ke[i].Value()) {
			return false
		}
	}
	return true
}

// isFieldPrefix reports whether the shard key's field names are a prefix of the index
// key's, whatever their kinds (the unique-index compatibility rule).
func isFieldPrefix(p *shardkey.Pattern, key bsoncore.Document) bool {
	ke, err := key.Elements()
	if err != nil || len(ke) < p.NumFields() {
		return false
	}
	for i, f := range p.Fields() {
		if ke[i].Key() != f {
			return false
		}
	}
	return true
}

func isHashedValue(v bsoncore.Value) bool {
	s, ok := v.StringValueOK()
	return ok && s == "hashed"
}

// IndexPlan is what CheckIndexes decided: nothing to do, or the shard key index to create.
type IndexPlan struct {
	Create bool
	Spec   bsoncore.Document // {key, name, unique?, collation?} for createIndexes
}

// CheckIndexes applies 7.0's validShardKeyIndexExists to the collection's indexes:
//
//   - every unique index (other than _id's) must have the shard key as a prefix;
//   - a useful index has the shard key as a prefix, is not sparse, not partial, not hidden,
//     has the simple collation and is not multikey on the key's fields (multikeyOnKey says
//     whether a document holds an array along a key field);
//   - with unique, an index exactly on the key must be unique (or be _id's);
//   - with no useful index, a non-empty collection is refused and an empty one gets the
//     index (simple collation when the collection has a default collation).
func CheckIndexes(ns string, p *shardkey.Pattern, unique bool, indexes []IndexSpec, collDefaultCollation bool, empty, multikeyOnKey bool) (IndexPlan, error) {
	for _, ix := range indexes {
		if !ix.Unique || ix.Name == "_id_" {
			continue
		}
		if !isFieldPrefix(p, ix.Key) {
			return IndexPlan{}, mongoerr.Newf(mongoerr.InvalidOptions,
				"can't shard collection '%s' with unique index on %s and proposed shard key %s. Uniqueness can't be maintained unless shard key is a prefix",
				ns, bsonutil.FormatDoc(ix.Key), p)
		}
	}
	useful := false
	for _, ix := range indexes {
		if !hasPrefix(p, ix.Key) || ix.Sparse || ix.Partial || ix.Hidden || ix.Collation != nil {
			continue
		}
		if multikeyOnKey {
			continue
		}
		useful = true
	}
	if useful && unique {
		var exact *IndexSpec
		for i := range indexes {
			if string(indexes[i].Key) == string(p.Doc()) {
				exact = &indexes[i]
				break
			}
		}
		if exact == nil {
			useful = false
		} else if !exact.Unique && !strings.HasPrefix(p.Fields()[0], "_id") {
			return IndexPlan{}, mongoerr.Newf(mongoerr.InvalidOptions,
				"can't shard collection %s, %s index not unique, and unique index explicitly specified", ns, p)
		}
	}
	if useful {
		return IndexPlan{}, nil
	}
	if !empty {
		return IndexPlan{}, mongoerr.New(mongoerr.InvalidOptions,
			"Please create an index that starts with the proposed shard key before sharding the collection")
	}
	b := bsoncore.NewDocumentBuilder().AppendDocument("key", p.Doc()).AppendString("name", IndexName(p.Doc()))
	if unique && !p.IsHashed() {
		b.AppendBoolean("unique", true)
	}
	if collDefaultCollation {
		b.AppendDocument("collation", bsoncore.NewDocumentBuilder().AppendString("locale", "simple").Build())
	}
	return IndexPlan{Create: true, Spec: b.Build()}, nil
}

// IndexName is an index's default name: field_value joined by "_" ({a: 1, b: "hashed"} →
// "a_1_b_hashed").
func IndexName(key bsoncore.Document) string {
	elems, _ := key.Elements()
	parts := make([]string, 0, 2*len(elems))
	for _, e := range elems {
		v := e.Value()
		s, ok := v.StringValueOK()
		if !ok {
			if f, isNum := bsonutil.ToFloat64(v); isNum {
				s = strconv.FormatFloat(f, 'g', -1, 64)
			}
		}
		parts = append(parts, e.Key(), s)
	}
	return strings.Join(parts, "_")
}
