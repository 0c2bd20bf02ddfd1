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

// isPrefixOf is BSONObj::isPrefixOf with the simple element comparator: the shard key's
// elements (names and values: 1 equals 1.0, "hashed" only "hashed") start the index key.
func isPrefixOf(p *shardkey.Pattern, key bsoncore.Document) bool {
	pe, _ := p.Doc().Elements()
	ke, err := key.Elements()
	if err != nil || len(ke) < len(pe) {
		return false
	}
	for i, e := range pe {
		if ke[i].Key() != e.Key() || bsonutil.Compare(e.Value(), ke[i].Value()) != 0 {
			return false
		}
	}
	return true
}

// isUniqueIndexCompatible is ShardKeyPattern::isUniqueIndexCompatible: the _id index is
// always compatible (unless the shard key itself starts with _id); otherwise the shard key's
// field names must be a prefix of the unique index's.
func isUniqueIndexCompatible(p *shardkey.Pattern, key bsoncore.Document) bool {
	ke, err := key.Elements()
	if err != nil || len(ke) == 0 {
		return false
	}
	if p.Fields()[0] != "_id" && ke[0].Key() == "_id" {
		return true
	}
	if len(ke) < p.NumFields() {
		return false
	}
	for i, f := range p.Fields() {
		if ke[i].Key() != f {
			return false
		}
	}
	return true
}

// IndexPlan is what CheckIndexes decided: nothing to do, or the shard key index to create.
type IndexPlan struct {
	Create bool
	Spec   bsoncore.Document // {key, name, unique?, collation?} for createIndexes
}

// CheckIndexes is 7.0's validateShardKeyIndexExistsOrCreateIfPossible over the collection's
// indexes (shard_key_util.cpp):
//
//  1. every unique index must be compatible with the shard key (isUniqueIndexCompatible);
//  2. a useful index is not sparse, not partial, has no collation and has the shard key as a
//     prefix; the reasons the last unusable index could not serve are kept for the message;
//  3. with unique, the index exactly on the key must be unique (or be on _id);
//  4. a useful index must not be multikey on the key (multikeyOnKey: a document holds an
//     array along a key field), else "couldn't find valid index for shard key";
//  5. with no useful index, a non-empty collection is refused and an empty one gets the
//     index (simple collation when the collection has a default collation).
func CheckIndexes(ns string, p *shardkey.Pattern, unique bool, indexes []IndexSpec, collDefaultCollation bool, empty, multikeyOnKey bool) (IndexPlan, error) {
	for _, ix := range indexes {
		if ix.Unique && !isUniqueIndexCompatible(p, ix.Key) {
			return IndexPlan{}, mongoerr.Newf(mongoerr.InvalidOptions,
				"can't shard collection '%s' with unique index on %s and proposed shard key %s. Uniqueness can't be maintained unless shard key is a prefix",
				ns, bsonutil.FormatDoc(ix.Key), p)
		}
	}
	useful := false
	allReasons := ""
	for _, ix := range indexes {
		if !ix.Sparse && !ix.Partial && ix.Collation == nil && !ix.Hidden && isPrefixOf(p, ix.Key) {
			useful = true
		}
		reasons := ""
		if ix.Sparse {
			reasons += " Index key is sparse."
		}
		if ix.Partial {
			reasons += " Index key is partial."
		}
		if ix.Collation != nil {
			reasons += " Index has a non-simple collation."
		}
		if reasons != "" {
			allReasons = " Index " + ix.Name + " cannot be used for sharding because [" + reasons + " ]"
		}
	}
	if useful && unique {
		var exact *IndexSpec
		for i := range indexes {
			if bsonutil.CompareDocuments(indexes[i].Key, p.Doc()) == 0 {
				exact = &indexes[i]
				break
			}
		}
		if exact == nil {
			useful = false
		} else if first, err := exact.Key.IndexErr(0); !exact.Unique && (err != nil || first.Key() != "_id") {
			return IndexPlan{}, mongoerr.Newf(mongoerr.InvalidOptions,
				"can't shard collection %s, %s index not unique, and unique index explicitly specified", ns, p)
		}
	}
	if useful {
		if multikeyOnKey && !(p.NumFields() == 1 && p.Fields()[0] == "_id") {
			return IndexPlan{}, mongoerr.New(mongoerr.InvalidOptions, "couldn't find valid index for shard key")
		}
		return IndexPlan{}, nil
	}
	if !empty {
		return IndexPlan{}, mongoerr.New(mongoerr.InvalidOptions,
			"Please create an index that starts with the proposed shard key before sharding the collection. "+allReasons)
	}
	b := bsoncore.NewDocumentBuilder().AppendDocument("key", p.Doc()).AppendString("name", IndexName(p.Doc()))
	if collDefaultCollation {
		b.AppendInt32("v", 2)
		b.AppendDocument("collation", bsoncore.NewDocumentBuilder().AppendString("locale", "simple").Build())
	}
	if unique && !(p.NumFields() == 1 && p.Fields()[0] == "_id") {
		b.AppendBoolean("unique", true)
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
