package routing

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
)

func TestCheckShardVersion(t *testing.T) {
	for _, c := range []struct {
		received, wanted ChunkVersion
		msg              string // "" passes
	}{
		{cv(2, 0, gen1), cv(2, 0, gen1), ""},
		{cv(2, 1, gen1), cv(2, 5, gen1), ""}, // minor differences are write-compatible
		{Ignored(), cv(2, 5, gen1), ""},
		{Ignored(), Unsharded(), ""},
		{Unsharded(), Unsharded(), ""},
		{cv(1, 0, gen1), cv(2, 0, gen1), "placement version mismatch detected for db.c"},
		{cv(3, 0, gen1), cv(2, 0, gen1), "placement version mismatch detected for db.c"},
		{cv(2, 0, gen1), cv(2, 0, gen2), "timestamp mismatch detected for db.c"},
		{cv(2, 0, gen1), cv(0, 0, gen1), "this shard no longer contains chunks for db.c, the collection may have been dropped"},
		{Unsharded(), cv(2, 0, gen1), "timestamp mismatch detected for db.c"},
		{cv(0, 0, gen1), cv(2, 0, gen1), "this shard contains chunks for db.c, but the client expects unsharded collection"},
	} {
		err := CheckShardVersion("db.c", "shard0", c.received, c.wanted)
		if c.msg == "" {
			if err != nil {
				t.Errorf("received %s wanted %s: %v", c.received, c.wanted, err)
			}
			continue
		}
		me, ok := mongoerr.As(err)
		if !ok || me.Code != mongoerr.StaleConfig || me.Msg != c.msg {
			t.Errorf("received %s wanted %s: %v, want StaleConfig %q", c.received, c.wanted, err, c.msg)
			continue
		}
		info := me.Info.(bsoncore.Document)
		got, _ := ParseShardVersion(info.Lookup("vReceived"))
		want, _ := ParseShardVersion(info.Lookup("vWanted"))
		if info.Lookup("ns").StringValue() != "db.c" || info.Lookup("shardId").StringValue() != "shard0" ||
			got != c.received || want != c.wanted {
			t.Errorf("info = %s", bsonutil.FormatDoc(info))
		}
	}
}

func TestCheckDatabaseVersion(t *testing.T) {
	u := catalog.UUID{1}
	v := NewDatabaseVersion(u, bson.Timestamp{T: 5})
	if err := CheckDatabaseVersion("db", v, &v); err != nil {
		t.Fatal(err)
	}
	w := v.Updated()
	err := CheckDatabaseVersion("db", v, &w)
	me, ok := mongoerr.As(err)
	if !ok || me.Code != mongoerr.StaleDbVersion || me.Msg != "version mismatch detected for db" {
		t.Fatalf("mismatch: %v", err)
	}
	info := me.Info.(bsoncore.Document)
	if back, _ := ParseDatabaseVersion(info.Lookup("vWanted")); back != w || info.Lookup("db").StringValue() != "db" {
		t.Errorf("info = %s", bsonutil.FormatDoc(info))
	}
	err = CheckDatabaseVersion("db", v, nil)
	if me, ok := mongoerr.As(err); !ok || me.Code != mongoerr.StaleDbVersion ||
		me.Msg != "sharding status of database db is not currently known and needs to be recovered" {
		t.Errorf("unknown: %v", err)
	}
}
