package router

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	proc "humongo/internal/cluster"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
	"humongo/internal/sharding/shardregistry"
	"humongo/internal/sharding/shardstate"
)

// startSingleMemberSet starts humongod --replSet name with role flags, initiates it and waits
// for it to be a writable primary.
func startSingleMemberSet(t *testing.T, bin, name string, args ...string) (*proc.Process, *mongo.Client) {
	t.Helper()
	p := proc.StartProcess(t, proc.ProcessOptions{Name: name, Binary: bin, Dir: t.TempDir(),
		Args: append([]string{"--replSet", name, "--bind_ip", "127.0.0.1"}, args...)})
	cl := proc.Connect(t, p.URI())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: bson.D{}}}).Err(); err != nil {
		t.Fatalf("replSetInitiate %s: %v", name, err)
	}
	for {
		var h struct {
			IsWritablePrimary bool `bson:"isWritablePrimary"`
		}
		if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&h); err == nil && h.IsWritablePrimary {
			return p, cl
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never became primary", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The read path end to end over real processes: a --configsvr set, two --shardsvr sets made
// shard-aware by their shardIdentity documents, and humongos --configdb; the catalog and the
// documents are written directly (addShard and shardCollection belong to other parts).
func TestRouterReadsRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four processes")
	}
	dir := proc.MustBuild(t, "humongod", "humongos")
	mongod := filepath.Join(dir, "humongod")
	cfgP, cfg := startSingleMemberSet(t, mongod, "cfg", "--configsvr")
	sh0P, sh0 := startSingleMemberSet(t, mongod, "sh0", "--shardsvr")
	sh1P, sh1 := startSingleMemberSet(t, mongod, "sh1", "--shardsvr")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	configDB := "cfg/" + cfgP.Addr()
	clusterID := bson.NewObjectID()
	for i, sh := range []*mongo.Client{sh0, sh1} {
		id := shardstate.Identity{ShardName: fmt.Sprintf("shard%d", i), ClusterID: clusterID, ConfigsvrConnectionString: configDB}
		if _, err := sh.Database("admin", options.Database().SetWriteConcern(writeconcern.Majority())).
			Collection("system.version").InsertOne(ctx, bson.Raw(id.Document())); err != nil {
			t.Fatalf("shardIdentity on shard%d: %v", i, err)
		}
	}
	config := cfg.Database("config", options.Database().SetWriteConcern(writeconcern.Majority()))
	insert := func(coll string, d bsoncore.Document) {
		t.Helper()
		if _, err := config.Collection(coll).InsertOne(ctx, bson.Raw(d)); err != nil {
			t.Fatalf("config.%s: %v", coll, err)
		}
	}
	insert("shards", shardregistry.Shard{ID: "shard0", Host: "sh0/" + sh0P.Addr()}.Doc())
	insert("shards", shardregistry.Shard{ID: "shard1", Host: "sh1/" + sh1P.Addr()}.Doc())
	insert("databases", configclient.DatabaseDoc(catalogcache.Database{Name: "app", Primary: "shard0",
		Version: routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 100, I: 1})}))
	p := shardkey.MustParse(mustDoc(bson.D{{Key: "k", Value: 1}}))
	coll := catalogcache.Collection{NS: "app.s", UUID: catalog.NewUUID(), Pattern: p,
		Gen: routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 100, I: 2}}}
	insert("collections", configclient.CollectionDoc(coll, 0))
	mid := mustDoc(bson.D{{Key: "k", Value: 0}})
	for i, ch := range []routing.Chunk{{Min: p.GlobalMin(), Max: mid, Shard: "shard0"}, {Min: mid, Max: p.GlobalMax(), Shard: "shard1"}} {
		ch.ID, ch.CollectionUUID = bson.NewObjectID(), coll.UUID
		ch.Version = routing.ChunkVersion{Major: 1, Minor: uint32(i), Generation: coll.Gen}
		insert("chunks", ch.ConfigDoc())
	}
	var all, low, high []any
	for i := 0; i < readDocs; i++ {
		d := readDoc(i)
		all = append(all, d)
		if i < readDocs/2 {
			low = append(low, d)
		} else {
			high = append(high, d)
		}
	}
	for _, x := range []struct {
		cl   *mongo.Client
		db   string
		coll string
		docs []any
	}{{sh0, "app", "s", low}, {sh1, "app", "s", high}, {cfg, "ref", "all", all}} {
		if _, err := x.cl.Database(x.db).Collection(x.coll).InsertMany(ctx, x.docs); err != nil {
			t.Fatal(err)
		}
	}

	rp := proc.StartProcess(t, proc.ProcessOptions{Name: "router", Binary: filepath.Join(dir, "humongos"), Dir: t.TempDir(),
		NoDBPath: true, Args: []string{"--configdb", configDB, "--bind_ip", "127.0.0.1"}})
	router := proc.Connect(t, rp.URI())
	s, ref := router.Database("app").Collection("s"), cfg.Database("ref").Collection("all")
	dr := drainer(t, ctx)

	sameDocs(t, "targeted find", dr(s.Find(ctx, bson.D{{Key: "k", Value: 12}})), dr(ref.Find(ctx, bson.D{{Key: "k", Value: 12}})))
	sorted := options.Find().SetSort(bson.D{{Key: "v", Value: 1}, {Key: "_id", Value: 1}}).SetSkip(4).SetLimit(60).SetBatchSize(5)
	sameDocs(t, "sorted scatter find", dr(s.Find(ctx, bson.D{}, sorted)), dr(ref.Find(ctx, bson.D{}, sorted)))
	d := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	pl := bson.A{d("$group", bson.D{{Key: "_id", Value: "$g"}, {Key: "n", Value: d("$sum", 1)}, {Key: "avg", Value: d("$avg", "$v")}}), d("$sort", d("_id", 1))}
	sameDocs(t, "aggregate $group", dr(s.Aggregate(ctx, pl)), dr(ref.Aggregate(ctx, pl)))
	pl = bson.A{d("$sort", bson.D{{Key: "s", Value: 1}, {Key: "_id", Value: 1}}), d("$limit", 25)}
	sameDocs(t, "aggregate $sort/$limit", dr(s.Aggregate(ctx, pl, options.Aggregate().SetBatchSize(3))), dr(ref.Aggregate(ctx, pl)))
	if n, err := s.CountDocuments(ctx, bson.D{{Key: "v", Value: bson.D{{Key: "$gte", Value: 10}}}}); err != nil {
		t.Fatal(err)
	} else if want, _ := ref.CountDocuments(ctx, bson.D{{Key: "v", Value: bson.D{{Key: "$gte", Value: 10}}}}); n != want {
		t.Fatalf("countDocuments: %d, want %d", n, want)
	}
	var cnt struct{ N int64 }
	if err := router.Database("app").RunCommand(ctx, bson.D{{Key: "count", Value: "s"}}).Decode(&cnt); err != nil || cnt.N != readDocs {
		t.Fatalf("count: %+v %v", cnt, err)
	}
	if n, err := router.Database("config").Collection("shards").CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("config.shards through the router: %d %v", n, err)
	}
	if stage, shards := explainStage(t, ctx, router.Database("app"), bson.D{{Key: "find", Value: "s"}, {Key: "filter", Value: d("k", -3)}}); stage != "SINGLE_SHARD" || len(shards) != 1 || shards[0] != "shard0" {
		t.Fatalf("explain: %s %v", stage, shards)
	}
}
