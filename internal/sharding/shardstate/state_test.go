package shardstate

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

func TestParseIdentity(t *testing.T) {
	oid := bson.NewObjectID()
	good := Identity{ShardName: "rs0", ClusterID: oid, ConfigsvrConnectionString: "cfg/h1:1,h2:2"}
	id, err := ParseIdentity(good.Document())
	if err != nil || id != good {
		t.Fatalf("ParseIdentity(good) = %+v, %v", id, err)
	}
	build := func(f func(b *bsoncore.DocumentBuilder)) bsoncore.Document {
		b := bsoncore.NewDocumentBuilder().AppendString("_id", IdentityID)
		f(b)
		return b.Build()
	}
	for _, tc := range []struct {
		doc  bsoncore.Document
		code mongoerr.Code
		msg  string
	}{
		{build(func(b *bsoncore.DocumentBuilder) {
			b.AppendObjectID("clusterId", oid).AppendString("configsvrConnectionString", "cfg/h:1")
		}), mongoerr.Location40414, "BSON field 'ShardIdentity.shardName' is missing but a required field"},
		{build(func(b *bsoncore.DocumentBuilder) {
			b.AppendString("shardName", "s").AppendString("clusterId", "x").AppendString("configsvrConnectionString", "cfg/h:1")
		}), mongoerr.TypeMismatch, "BSON field 'ShardIdentity.clusterId' is the wrong type 'string', expected type 'objectId'"},
		{build(func(b *bsoncore.DocumentBuilder) {
			b.AppendString("shardName", "s").AppendObjectID("clusterId", oid)
		}), mongoerr.Location40414, "BSON field 'ShardIdentity.configsvrConnectionString' is missing but a required field"},
		{build(func(b *bsoncore.DocumentBuilder) {
			b.AppendString("shardName", "s").AppendObjectID("clusterId", oid).AppendString("configsvrConnectionString", "h:1")
		}), mongoerr.UnsupportedFormat, "config server connection string can only be replica sets: h:1"},
		{build(func(b *bsoncore.DocumentBuilder) {
			b.AppendString("shardName", "s").AppendObjectID("clusterId", oid).AppendString("configsvrConnectionString", "h:1,h:2")
		}), mongoerr.FailedToParse, "invalid url [h:1,h:2]"},
		{bsoncore.NewDocumentBuilder().AppendString("shardName", "s").Build(), mongoerr.NoSuchKey, "missing _id field for shardIdentity document"},
	} {
		_, err := ParseIdentity(tc.doc)
		if mongoerr.CodeOf(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseIdentity(%s) = %v, want %d %q", tc.doc, err, tc.code, tc.msg)
		}
	}
}

func TestStateAwareness(t *testing.T) {
	var none *State
	if none.Role() != RoleNone || none.AppendServerStatus(nil) != nil {
		t.Fatalf("a nil state has a role or a section")
	}
	s := New(RoleShardServer)
	if b := s.AppendServerStatus(nil); len(b) != 0 {
		t.Fatalf("serverStatus.sharding before shard awareness: %v", b)
	}
	id := Identity{ShardName: "rs0", ClusterID: bson.NewObjectID(), ConfigsvrConnectionString: "cfg/h:1"}
	if err := s.Initialize(id); err != nil {
		t.Fatal(err)
	}
	id.ConfigsvrConnectionString = "cfg/h:1,h:2" // a config server set that grew
	if err := s.Initialize(id); err != nil {
		t.Fatal(err)
	}
	other := id
	other.ShardName = "rs1"
	if err := s.Initialize(other); mongoerr.CodeOf(err) != mongoerr.InconsistentShardIdentity {
		t.Fatalf("a second identity: %v", err)
	}
	section := bsoncore.Document(bsoncore.NewDocumentBuilder().Build())
	section = bsoncore.Document(append(section[:4:4], s.AppendServerStatus(nil)...))
	section = bsoncore.Document(bsoncore.UpdateLength(append(section, 0), 0, int32(len(section)+1)))
	if got := section.Lookup("sharding", "configsvrConnectionString").StringValue(); got != "cfg/h:1,h:2" {
		t.Errorf("configsvrConnectionString %q in %v", got, section)
	}
	if got := section.Lookup("sharding", "maxChunkSizeInBytes").Int64(); got != 128<<20 {
		t.Errorf("maxChunkSizeInBytes %d", got)
	}
	if _, err := ParseRole("router"); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Errorf("ParseRole(router): %v", err)
	}
}
