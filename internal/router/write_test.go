package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// shardedCluster is a config server, two shards (single-node replica sets) and a router
// server, with a hand-written catalog (cfgcmds and shardcoll build it through commands
// later): database app on shard0; app.s sharded on {k: 1} with [MinKey, 0) on shard0 and
// [0, MaxKey) on shard1, created on both shards.
type shardedCluster struct {
	cfg    *repltest.Node
	shards [2]*repltest.Node
	config *mongo.Database
	coll   catalogcache.Collection
	router *mongo.Client
	rc     *Cluster
}

func startShardedCluster(t testing.TB) *shardedCluster {
	t.Helper()
	sc := &shardedCluster{cfg: repltest.StartPrimary(t)}
	sc.shards[0], sc.shards[1] = repltest.StartPrimary(t), repltest.StartPrimary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sc.config = sc.cfg.Client.Database("config", options.Database().SetWriteConcern(writeconcern.Majority()))
	insert := func(coll string, d bsoncore.Document) {
		t.Helper()
		if _, err := sc.config.Collection(coll).InsertOne(ctx, bson.Raw(d)); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range sc.shards {
		insert("shards", shardregistry.Shard{ID: fmt.Sprintf("shard%d", i), Host: "rs0/" + n.Host}.Doc())
	}
	insert("databases", configclient.DatabaseDoc(catalogcache.Database{Name: "app", Primary: "shard0",
		Version: routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 100, I: 1})}))
	sc.coll = sc.shardCollection(t, "app.s", mustDoc(bson.D{{Key: "k", Value: 1}}), mustDoc(bson.D{{Key: "k", Value: 0}}))
	var err error
	sc.rc, err = NewCluster(client.ReplicaSetHosts{SetName: "rs0", Seeds: []string{sc.cfg.Host}},
		client.Options{AppName: "humongos-test", ServerSelectionTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.rc.Close)
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
	Attach(st, sc.rc)
	sc.router, err = mongo.Connect(options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.router.Disconnect(context.Background()) })
	return sc
}

// shardCollection writes the catalog of ns sharded on pattern with two chunks split at split,
// [MinKey, split) on shard0 and [split, MaxKey) on shard1, and creates the collection on both
// shards. (The shards do not check collection uuids yet, shardrt: each has its own.)
func (sc *shardedCluster) shardCollection(t testing.TB, ns string, pattern, split bsoncore.Document) catalogcache.Collection {
	t.Helper()
	ctx := context.Background()
	p := shardkey.MustParse(pattern)
	coll := catalogcache.Collection{NS: ns, UUID: catalog.NewUUID(), Pattern: p,
		Gen: routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 100, I: 2}}}
	if _, err := sc.config.Collection("collections").InsertOne(ctx, bson.Raw(configclient.CollectionDoc(coll, 0))); err != nil {
		t.Fatal(err)
	}
	for i, r := range [][2]bsoncore.Document{{p.GlobalMin(), split}, {split, p.GlobalMax()}} {
		ch := routing.Chunk{ID: bson.NewObjectID(), CollectionUUID: coll.UUID, Min: r[0], Max: r[1],
			Shard: fmt.Sprintf("shard%d", i), Version: routing.ChunkVersion{Major: 1, Minor: uint32(i), Generation: coll.Gen}}
		if _, err := sc.config.Collection("chunks").InsertOne(ctx, bson.Raw(ch.ConfigDoc())); err != nil {
			t.Fatal(err)
		}
	}
	db, name, _ := cut(ns)
	for _, n := range sc.shards {
		if err := n.Client.Database(db).CreateCollection(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	return coll
}

// ids returns the sorted _ids of coll's documents on shard i, read directly.
func (sc *shardedCluster) ids(t *testing.T, i int, db, coll string) []int32 {
	t.Helper()
	cur, err := sc.shards[i].Client.Database(db).Collection(coll).Find(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ID int32 `bson:"_id"`
	}
	if err := cur.All(context.Background(), &docs); err != nil {
		t.Fatal(err)
	}
	var out []int32
	for _, d := range docs {
		out = append(out, d.ID)
	}
	slices.Sort(out)
	return out
}

// count counts the documents matching filter over both shards, read directly.
func (sc *shardedCluster) count(t *testing.T, db, coll string, filter bson.D) int64 {
	t.Helper()
	var total int64
	for _, n := range sc.shards {
		c, err := n.Client.Database(db).Collection(coll).CountDocuments(context.Background(), filter)
		if err != nil {
			t.Fatal(err)
		}
		total += c
	}
	return total
}

func (sc *shardedCluster) run(t *testing.T, db string, cmd bson.D) bson.Raw {
	t.Helper()
	raw, err := sc.router.Database(db).RunCommand(context.Background(), cmd).Raw()
	var we mongo.WriteException
	if errors.As(err, &we) && len(we.Raw) > 0 {
		return we.Raw // writeErrors in an ok: 1 reply
	}
	if err != nil {
		t.Fatalf("%v: %v", cmd[0].Key, err)
	}
	return raw
}

func codeOf(err error) int32 {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return -1
}

type writeReply struct {
	N           int32 `bson:"n"`
	NModified   int32 `bson:"nModified"`
	WriteErrors []struct {
		Index int32 `bson:"index"`
		Code  int32 `bson:"code"`
	} `bson:"writeErrors"`
	Upserted []struct {
		Index int32 `bson:"index"`
		ID    any   `bson:"_id"`
	} `bson:"upserted"`
}

func decodeWrite(t *testing.T, raw bson.Raw) writeReply {
	t.Helper()
	var r writeReply
	if err := bson.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func errIndexes(r writeReply) []int32 {
	var out []int32
	for _, e := range r.WriteErrors {
		out = append(out, e.Index)
	}
	return out
}

// Inserts land on the shard owning their shard key (a missing key is null: below 0, shard0);
// ordered and unordered batches with errors on both shards report the client's indexes.
func TestRouterInsert(t *testing.T) {
	sc := startShardedCluster(t)
	docs := bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: -5}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 5}},
		bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: -1}}, bson.D{{Key: "_id", Value: 4}, {Key: "k", Value: 0}},
		bson.D{{Key: "_id", Value: 5}}}
	r := decodeWrite(t, sc.run(t, "app", bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: docs}}))
	if r.N != 5 || len(r.WriteErrors) != 0 {
		t.Fatalf("insert: %+v", r)
	}
	if got := sc.ids(t, 0, "app", "s"); !slices.Equal(got, []int32{1, 3, 5}) {
		t.Fatalf("shard0 holds %v", got)
	}
	if got := sc.ids(t, 1, "app", "s"); !slices.Equal(got, []int32{2, 4}) {
		t.Fatalf("shard1 holds %v", got)
	}
	// Duplicates on both shards: statements 1 (shard0) and 3 (shard1).
	batch := bson.A{bson.D{{Key: "_id", Value: 10}, {Key: "k", Value: -10}}, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: -5}},
		bson.D{{Key: "_id", Value: 11}, {Key: "k", Value: 11}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 5}},
		bson.D{{Key: "_id", Value: 12}, {Key: "k", Value: -12}}}
	r = decodeWrite(t, sc.run(t, "app", bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: batch}}))
	if r.N != 1 || !slices.Equal(errIndexes(r), []int32{1}) || r.WriteErrors[0].Code != int32(mongoerr.DuplicateKey) {
		t.Fatalf("ordered batch: %+v", r)
	}
	if got := sc.ids(t, 1, "app", "s"); slices.Contains(got, 11) {
		t.Fatal("an ordered batch went on after its first error")
	}
	batch[0] = bson.D{{Key: "_id", Value: 20}, {Key: "k", Value: -20}}
	r = decodeWrite(t, sc.run(t, "app", bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: batch}, {Key: "ordered", Value: false}}))
	if r.N != 3 || !slices.Equal(errIndexes(r), []int32{1, 3}) {
		t.Fatalf("unordered batch: %+v", r)
	}
	if got := sc.ids(t, 0, "app", "s"); !slices.Equal(got, []int32{1, 3, 5, 10, 12, 20}) {
		t.Fatalf("shard0 after the batches: %v", got)
	}
	if got := sc.ids(t, 1, "app", "s"); !slices.Equal(got, []int32{2, 4, 11}) {
		t.Fatalf("shard1 after the batches: %v", got)
	}
	// A document without _id gets one from the router.
	r = decodeWrite(t, sc.run(t, "app", bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{bson.D{{Key: "k", Value: 99}}}}}))
	if r.N != 1 {
		t.Fatalf("insert without _id: %+v", r)
	}
	// An array shard key value is refused as MongoDB does.
	r = decodeWrite(t, sc.run(t, "app", bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 50}, {Key: "k", Value: bson.A{1}}}}}}))
	if len(r.WriteErrors) != 1 || r.WriteErrors[0].Code != int32(mongoerr.ShardKeyNotFound) {
		t.Fatalf("array shard key: %+v", r)
	}
	if err := sc.router.Database("app").RunCommand(context.Background(), bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{}}}).Err(); codeOf(err) != int32(mongoerr.InvalidLength) {
		t.Fatalf("empty batch: %v", err)
	}
}

// Updates and deletes by shard key go to one shard, multi ones to both; single ones without
// shard key or _id get MongoDB's errors; an unsharded collection lives on the primary.
func TestRouterUpdateDelete(t *testing.T) {
	sc := startShardedCluster(t)
	ctx := context.Background()
	coll := sc.router.Database("app").Collection("s")
	for i := -3; i <= 3; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "v", Value: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := coll.UpdateOne(ctx, bson.D{{Key: "k", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil || res.ModifiedCount != 1 {
		t.Fatalf("updateOne by shard key: %+v %v", res, err)
	}
	if res, err := coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 10}}}}); err != nil || res.MatchedCount != 7 || res.ModifiedCount != 7 {
		t.Fatalf("updateMany over both shards: %+v %v", res, err)
	}
	if res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: -3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}); err != nil || res.ModifiedCount != 1 {
		t.Fatalf("updateOne by _id: %+v %v", res, err)
	}
	// updateOne without shard key or _id: two phases, exactly one document of the six
	// matching on both shards.
	if res, err := coll.UpdateOne(ctx, bson.D{{Key: "v", Value: 10}}, bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 2}}}}); err != nil || res.MatchedCount != 1 || res.ModifiedCount != 1 {
		t.Fatalf("updateOne without shard key or _id: %+v %v", res, err)
	}
	if n := sc.count(t, "app", "s", bson.D{{Key: "w", Value: 2}}); n != 1 {
		t.Fatalf("documents updated by updateOne without shard key: %d", n)
	}
	if res, err := coll.UpdateOne(ctx, bson.D{{Key: "v", Value: 12345}}, bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}); err != nil || res.MatchedCount != 0 {
		t.Fatalf("updateOne without shard key matching nothing: %+v %v", res, err)
	}
	var we mongo.WriteException
	_, err := coll.UpdateOne(ctx, bson.D{{Key: "v", Value: 99}}, bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	if !errors.As(err, &we) || we.WriteErrors[0].Code != int(mongoerr.ShardKeyNotFound) {
		t.Fatalf("upsert without shard key: %v", err)
	}
	r := decodeWrite(t, sc.run(t, "app", bson.D{{Key: "update", Value: "s"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: 7}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}, {Key: "upsert", Value: true}},
		bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: -7}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}, {Key: "upsert", Value: true}},
	}}}))
	if r.N != 3 || r.NModified != 1 || len(r.Upserted) != 2 || r.Upserted[0].Index != 1 || r.Upserted[1].Index != 2 {
		t.Fatalf("update batch with upserts: %+v", r)
	}
	var doc bson.M
	if err := sc.shards[1].Client.Database("app").Collection("s").FindOne(ctx, bson.D{{Key: "k", Value: 7}}).Decode(&doc); err != nil {
		t.Fatalf("upsert k=7 not on shard1: %v", err)
	}
	if err := sc.shards[0].Client.Database("app").Collection("s").FindOne(ctx, bson.D{{Key: "k", Value: -7}}).Decode(&doc); err != nil {
		t.Fatalf("upsert k=-7 not on shard0: %v", err)
	}
	// Deletes.
	if res, err := coll.DeleteOne(ctx, bson.D{{Key: "k", Value: -1}}); err != nil || res.DeletedCount != 1 {
		t.Fatalf("deleteOne by shard key: %+v %v", res, err)
	}
	if res, err := coll.DeleteOne(ctx, bson.D{{Key: "v", Value: 10}}); err != nil || res.DeletedCount != 1 {
		t.Fatalf("deleteOne without shard key: %+v %v", res, err)
	}
	if res, err := coll.DeleteMany(ctx, bson.D{{Key: "v", Value: bson.D{{Key: "$gte", Value: 10}}}}); err != nil || res.DeletedCount != 5 {
		t.Fatalf("deleteMany over both shards: %+v %v", res, err)
	}
	if n, err := sc.shards[0].Client.Database("app").Collection("s").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("shard0 after deletes: %d documents, %v", n, err)
	}
	// findAndModify by shard key; without it, MongoDB 6's error.
	var fam struct {
		Value bson.M `bson:"value"`
	}
	if err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "k", Value: 7}}, bson.D{{Key: "$set", Value: bson.D{{Key: "f", Value: 1}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&fam.Value); err != nil || fam.Value["f"] != int32(1) {
		t.Fatalf("findAndModify by shard key: %v %v", fam, err)
	}
	// Without shard key: the first document by the sort over both shards (k=7 on shard1
	// before k=-7 on shard0 in descending k order).
	var got bson.M
	if err := coll.FindOneAndDelete(ctx, bson.D{{Key: "x", Value: 1}}, options.FindOneAndDelete().SetSort(bson.D{{Key: "k", Value: -1}})).Decode(&got); err != nil || got["k"] != int32(7) {
		t.Fatalf("findAndModify without shard key: %v %v", got, err)
	}
	if err := coll.FindOneAndDelete(ctx, bson.D{{Key: "x", Value: 12345}}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("findAndModify without shard key matching nothing: %v", err)
	}
	if err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "x", Value: 12345}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}},
		options.FindOneAndUpdate().SetUpsert(true)).Err(); codeOf(err) != int32(mongoerr.ShardKeyNotFound) {
		t.Fatalf("findAndModify upsert without shard key: %v", err)
	}
	// An unsharded collection: everything on the primary shard.
	u := sc.router.Database("app").Collection("u")
	if _, err := u.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	if res, err := u.UpdateOne(ctx, bson.D{{Key: "a", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}); err != nil || res.ModifiedCount != 1 {
		t.Fatalf("unsharded updateOne: %+v %v", res, err)
	}
	if res, err := u.DeleteOne(ctx, bson.D{{Key: "a", Value: 1}}); err != nil || res.DeletedCount != 1 {
		t.Fatalf("unsharded deleteOne: %+v %v", res, err)
	}
	if got := sc.ids(t, 0, "app", "u"); !slices.Equal(got, []int32{2}) {
		t.Fatalf("unsharded collection on shard0: %v", got)
	}
	if got := sc.ids(t, 1, "app", "u"); len(got) != 0 {
		t.Fatalf("unsharded collection leaked to shard1: %v", got)
	}
}

// DDL reaches every shard: indexes on both shards of the sharded collection, create on the
// primary; listDatabases sums the shards; mongos's refusals and no-ops.
func TestRouterDDL(t *testing.T) {
	sc := startShardedCluster(t)
	ctx := context.Background()
	app := sc.router.Database("app")
	for _, k := range []int{-1, 1} {
		if _, err := app.Collection("s").InsertOne(ctx, bson.D{{Key: "k", Value: k}}); err != nil {
			t.Fatal(err)
		}
	}
	idxName, err := app.Collection("s").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "v", Value: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	hasIndex := func(i int, coll, name string) bool {
		specs, err := sc.shards[i].Client.Database("app").Collection(coll).Indexes().ListSpecifications(ctx)
		if err != nil {
			return false
		}
		for _, s := range specs {
			if s.Name == name {
				return true
			}
		}
		return false
	}
	if !hasIndex(0, "s", idxName) || !hasIndex(1, "s", idxName) {
		t.Fatal("createIndexes did not reach both shards")
	}
	// (collMod runs on the primary shard's collMod coordinator, which these plain replica-set
	// "shards" do not have: internal/cluster's TestCollModCoordinator runs it.)
	if err := app.Collection("s").Indexes().DropOne(ctx, idxName); err != nil {
		t.Fatal(err)
	}
	if hasIndex(0, "s", idxName) || hasIndex(1, "s", idxName) {
		t.Fatal("dropIndexes did not reach both shards")
	}
	// An unsharded collection's createIndexes answers with the primary's reply and raw.
	raw := sc.run(t, "app", bson.D{{Key: "createIndexes", Value: "un"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
	if n, ok := raw.Lookup("numIndexesAfter").AsInt64OK(); !ok || n != 2 {
		t.Fatalf("unsharded createIndexes reply: %s", raw)
	}
	if rawDoc, ok := raw.Lookup("raw").DocumentOK(); !ok || len(mustElems(t, rawDoc)) != 1 || !hasIndex(0, "un", "a_1") {
		t.Fatalf("unsharded createIndexes raw: %s", raw)
	}
	err = app.RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "s"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: "nope"}}}, {Key: "name", Value: "bad"}}}}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code == 0 || bson.Raw(ce.Raw).Lookup("raw").Type != bson.TypeEmbeddedDocument {
		t.Fatalf("failing createIndexes: %v %s", err, bson.Raw(ce.Raw))
	}
	// (create, rename and dropDatabase run on the primary shard's DDL coordinators, which
	// these plain replica-set "shards" do not have: internal/cluster's
	// TestShardedDDLCoordinators and TestCollModCoordinator run them through real shards.)
	// listDatabases: app on both shards, sizes summed.
	var ld struct {
		Databases []struct {
			Name   string           `bson:"name"`
			Size   int64            `bson:"sizeOnDisk"`
			Shards map[string]int64 `bson:"shards"`
		} `bson:"databases"`
	}
	if err := bson.Unmarshal(sc.run(t, "admin", bson.D{{Key: "listDatabases", Value: 1}}), &ld); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range ld.Databases {
		if d.Name == "app" {
			found = true
			if len(d.Shards) != 2 || d.Size != d.Shards["shard0"]+d.Shards["shard1"] {
				t.Fatalf("listDatabases app: %+v", d)
			}
		}
		if d.Name == "local" {
			t.Fatal("listDatabases lists local")
		}
	}
	if !found {
		t.Fatalf("listDatabases: %+v", ld)
	}
	// The drop of a sharded collection runs on the primary shard's drop coordinator, which
	// these plain replica-set "shards" do not have: internal/cluster's
	// TestShardedDropCoordinatorKilled drops through real shards.
	// mongos's refusals and no-ops.
	if err := sc.router.Database("config").Collection("x").Drop(ctx); codeOf(err) != int32(mongoerr.IllegalOperation) {
		t.Fatalf("drop in config: %v", err)
	}
	if err := sc.router.Database("admin").Drop(ctx); codeOf(err) != int32(mongoerr.IllegalOperation) {
		t.Fatalf("dropDatabase admin: %v", err)
	}
	if raw := sc.run(t, "nodb", bson.D{{Key: "drop", Value: "c"}}); raw.Lookup("info").StringValue() != "database does not exist" {
		t.Fatalf("drop in a missing database: %s", raw)
	}
	sc.run(t, "nodb", bson.D{{Key: "dropDatabase", Value: 1}})
}

func mustElems(t *testing.T, d bson.Raw) []bson.RawElement {
	t.Helper()
	e, err := d.Elements()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A retryable write (lsid and txnNumber) sent twice through the router runs once: the router
// forwards the client's session to the shard, which answers the retry from its history.
func TestRouterRetryableWrite(t *testing.T) {
	sc := startShardedCluster(t)
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: func() []byte { u := catalog.NewUUID(); return u[:] }()}}}
	cmd := bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: -1}},
		bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 1}}}}, {Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(7)}}
	for attempt := 0; attempt < 2; attempt++ {
		r := decodeWrite(t, sc.run(t, "app", cmd))
		if r.N != 2 || len(r.WriteErrors) != 0 {
			t.Fatalf("attempt %d: %+v", attempt, r)
		}
	}
	// An ordered batch alternating between the shards runs in several rounds under one
	// txnNumber: each statement keeps its own id on its shard (stmtIds), so none is taken
	// for a retry of another, and the whole batch retried runs nothing again.
	alt := bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: 10}, {Key: "k", Value: -10}}, bson.D{{Key: "_id", Value: 11}, {Key: "k", Value: 11}},
		bson.D{{Key: "_id", Value: 12}, {Key: "k", Value: -12}}, bson.D{{Key: "_id", Value: 13}, {Key: "k", Value: 13}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(8)}}
	for attempt := 0; attempt < 2; attempt++ {
		if r := decodeWrite(t, sc.run(t, "app", alt)); r.N != 4 || len(r.WriteErrors) != 0 {
			t.Fatalf("alternating batch, attempt %d: %+v", attempt, r)
		}
	}
	if got := sc.ids(t, 0, "app", "s"); !slices.Equal(got, []int32{1, 10, 12}) {
		t.Fatalf("shard0 after the alternating batch: %v", got)
	}
	if got := sc.ids(t, 1, "app", "s"); !slices.Equal(got, []int32{2, 11, 13}) {
		t.Fatalf("shard1 after the alternating batch: %v", got)
	}
	// Another session with the same txnNumber is another write: it runs, and fails on the
	// documents the first one inserted.
	cmd[2].Value = bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: func() []byte { u := catalog.NewUUID(); return u[:] }()}}}
	cmd = append(cmd, bson.E{Key: "ordered", Value: false})
	if r := decodeWrite(t, sc.run(t, "app", cmd)); r.N != 0 || !slices.Equal(errIndexes(r), []int32{0, 1}) {
		t.Fatalf("another session: %+v", r)
	}
}

// An update that moves a document to another shard by changing its shard key is refused
// outside a retryable write with MongoDB's error; one that keeps it on its shard runs.
func TestRouterShardKeyUpdate(t *testing.T) {
	sc := startShardedCluster(t)
	ctx := context.Background()
	if _, err := sc.router.Database("app").Collection("s").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: -5}}); err != nil {
		t.Fatal(err)
	}
	upd := func(u any) writeReply {
		return decodeWrite(t, sc.run(t, "app", bson.D{{Key: "update", Value: "s"}, {Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: -5}}}, {Key: "u", Value: u}}}}}))
	}
	for _, u := range []any{bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: 5}}}}, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 5}}} {
		r := upd(u)
		if len(r.WriteErrors) != 1 || r.WriteErrors[0].Code != int32(mongoerr.IllegalOperation) {
			t.Fatalf("shard key update %v moving the document: %+v", u, r)
		}
	}
	if r := upd(bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: -6}}}}); r.NModified != 1 || len(r.WriteErrors) != 0 {
		t.Fatalf("shard key update within the shard: %+v", r)
	}
	if got := sc.ids(t, 1, "app", "s"); len(got) != 0 {
		t.Fatalf("a document moved to shard1 by an update: %v", got)
	}
}

// BenchmarkInsertOne compares insertOne of one document through the router (sharded
// collection, targeted by shard key) with the same insert sent directly to the owning shard,
// with the same explicit write concern (w: 1 and majority) on both paths.
func BenchmarkInsertOne(b *testing.B) {
	sc := startShardedCluster(b)
	ctx := context.Background()
	for _, wc := range []*writeconcern.WriteConcern{writeconcern.W1(), writeconcern.Majority()} {
		opts := options.Collection().SetWriteConcern(wc)
		for _, c := range []struct {
			name string
			coll *mongo.Collection
		}{{"router", sc.router.Database("app").Collection("s", opts)}, {"direct", sc.shards[1].Client.Database("app").Collection("s", opts)}} {
			b.Run(fmt.Sprintf("%s/w=%v", c.name, wc.W), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := c.coll.InsertOne(ctx, bson.D{{Key: "k", Value: i + 1}}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// A hashed shard key: inserts land on the owner of their key's hash, updates and deletes by
// the key reach that shard alone.
func TestRouterHashedKey(t *testing.T) {
	sc := startShardedCluster(t)
	ctx := context.Background()
	sc.shardCollection(t, "app.h", mustDoc(bson.D{{Key: "_id", Value: "hashed"}}), mustDoc(bson.D{{Key: "_id", Value: int64(0)}}))
	coll := sc.router.Database("app").Collection("h")
	want := [2][]int32{}
	var docs []any
	for i := int32(0); i < 40; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
		h, err := shardkey.HashValue(bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, i)})
		if err != nil {
			t.Fatal(err)
		}
		owner := 1
		if h.Int64() < 0 {
			owner = 0
		}
		want[owner] = append(want[owner], i)
	}
	if _, err := coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
		t.Fatal(err)
	}
	for i := range sc.shards {
		if got := sc.ids(t, i, "app", "h"); !slices.Equal(got, want[i]) || len(got) == 0 {
			t.Fatalf("shard%d holds %v, want %v", i, got, want[i])
		}
	}
	if res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: want[1][0]}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil || res.ModifiedCount != 1 {
		t.Fatalf("updateOne by hashed key: %+v %v", res, err)
	}
	if res, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: want[0][0]}}); err != nil || res.DeletedCount != 1 {
		t.Fatalf("deleteOne by hashed key: %+v %v", res, err)
	}
	if got := sc.ids(t, 0, "app", "h"); slices.Contains(got, want[0][0]) {
		t.Fatal("deleteOne by hashed key left the document")
	}
}

// A batch whose statements for one shard exceed a BSON document's size is sent in several
// commands, and its reply counts them all.
func TestRouterLargeBatch(t *testing.T) {
	sc := startShardedCluster(t)
	ctx := context.Background()
	big := make([]byte, 1<<20)
	var docs []any
	for i := 0; i < 20; i++ { // 20 MB, all on shard1
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "pad", Value: bson.Binary{Data: big}}})
	}
	res, err := sc.router.Database("app").Collection("s").InsertMany(ctx, docs)
	if err != nil || len(res.InsertedIDs) != 20 {
		t.Fatalf("large batch: %v", err)
	}
	if got := sc.ids(t, 1, "app", "s"); len(got) != 20 {
		t.Fatalf("shard1 holds %d documents", len(got))
	}
}

// Malformed write commands fail as a whole with MongoDB's codes, before anything is sent.
func TestRouterWriteBadInput(t *testing.T) {
	sc := startShardedCluster(t)
	ctx := context.Background()
	for _, c := range []struct {
		cmd  bson.D
		code mongoerr.Code
	}{
		{bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: 1}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{1}}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "insert", Value: "s"}}, mongoerr.Location40414},
		{bson.D{{Key: "insert", Value: 5}, {Key: "documents", Value: bson.A{bson.D{}}}}, mongoerr.InvalidNamespace},
		{bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "ordered", Value: "yes"}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "update", Value: "s"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: 1}, {Key: "u", Value: bson.D{}}}}}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "update", Value: "s"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}}}}}, mongoerr.Location40414},
		{bson.D{{Key: "delete", Value: "s"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}}}}}, mongoerr.Location40414},
		{bson.D{{Key: "delete", Value: "s"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 2}}}}}, mongoerr.FailedToParse},
		{bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}},
			{Key: "txnNumber", Value: int64(1)}, {Key: "stmtIds", Value: bson.A{int32(1), int32(2)}}}, mongoerr.InvalidLength},
		{bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "autocommit", Value: false}}, mongoerr.InvalidOptions},
	} {
		if err := sc.router.Database("app").RunCommand(ctx, c.cmd).Err(); codeOf(err) != int32(c.code) {
			t.Errorf("%v: got %v, want %s", c.cmd, err, c.code.Name())
		}
	}
	if n := sc.count(t, "app", "s", bson.D{}); n != 0 {
		t.Fatalf("bad commands wrote %d documents", n)
	}
}

// In an ordered batch a statement sent to several shards runs alone: after it fails on one
// shard, no shard runs the next statement.
func TestRouterOrderedMultiShard(t *testing.T) {
	sc := startShardedCluster(t)
	ctx := context.Background()
	if _, err := sc.router.Database("app").Collection("s").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: -1}, {Key: "v", Value: "text"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 1}, {Key: "v", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	r := decodeWrite(t, sc.run(t, "app", bson.D{{Key: "update", Value: "s"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}}, {Key: "multi", Value: true}},
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}}, {Key: "multi", Value: true}},
	}}}))
	if !slices.Equal(errIndexes(r), []int32{0}) {
		t.Fatalf("ordered multi-shard batch: %+v", r)
	}
	if n := sc.count(t, "app", "s", bson.D{{Key: "w", Value: 1}}); n != 0 {
		t.Fatalf("the statement after a failed one ran on %d documents", n)
	}
}
