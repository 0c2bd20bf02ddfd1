package router

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/client"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/applier/repltest"
	"humongo/internal/server"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
	"humongo/internal/sharding/shardregistry"
)

func mustDoc(d bson.D) bsoncore.Document {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// testCluster is a config server (a single-node replica set holding a hand-written catalog:
// database app on shard0, app.c sharded on {k: 1} in one chunk) and one shard.
type testCluster struct {
	cfg, shard *repltest.Node
	config     *mongo.Database
	coll       catalogcache.Collection
	cluster    *Cluster
}

func startTestCluster(t *testing.T) *testCluster {
	t.Helper()
	tc := &testCluster{cfg: repltest.StartPrimary(t), shard: repltest.StartPrimary(t)}
	ctx := context.Background()
	tc.config = tc.cfg.Client.Database("config", options.Database().SetWriteConcern(writeconcern.Majority()))
	insert := func(coll string, d bsoncore.Document) {
		t.Helper()
		if _, err := tc.config.Collection(coll).InsertOne(ctx, bson.Raw(d)); err != nil {
			t.Fatal(err)
		}
	}
	insert("shards", shardregistry.Shard{ID: "shard0", Host: "rs0/" + tc.shard.Host}.Doc())
	insert("databases", configclient.DatabaseDoc(catalogcache.Database{Name: "app", Primary: "shard0",
		Version: routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 100, I: 1})}))
	p := shardkey.MustParse(mustDoc(bson.D{{Key: "k", Value: 1}}))
	tc.coll = catalogcache.Collection{NS: "app.c", UUID: catalog.NewUUID(), Pattern: p,
		Gen: routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 100, I: 2}}}
	insert("collections", configclient.CollectionDoc(tc.coll, 0))
	ch := routing.Chunk{ID: bson.NewObjectID(), CollectionUUID: tc.coll.UUID, Min: p.GlobalMin(), Max: p.GlobalMax(),
		Shard: "shard0", Version: routing.ChunkVersion{Major: 1, Generation: tc.coll.Gen}}
	insert("chunks", ch.ConfigDoc())
	var err error
	tc.cluster, err = NewCluster(client.ReplicaSetHosts{SetName: "rs0", Seeds: []string{tc.cfg.Host}},
		client.Options{AppName: "humongos-test", ServerSelectionTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.cluster.Close)
	return tc
}

// The router reaches a shard through the registry and sends it versioned commands.
func TestClusterShardAndVersions(t *testing.T) {
	tc := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := tc.cluster.Shard(ctx, "shard0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}, nil); err != nil {
		t.Fatalf("ping shard0: %v", err)
	}
	if _, err := tc.cluster.Shard(ctx, "nope"); !mongoerr.Is(err, mongoerr.ShardNotFound) {
		t.Fatalf("unknown shard: %v", err)
	}
	r, err := tc.cluster.Cache.Routing(ctx, "app.c")
	if err != nil {
		t.Fatal(err)
	}
	cmd := Versioned(mustDoc(bson.D{{Key: "find", Value: "c"}}), r, "shard0")
	v, err := routing.ParseShardVersion(cmd.Lookup("shardVersion"))
	if err != nil || v.Major != 1 || v.Generation != tc.coll.Gen {
		t.Fatalf("shardVersion of a sharded collection: %v %v (%s)", v, err, cmd)
	}
	u, err := tc.cluster.Cache.Routing(ctx, "app.u")
	if err != nil {
		t.Fatal(err)
	}
	cmd = Versioned(mustDoc(bson.D{{Key: "find", Value: "u"}}), u, "shard0")
	if v, err := routing.ParseShardVersion(cmd.Lookup("shardVersion")); err != nil || v.IsSet() {
		t.Fatalf("shardVersion of an unsharded collection: %v %v", v, err)
	}
	if dv, err := routing.ParseDatabaseVersion(cmd.Lookup("databaseVersion")); err != nil || !dv.Equal(u.DB.Version) {
		t.Fatalf("databaseVersion: %v %v", dv, err)
	}
	if err := bsoncore.Document(cmd).Validate(); err != nil {
		t.Fatal(err)
	}
}

// A StaleConfig answer (here as the driver reports a shard's) makes the router refresh the
// collection and try again; a catalog that keeps changing fails after maxStaleRetries.
func TestWithRoutingRetriesStale(t *testing.T) {
	tc := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tc.cluster.Cache.Routing(ctx, "app.c"); err != nil { // cached: on shard0
		t.Fatal(err)
	}
	// The chunk moves to shard1 behind the router's back.
	newVersion := routing.ChunkVersion{Major: 2, Generation: tc.coll.Gen}
	if _, err := tc.config.Collection("chunks").UpdateOne(ctx, bson.D{{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: tc.coll.UUID[:]}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "shard", Value: "shard1"}, {Key: "lastmod", Value: newVersion.Placement()}}}}); err != nil {
		t.Fatal(err)
	}
	stale := mongo.CommandError{Code: int32(mongoerr.StaleConfig), Message: "placement version mismatch detected for app.c",
		Raw: bson.Raw(mustDoc(bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: int32(mongoerr.StaleConfig)},
			{Key: "ns", Value: "app.c"}, {Key: "vReceived", Value: bson.Raw(routing.ChunkVersion{Major: 1, Generation: tc.coll.Gen}.ShardVersionDoc())},
			{Key: "vWanted", Value: bson.Raw(routing.ChunkVersion{Major: 0, Generation: tc.coll.Gen}.ShardVersionDoc())}, {Key: "shardId", Value: "shard0"}}))}
	var seen []string
	err := tc.cluster.WithRouting(ctx, "app.c", func(r *catalogcache.Routing) error {
		s, err := r.Table.ShardForKey(mustDoc(bson.D{{Key: "k", Value: 1}}))
		if err != nil {
			return err
		}
		seen = append(seen, s)
		if s == "shard0" {
			return stale // shard0 no longer owns it
		}
		return nil
	})
	if err != nil || len(seen) != 2 || seen[1] != "shard1" {
		t.Fatalf("retry after StaleConfig: routed to %v, err %v", seen, err)
	}
	attempts := 0
	err = tc.cluster.WithRouting(ctx, "app.c", func(*catalogcache.Routing) error {
		attempts++
		return stale
	})
	if ce, ok := err.(mongo.CommandError); !ok || ce.Code != int32(mongoerr.StaleConfig) {
		t.Fatalf("endless staleness: %v", err)
	}
	if attempts != maxStaleRetries+1 {
		t.Fatalf("%d attempts, want %d", attempts, maxStaleRetries+1)
	}
}

// listShards and flushRouterConfig through a router server attached to the cluster; before
// it is attached they fail with ShardingStateNotInitialized.
func TestClusterCommands(t *testing.T) {
	tc := startTestCluster(t)
	st := service.NewState(service.Config{Params: service.NewParams(ParamSpecs())})
	s, err := server.New(server.Config{Name: "humongos", State: st, Registry: NewRegistry(), Role: Role{}})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := mongo.Connect(options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Disconnect(context.Background()) }()
	admin := cl.Database("admin")
	var ce mongo.CommandError
	if err := admin.RunCommand(ctx, bson.D{{Key: "listShards", Value: 1}}).Err(); !errors.As(err, &ce) || ce.Code != int32(mongoerr.ShardingStateNotInitialized) {
		t.Fatalf("listShards before the router is attached: %v", err)
	}
	Attach(st, tc.cluster)
	var ls struct {
		Shards []struct {
			ID   string `bson:"_id"`
			Host string `bson:"host"`
		} `bson:"shards"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "listShards", Value: 1}}).Decode(&ls); err != nil {
		t.Fatal(err)
	}
	if len(ls.Shards) != 1 || ls.Shards[0].ID != "shard0" || ls.Shards[0].Host != "rs0/"+tc.shard.Host {
		t.Fatalf("listShards: %+v", ls)
	}
	// flushRouterConfig makes the next use reload.
	loads := func() *catalogcache.Routing {
		r, err := tc.cluster.Cache.Routing(ctx, "app.c")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := loads()
	for _, arg := range []any{1, "app", "app.c"} {
		var reply struct{ Flushed bool }
		if err := admin.RunCommand(ctx, bson.D{{Key: "flushRouterConfig", Value: arg}}).Decode(&reply); err != nil || !reply.Flushed {
			t.Fatalf("flushRouterConfig %v: %+v %v", arg, reply, err)
		}
		if after := loads(); after == before {
			t.Fatalf("flushRouterConfig %v did not make the cache reload", arg)
		} else {
			before = after
		}
	}
	if err := cl.Database("app").RunCommand(ctx, bson.D{{Key: "listShards", Value: 1}}).Err(); !errors.As(err, &ce) || ce.Code != int32(mongoerr.Unauthorized) {
		t.Fatalf("listShards outside admin: %v", err)
	}
}
