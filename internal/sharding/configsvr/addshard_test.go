package configsvr

import (
	"context"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/sharding/shardregistry"
)

func doc(t *testing.T, d bson.D) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseAddShard(t *testing.T) {
	r, err := ParseAddShard(doc(t, bson.D{{Key: "addShard", Value: "rs/h:1,h:2"}, {Key: "name", Value: "s"}}))
	if err != nil || r.ConnString != "rs/h:1,h:2" || r.Name == nil || *r.Name != "s" {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []struct {
		cmd  bson.D
		code mongoerr.Code
	}{
		{bson.D{{Key: "addShard", Value: 1}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "addShard", Value: ""}}, mongoerr.BadValue},
		{bson.D{{Key: "addShard", Value: "rs/h:1"}, {Key: "name", Value: ""}}, mongoerr.BadValue},
		{bson.D{{Key: "addShard", Value: "rs/h:1"}, {Key: "name", Value: 3}}, mongoerr.TypeMismatch},
	} {
		if _, err := ParseAddShard(doc(t, bad.cmd)); !mongoerr.Is(err, bad.code) {
			t.Errorf("%v: %v, want %v", bad.cmd, err, bad.code)
		}
	}
	for s, want := range map[string]string{"rs/h:1,h:2": "rs/h:1,h:2", "h:1": "h:1"} {
		if cs, err := parseConnString(s); err != nil || cs.String() != want {
			t.Errorf("parseConnString(%q) = %v, %v", s, cs, err)
		}
	}
	for _, s := range []string{"h:1,h:2", "/h:1", "rs/", "rs/h:1,,h:2", "rs/h:99999"} {
		if _, err := parseConnString(s); !mongoerr.Is(err, mongoerr.FailedToParse) {
			t.Errorf("parseConnString(%q): %v, want FailedToParse", s, err)
		}
	}
}

// checkIfShardExists: the same set (and options) is the existing shard; another name for
// it, another set on its hosts, or its name for another set is IllegalOperation.
func TestCheckIfShardExists(t *testing.T) {
	existing := []shardregistry.Shard{{ID: "a", Host: "rsA/h:1,h:2"}, {ID: "b", Host: "rsB/h:3"}}
	name := func(s string) *string { return &s }
	for _, c := range []struct {
		cs      string
		name    *string
		want    string // existing shard's id, "" for none
		errPart string
	}{
		{"rsA/h:1", nil, "a", ""},
		{"rsA/h:2", name("a"), "a", ""},
		{"rsC/h:9", nil, "", ""},
		{"rsA/h:1", name("x"), "", "A shard already exists containing the replica set 'rsA'"},
		{"rsA/h:9", nil, "", "A shard named rsA containing the replica set 'rsA' already exists"},
		{"rsC/h:3", nil, "", "'h:3' is already a member of the existing shard 'rsB/h:3' (b)."},
		{"rsC/h:9", name("b"), "", "A shard named b already exists"},
	} {
		cs, err := parseConnString(c.cs)
		if err != nil {
			t.Fatal(err)
		}
		s, err := checkIfShardExists(existing, cs, c.name)
		switch {
		case c.errPart != "":
			if !mongoerr.Is(err, mongoerr.IllegalOperation) || !strings.Contains(err.Error(), c.errPart) {
				t.Errorf("%s %v: %v, want IllegalOperation %q", c.cs, c.name, err, c.errPart)
			}
		case err != nil:
			t.Errorf("%s: %v", c.cs, err)
		case c.want == "" && s != nil, c.want != "" && (s == nil || s.ID != c.want):
			t.Errorf("%s: %+v, want %q", c.cs, s, c.want)
		}
	}
}

func TestCheckSetName(t *testing.T) {
	set, _ := parseConnString("rs/h:1")
	bare, _ := parseConnString("h:1")
	member := doc(t, bson.D{{Key: "setName", Value: "rs"}})
	standalone := doc(t, bson.D{{Key: "ismaster", Value: true}})
	for _, c := range []struct {
		cs    connString
		hello bsoncore.Document
		code  mongoerr.Code
		part  string
	}{
		{set, member, 0, ""},
		{bare, member, mongoerr.OperationFailed, "host is part of set rs; use replica set url format"},
		{set, standalone, mongoerr.OperationFailed, "host did not return a set name"},
		{connString{set: "other", hosts: []string{"h:1"}}, member, mongoerr.OperationFailed, "does not match the actual set name rs"},
		{set, doc(t, bson.D{{Key: "msg", Value: "isdbgrid"}}), mongoerr.IllegalOperation, "cannot add a mongos as a shard"},
	} {
		err := checkSetName(c.cs, c.hello)
		if mongoerr.CodeOf(err) != c.code && !(c.code == 0 && err == nil) || (err != nil && !strings.Contains(err.Error(), c.part)) {
			t.Errorf("%v %s: %v, want %v %q", c.cs, c.hello, err, c.code, c.part)
		}
	}
}

func TestParseCreateDatabase(t *testing.T) {
	r, err := ParseCreateDatabase(doc(t, bson.D{{Key: "_configsvrCreateDatabase", Value: "db"},
		{Key: "primaryShardId", Value: "s0"}, {Key: "enableSharding", Value: true}}))
	if err != nil || r.Name != "db" || r.PrimaryShard != "s0" || !r.EnableSharding {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []bson.D{
		{{Key: "_configsvrCreateDatabase", Value: 1}},
		{{Key: "_configsvrCreateDatabase", Value: "db"}, {Key: "primaryShardId", Value: 1}},
		{{Key: "_configsvrCreateDatabase", Value: "db"}, {Key: "primaryShardId", Value: ""}},
		{{Key: "_configsvrCreateDatabase", Value: "db"}, {Key: "enableSharding", Value: false}},
	} {
		if _, err := ParseCreateDatabase(doc(t, bad)); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	for name, ok := range map[string]bool{"db": true, "a$b": true, "": false, "a.b": false, "a b": false, "a/b": false,
		`a"b`: false, strings.Repeat("x", 63): true, strings.Repeat("x", 64): false} {
		if ValidDBName(name) != ok {
			t.Errorf("ValidDBName(%q) = %v", name, !ok)
		}
	}
}

// The checks CreateDatabase makes before reading the catalog, and the answers it reads back.
func TestCreateDatabaseChecksAndExisting(t *testing.T) {
	entry := doc(t, bson.D{{Key: "_id", Value: "App"}, {Key: "primary", Value: "s0"}, {Key: "version", Value: bson.D{
		{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}, {Key: "timestamp", Value: bson.Timestamp{T: 5, I: 1}},
		{Key: "lastMod", Value: int32(1)}}}})
	shard := doc(t, bson.D{{Key: "_id", Value: "s0"}, {Key: "host", Value: "rs/h:1"}})
	m := &Manager{Run: func(_ context.Context, _ string, cmd bsoncore.Document) (bsoncore.Document, error) {
		coll := cmd.Lookup("find").StringValue()
		batch := bsoncore.NewArrayBuilder()
		filter := cmd.Lookup("filter").Document()
		switch {
		case coll == "shards" && filter.Lookup("_id").StringValue() == "s0":
			batch.AppendDocument(shard)
		case coll == "databases" && filter.Lookup("_id").Type == bsoncore.TypeEmbeddedDocument: // the caseless regex
			batch.AppendDocument(entry)
		case coll == "databases" && filter.Lookup("_id").StringValue() == "App":
			batch.AppendDocument(entry)
		}
		return bsoncore.NewDocumentBuilder().AppendDocument("cursor", bsoncore.NewDocumentBuilder().
			AppendArray("firstBatch", batch.Build()).Build()).Build(), nil
	}}
	ctx := context.Background()
	if d, err := m.CreateDatabase(ctx, CreateDatabaseRequest{Name: "App"}); err != nil || d.Primary != "s0" || d.Version.LastMod != 1 {
		t.Fatalf("existing database: %+v %v", d, err)
	}
	for _, c := range []struct {
		req  CreateDatabaseRequest
		code mongoerr.Code
	}{
		{CreateDatabaseRequest{Name: "app"}, mongoerr.DatabaseDifferCase},
		{CreateDatabaseRequest{Name: "admin"}, mongoerr.InvalidOptions},
		{CreateDatabaseRequest{Name: "local"}, mongoerr.InvalidOptions},
		{CreateDatabaseRequest{Name: "a.b"}, mongoerr.InvalidNamespace},
		{CreateDatabaseRequest{Name: "x", PrimaryShard: "nope"}, mongoerr.ShardNotFound},
	} {
		if _, err := m.CreateDatabase(ctx, c.req); !mongoerr.Is(err, c.code) {
			t.Errorf("%+v: %v, want %v", c.req, err, c.code)
		}
	}
	if d, err := m.CreateDatabase(ctx, CreateDatabaseRequest{Name: "config"}); err != nil || d.Primary != "config" || !d.Version.IsFixed() {
		t.Errorf("config: %+v %v", d, err)
	}
}

// A creation that loses the insert race (DuplicateKey on _id) answers the winner's entry.
func TestCreateDatabaseLosesRace(t *testing.T) {
	winner := doc(t, bson.D{{Key: "_id", Value: "db"}, {Key: "primary", Value: "s0"}, {Key: "version", Value: bson.D{
		{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}, {Key: "timestamp", Value: bson.Timestamp{T: 7, I: 1}},
		{Key: "lastMod", Value: int32(1)}}}})
	shard := doc(t, bson.D{{Key: "_id", Value: "s0"}, {Key: "host", Value: "rs/h:1"}})
	inserted := false
	m := &Manager{Now: func() bson.Timestamp { return bson.Timestamp{T: 9, I: 1} },
		Run: func(_ context.Context, _ string, cmd bsoncore.Document) (bsoncore.Document, error) {
			if cmd.Lookup("insert").Type != 0 {
				inserted = true
				return bsoncore.NewDocumentBuilder().AppendArray("writeErrors", bsoncore.NewArrayBuilder().AppendDocument(
					bsoncore.NewDocumentBuilder().AppendInt32("index", 0).AppendInt32("code", int32(mongoerr.DuplicateKey)).
						AppendString("errmsg", "E11000 duplicate key error").Build()).Build()).Build(), nil
			}
			batch := bsoncore.NewArrayBuilder()
			switch cmd.Lookup("find").StringValue() {
			case "shards":
				batch.AppendDocument(shard)
			case "databases":
				if inserted { // the other creation's entry is there only after this one's insert
					batch.AppendDocument(winner)
				}
			}
			return bsoncore.NewDocumentBuilder().AppendDocument("cursor", bsoncore.NewDocumentBuilder().
				AppendArray("firstBatch", batch.Build()).Build()).Build(), nil
		}}
	d, err := m.CreateDatabase(context.Background(), CreateDatabaseRequest{Name: "db", PrimaryShard: "s0"})
	if err != nil || !inserted || d.Version.Timestamp.T != 7 {
		t.Fatalf("%+v %v (inserted %v)", d, err, inserted)
	}
}
