// Package routing owns the versioned routing data that routers, shards and the config server
// share (spec: /work/shared/spec/sharding.md, "Shard versioning and database versioning"
// with its "Special versioning conventions", and "The routing table cache"; MongoDB's
// chunk_version.h, shard_version.h, database_version.idl, type_chunk.cpp and
// chunk_manager.cpp): chunk, shard and database versions with their ordering rules and BSON
// wire forms, config.chunks documents, and the routing table of one sharded collection
// (chunks by key range, built, validated and refreshed incrementally, answering which shard
// owns a key or which shards a set of ranges touches). It is pure: no I/O and no goroutines;
// a RoutingTable is immutable once built.
package routing

import (
	"fmt"
	"math"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
)

// Generation identifies one incarnation of a sharded collection (MongoDB's
// CollectionGeneration): the epoch changes when it is dropped and re-created or its shard
// key refined; the timestamp is the cluster time of its creation and is the authoritative
// identity since 5.0 (two generations with the same timestamp have the same epoch).
type Generation struct {
	Epoch     bson.ObjectID
	Timestamp bson.Timestamp
}

// SameCollection is CollectionGeneration::isSameCollection: equal timestamps.
func (g Generation) SameCollection(o Generation) bool { return g.Timestamp == o.Timestamp }

// ChunkVersion is a placement version <major, minor> within a generation. The major part
// increases when chunks move between shards, the minor part on splits and merges.
type ChunkVersion struct {
	Major, Minor uint32
	Generation
}

// Unsharded is ChunkVersion::UNSHARDED(): 0|0 with a zero epoch and timestamp, the version a
// router sends for a collection it believes unsharded.
func Unsharded() ChunkVersion { return ChunkVersion{} }

// ignoredEpoch is OID::init(Date_t(), max=true): a zero time and all other bytes 0xff.
var ignoredEpoch = bson.ObjectID{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ignoredTimestamp is Timestamp::max().
var ignoredTimestamp = bson.Timestamp{T: math.MaxUint32, I: math.MaxUint32}

// Ignored is ChunkVersion::IGNORED(): 0|0 with the maximal timestamp, sent by operations that
// must not be version-checked (a shard accepts it whatever its own version).
func Ignored() ChunkVersion {
	return ChunkVersion{Generation: Generation{Epoch: ignoredEpoch, Timestamp: ignoredTimestamp}}
}

// IsIgnored is ChunkVersion::isIgnoredVersion.
func (v ChunkVersion) IsIgnored() bool {
	return v.Major == 0 && v.Minor == 0 && v.Timestamp == ignoredTimestamp
}

// IsSet is ChunkVersion::isSet: a placement version other than 0|0.
func (v ChunkVersion) IsSet() bool { return v.Major != 0 || v.Minor != 0 }

// Equal is ChunkVersion::operator==: same timestamp and same major and minor.
func (v ChunkVersion) Equal(o ChunkVersion) bool {
	return v.Timestamp == o.Timestamp && v.Major == o.Major && v.Minor == o.Minor
}

// IsOlderThan is ChunkVersion::isOlderThan: an older collection generation (smaller
// timestamp) is older whatever its placement; within a generation, compare major then minor.
func (v ChunkVersion) IsOlderThan(o ChunkVersion) bool {
	if v.Timestamp != o.Timestamp {
		return tsLess(v.Timestamp, o.Timestamp)
	}
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	return v.Minor < o.Minor
}

// IsOlderOrEqualThan is ChunkVersion::isOlderOrEqualThan.
func (v ChunkVersion) IsOlderOrEqualThan(o ChunkVersion) bool { return v.IsOlderThan(o) || v.Equal(o) }

// placementLess orders placements within one generation.
func (v ChunkVersion) placementLess(o ChunkVersion) bool {
	return v.Major < o.Major || v.Major == o.Major && v.Minor < o.Minor
}

func tsLess(a, b bson.Timestamp) bool { return a.T < b.T || a.T == b.T && a.I < b.I }

// IncMajor returns the next major version (minor reset to 0), as a migration commits it.
func (v ChunkVersion) IncMajor() (ChunkVersion, error) {
	if v.Major == math.MaxUint32 {
		return v, mongoerr.New(mongoerr.Location31180, "The chunk major version has reached its maximum value. Manual intervention will be required before more chunk move, split, or merge operations are allowed.")
	}
	v.Major, v.Minor = v.Major+1, 0
	return v, nil
}

// IncMinor returns the next minor version, as a split or merge commits it.
func (v ChunkVersion) IncMinor() (ChunkVersion, error) {
	if v.Minor == math.MaxUint32 {
		return v, mongoerr.New(mongoerr.Location31181, "The chunk minor version has reached its maximum value. Manual intervention will be required before more chunk split or merge operations are allowed.")
	}
	v.Minor++
	return v, nil
}

// String is ChunkVersion::toString: "major|minor||epoch||Timestamp(t, i)".
func (v ChunkVersion) String() string {
	return fmt.Sprintf("%d|%d||%s||Timestamp(%d, %d)", v.Major, v.Minor, v.Epoch.Hex(), v.Timestamp.T, v.Timestamp.I)
}

// Placement is the version as the Timestamp(major, minor) that config.chunks' lastmod and the
// shard version's "v" hold.
func (v ChunkVersion) Placement() bson.Timestamp { return bson.Timestamp{T: v.Major, I: v.Minor} }

// AppendShardVersion appends the shardVersion sub-document as MongoDB 7.0 sends it
// (ShardVersion::serialize): {e: epoch, t: timestamp, v: Timestamp(major, minor)}.
func (v ChunkVersion) AppendShardVersion(dst []byte, field string) []byte {
	idx, dst := bsoncore.AppendDocumentElementStart(dst, field)
	dst = bsoncore.AppendObjectIDElement(dst, "e", v.Epoch)
	dst = bsoncore.AppendTimestampElement(dst, "t", v.Timestamp.T, v.Timestamp.I)
	dst = bsoncore.AppendTimestampElement(dst, "v", v.Major, v.Minor)
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

// ShardVersionDoc returns {e, t, v} as a document.
func (v ChunkVersion) ShardVersionDoc() bsoncore.Document {
	d := v.AppendShardVersion(nil, "x")
	return bsoncore.Document(d[3:]) // after the type byte and "x\0"
}

// ParseShardVersion parses a shardVersion value as ShardVersion::parse does (IDL struct
// "ShardVersion", non-strict: unknown fields such as placementConflictTime are ignored).
func ParseShardVersion(v bsoncore.Value) (ChunkVersion, error) {
	if v.Type != bsoncore.TypeEmbeddedDocument {
		return ChunkVersion{}, wrongType("shardVersion", v.Type, "object")
	}
	f, err := idlFields("ShardVersion", v.Document(), []idlField{{"e", bsoncore.TypeObjectID}, {"t", bsoncore.TypeTimestamp}, {"v", bsoncore.TypeTimestamp}})
	if err != nil {
		return ChunkVersion{}, err
	}
	var cv ChunkVersion
	cv.Epoch = f["e"].ObjectID()
	cv.Timestamp.T, cv.Timestamp.I = f["t"].Timestamp()
	cv.Major, cv.Minor = f["v"].Timestamp()
	return cv, nil
}

// idlField is a required field of an IDL struct and its type.
type idlField struct {
	name string
	t    bsoncore.Type
}

// idlFields extracts required fields of the given types, in declaration order, with the IDL
// parser's errors; other fields are ignored (the structs are not strict).
func idlFields(ctx string, doc bsoncore.Document, want []idlField) (map[string]bsoncore.Value, error) {
	elems, err := doc.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s: %v", ctx, err)
	}
	got := make(map[string]bsoncore.Value, len(want))
	for _, e := range elems {
		i := slices.IndexFunc(want, func(f idlField) bool { return f.name == e.Key() })
		if i < 0 {
			continue
		}
		t := want[i].t
		if e.Value().Type != t {
			return nil, wrongType(ctx+"."+e.Key(), e.Value().Type, bsonutil.TypeName(t))
		}
		got[e.Key()] = e.Value()
	}
	for _, f := range want {
		if _, ok := got[f.name]; !ok {
			return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.%s' is missing but a required field", ctx, f.name)
		}
	}
	return got, nil
}

func wrongType(field string, t bsoncore.Type, want string) error {
	return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type '%s'",
		field, bsonutil.TypeName(t), want)
}

// DatabaseVersion is a database's version (database_version.idl): the database's identity
// (uuid, and since 5.0 the timestamp of its creation) and lastMod, bumped when its primary
// shard moves.
type DatabaseVersion struct {
	UUID      catalog.UUID
	Timestamp bson.Timestamp
	LastMod   int32
}

// NewDatabaseVersion is the version of a newly created database: lastMod 1.
func NewDatabaseVersion(uuid catalog.UUID, ts bson.Timestamp) DatabaseVersion {
	return DatabaseVersion{UUID: uuid, Timestamp: ts, LastMod: 1}
}

// Updated is DatabaseVersion::makeUpdated: the next lastMod, as movePrimary commits it.
func (d DatabaseVersion) Updated() DatabaseVersion {
	d.LastMod++
	return d
}

// IsFixed is DatabaseVersion::isFixed: the fixed version (lastMod 0) of config and admin,
// which never changes and is never stale.
func (d DatabaseVersion) IsFixed() bool { return d.LastMod == 0 }

// Less is DatabaseVersion::operator<: by timestamp, then by lastMod.
func (d DatabaseVersion) Less(o DatabaseVersion) bool {
	if d.Timestamp != o.Timestamp {
		return tsLess(d.Timestamp, o.Timestamp)
	}
	return d.LastMod < o.LastMod
}

// Equal reports equal timestamp, lastMod and uuid.
func (d DatabaseVersion) Equal(o DatabaseVersion) bool { return d == o }

// String renders the version as MongoDB logs it.
func (d DatabaseVersion) String() string {
	return fmt.Sprintf("{ uuid: UUID(\"%s\"), timestamp: Timestamp(%d, %d), lastMod: %d }",
		d.UUID, d.Timestamp.T, d.Timestamp.I, d.LastMod)
}

// AppendDoc appends {uuid, timestamp, lastMod} under field, the databaseVersion a router
// attaches to commands on unsharded collections and config.databases' "version".
func (d DatabaseVersion) AppendDoc(dst []byte, field string) []byte {
	idx, dst := bsoncore.AppendDocumentElementStart(dst, field)
	dst = bsoncore.AppendBinaryElement(dst, "uuid", 4, d.UUID[:])
	dst = bsoncore.AppendTimestampElement(dst, "timestamp", d.Timestamp.T, d.Timestamp.I)
	dst = bsoncore.AppendInt32Element(dst, "lastMod", d.LastMod)
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

// Doc returns {uuid, timestamp, lastMod}.
func (d DatabaseVersion) Doc() bsoncore.Document {
	b := d.AppendDoc(nil, "x")
	return bsoncore.Document(b[3:])
}

// ParseDatabaseVersion parses a databaseVersion value (IDL struct "DatabaseVersion").
func ParseDatabaseVersion(v bsoncore.Value) (DatabaseVersion, error) {
	if v.Type != bsoncore.TypeEmbeddedDocument {
		return DatabaseVersion{}, wrongType("databaseVersion", v.Type, "object")
	}
	f, err := idlFields("DatabaseVersion", v.Document(), []idlField{{"uuid", bsoncore.TypeBinary}, {"timestamp", bsoncore.TypeTimestamp}, {"lastMod", bsoncore.TypeInt32}})
	if err != nil {
		return DatabaseVersion{}, err
	}
	var d DatabaseVersion
	sub, data := f["uuid"].Binary()
	if sub != 4 || len(data) != 16 {
		return DatabaseVersion{}, mongoerr.New(mongoerr.InvalidUUID, "BSON field 'DatabaseVersion.uuid' is not a UUID")
	}
	copy(d.UUID[:], data)
	d.Timestamp.T, d.Timestamp.I = f["timestamp"].Timestamp()
	d.LastMod = f["lastMod"].Int32()
	return d, nil
}
