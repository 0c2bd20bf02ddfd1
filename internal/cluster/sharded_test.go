package cluster

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
)

// A two-shard cluster through humongos: the harness's addShard, listShards, a repeated
// addShard, the refusals of a shard whose database exists elsewhere and of a set started
// without --shardsvr, enableSharding (least-data primary, config.databases entry, repeated,
// bad names, case-differing names), balancerStatus.
func TestShardedAddShardEnableSharding(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	start := time.Now()
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{})
	t.Logf("cluster up in %v", time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) bson.Raw {
		t.Helper()
		raw, err := admin.RunCommand(ctx, cmd).Raw()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return raw
	}
	fails := func(cmd bson.D, code int32, msg string) {
		t.Helper()
		err := admin.RunCommand(ctx, cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Message, msg) {
			t.Fatalf("%v: want code %d with %q, got %v", cmd, code, msg, err)
		}
	}

	// listShards shows both, with their sets' connection strings, shard-aware (state 1).
	var ls struct {
		Shards []struct {
			ID    string `bson:"_id"`
			Host  string `bson:"host"`
			State int32  `bson:"state"`
		} `bson:"shards"`
	}
	if err := bson.Unmarshal(run(bson.D{{Key: "listShards", Value: 1}}), &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls.Shards) != 2 {
		t.Fatalf("listShards: %+v", ls)
	}
	for i, s := range ls.Shards {
		want := d.Shards[i]
		if s.ID != want.Topology.Name || s.Host != want.ConnectionString() || s.State != 1 {
			t.Errorf("shard %d: %+v, want %s at %s", i, s, want.Topology.Name, want.ConnectionString())
		}
	}
	// TopologyTime ticked to the newest shard's topologyTime: the config server gossips it to
	// members (a shard hears of it lazily: it only must keep the relation).
	var newest struct {
		TopologyTime bson.Timestamp `bson:"topologyTime"`
	}
	if err := d.Config.Client.Database("config").Collection("shards").FindOne(ctx, bson.D{},
		options.FindOne().SetSort(bson.D{{Key: "topologyTime", Value: -1}})).Decode(&newest); err != nil {
		t.Fatal(err)
	}
	member := bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}, {Key: "$configTime", Value: bson.Timestamp{T: 1}}}
	for _, p := range []*Process{d.Config.Nodes[0], d.Shards[0].Nodes[0]} {
		r := rawCommand(t, p.Addr(), member)
		tt, ti, _ := r.Lookup("$topologyTime").TimestampOK()
		ct, ci, _ := r.Lookup("$configTime").TimestampOK()
		if got := (bson.Timestamp{T: tt, I: ti}); (p == d.Config.Nodes[0] && got.Compare(newest.TopologyTime) < 0) ||
			(bson.Timestamp{T: ct, I: ci}).Compare(got) < 0 {
			t.Errorf("%s: $topologyTime %v, $configTime %v; newest shard's topologyTime %v: %v", p.Name(), got, bson.Timestamp{T: ct, I: ci}, newest.TopologyTime, r)
		}
	}
	// Each shard holds its identity, and is shard-aware.
	var ident struct {
		ShardName string        `bson:"shardName"`
		ClusterID bson.ObjectID `bson:"clusterId"`
		ConfigCS  string        `bson:"configsvrConnectionString"`
	}
	if err := d.Shards[1].Client.Database("admin").Collection("system.version").
		FindOne(ctx, bson.D{{Key: "_id", Value: "shardIdentity"}}).Decode(&ident); err != nil {
		t.Fatal(err)
	}
	if ident.ShardName != "shard1" || ident.ConfigCS != d.Config.ConnectionString() || ident.ClusterID.IsZero() {
		t.Errorf("shard1's identity: %+v", ident)
	}
	var ss struct {
		Sharding *struct {
			ConfigsvrConnectionString string `bson:"configsvrConnectionString"`
		} `bson:"sharding"`
	}
	if err := d.Shards[1].Client.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&ss); err != nil {
		t.Fatal(err)
	}
	if ss.Sharding == nil || ss.Sharding.ConfigsvrConnectionString != d.Config.ConnectionString() {
		t.Errorf("shard1 is not shard-aware: %+v", ss.Sharding)
	}

	// The same addShard again answers the existing name; another name for it is refused.
	var added struct {
		ShardAdded string `bson:"shardAdded"`
	}
	if err := bson.Unmarshal(run(bson.D{{Key: "addShard", Value: d.Shards[0].ConnectionString()}}), &added); err != nil || added.ShardAdded != "shard0" {
		t.Fatalf("repeated addShard: %+v %v", added, err)
	}
	fails(bson.D{{Key: "addShard", Value: d.Shards[0].ConnectionString()}, {Key: "name", Value: "other"}},
		20, "A shard already exists containing the replica set 'shard0'")
	fails(bson.D{{Key: "addShard", Value: "shard9/" + d.Shards[0].Nodes[0].Addr()}},
		20, "'"+d.Shards[0].Nodes[0].Addr()+"' is already a member of the existing shard '"+d.Shards[0].ConnectionString()+"' (shard0).")
	fails(bson.D{{Key: "addShard", Value: "a:1,b:2"}}, 9, "invalid url")

	// enableSharding: shard0 holds more data, so a new database goes to shard1.
	docs := make([]any, 2000)
	for i := range docs {
		docs[i] = bson.D{{Key: "i", Value: i}, {Key: "pad", Value: strings.Repeat("x", 200)}}
	}
	if _, err := d.Shards[0].Client.Database("seed").Collection("c").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	run(bson.D{{Key: "enableSharding", Value: "app"}})
	config := d.Config.Client.Database("config", options.Database().SetReadConcern(readconcern.Majority()))
	type dbEntry struct {
		ID      string `bson:"_id"`
		Primary string `bson:"primary"`
		Version struct {
			UUID      bson.Binary    `bson:"uuid"`
			Timestamp bson.Timestamp `bson:"timestamp"`
			LastMod   int32          `bson:"lastMod"`
		} `bson:"version"`
	}
	var app dbEntry
	if err := config.Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: "app"}}).Decode(&app); err != nil {
		t.Fatal(err)
	}
	if app.Primary != "shard1" || app.Version.LastMod != 1 || len(app.Version.UUID.Data) != 16 || app.Version.Timestamp.T == 0 {
		t.Fatalf("config.databases entry of app: %+v", app)
	}
	run(bson.D{{Key: "enableSharding", Value: "app"}}) // again: the same entry
	var again dbEntry
	if err := config.Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: "app"}}).Decode(&again); err != nil || again.Primary != app.Primary || again.Version.Timestamp != app.Version.Timestamp ||
		!bytes.Equal(again.Version.UUID.Data, app.Version.UUID.Data) {
		t.Fatalf("second enableSharding changed the entry: %+v %v", again, err)
	}
	// A first write through the router creates its database implicitly (least data: shard1),
	// and the document lands on that primary shard.
	if _, err := d.Client.Database("fresh").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert into a new database: %v", err)
	}
	var freshDB dbEntry
	if err := config.Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: "fresh"}}).Decode(&freshDB); err != nil || freshDB.Primary != "shard1" {
		t.Fatalf("implicitly created database: %+v %v", freshDB, err)
	}
	if n, err := d.Shards[1].Client.Database("fresh").Collection("c").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("the document on the primary shard: %d, %v", n, err)
	}
	run(bson.D{{Key: "enableSharding", Value: "pinned"}, {Key: "primaryShard", Value: "shard0"}})
	var pinned dbEntry
	if err := config.Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: "pinned"}}).Decode(&pinned); err != nil || pinned.Primary != "shard0" {
		t.Fatalf("enableSharding with primaryShard: %+v %v", pinned, err)
	}
	fails(bson.D{{Key: "enableSharding", Value: "APP"}}, 13297, "can't have 2 databases that just differ on case")
	fails(bson.D{{Key: "enableSharding", Value: "app"}, {Key: "primaryShard", Value: "shard0"}}, 48, "database already created on a primary which is different from shard0")
	fails(bson.D{{Key: "enableSharding", Value: "x"}, {Key: "primaryShard", Value: "nope"}}, 70, "nope")
	fails(bson.D{{Key: "enableSharding", Value: "admin"}}, 72, "Cannot manually create database'admin'")
	fails(bson.D{{Key: "enableSharding", Value: "local"}}, 72, "Database local could not be created :: caused by :: Cannot manually create database'local'")
	run(bson.D{{Key: "enableSharding", Value: "config"}}) // config lives on the config server: nothing to create
	fails(bson.D{{Key: "enableSharding", Value: "a.b"}}, 73, "Invalid db name specified: a.b")

	// The config server's commands run only there, and only with majority write concern.
	direct := func(cl *mongo.Client, cmd bson.D, code int32, msg string) {
		t.Helper()
		err := cl.Database("admin").RunCommand(ctx, cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Message, msg) {
			t.Fatalf("%v: want code %d with %q, got %v", cmd, code, msg, err)
		}
	}
	direct(d.Shards[0].Client, bson.D{{Key: "_configsvrAddShard", Value: "x/h:1"}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}},
		20, "_configsvrAddShard can only be run on config servers")
	direct(d.Config.Client, bson.D{{Key: "_configsvrCreateDatabase", Value: "y"}}, 72, "_configsvrCreateDatabase must be called with majority writeConcern")

	// balancerStatus: the balancer is on by default (its rounds are TestShardedBalancer's).
	var bs struct {
		Mode string `bson:"mode"`
	}
	if err := bson.Unmarshal(run(bson.D{{Key: "balancerStatus", Value: 1}}), &bs); err != nil || bs.Mode != "full" {
		t.Fatalf("balancerStatus: %+v %v", bs, err)
	}

	// A shard-server set holding a database the cluster already has is refused.
	extra := d.StartSet(t, "extra", 1, "--shardsvr")
	if _, err := extra.Client.Database("app").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	fails(bson.D{{Key: "addShard", Value: extra.ConnectionString()}}, 96,
		"can't add shard '"+extra.ConnectionString()+"' because a local database 'app' exists in another shard1")
	// A set started without --shardsvr is refused by its own _addShard.
	plain := d.StartSet(t, "plain", 1)
	fails(bson.D{{Key: "addShard", Value: plain.ConnectionString()}}, 50876, "Cannot run addShard on a node started without --shardsvr")
	fails(bson.D{{Key: "addShard", Value: plain.ConnectionString()}, {Key: "name", Value: "shard0"}}, 20, "A shard named shard0 already exists")
	fails(bson.D{{Key: "addShard", Value: "wrong/" + plain.Nodes[0].Addr()}}, 96, "does not match the actual set name plain")
	fails(bson.D{{Key: "addShard", Value: plain.Nodes[0].Addr()}}, 96, "host is part of set plain")
	// A standalone cannot be a shard: humongod refuses --shardsvr without --replSet, and
	// without --shardsvr its _addShard refuses.
	standalone := StartProcess(t, ProcessOptions{Name: "standalone", Binary: d.opts.BinDir + "/humongod", Dir: t.TempDir(),
		StartTimeout: d.opts.StartTimeout})
	fails(bson.D{{Key: "addShard", Value: standalone.Addr()}}, 50876, "Cannot run addShard on a node started without --shardsvr")
	if err := bson.Unmarshal(run(bson.D{{Key: "listShards", Value: 1}}), &ls); err != nil || len(ls.Shards) != 2 {
		t.Fatalf("listShards after the refusals: %+v %v", ls, err)
	}
	// A shard-server set holding a new database is added with it: the database is recorded
	// with the new shard as its primary.
	fresh := d.StartSet(t, "fresh", 1, "--shardsvr")
	if _, err := fresh.Client.Database("imported").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := bson.Unmarshal(run(bson.D{{Key: "addShard", Value: fresh.ConnectionString()}, {Key: "name", Value: "fresh0"}}), &added); err != nil || added.ShardAdded != "fresh0" {
		t.Fatalf("addShard with a name: %+v %v", added, err)
	}
	var imported dbEntry
	if err := config.Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: "imported"}}).Decode(&imported); err != nil || imported.Primary != "fresh0" {
		t.Fatalf("imported database: %+v %v", imported, err)
	}
}
