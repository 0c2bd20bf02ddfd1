package routing

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
)

// HistoryEntry is one element of a chunk's history: the shard that owned it from ValidAfter
// on (snapshot reads at an older cluster time route by it).
type HistoryEntry struct {
	ValidAfter bson.Timestamp
	Shard      string
}

// Chunk is a range [Min, Max) of shard keys owned by one shard, with the version at which its
// placement last changed: a config.chunks document (MongoDB's ChunkType).
type Chunk struct {
	ID                  bson.ObjectID
	CollectionUUID      catalog.UUID
	Min, Max            bsoncore.Document
	Shard               string
	Version             ChunkVersion
	OnCurrentShardSince *bson.Timestamp
	History             []HistoryEntry
	Jumbo               bool
}

// RangeString renders [min, max) as MongoDB's ChunkRange::toString does.
func (c *Chunk) RangeString() string {
	return fmt.Sprintf("[%s, %s)", bsonutil.FormatDoc(c.Min), bsonutil.FormatDoc(c.Max))
}

// String renders the chunk for error messages.
func (c *Chunk) String() string {
	return fmt.Sprintf("%s, version: %s, shard: %s", c.RangeString(), c.Version, c.Shard)
}

// ConfigDoc is ChunkType::toConfigBSON, the 7.0 config.chunks schema: {_id, uuid, min, max,
// shard, lastmod: Timestamp(major, minor), jumbo (only when set), onCurrentShardSince,
// history: [{validAfter, shard}]}. The epoch and timestamp are the collection's
// (config.collections), not stored per chunk since 5.0.
func (c *Chunk) ConfigDoc() bsoncore.Document {
	idx, d := bsoncore.AppendDocumentStart(nil)
	d = bsoncore.AppendObjectIDElement(d, "_id", c.ID)
	d = bsoncore.AppendBinaryElement(d, "uuid", 4, c.CollectionUUID[:])
	d = bsoncore.AppendDocumentElement(d, "min", c.Min)
	d = bsoncore.AppendDocumentElement(d, "max", c.Max)
	d = bsoncore.AppendStringElement(d, "shard", c.Shard)
	d = bsoncore.AppendTimestampElement(d, "lastmod", c.Version.Major, c.Version.Minor)
	if c.Jumbo {
		d = bsoncore.AppendBooleanElement(d, "jumbo", true)
	}
	if c.OnCurrentShardSince != nil {
		d = bsoncore.AppendTimestampElement(d, "onCurrentShardSince", c.OnCurrentShardSince.T, c.OnCurrentShardSince.I)
	}
	if len(c.History) > 0 {
		aidx, a := bsoncore.AppendArrayElementStart(d, "history")
		for i, h := range c.History {
			hidx, hd := bsoncore.AppendDocumentElementStart(a, fmt.Sprint(i))
			hd = bsoncore.AppendTimestampElement(hd, "validAfter", h.ValidAfter.T, h.ValidAfter.I)
			hd = bsoncore.AppendStringElement(hd, "shard", h.Shard)
			a, _ = bsoncore.AppendDocumentEnd(hd, hidx)
		}
		d, _ = bsoncore.AppendArrayEnd(a, aidx)
	}
	d, _ = bsoncore.AppendDocumentEnd(d, idx)
	return d
}

// missing and wrongField are bsonExtractTypedField's errors.
func missing(field string) error {
	return mongoerr.Newf(mongoerr.NoSuchKey, "Missing expected field \"%s\"", field)
}

func wrongField(field string, got, want bsoncore.Type) error {
	return mongoerr.Newf(mongoerr.TypeMismatch, "\"%s\" had the wrong type. Expected %s, found %s",
		field, bsonutil.TypeName(want), bsonutil.TypeName(got))
}

// ParseConfigChunk is ChunkType::parseFromConfigBSON: a config.chunks document of a
// collection of generation gen. _id, uuid, min, max, shard and lastmod are required;
// onCurrentShardSince, history and jumbo are optional. The chunk is validated (Validate).
func ParseConfigChunk(doc bsoncore.Document, gen Generation) (Chunk, error) {
	var c Chunk
	if err := doc.Validate(); err != nil {
		return c, mongoerr.Newf(mongoerr.InvalidBSON, "invalid chunk document: %v", err)
	}
	get := func(name string, t bsoncore.Type) (bsoncore.Value, error) {
		v, err := doc.LookupErr(name)
		if err != nil {
			return v, missing(name)
		}
		if v.Type != t {
			return v, wrongField(name, v.Type, t)
		}
		return v, nil
	}
	v, err := get("_id", bsoncore.TypeObjectID)
	if err != nil {
		return c, err
	}
	c.ID = v.ObjectID()
	if v, err = get("uuid", bsoncore.TypeBinary); err != nil {
		return c, err
	}
	if sub, data := v.Binary(); sub != 4 || len(data) != 16 {
		return c, mongoerr.New(mongoerr.InvalidUUID, "chunk uuid is not a UUID")
	} else {
		copy(c.CollectionUUID[:], data)
	}
	if v, err = get("min", bsoncore.TypeEmbeddedDocument); err != nil {
		return c, err
	}
	c.Min = v.Document()
	if v, err = get("max", bsoncore.TypeEmbeddedDocument); err != nil {
		return c, err
	}
	c.Max = v.Document()
	if v, err = get("shard", bsoncore.TypeString); err != nil {
		return c, err
	}
	c.Shard = v.StringValue()
	if v, err = get("lastmod", bsoncore.TypeTimestamp); err != nil {
		return c, err
	}
	c.Version.Major, c.Version.Minor = v.Timestamp()
	c.Version.Generation = gen
	if v, err := doc.LookupErr("onCurrentShardSince"); err == nil {
		if v.Type != bsoncore.TypeTimestamp {
			return c, wrongField("onCurrentShardSince", v.Type, bsoncore.TypeTimestamp)
		}
		t, i := v.Timestamp()
		c.OnCurrentShardSince = &bson.Timestamp{T: t, I: i}
	}
	if v, err := doc.LookupErr("jumbo"); err == nil {
		if v.Type != bsoncore.TypeBoolean {
			return c, wrongField("jumbo", v.Type, bsoncore.TypeBoolean)
		}
		c.Jumbo = v.Boolean()
	}
	if v, err := doc.LookupErr("history"); err == nil {
		if v.Type != bsoncore.TypeArray {
			return c, wrongField("history", v.Type, bsoncore.TypeArray)
		}
		vals, _ := v.Array().Values()
		for _, hv := range vals {
			if hv.Type != bsoncore.TypeEmbeddedDocument {
				return c, wrongField("history", hv.Type, bsoncore.TypeEmbeddedDocument)
			}
			hd := hv.Document()
			va, err := hd.LookupErr("validAfter")
			if err != nil {
				return c, missing("validAfter")
			}
			if va.Type != bsoncore.TypeTimestamp {
				return c, wrongField("validAfter", va.Type, bsoncore.TypeTimestamp)
			}
			sh, err := hd.LookupErr("shard")
			if err != nil {
				return c, missing("shard")
			}
			if sh.Type != bsoncore.TypeString {
				return c, wrongField("shard", sh.Type, bsoncore.TypeString)
			}
			t, i := va.Timestamp()
			c.History = append(c.History, HistoryEntry{ValidAfter: bson.Timestamp{T: t, I: i}, Shard: sh.StringValue()})
		}
	}
	return c, c.Validate()
}

// Validate is ChunkType::validate: non-empty min and max with the same field names in the
// same order, min < max, a shard, a set version, and a history (when present) whose first
// entry names the chunk's shard.
func (c *Chunk) Validate() error {
	if len(c.Min) <= 5 {
		return mongoerr.New(mongoerr.NoSuchKey, "missing min for chunk")
	}
	if len(c.Max) <= 5 {
		return mongoerr.New(mongoerr.NoSuchKey, "missing max for chunk")
	}
	minE, err1 := c.Min.Elements()
	maxE, err2 := c.Max.Elements()
	if err1 != nil || err2 != nil || len(minE) != len(maxE) {
		return mongoerr.Newf(mongoerr.BadValue, "min and max don't have matching keys for chunk %s", c.RangeString())
	}
	for i := range minE {
		if minE[i].Key() != maxE[i].Key() {
			return mongoerr.Newf(mongoerr.BadValue, "min and max don't have matching keys for chunk %s", c.RangeString())
		}
	}
	if bsonutil.CompareDocuments(c.Min, c.Max) >= 0 {
		return mongoerr.Newf(mongoerr.FailedToParse, "min is not less than max for chunk %s", c.RangeString())
	}
	if c.Shard == "" {
		return mongoerr.New(mongoerr.NoSuchKey, "missing shard for chunk")
	}
	if !c.Version.IsSet() {
		return mongoerr.Newf(mongoerr.BadValue, "invalid version for chunk %s", c.RangeString())
	}
	if len(c.History) > 0 && c.History[0].Shard != c.Shard {
		return mongoerr.Newf(mongoerr.BadValue, "History contains an invalid shard %s", c.History[0].Shard)
	}
	return nil
}
