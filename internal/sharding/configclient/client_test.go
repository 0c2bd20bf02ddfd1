package configclient_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/applier/repltest"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
	"humongo/internal/sharding/shardregistry"
	"humongo/internal/vclock"
)

func doc(d bson.D) bsoncore.Document {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// The routing table cache and the shard registry read a config server's catalog: a sharded
// collection's chunks (then only the changed ones after a split), an unsharded one's
// database, the shards.
func TestCacheOverConfigServer(t *testing.T) {
	p := repltest.StartPrimary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Catalog writes are majority-committed (the reader reads majority-committed data only).
	config := p.Client.Database("config", options.Database().SetWriteConcern(writeconcern.Majority()))
	insert := func(coll string, docs ...bsoncore.Document) {
		t.Helper()
		for _, d := range docs {
			if _, err := config.Collection(coll).InsertOne(ctx, bson.Raw(d)); err != nil {
				t.Fatal(err)
			}
		}
	}
	insert("shards", shardregistry.Shard{ID: "shard0", Host: "shard0/127.0.0.1:1"}.Doc(), shardregistry.Shard{ID: "shard1", Host: "shard1/127.0.0.1:2"}.Doc())
	dbv := routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 100, I: 1})
	insert("databases", configclient.DatabaseDoc(catalogcache.Database{Name: "app", Primary: "shard0", Version: dbv}))
	pattern := shardkey.MustParse(doc(bson.D{{Key: "k", Value: 1}}))
	coll := catalogcache.Collection{NS: "app.c", UUID: catalog.NewUUID(), Pattern: pattern,
		Gen: routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 100, I: 2}}}
	insert("collections", configclient.CollectionDoc(coll, 0))
	chunk := func(min, max bsoncore.Document, shard string, major, minor uint32) routing.Chunk {
		return routing.Chunk{ID: bson.NewObjectID(), CollectionUUID: coll.UUID, Min: min, Max: max, Shard: shard,
			Version: routing.ChunkVersion{Major: major, Minor: minor, Generation: coll.Gen}}
	}
	at := func(v int) bsoncore.Document { return doc(bson.D{{Key: "k", Value: v}}) }
	left, right := chunk(pattern.GlobalMin(), at(0), "shard0", 1, 0), chunk(at(0), pattern.GlobalMax(), "shard1", 1, 1)
	insert("chunks", left.ConfigDoc(), right.ConfigDoc())

	cl := configclient.New(p.Client)
	cache := catalogcache.New(cl)
	r, err := cache.Routing(ctx, "app.c")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Sharded() || r.Table.NumChunks() != 2 || r.DB.Primary != "shard0" {
		t.Fatalf("routing of app.c: %+v", r)
	}
	for k, want := range map[int]string{-5: "shard0", 5: "shard1"} {
		if s, err := r.Table.ShardForKey(at(k)); err != nil || s != want {
			t.Fatalf("key %d on %s (%v), want %s", k, s, err, want)
		}
	}
	// Split the right chunk at 10 (minor versions 1|2 and 1|3), then tell the cache.
	if _, err := config.Collection("chunks").DeleteOne(ctx, bson.D{{Key: "_id", Value: right.ID}}); err != nil {
		t.Fatal(err)
	}
	c1, c2 := chunk(at(0), at(10), "shard1", 1, 2), chunk(at(10), pattern.GlobalMax(), "shard0", 1, 3)
	insert("chunks", c1.ConfigDoc(), c2.ConfigDoc())
	wanted := routing.ChunkVersion{Major: 1, Minor: 3, Generation: coll.Gen}
	cache.OnStaleShardVersion("app.c", &wanted)
	if r, err = cache.Routing(ctx, "app.c"); err != nil {
		t.Fatal(err)
	}
	if r.Table.NumChunks() != 3 || !r.Table.Version().Equal(wanted) {
		t.Fatalf("after the split: %d chunks, version %v", r.Table.NumChunks(), r.Table.Version())
	}
	if s, _ := r.Table.ShardForKey(at(50)); s != "shard0" {
		t.Fatalf("key 50 on %s after the split, want shard0", s)
	}

	u, err := cache.Routing(ctx, "app.unsharded")
	if err != nil || u.Sharded() || u.DB.Primary != "shard0" || !u.DB.Version.Equal(dbv) {
		t.Fatalf("unsharded collection: %+v %v", u, err)
	}
	if _, err := cache.Routing(ctx, "nodb.c"); !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		t.Fatalf("collection of a database without an entry: %v", err)
	}
	reg := shardregistry.New(cl)
	if s, err := reg.Lookup(ctx, "shard1"); err != nil || s.Host != "shard1/127.0.0.1:2" {
		t.Fatalf("shard registry: %+v %v", s, err)
	}
}

// With a clock whose ConfigTime is set, every read waits for it: the driver sends
// afterClusterTime = ConfigTime with the majority read concern.
func TestReadsWaitForConfigTime(t *testing.T) {
	p := repltest.StartPrimary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	config := p.Client.Database("config", options.Database().SetWriteConcern(writeconcern.Majority()))
	dbv := routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 100, I: 1})
	res, err := config.Collection("databases").InsertOne(ctx, bson.Raw(configclient.DatabaseDoc(catalogcache.Database{Name: "app", Primary: "shard0", Version: dbv})))
	if err != nil || res == nil {
		t.Fatal(err)
	}
	var sent []bson.Raw
	var mu sync.Mutex
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "find" {
			mu.Lock()
			sent = append(sent, e.Command)
			mu.Unlock()
		}
	}}
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + p.Host + "/?directConnection=true").SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Disconnect(context.Background())
	var clock vclock.Clock
	// The ConfigTime a member would have heard of: the node's newest write.
	var hello struct {
		LastWrite struct {
			OpTime struct{ TS bson.Timestamp } `bson:"opTime"`
		} `bson:"lastWrite"`
	}
	if err := p.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatal(err)
	}
	ts := hello.LastWrite.OpTime.TS
	clock.TickConfigTo(optime.MakeTimestamp(ts.T, ts.I))
	got, err := configclient.New(cl).WithClock(&clock).Database(ctx, "app")
	if err != nil || got.Primary != "shard0" {
		t.Fatalf("Database: %+v, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 1 {
		t.Fatalf("%d finds sent", len(sent))
	}
	rc := sent[0].Lookup("readConcern").Document()
	if rc.Lookup("level").StringValue() != "majority" {
		t.Fatalf("readConcern %v", rc)
	}
	if at, ai := rc.Lookup("afterClusterTime").Timestamp(); at != ts.T || ai != ts.I {
		t.Fatalf("readConcern %v, want afterClusterTime %v", rc, ts)
	}
}
