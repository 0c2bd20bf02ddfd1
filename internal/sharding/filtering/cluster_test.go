package filtering_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/cluster"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
	"humongo/internal/sharding/shardregistry"
	"humongo/internal/sharding/shardstate"
)

// startSet starts one humongod as a single-member replica set with args and waits until it
// is primary; it returns the process and a direct client.
func startSet(t *testing.T, bin, dir, name string, cfgsvr bool, args ...string) (*cluster.Process, *mongo.Client) {
	t.Helper()
	p := cluster.StartProcess(t, cluster.ProcessOptions{Name: name, Binary: bin, Dir: dir,
		Args: append([]string{"--replSet", name}, args...)})
	cl, err := mongo.Connect(options.Client().ApplyURI(p.URI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := cluster.InitiateConfig(name, []string{p.Addr()}, nil)
	if cfgsvr {
		cfg = append(cfg, bson.E{Key: "configsvr", Value: true})
	}
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: cfg}}).Err(); err != nil {
		t.Fatalf("initiate %s: %v", name, err)
	}
	for {
		var h struct {
			Primary bool `bson:"isWritablePrimary"`
		}
		if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&h); err == nil && h.Primary {
			return p, cl
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never became primary", name)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func doc(d bson.D) bsoncore.Document {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

func commandError(t *testing.T, err error, code mongoerr.Code) mongo.CommandError {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != int32(code) {
		t.Fatalf("error %v, want %s", err, code)
	}
	return ce
}

// A config server and one shard as real processes, the catalog written directly on the
// config server: the shard answers versioned requests from its filtering metadata, refreshes
// it when stale, and hides orphans from versioned reads only.
func TestShardVersioningRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := cluster.MustBuild(t, "humongod") + "/humongod"
	dir := t.TempDir()
	cfgProc, cfgCl := startSet(t, bin, dir, "cfg", true, "--configsvr")
	shProc, shCl := startSet(t, bin, dir, "sh0", false, "--shardsvr")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// The catalog: database app (primary sh0), app.c sharded on {k: 1}: [MinKey, 10) on
	// sh0 at 1|0, [10, MaxKey) on sh1 at 1|1.
	config := cfgCl.Database("config", options.Database().SetWriteConcern(writeconcern.Majority()))
	insert := func(coll string, d bsoncore.Document) {
		t.Helper()
		for {
			_, err := config.Collection(coll).InsertOne(ctx, bson.Raw(d))
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("insert into config.%s: %v", coll, err)
			}
			time.Sleep(100 * time.Millisecond) // the catalog may still be initialising
		}
	}
	insert("shards", shardregistry.Shard{ID: "sh0", Host: "sh0/" + shProc.Addr()}.Doc())
	dbv := routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 100, I: 1})
	insert("databases", configclient.DatabaseDoc(catalogcache.Database{Name: "app", Primary: "sh0", Version: dbv}))
	p := shardkey.MustParse(doc(bson.D{{Key: "k", Value: 1}}))
	coll := catalogcache.Collection{NS: "app.c", UUID: catalog.NewUUID(), Pattern: p,
		Gen: routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 100, I: 2}}}
	insert("collections", configclient.CollectionDoc(coll, 0))
	v10 := routing.ChunkVersion{Major: 1, Generation: coll.Gen}
	v11 := routing.ChunkVersion{Major: 1, Minor: 1, Generation: coll.Gen}
	mine := routing.Chunk{ID: bson.NewObjectID(), CollectionUUID: coll.UUID, Min: p.GlobalMin(), Max: doc(bson.D{{Key: "k", Value: 10}}),
		Shard: "sh0", Version: v10}
	theirs := routing.Chunk{ID: bson.NewObjectID(), CollectionUUID: coll.UUID, Min: doc(bson.D{{Key: "k", Value: 10}}), Max: p.GlobalMax(),
		Shard: "sh1", Version: v11}
	insert("chunks", mine.ConfigDoc())
	insert("chunks", theirs.ConfigDoc())

	// The shard's data: k 0..19, of which 10..19 are orphans here.
	app := shCl.Database("app")
	var docs []any
	for k := range 20 {
		docs = append(docs, bson.D{{Key: "_id", Value: k}, {Key: "k", Value: k}})
	}
	if _, err := app.Collection("c").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Collection("u").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}

	sv := func(v routing.ChunkVersion) bson.Raw { return bson.Raw(v.ShardVersionDoc()) }
	find := func(ns string, v *routing.ChunkVersion, dv *routing.DatabaseVersion) (int, error) {
		cmd := bson.D{{Key: "find", Value: ns}, {Key: "batchSize", Value: 1000}}
		if v != nil {
			cmd = append(cmd, bson.E{Key: "shardVersion", Value: sv(*v)})
		}
		if dv != nil {
			cmd = append(cmd, bson.E{Key: "databaseVersion", Value: bson.Raw(dv.Doc())})
		}
		var r struct {
			Cursor struct {
				FirstBatch []bson.Raw `bson:"firstBatch"`
			} `bson:"cursor"`
		}
		err := app.RunCommand(ctx, cmd).Decode(&r)
		return len(r.Cursor.FirstBatch), err
	}

	// Versioned before shard awareness: ShardingStateNotInitialized.
	_, err := find("c", &v10, nil)
	commandError(t, err, mongoerr.ShardingStateNotInitialized)

	id := shardstate.Identity{ShardName: "sh0", ClusterID: bson.NewObjectID(), ConfigsvrConnectionString: "cfg/" + cfgProc.Addr()}
	if _, err := shCl.Database("admin").Collection("system.version").InsertOne(ctx, bson.Raw(id.Document())); err != nil {
		t.Fatal(err)
	}

	var gsv bson.Raw
	gsv, err = shCl.Database("admin").RunCommand(ctx, bson.D{{Key: "getShardVersion", Value: "app.c"}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := gsv.Lookup("global").StringValueOK(); g != "UNKNOWN" {
		t.Fatalf("getShardVersion before any refresh: %s", gsv)
	}

	// First versioned request: the metadata is unknown; StaleConfig, and the shard refreshes.
	_, err = find("c", &v10, nil)
	ce := commandError(t, err, mongoerr.StaleConfig)
	if ns, _ := ce.Raw.Lookup("ns").StringValueOK(); ns != "app.c" {
		t.Fatalf("StaleConfig reply %s", ce.Raw)
	}
	if sid, _ := ce.Raw.Lookup("shardId").StringValueOK(); sid != "sh0" {
		t.Fatalf("StaleConfig reply %s", ce.Raw)
	}
	if got, err := routing.ParseShardVersion(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: ce.Raw.Lookup("vReceived").Value}); err != nil || !got.Equal(v10) {
		t.Fatalf("vReceived %v %v in %s", got, err, ce.Raw)
	}

	gsv, err = shCl.Database("admin").RunCommand(ctx, bson.D{{Key: "getShardVersion", Value: "app.c"}, {Key: "fullMetadata", Value: true}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if tt, ti, ok := gsv.Lookup("global").TimestampOK(); !ok || tt != 1 || ti != 0 {
		t.Fatalf("getShardVersion after the refresh: %s", gsv)
	}
	if cs, _ := gsv.Lookup("configServer").StringValueOK(); cs != id.ConfigsvrConnectionString {
		t.Fatalf("configServer in %s", gsv)
	}
	if tt, ti, ok := gsv.Lookup("metadata", "collVersion").TimestampOK(); !ok || tt != 1 || ti != 1 {
		t.Fatalf("collVersion in %s", gsv)
	}
	if chunks, ok := gsv.Lookup("metadata", "chunks").ArrayOK(); !ok || len(mustValues(t, bsoncore.Array(chunks))) != 1 {
		t.Fatalf("chunks in %s", gsv)
	}

	// The primary persisted what it learned in config.cache.* (7.0's formats).
	shConfig := shCl.Database("config")
	var cc bson.Raw
	if cc, err = shConfig.Collection("cache.collections").FindOne(ctx, bson.D{{Key: "_id", Value: "app.c"}}).Raw(); err != nil {
		t.Fatalf("config.cache.collections: %v", err)
	}
	if tt, ti, ok := cc.Lookup("lastRefreshedCollectionVersion").TimestampOK(); !ok || tt != 1 || ti != 1 || cc.Lookup("refreshing").Boolean() {
		t.Fatalf("config.cache.collections entry %s", cc)
	}
	cacheChunks := func() map[string]string {
		t.Helper()
		cur, err := shConfig.Collection("cache.chunks.app.c").Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, d := range docs {
			tt, ti, _ := d.Lookup("lastmod").TimestampOK()
			out[d.Lookup("_id").String()] = fmt.Sprintf("%s {%d %d}", d.Lookup("shard").StringValue(), tt, ti)
		}
		return out
	}
	if got := cacheChunks(); len(got) != 2 {
		t.Fatalf("config.cache.chunks.app.c: %v", got)
	}

	// SHARDRT_MEASURE=1 logs the cost of the version check: p50 of a find by _id, unversioned
	// and versioned (the filter included).
	if os.Getenv("SHARDRT_MEASURE") != "" {
		p50 := func(f func()) time.Duration {
			var ds []time.Duration
			for range 500 {
				st := time.Now()
				f()
				ds = append(ds, time.Since(st))
			}
			slices.Sort(ds)
			return ds[len(ds)/2]
		}
		one := func(v *routing.ChunkVersion) func() {
			return func() {
				cmd := bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 3}}}}
				if v != nil {
					cmd = append(cmd, bson.E{Key: "shardVersion", Value: sv(*v)})
				}
				if err := app.RunCommand(ctx, cmd).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		t.Logf("find by _id p50: unversioned %v, versioned %v", p50(one(nil)), p50(one(&v10)))
	}
	// The current version: only the owned documents; unversioned: all of them.
	if n, err := find("c", &v10, nil); err != nil || n != 10 {
		t.Fatalf("versioned find: %d docs, %v", n, err)
	}
	if n, err := find("c", nil, nil); err != nil || n != 20 {
		t.Fatalf("unversioned find: %d docs, %v", n, err)
	}
	var cnt struct {
		N int `bson:"n"`
	}
	if err := app.RunCommand(ctx, bson.D{{Key: "count", Value: "c"}, {Key: "shardVersion", Value: sv(v10)}}).Decode(&cnt); err != nil || cnt.N != 10 {
		t.Fatalf("versioned count: %d, %v", cnt.N, err)
	}
	var agg struct {
		Cursor struct {
			FirstBatch []bson.Raw `bson:"firstBatch"`
		} `bson:"cursor"`
	}
	if err := app.RunCommand(ctx, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}},
		{Key: "shardVersion", Value: sv(v10)}}).Decode(&agg); err != nil || len(agg.Cursor.FirstBatch) != 10 {
		t.Fatalf("versioned aggregate: %d docs, %v", len(agg.Cursor.FirstBatch), err)
	}
	expl, err := app.RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}}}, {Key: "shardVersion", Value: sv(v10)}}).Raw()
	if err != nil || !bsonContains(expl, "SHARDING_FILTER") {
		t.Fatalf("versioned explain without SHARDING_FILTER: %v %s", err, expl)
	}
	if expl, err := app.RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}}}}).Raw(); err != nil || bsonContains(expl, "SHARDING_FILTER") {
		t.Fatalf("unversioned explain: %v %s", err, expl)
	}
	// A versioned delete leaves the orphans alone.
	if err := app.RunCommand(ctx, bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: 9}}}}}, {Key: "limit", Value: 0}}}},
		{Key: "shardVersion", Value: sv(v10)}}).Decode(&cnt); err != nil || cnt.N != 1 {
		t.Fatalf("versioned delete: n %d, %v", cnt.N, err)
	}

	// The other chunk moves here on the config server (2|0): a router that knows it is ahead
	// of the shard, which answers StaleConfig with vWanted 1|0 and refreshes; then it works.
	v20 := routing.ChunkVersion{Major: 2, Generation: coll.Gen}
	if _, err := config.Collection("chunks").UpdateOne(ctx, bson.D{{Key: "_id", Value: theirs.ID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "shard", Value: "sh0"}, {Key: "lastmod", Value: v20.Placement()}}}}); err != nil {
		t.Fatal(err)
	}
	_, err = find("c", &v20, nil)
	ce = commandError(t, err, mongoerr.StaleConfig)
	if got, err := routing.ParseShardVersion(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: ce.Raw.Lookup("vWanted").Value}); err != nil || !got.Equal(v10) {
		t.Fatalf("vWanted %v %v in %s", got, err, ce.Raw)
	}
	if n, err := find("c", &v20, nil); err != nil || n != 19 {
		t.Fatalf("after the refresh: %d docs, %v", n, err)
	}
	// Now a router with the old version is the stale one.
	_, err = find("c", &v10, nil)
	ce = commandError(t, err, mongoerr.StaleConfig)
	if got, err := routing.ParseShardVersion(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: ce.Raw.Lookup("vWanted").Value}); err != nil || !got.Equal(v20) {
		t.Fatalf("vWanted %v %v in %s", got, err, ce.Raw)
	}

	// databaseVersion on an unsharded collection: unknown first, then known; a wrong one is
	// StaleDbVersion with the shard's version.
	unsharded := routing.Unsharded()
	_, err = find("u", &unsharded, &dbv)
	ce = commandError(t, err, mongoerr.StaleDbVersion)
	if db, _ := ce.Raw.Lookup("db").StringValueOK(); db != "app" {
		t.Fatalf("StaleDbVersion reply %s", ce.Raw)
	}
	// The database version is known now; the collection's metadata is not yet (a router
	// retries once more).
	_, err = find("u", &unsharded, &dbv)
	commandError(t, err, mongoerr.StaleConfig)
	if n, err := find("u", &unsharded, &dbv); err != nil || n != 1 {
		t.Fatalf("unsharded versioned find: %d, %v", n, err)
	}
	wrong := routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 100, I: 1})
	_, err = find("u", &unsharded, &wrong)
	ce = commandError(t, err, mongoerr.StaleDbVersion)
	if got, err := routing.ParseDatabaseVersion(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: ce.Raw.Lookup("vWanted").Value}); err != nil || got != dbv {
		t.Fatalf("vWanted %v %v in %s", got, err, ce.Raw)
	}

	// _flushRoutingTableCacheUpdates refreshes at once.
	// The chunk goes back to sh1 (3|0), the donor's remaining chunk bumped to 3|1 as a
	// migration commit does.
	v31 := routing.ChunkVersion{Major: 3, Minor: 1, Generation: coll.Gen}
	if _, err := config.Collection("chunks").UpdateOne(ctx, bson.D{{Key: "_id", Value: theirs.ID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "shard", Value: "sh1"}, {Key: "lastmod", Value: bson.Timestamp{T: 3, I: 0}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Collection("chunks").UpdateOne(ctx, bson.D{{Key: "_id", Value: mine.ID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "lastmod", Value: v31.Placement()}}}}); err != nil {
		t.Fatal(err)
	}
	if err := shCl.Database("admin").RunCommand(ctx, bson.D{{Key: "_flushRoutingTableCacheUpdates", Value: "app.c"}}).Err(); err != nil {
		t.Fatal(err)
	}
	gsv, err = shCl.Database("admin").RunCommand(ctx, bson.D{{Key: "getShardVersion", Value: "app.c"}}).Raw()
	if tt, ti, ok := gsv.Lookup("global").TimestampOK(); err != nil || !ok || tt != 3 || ti != 1 {
		t.Fatalf("getShardVersion after the flush: %v %s", err, gsv)
	}
	if n, err := find("c", &v31, nil); err != nil || n != 9 {
		t.Fatalf("after the chunk left: %d docs, %v", n, err)
	}
	if got := cacheChunks(); len(got) != 2 || got[`{"k": {"$numberInt":"10"}}`] != "sh1 {3 0}" {
		t.Fatalf("config.cache.chunks.app.c after incremental refreshes: %v", got)
	}
	var cdb bson.Raw
	if cdb, err = shConfig.Collection("cache.databases").FindOne(ctx, bson.D{{Key: "_id", Value: "app"}}).Raw(); err != nil || cdb.Lookup("primary").StringValue() != "sh0" {
		t.Fatalf("config.cache.databases: %v %s", err, cdb)
	}

	// Versioned writes: a stale version is a StaleConfig write error (its fields inline, as
	// WriteError::serialize puts them), and the write error path refreshes too.
	insertV := func(coll string, v routing.ChunkVersion, dv *routing.DatabaseVersion, k int) bson.Raw {
		t.Helper()
		cmd := bson.D{{Key: "insert", Value: coll}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 100 + k}, {Key: "k", Value: k}}}},
			{Key: "shardVersion", Value: sv(v)}}
		if dv != nil {
			cmd = append(cmd, bson.E{Key: "databaseVersion", Value: bson.Raw(dv.Doc())})
		}
		r, err := app.RunCommand(ctx, cmd).Raw()
		if len(r) == 0 {
			t.Fatal(err) // a write error still comes with the reply
		}
		return r
	}
	writeErrCode := func(r bson.Raw) int32 {
		c, _ := r.Lookup("writeErrors", "0", "code").AsInt64OK()
		return int32(c)
	}
	if r := insertV("c", v31, nil, 1); writeErrCode(r) != 0 {
		t.Fatalf("current versioned insert: %s", r)
	}
	r := insertV("c", v10, nil, 2)
	if writeErrCode(r) != int32(mongoerr.StaleConfig) {
		t.Fatalf("stale versioned insert: %s", r)
	}
	if ns, _ := r.Lookup("writeErrors", "0", "ns").StringValueOK(); ns != "app.c" {
		t.Fatalf("StaleConfig write error without its info: %s", r)
	}
	if r := insertV("n", unsharded, &dbv, 3); writeErrCode(r) != int32(mongoerr.StaleConfig) {
		t.Fatalf("insert into a namespace of unknown metadata: %s", r)
	}
	// The check came before the implicit creation (under its lock): nothing was created.
	if names, err := app.ListCollectionNames(ctx, bson.D{{Key: "name", Value: "n"}}); err != nil || len(names) != 0 {
		t.Fatalf("collection created by a stale insert: %v %v", names, err)
	}
	if r := insertV("n", unsharded, &dbv, 3); writeErrCode(r) != 0 {
		t.Fatalf("insert after the write error path refreshed: %s", r)
	}
}

func mustValues(t *testing.T, a bsoncore.Array) []bsoncore.Value {
	t.Helper()
	vs, err := a.Values()
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func bsonContains(d bson.Raw, s string) bool {
	return strings.Contains(d.String(), s)
}
