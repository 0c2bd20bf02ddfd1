// Package shardkey owns shard key patterns (spec: /work/shared/spec/sharding.md, "Routing" and
// "The authoritative routing table"; MongoDB's ShardKeyPattern and shard key targeting): parsing and validating a key
// pattern as shardCollection does, extracting a document's shard key (hashed fields through
// index.Hash64, as MongoDB stores them), the global MinKey/MaxKey bounds, the checks on keys
// stored as chunk bounds, and targeting: the shard key ranges a find filter can touch. It is
// pure: no I/O.
package shardkey

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
)

// MaxShardKeySizeBytes is the pre-4.4 ShardKeyPattern::kMaxShardKeySizeBytes. MongoDB 4.4
// removed the limit (7.0's ShardKeyPattern has no size check); CheckShardKeySize keeps it
// for callers that choose to enforce it.
const MaxShardKeySizeBytes = 512

// Pattern is a parsed, valid shard key pattern: {a: 1, "b.c": 1} or with one "hashed" field.
type Pattern struct {
	doc    bsoncore.Document
	fields []string
	hashed int // index of the hashed field, or -1
}

// Parse validates a key pattern as MongoDB's ShardKeyPattern constructor does
// (parseShardKeyPattern): not empty; each field a dotted path without empty parts; each value
// a number that truncates to 1 or the string "hashed", at most one hashed field (compound
// hashed keys such as {a: 1, b: "hashed"} are valid since 4.4). A part starting with '$' is
// refused as creating the shard key index would refuse it, and a repeated field too.
func Parse(kp bsoncore.Document) (*Pattern, error) {
	if err := kp.Validate(); err != nil {
		return nil, mongoerr.Newf(mongoerr.BadValue, "invalid shard key pattern: %v", err)
	}
	elems, _ := kp.Elements()
	if len(elems) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Shard key is empty")
	}
	p := &Pattern{doc: kp, hashed: -1}
	seen := map[string]bool{}
	for i, e := range elems {
		name := e.Key()
		if name == "" {
			return nil, mongoerr.Newf(mongoerr.BadValue, "Field %s is empty", name)
		}
		parts := strings.Split(name, ".")
		for _, part := range parts {
			if part == "" {
				return nil, mongoerr.Newf(mongoerr.BadValue, "Field %s contains empty parts", name)
			}
			if strings.HasPrefix(part, "$") {
				return nil, mongoerr.New(mongoerr.CannotCreateIndex, "Index key contains an illegal field name: field name starts with '$'.")
			}
		}
		if seen[name] {
			return nil, mongoerr.Newf(mongoerr.BadValue, "Shard key %s contains field %s more than once",
				bsonutil.FormatDoc(kp), name)
		}
		seen[name] = true
		v := e.Value()
		isHashed := v.Type == bsoncore.TypeString && v.StringValue() == "hashed"
		n, isNum := bsonutil.ToFloat64(v)
		if !(isNum && int64(n) == 1) && !(isHashed && p.hashed < 0) {
			return nil, mongoerr.Newf(mongoerr.BadValue,
				"Shard key %s can contain at most one 'hashed' field, and/or multiple numerical fields set to a value of 1. Failed to parse field %s",
				bsonutil.FormatDoc(kp), name)
		}
		if isHashed {
			p.hashed = i
		}
		p.fields = append(p.fields, name)
	}
	return p, nil
}

// MustParse is Parse for patterns known to be valid (tests, stored metadata already checked).
func MustParse(kp bsoncore.Document) *Pattern {
	p, err := Parse(kp)
	if err != nil {
		panic(err)
	}
	return p
}

// Doc returns the key pattern document.
func (p *Pattern) Doc() bsoncore.Document { return p.doc }

// Fields returns the pattern's dotted paths, in order.
func (p *Pattern) Fields() []string { return p.fields }

// NumFields is the number of fields.
func (p *Pattern) NumFields() int { return len(p.fields) }

// HashedField returns the index of the hashed field, or -1.
func (p *Pattern) HashedField() int { return p.hashed }

// IsHashed reports whether the pattern has a hashed field.
func (p *Pattern) IsHashed() bool { return p.hashed >= 0 }

// IsHashedPrefix reports whether the first field is hashed (MongoDB's isHashedPattern, which
// presplitting with numInitialChunks requires).
func (p *Pattern) IsHashedPrefix() bool { return p.hashed == 0 }

// HasID reports whether _id is a field of the pattern.
func (p *Pattern) HasID() bool {
	for _, f := range p.fields {
		if f == "_id" {
			return true
		}
	}
	return false
}

// String renders the pattern as MongoDB's toString does.
func (p *Pattern) String() string { return bsonutil.FormatDoc(p.doc) }

// GlobalMin is {f1: MinKey, f2: MinKey, ...}, the lower bound of the first chunk.
func (p *Pattern) GlobalMin() bsoncore.Document { return p.fill(bsoncore.TypeMinKey) }

// GlobalMax is {f1: MaxKey, ...}, the (exclusive) upper bound of the last chunk.
func (p *Pattern) GlobalMax() bsoncore.Document { return p.fill(bsoncore.TypeMaxKey) }

func (p *Pattern) fill(t bsoncore.Type) bsoncore.Document {
	idx, d := bsoncore.AppendDocumentStart(nil)
	for _, f := range p.fields {
		d = bsoncore.AppendHeader(d, t, f)
	}
	d, _ = bsoncore.AppendDocumentEnd(d, idx)
	return d
}

// IsShardKey reports whether key has exactly the pattern's fields, in order, and no array
// value (MongoDB's isShardKey on a normalized key).
func (p *Pattern) IsShardKey(key bsoncore.Document) bool {
	elems, err := key.Elements()
	if err != nil || len(elems) != len(p.fields) {
		return false
	}
	for i, e := range elems {
		if e.Key() != p.fields[i] || e.Value().Type == bsoncore.TypeArray {
			return false
		}
	}
	return true
}

// Values returns a shard key document's values, in pattern order; the key must satisfy
// IsShardKey.
func Values(key bsoncore.Document) []bsoncore.Value {
	elems, _ := key.Elements()
	vals := make([]bsoncore.Value, len(elems))
	for i, e := range elems {
		vals[i] = e.Value()
	}
	return vals
}

// errArrayKey is MongoDB's extractShardKeyFromDocThrows error.
func errArrayKey() error {
	return mongoerr.New(mongoerr.ShardKeyNotFound, "Shard key cannot contain array values or array descendants.")
}

// ExtractKey returns doc's shard key, {f1: v1, ...} in pattern order, as MongoDB's
// extractShardKeyFromDoc: dotted paths followed through embedded documents only; a missing
// field (or a scalar in the middle of the path) is null, as MongoDB stores it since 4.4; an
// array on the path or at its end is refused with ShardKeyNotFound; the hashed field holds
// NumberLong(hash64(value, seed 0)), the hash of null when missing.
func (p *Pattern) ExtractKey(doc bsoncore.Document) (bsoncore.Document, error) {
	idx, out := bsoncore.AppendDocumentStart(nil)
	for i, f := range p.fields {
		v, err := lookupNoArrays(doc, f)
		if err != nil {
			return nil, err
		}
		if v.Type == 0 {
			v = bsoncore.Value{Type: bsoncore.TypeNull}
		}
		if i == p.hashed {
			h, err := index.Hash64(v, index.DefaultHashSeed)
			if err != nil {
				return nil, mongoerr.Newf(mongoerr.BadValue, "cannot hash shard key field %s: %v", f, err)
			}
			out = bsoncore.AppendInt64Element(out, f, h)
			continue
		}
		out = bsoncore.AppendValueElement(out, f, v)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out, nil
}

// lookupNoArrays follows a dotted path through embedded documents; the zero Value means
// missing. An array anywhere on the path is an error.
func lookupNoArrays(doc bsoncore.Document, path string) (bsoncore.Value, error) {
	cur := doc
	for {
		head, rest, more := strings.Cut(path, ".")
		v, err := cur.LookupErr(head)
		if err != nil {
			return bsoncore.Value{}, nil
		}
		if v.Type == bsoncore.TypeArray {
			return bsoncore.Value{}, errArrayKey()
		}
		if !more {
			return v, nil
		}
		if v.Type != bsoncore.TypeEmbeddedDocument {
			return bsoncore.Value{}, nil
		}
		cur, path = v.Document(), rest
	}
}

// HashValue is the value a hashed shard key field stores for v: NumberLong(hash64(v, 0)),
// MongoDB's convertShardKeyToHashed.
func HashValue(v bsoncore.Value) (bsoncore.Value, error) {
	h, err := index.Hash64(v, index.DefaultHashSeed)
	if err != nil {
		return bsoncore.Value{}, mongoerr.Newf(mongoerr.BadValue, "cannot hash value: %v", err)
	}
	return bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, h)}, nil
}

// CheckShardKeySize is ShardKeyPattern::checkShardKeySize: a key (a chunk bound or split
// point) may be at most MaxShardKeySizeBytes of BSON.
func CheckShardKeySize(key bsoncore.Document) error {
	if len(key) <= MaxShardKeySizeBytes {
		return nil
	}
	return mongoerr.Newf(mongoerr.ShardKeyTooBig, "shard keys must be less than %d bytes, but key %s is %d bytes",
		MaxShardKeySizeBytes, bsonutil.FormatDoc(key), len(key))
}

// CheckKeyForMetadataStorage is ShardKeyPattern::checkShardKeyIsValidForMetadataStorage, for
// keys stored as chunk bounds (split points, zone ranges): no arrays, regexes, or embedded
// documents with $-prefixed field names.
func CheckKeyForMetadataStorage(key bsoncore.Document) error {
	elems, err := key.Elements()
	if err != nil {
		return mongoerr.Newf(mongoerr.BadValue, "invalid shard key: %v", err)
	}
	for _, e := range elems {
		v := e.Value()
		bad := v.Type == bsoncore.TypeArray || v.Type == bsoncore.TypeRegex || v.Type == 0
		if v.Type == bsoncore.TypeEmbeddedDocument && hasDollarField(v.Document()) {
			bad = true
		}
		if bad {
			return mongoerr.Newf(mongoerr.BadValue, "Shard key element %s is not valid for storage",
				bsonutil.FormatElement(e.Key(), v))
		}
	}
	return nil
}

// hasDollarField reports a $-prefixed field name at any depth (storageValidEmbedded).
func hasDollarField(d bsoncore.Document) bool {
	elems, _ := d.Elements()
	for _, e := range elems {
		if strings.HasPrefix(e.Key(), "$") {
			return true
		}
		if v := e.Value(); v.Type == bsoncore.TypeEmbeddedDocument && hasDollarField(v.Document()) {
			return true
		}
	}
	return false
}

// CheckUnique is shardCollection's check that a hashed shard key is not declared unique.
func (p *Pattern) CheckUnique(unique bool) error {
	if unique && p.IsHashed() {
		return mongoerr.New(mongoerr.InvalidOptions, "Hashed shard keys cannot be declared unique. It's possible to ensure uniqueness on the hashed field by declaring an additional (non-hashed) unique index on the field.")
	}
	return nil
}
