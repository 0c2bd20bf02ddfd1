package routing

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
)

func msg(err error) string {
	if e, ok := mongoerr.As(err); ok {
		return e.Msg
	}
	return ""
}

func docOf(t testing.TB, d any) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	epoch1 = bson.ObjectID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	epoch2 = bson.ObjectID{2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	gen1   = Generation{Epoch: epoch1, Timestamp: bson.Timestamp{T: 100, I: 1}}
	gen2   = Generation{Epoch: epoch2, Timestamp: bson.Timestamp{T: 200, I: 1}}
)

func cv(major, minor uint32, g Generation) ChunkVersion {
	return ChunkVersion{Major: major, Minor: minor, Generation: g}
}

// TestChunkVersionOrder pins chunk_version.h's comparisons.
func TestChunkVersionOrder(t *testing.T) {
	for _, c := range []struct {
		a, b              ChunkVersion
		older, olderEqual bool
	}{
		{cv(1, 0, gen1), cv(1, 1, gen1), true, true},
		{cv(1, 5, gen1), cv(2, 0, gen1), true, true},
		{cv(2, 0, gen1), cv(1, 9, gen1), false, false},
		{cv(1, 1, gen1), cv(1, 1, gen1), false, true},
		// Another generation: the timestamp decides, whatever the placement.
		{cv(9, 9, gen1), cv(1, 0, gen2), true, true},
		{cv(1, 0, gen2), cv(9, 9, gen1), false, false},
	} {
		if got := c.a.IsOlderThan(c.b); got != c.older {
			t.Errorf("%s.IsOlderThan(%s) = %v", c.a, c.b, got)
		}
		if got := c.a.IsOlderOrEqualThan(c.b); got != c.olderEqual {
			t.Errorf("%s.IsOlderOrEqualThan(%s) = %v", c.a, c.b, got)
		}
	}
	if !cv(1, 0, gen1).Generation.SameCollection(gen1) || gen1.SameCollection(gen2) {
		t.Error("SameCollection")
	}
	if Unsharded().IsSet() || Unsharded().IsIgnored() || !Ignored().IsIgnored() || Ignored().IsSet() {
		t.Error("UNSHARDED / IGNORED")
	}
	if cv(1, 0, gen1).IsIgnored() || !cv(1, 0, gen1).IsSet() {
		t.Error("a set version is neither ignored nor unset")
	}
	// IGNORED is newer than any real version (timestamp max), UNSHARDED older.
	if !cv(5, 5, gen2).IsOlderThan(Ignored()) || !Unsharded().IsOlderThan(cv(1, 0, gen1)) {
		t.Error("IGNORED/UNSHARDED ordering")
	}
	if got := Ignored().Epoch.Hex(); got != "00000000ffffffffffffffff" {
		t.Errorf("IGNORED epoch = %s", got)
	}
	if got := cv(3, 4, gen1).String(); got != "3|4||0102030405060708090a0b0c||Timestamp(100, 1)" {
		t.Errorf("String = %s", got)
	}
	v, err := cv(3, 4, gen1).IncMajor()
	if err != nil || v.Major != 4 || v.Minor != 0 {
		t.Errorf("IncMajor = %s, %v", v, err)
	}
	if v, err = v.IncMinor(); err != nil || v.Major != 4 || v.Minor != 1 {
		t.Errorf("IncMinor = %s, %v", v, err)
	}
	if _, err := cv(1<<32-1, 0, gen1).IncMajor(); !mongoerr.Is(err, mongoerr.Location31180) {
		t.Errorf("IncMajor at max: %v", err)
	}
	if _, err := cv(1, 1<<32-1, gen1).IncMinor(); !mongoerr.Is(err, mongoerr.Location31181) {
		t.Errorf("IncMinor at max: %v", err)
	}
}

func TestShardVersionWire(t *testing.T) {
	v := cv(7, 3, gen1)
	d := v.ShardVersionDoc()
	if got := bsonutil.FormatDoc(d); got != "{ e: ObjectId('0102030405060708090a0b0c'), t: Timestamp(100, 1), v: Timestamp(7, 3) }" {
		t.Errorf("shardVersion = %s", got)
	}
	back, err := ParseShardVersion(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d})
	if err != nil || !back.Equal(v) || back.Epoch != v.Epoch {
		t.Errorf("round trip = %s, %v", back, err)
	}
	// Unknown fields (placementConflictTime, 7.0's optional ones) are ignored.
	extra := docOf(t, bson.D{{Key: "e", Value: epoch1}, {Key: "t", Value: bson.Timestamp{T: 100, I: 1}},
		{Key: "v", Value: bson.Timestamp{T: 7, I: 3}}, {Key: "placementConflictTime", Value: bson.Timestamp{T: 1}}})
	if back, err := ParseShardVersion(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: extra}); err != nil || !back.Equal(v) {
		t.Errorf("with extra field = %s, %v", back, err)
	}
	for _, c := range []struct {
		v    bsoncore.Value
		code mongoerr.Code
		msg  string
	}{
		{bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: docOf(t, bson.D{{Key: "e", Value: epoch1}, {Key: "t", Value: bson.Timestamp{}}})},
			mongoerr.Location40414, "BSON field 'ShardVersion.v' is missing but a required field"},
		{bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: docOf(t, bson.D{{Key: "e", Value: "x"}, {Key: "t", Value: bson.Timestamp{}}, {Key: "v", Value: bson.Timestamp{}}})},
			mongoerr.TypeMismatch, "BSON field 'ShardVersion.e' is the wrong type 'string', expected type 'objectId'"},
		{bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 1)},
			mongoerr.TypeMismatch, "BSON field 'shardVersion' is the wrong type 'int', expected type 'object'"},
	} {
		_, err := ParseShardVersion(c.v)
		if !mongoerr.Is(err, c.code) || msg(err) != c.msg {
			t.Errorf("ParseShardVersion(%v) = %v, want %v %q", c.v, err, c.code, c.msg)
		}
	}
	// IGNORED and UNSHARDED travel like any version.
	for _, v := range []ChunkVersion{Ignored(), Unsharded()} {
		back, err := ParseShardVersion(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: v.ShardVersionDoc()})
		if err != nil || back != v {
			t.Errorf("round trip of %s = %s, %v", v, back, err)
		}
	}
}

func TestDatabaseVersion(t *testing.T) {
	u := catalog.UUID{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	v := NewDatabaseVersion(u, bson.Timestamp{T: 50, I: 2})
	if v.LastMod != 1 || v.IsFixed() {
		t.Errorf("new version = %s", v)
	}
	w := v.Updated()
	if !v.Less(w) || w.Less(v) || v.Equal(w) {
		t.Error("Updated is not newer")
	}
	older := NewDatabaseVersion(u, bson.Timestamp{T: 49, I: 9}).Updated().Updated()
	if !older.Less(v) {
		t.Error("the timestamp orders before lastMod")
	}
	if !(DatabaseVersion{}).IsFixed() {
		t.Error("fixed version")
	}
	d := w.Doc()
	if got := bsonutil.FormatDoc(d); !strings.HasPrefix(got, "{ uuid: ") || !strings.HasSuffix(got, "timestamp: Timestamp(50, 2), lastMod: 2 }") {
		t.Errorf("databaseVersion = %s", got)
	}
	back, err := ParseDatabaseVersion(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d})
	if err != nil || back != w {
		t.Errorf("round trip = %s, %v", back, err)
	}
	bad := docOf(t, bson.D{{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: u[:]}}, {Key: "lastMod", Value: int32(1)}})
	if _, err := ParseDatabaseVersion(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: bad}); !mongoerr.Is(err, mongoerr.Location40414) ||
		msg(err) != "BSON field 'DatabaseVersion.timestamp' is missing but a required field" {
		t.Errorf("missing timestamp: %v", err)
	}
	bad = docOf(t, bson.D{{Key: "uuid", Value: bson.Binary{Subtype: 0, Data: u[:]}}, {Key: "timestamp", Value: bson.Timestamp{}}, {Key: "lastMod", Value: int32(1)}})
	if _, err := ParseDatabaseVersion(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: bad}); !mongoerr.Is(err, mongoerr.InvalidUUID) {
		t.Errorf("non-UUID binary: %v", err)
	}
}
