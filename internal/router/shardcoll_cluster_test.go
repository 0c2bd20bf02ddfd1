package router_test

// Real-process tests of sharding a collection, split and merge: a config server, two
// single-member shards and a humongos, wired by hand (config.shards, shardIdentity and
// config.databases written directly: addShard and enableSharding are another part of
// issue 12).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/catalog"
	"humongo/internal/cluster"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardregistry"
	"humongo/internal/sharding/shardstate"
)

type shardedCluster struct {
	cfg            *mongo.Client
	shards         map[string]*mongo.Client // by shard id
	router         *mongo.Client
	shardProcesses map[string]*cluster.Process
	configDB       string // the routers' --configdb
}

func connectTo(t *testing.T, uri string) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(30 * time.Second).SetRetryWrites(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	return cl
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitWritable(ctx context.Context, t *testing.T, cl *mongo.Client) {
	t.Helper()
	waitUntil(t, "a writable primary", func() bool {
		var h struct {
			W bool `bson:"isWritablePrimary"`
		}
		return cl.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&h) == nil && h.W
	})
}

func startShardedCluster(t *testing.T) *shardedCluster {
	t.Helper()
	dir := cluster.MustBuild(t, "humongod", "humongos")
	mongod, mongos := filepath.Join(dir, "humongod"), filepath.Join(dir, "humongos")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sc := &shardedCluster{shards: map[string]*mongo.Client{}, shardProcesses: map[string]*cluster.Process{}}

	cfgP := cluster.StartProcess(t, cluster.ProcessOptions{Name: "cfg0", Binary: mongod, Dir: t.TempDir(),
		Args: []string{"--configsvr", "--replSet", "cfg", "--bind_ip", "127.0.0.1"}})
	sc.cfg = connectTo(t, cfgP.URI())
	if err := sc.cfg.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: bson.D{{Key: "_id", Value: "cfg"},
		{Key: "configsvr", Value: true}, {Key: "members", Value: bson.A{bson.D{{Key: "_id", Value: 0}, {Key: "host", Value: cfgP.Addr()}}}}}}}).Err(); err != nil {
		t.Fatalf("initiate cfg: %v", err)
	}
	var clusterID bson.ObjectID
	waitUntil(t, "the config catalog", func() bool {
		var v struct {
			ID bson.ObjectID `bson:"clusterId"`
		}
		err := sc.cfg.Database("config").Collection("version").FindOne(ctx, bson.D{}).Decode(&v)
		clusterID = v.ID
		return err == nil && !v.ID.IsZero()
	})
	config := sc.cfg.Database("config", options.Database().SetWriteConcern(writeconcern.Majority()))
	for _, id := range []string{"sh0", "sh1"} {
		p := cluster.StartProcess(t, cluster.ProcessOptions{Name: id, Binary: mongod, Dir: t.TempDir(),
			Args: []string{"--shardsvr", "--replSet", id, "--bind_ip", "127.0.0.1", "--setParameter", "enableTestCommands=1"}})
		cl := connectTo(t, p.URI())
		if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: bson.D{{Key: "_id", Value: id},
			{Key: "members", Value: bson.A{bson.D{{Key: "_id", Value: 0}, {Key: "host", Value: p.Addr()}}}}}}}).Err(); err != nil {
			t.Fatalf("initiate %s: %v", id, err)
		}
		waitWritable(ctx, t, cl)
		if _, err := config.Collection("shards").InsertOne(ctx, bson.Raw(shardregistry.Shard{ID: id, Host: id + "/" + p.Addr()}.Doc())); err != nil {
			t.Fatal(err)
		}
		ident := shardstate.Identity{ShardName: id, ClusterID: clusterID, ConfigsvrConnectionString: "cfg/" + cfgP.Addr()}
		if _, err := cl.Database("admin").Collection("system.version").InsertOne(ctx, bson.Raw(ident.Document())); err != nil {
			t.Fatal(err)
		}
		sc.shards[id], sc.shardProcesses[id] = cl, p
	}
	if _, err := config.Collection("databases").InsertOne(ctx, bson.Raw(configclient.DatabaseDoc(catalogcache.Database{
		Name: "app", Primary: "sh0", Version: routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 100, I: 1})}))); err != nil {
		t.Fatal(err)
	}
	sc.configDB = "cfg/" + cfgP.Addr()
	r := cluster.StartProcess(t, cluster.ProcessOptions{Name: "router0", Binary: mongos, Dir: t.TempDir(), NoDBPath: true,
		Args: []string{"--configdb", "cfg/" + cfgP.Addr(), "--bind_ip", "127.0.0.1"}})
	sc.router = connectTo(t, r.URI())
	return sc
}

func commandErr(t *testing.T, err error) mongo.CommandError {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("want a command error, got %v", err)
	}
	return ce
}

func expectCode(t *testing.T, what string, err error, code mongoerr.Code, msg string) {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != int32(code) || !strings.Contains(ce.Message, msg) {
		t.Errorf("%s: got %v, want code %d with %q", what, err, code, msg)
	}
}

type chunkRow struct {
	Min     bson.Raw       `bson:"min"`
	Max     bson.Raw       `bson:"max"`
	Shard   string         `bson:"shard"`
	Lastmod bson.Timestamp `bson:"lastmod"`
}

func (c chunkRow) String() string {
	return fmt.Sprintf("[%s, %s) %s %d|%d", c.Min, c.Max, c.Shard, c.Lastmod.T, c.Lastmod.I)
}

// collEntry reads config.collections and config.chunks (sorted by min) for ns.
func (sc *shardedCluster) collEntry(ctx context.Context, t *testing.T, ns string) (bson.Raw, []chunkRow) {
	t.Helper()
	raw, err := sc.cfg.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Raw()
	if err != nil {
		t.Fatalf("config.collections %s: %v", ns, err)
	}
	_, uuid := raw.Lookup("uuid").Binary()
	cur, err := sc.cfg.Database("config").Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: uuid}}},
		options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var chunks []chunkRow
	if err := cur.All(ctx, &chunks); err != nil {
		t.Fatal(err)
	}
	return raw, chunks
}

func localUUID(ctx context.Context, t *testing.T, cl *mongo.Client, db, coll string) []byte {
	t.Helper()
	specs, err := cl.Database(db).ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: coll}})
	if err != nil || len(specs) != 1 {
		return nil
	}
	return specs[0].UUID.Data
}

func indexNames(ctx context.Context, t *testing.T, cl *mongo.Client, db, coll string) string {
	t.Helper()
	specs, err := cl.Database(db).Collection(coll).Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

func TestShardCollectionSplitMerge(t *testing.T) {
	sc := startShardedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin := sc.router.Database("admin")
	shardColl := func(ns string, extra ...bson.E) (bson.Raw, error) {
		cmd := bson.D{{Key: "shardCollection", Value: ns}}
		cmd = append(cmd, extra...)
		return admin.RunCommand(ctx, cmd).Raw()
	}
	key := func(k any) bson.E { return bson.E{Key: "key", Value: k} }

	t.Run("ranged", func(t *testing.T) {
		reply, err := shardColl("app.r", key(bson.D{{Key: "k", Value: 1}}))
		if err != nil {
			t.Fatalf("shardCollection: %v", err)
		}
		if reply.Lookup("collectionsharded").StringValue() != "app.r" {
			t.Errorf("reply %s", reply)
		}
		_, replyUUID := reply.Lookup("collectionUUID").Binary()
		entry, chunks := sc.collEntry(ctx, t, "app.r")
		_, uuid := entry.Lookup("uuid").Binary()
		if string(uuid) != string(replyUUID) || string(uuid) != string(localUUID(ctx, t, sc.shards["sh0"], "app", "r")) {
			t.Errorf("uuid: config %x, reply %x, shard %x", uuid, replyUUID, localUUID(ctx, t, sc.shards["sh0"], "app", "r"))
		}
		if entry.Lookup("key").String() != `{"k": {"$numberInt":"1"}}` || entry.Lookup("unique").Boolean() {
			t.Errorf("config.collections: %s", entry)
		}
		if len(chunks) != 1 || chunks[0].Shard != "sh0" || chunks[0].Lastmod != (bson.Timestamp{T: 1, I: 0}) ||
			chunks[0].Min.Lookup("k").Type != bson.TypeMinKey || chunks[0].Max.Lookup("k").Type != bson.TypeMaxKey {
			t.Errorf("chunks: %v", chunks)
		}
		if got := indexNames(ctx, t, sc.shards["sh0"], "app", "r"); got != "_id_,k_1" {
			t.Errorf("shard key index on sh0: %s", got)
		}
		// Sharding again with the same options is a success; other options are not.
		if _, err := shardColl("app.r", key(bson.D{{Key: "k", Value: 1}})); err != nil {
			t.Errorf("same options again: %v", err)
		}
		_, err = shardColl("app.r", key(bson.D{{Key: "j", Value: 1}}))
		expectCode(t, "another key", err, mongoerr.AlreadyInitialized, "sharding already enabled for collection app.r")
		_, err = shardColl("app.r", key(bson.D{{Key: "k", Value: 1}}), bson.E{Key: "unique", Value: true})
		expectCode(t, "unique now", err, mongoerr.AlreadyInitialized, "sharding already enabled for collection app.r")
		if _, chunks2 := sc.collEntry(ctx, t, "app.r"); len(chunks2) != 1 {
			t.Errorf("chunks changed: %v", chunks2)
		}
	})

	t.Run("hashed", func(t *testing.T) {
		if _, err := shardColl("app.h", key(bson.D{{Key: "h", Value: "hashed"}})); err != nil {
			t.Fatalf("shardCollection: %v", err)
		}
		entry, chunks := sc.collEntry(ctx, t, "app.h")
		_, uuid := entry.Lookup("uuid").Binary()
		// 7.0's default: two chunks per shard, contiguous runs, split at -2^62, 0, 2^62.
		want := []struct {
			shard string
			min   int64
		}{{"sh0", 0}, {"sh0", -4611686018427387902}, {"sh1", 0}, {"sh1", 4611686018427387902}}
		if len(chunks) != 4 {
			t.Fatalf("chunks: %v", chunks)
		}
		for i, ch := range chunks {
			if ch.Shard != want[i].shard || ch.Lastmod != (bson.Timestamp{T: 1, I: uint32(i)}) {
				t.Errorf("chunk %d: %v", i, ch)
			}
			if i > 0 && ch.Min.Lookup("h").Int64() != want[i].min {
				t.Errorf("chunk %d min: %v", i, ch)
			}
		}
		for _, id := range []string{"sh0", "sh1"} {
			if got := localUUID(ctx, t, sc.shards[id], "app", "h"); string(got) != string(uuid) {
				t.Errorf("%s: collection uuid %x, want %x", id, got, uuid)
			}
			if got := indexNames(ctx, t, sc.shards[id], "app", "h"); got != "_id_,h_hashed" {
				t.Errorf("%s indexes: %s", id, got)
			}
		}
		if _, err := shardColl("app.h6", key(bson.D{{Key: "h", Value: "hashed"}}), bson.E{Key: "numInitialChunks", Value: 6}); err != nil {
			t.Fatal(err)
		}
		if _, chunks := sc.collEntry(ctx, t, "app.h6"); len(chunks) != 6 || chunks[2].Shard != "sh0" || chunks[3].Shard != "sh1" {
			t.Errorf("numInitialChunks 6: %v", chunks)
		}
		_, err := shardColl("app.r6", key(bson.D{{Key: "k", Value: 1}}), bson.E{Key: "numInitialChunks", Value: 6})
		expectCode(t, "numInitialChunks on a ranged key", err, mongoerr.InvalidOptions, "numInitialChunks is only supported when the collection is empty and has a hashed field")
	})

	t.Run("errors", func(t *testing.T) {
		// A database that does not exist yet is created first, as 7.0's mongos does.
		if _, err := shardColl("nodb.c", key(bson.D{{Key: "k", Value: 1}})); err != nil {
			t.Errorf("shardCollection on a new database: %v", err)
		} else if _, chunks := sc.collEntry(ctx, t, "nodb.c"); len(chunks) != 1 {
			t.Errorf("nodb.c chunks: %v", chunks)
		}
		_, err := shardColl("app.bad", key(bson.D{{Key: "k", Value: "text"}}))
		expectCode(t, "bad key", err, mongoerr.BadValue, "Shard key")
		_, err = shardColl("app.bad", key(bson.D{{Key: "k", Value: "hashed"}}), bson.E{Key: "unique", Value: true})
		expectCode(t, "unique hashed", err, mongoerr.InvalidOptions, "Hashed shard keys cannot be declared unique")
		_, err = shardColl("app.bad", key(bson.D{{Key: "k", Value: 1}}), bson.E{Key: "collation", Value: bson.D{{Key: "locale", Value: "fr"}}})
		expectCode(t, "collation", err, mongoerr.BadValue, "The collation for shardCollection must be {locale: 'simple'}")
		_, err = shardColl("app.bad")
		expectCode(t, "no key", err, mongoerr.Location40414, "shardCollection.key")
		_, err = shardColl("app.ts", key(bson.D{{Key: "k", Value: 1}}), bson.E{Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "t"}}})
		expectCode(t, "timeseries", err, mongoerr.CommandNotSupported, "time-series")
		_, err = shardColl("admin.x", key(bson.D{{Key: "k", Value: 1}}))
		expectCode(t, "admin", err, mongoerr.IllegalOperation, "admin")
		// Internal commands run only where they belong.
		err = sc.cfg.Database("app").RunCommand(ctx, bson.D{{Key: "_shardsvrCreateCollection", Value: "x"}, {Key: "shardKey", Value: bson.D{{Key: "k", Value: 1}}}}).Err()
		expectCode(t, "_shardsvrCreateCollection on the config server", err, mongoerr.IllegalOperation, "can only be run on shard servers")
		err = sc.shards["sh0"].Database("admin").RunCommand(ctx, bson.D{{Key: "_configsvrCommitChunkSplit", Value: "app.r"}}).Err()
		expectCode(t, "_configsvrCommitChunkSplit on a shard", err, mongoerr.IllegalOperation, "_configsvrCommitChunkSplit can only be run on config servers")
		if n, _ := sc.cfg.Database("config").Collection("collections").CountDocuments(ctx, bson.D{{Key: "_id", Value: "app.bad"}}); n != 0 {
			t.Errorf("a refused shardCollection left a config.collections entry")
		}
	})

	t.Run("nonEmpty", func(t *testing.T) {
		// Documents go straight to the primary shard (the router's CRUD is another part).
		sh0 := sc.shards["sh0"].Database("app")
		if _, err := sh0.Collection("ne").InsertMany(ctx, []any{bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}, {Key: "u", Value: 1}},
			bson.D{{Key: "a", Value: 2}, {Key: "b", Value: 2}, {Key: "u", Value: 2}}}); err != nil {
			t.Fatal(err)
		}
		_, err := shardColl("app.ne", key(bson.D{{Key: "a", Value: 1}}))
		expectCode(t, "no index", err, mongoerr.InvalidOptions, "Please create an index that starts with the proposed shard key before sharding the collection")
		if _, err := sh0.Collection("ne").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}},
			Options: options.Index().SetSparse(true)}); err != nil {
			t.Fatal(err)
		}
		_, err = shardColl("app.ne", key(bson.D{{Key: "a", Value: 1}}))
		expectCode(t, "sparse index only", err, mongoerr.InvalidOptions, "Index a_1 cannot be used for sharding because [ Index key is sparse. ]")
		if _, err := sh0.Collection("ne").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "u", Value: 1}},
			Options: options.Index().SetUnique(true)}); err != nil {
			t.Fatal(err)
		}
		if _, err := sh0.Collection("ne").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}); err != nil {
			t.Fatal(err)
		}
		_, err = shardColl("app.ne", key(bson.D{{Key: "a", Value: 1}}))
		expectCode(t, "unique index not prefixed", err, mongoerr.InvalidOptions, "Uniqueness can't be maintained unless shard key is a prefix")
		if err := sh0.Collection("ne").Indexes().DropOne(ctx, "u_1"); err != nil {
			t.Fatal(err)
		}
		_, err = shardColl("app.ne", key(bson.D{{Key: "a", Value: 1}}), bson.E{Key: "unique", Value: true})
		expectCode(t, "unique with a non-unique index on the key", err, mongoerr.InvalidOptions, "index not unique, and unique index explicitly specified")
		// An array on the key makes the index multikey: not usable.
		if _, err := sh0.Collection("ne").InsertOne(ctx, bson.D{{Key: "a", Value: bson.A{1, 2}}, {Key: "b", Value: 3}}); err != nil {
			t.Fatal(err)
		}
		_, err = shardColl("app.ne", key(bson.D{{Key: "a", Value: 1}}))
		expectCode(t, "multikey", err, mongoerr.InvalidOptions, "couldn't find valid index for shard key")
		if _, err := sh0.Collection("ne").DeleteOne(ctx, bson.D{{Key: "b", Value: 3}}); err != nil {
			t.Fatal(err)
		}
		// {a: 1, b: 1} has the key as a prefix, is not sparse: usable.
		if _, err := shardColl("app.ne", key(bson.D{{Key: "a", Value: 1}})); err != nil {
			t.Fatalf("with a supporting index: %v", err)
		}
		if _, chunks := sc.collEntry(ctx, t, "app.ne"); len(chunks) != 1 || chunks[0].Shard != "sh0" {
			t.Errorf("chunks: %v", chunks)
		}
		if got := indexNames(ctx, t, sc.shards["sh0"], "app", "ne"); got != "_id_,a_1,a_1_b_1" {
			t.Errorf("no index may be created on a non-empty collection: %s", got)
		}
		// A hashed key on a non-empty collection: one chunk on the primary.
		if _, err := sh0.Collection("neh").InsertOne(ctx, bson.D{{Key: "h", Value: 1}}); err != nil {
			t.Fatal(err)
		}
		if _, err := sh0.Collection("neh").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "h", Value: "hashed"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := shardColl("app.neh", key(bson.D{{Key: "h", Value: "hashed"}})); err != nil {
			t.Fatal(err)
		}
		if _, chunks := sc.collEntry(ctx, t, "app.neh"); len(chunks) != 1 {
			t.Errorf("hashed non-empty chunks: %v", chunks)
		}
	})

	t.Run("defaultCollation", func(t *testing.T) {
		if err := sc.shards["sh0"].Database("app").CreateCollection(ctx, "fr",
			options.CreateCollection().SetCollation(&options.Collation{Locale: "fr"})); err != nil {
			t.Fatal(err)
		}
		_, err := shardColl("app.fr", key(bson.D{{Key: "k", Value: 1}}))
		expectCode(t, "default collation", err, mongoerr.BadValue, "Must specify collation {locale: 'simple'}")
		if _, err := shardColl("app.fr", key(bson.D{{Key: "k", Value: 1}}), bson.E{Key: "collation", Value: bson.D{{Key: "locale", Value: "simple"}}}); err != nil {
			t.Fatalf("with the simple collation: %v", err)
		}
		entry, _ := sc.collEntry(ctx, t, "app.fr")
		if loc, _ := entry.Lookup("defaultCollation", "locale").StringValueOK(); loc != "fr" {
			t.Errorf("config.collections defaultCollation: %s", entry)
		}
		specs, err := sc.shards["sh0"].Database("app").Collection("fr").Indexes().ListSpecifications(ctx)
		if err != nil || len(specs) != 2 || specs[1].Name != "k_1" {
			t.Fatalf("indexes: %v %v", specs, err)
		}
		raw, err := sc.shards["sh0"].Database("app").RunCommand(ctx, bson.D{{Key: "listIndexes", Value: "fr"}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		ixs := mustValues(t, raw.Lookup("cursor", "firstBatch").Array())
		if loc, _ := ixs[1].Document().Lookup("collation", "locale").StringValueOK(); loc != "" && loc != "simple" {
			t.Errorf("shard key index collation: %s", ixs[1])
		}
	})

	t.Run("splitMerge", func(t *testing.T) {
		if _, err := shardColl("app.s", key(bson.D{{Key: "k", Value: 1}})); err != nil {
			t.Fatal(err)
		}
		split := func(arg bson.E) error {
			return admin.RunCommand(ctx, bson.D{{Key: "split", Value: "app.s"}, arg}).Err()
		}
		middle := func(k int) bson.E { return bson.E{Key: "middle", Value: bson.D{{Key: "k", Value: k}}} }
		layout := func() string {
			_, chunks := sc.collEntry(ctx, t, "app.s")
			var parts []string
			for _, c := range chunks {
				parts = append(parts, fmt.Sprintf("%s-%s@%d|%d", keyString(c.Min.Lookup("k")), keyString(c.Max.Lookup("k")), c.Lastmod.T, c.Lastmod.I))
			}
			return strings.Join(parts, " ")
		}
		if err := split(middle(10)); err != nil {
			t.Fatalf("split at 10: %v", err)
		}
		if got, want := layout(), `min-10@1|1 10-max@1|2`; got != want {
			t.Errorf("after split at 10: %s, want %s", got, want)
		}
		full, err := admin.RunCommand(ctx, bson.D{{Key: "getShardVersion", Value: "app.s"}, {Key: "fullMetadata", Value: true}}).Raw()
		if err != nil {
			t.Fatalf("getShardVersion: %v", err)
		}
		if v, i := full.Lookup("version").Timestamp(); v != 1 || i != 2 || len(mustValues(t, full.Lookup("chunks").Array())) != 2 ||
			full.Lookup("versionEpoch").Type != bson.TypeObjectID || full.Lookup("versionTimestamp").Type != bson.TypeTimestamp {
			t.Errorf("getShardVersion: %s", full)
		}
		expectCode(t, "split at a boundary", split(middle(10)), mongoerr.InvalidOptions, "is a boundary key of existing chunk")
		expectCode(t, "split no args", admin.RunCommand(ctx, bson.D{{Key: "split", Value: "app.s"}}).Err(), mongoerr.InvalidOptions, "need to specify find/bounds or middle")
		expectCode(t, "split bad key", split(bson.E{Key: "middle", Value: bson.D{{Key: "x", Value: 1}}}), mongoerr.InvalidOptions, "is not valid for shard key pattern")
		expectCode(t, "split unsharded", admin.RunCommand(ctx, bson.D{{Key: "split", Value: "app.none"}, middle(1)}).Err(),
			mongoerr.NamespaceNotSharded, "to be sharded")
		if err := split(middle(20)); err != nil {
			t.Fatalf("split at 20: %v", err)
		}
		if got, want := layout(), `min-10@1|1 10-20@1|3 20-max@1|4`; got != want {
			t.Errorf("after split at 20: %s, want %s", got, want)
		}
		// find: the median of the chunk's documents on its shard.
		var docs []any
		for k := 20; k < 30; k++ {
			docs = append(docs, bson.D{{Key: "k", Value: k}})
		}
		if _, err := sc.shards["sh0"].Database("app").Collection("s").InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
		if err := split(bson.E{Key: "find", Value: bson.D{{Key: "k", Value: 21}}}); err != nil {
			t.Fatalf("split find: %v", err)
		}
		if got, want := layout(), `min-10@1|1 10-20@1|3 20-25@1|5 25-max@1|6`; got != want {
			t.Errorf("after split by find: %s, want %s", got, want)
		}
		merge := func(lo, hi any) error {
			return admin.RunCommand(ctx, bson.D{{Key: "mergeChunks", Value: "app.s"}, {Key: "bounds", Value: bson.A{
				bson.D{{Key: "k", Value: lo}}, bson.D{{Key: "k", Value: hi}}}}}).Err()
		}
		expectCode(t, "merge not filling", merge(5, 20), mongoerr.IllegalOperation, "does not contain a sequence of chunks that exactly fills the range")
		if err := merge(bson.MinKey{}, 20); err != nil {
			t.Fatalf("merge: %v", err)
		}
		if got, want := layout(), `min-20@1|7 20-25@1|5 25-max@1|6`; got != want {
			t.Errorf("after merge: %s, want %s", got, want)
		}
		// The router's cache follows the merge incrementally: three chunks at 1|7.
		full, err = admin.RunCommand(ctx, bson.D{{Key: "getShardVersion", Value: "app.s"}, {Key: "fullMetadata", Value: true}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		if v, i := full.Lookup("version").Timestamp(); v != 1 || i != 7 || len(mustValues(t, full.Lookup("chunks").Array())) != 3 {
			t.Errorf("getShardVersion after merge: %s", full)
		}
		var dbv struct {
			Primary string `bson:"primaryShard"`
		}
		if err := admin.RunCommand(ctx, bson.D{{Key: "getShardVersion", Value: "app"}}).Decode(&dbv); err != nil || dbv.Primary != "sh0" {
			t.Errorf("getShardVersion of the database: %+v %v", dbv, err)
		}
	})

	// split with find or bounds takes the chunk's median from splitVector (force) on its
	// owner, for compound and hashed shard keys too.
	t.Run("splitMedianAnyKey", func(t *testing.T) {
		if _, err := shardColl("app.sc", key(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}})); err != nil {
			t.Fatal(err)
		}
		if _, err := shardColl("app.sh", key(bson.D{{Key: "h", Value: "hashed"}})); err != nil {
			t.Fatal(err)
		}
		var cdocs, hdocs []any
		for i := range 20 {
			cdocs = append(cdocs, bson.D{{Key: "a", Value: i % 2}, {Key: "b", Value: i}})
		}
		for i := range 200 {
			hdocs = append(hdocs, bson.D{{Key: "h", Value: i}})
		}
		if _, err := sc.router.Database("app").Collection("sc").InsertMany(ctx, cdocs); err != nil {
			t.Fatal(err)
		}
		if _, err := sc.router.Database("app").Collection("sh").InsertMany(ctx, hdocs); err != nil {
			t.Fatal(err)
		}
		err := admin.RunCommand(ctx, bson.D{{Key: "split", Value: "app.sc"}, {Key: "find", Value: bson.D{{Key: "a", Value: 0}, {Key: "b", Value: 0}}}}).Err()
		if err != nil {
			t.Fatalf("split compound by find: %v", err)
		}
		// 20 keys sorted by (a, b): the 11th is {a: 1, b: 1}.
		_, chunks := sc.collEntry(ctx, t, "app.sc")
		if len(chunks) != 2 || chunks[1].Min.Lookup("a").Int32() != 1 || chunks[1].Min.Lookup("b").Int32() != 1 {
			t.Fatalf("compound chunks after split: %v", chunks)
		}
		_, before := sc.collEntry(ctx, t, "app.sh")
		first := before[0]
		err = admin.RunCommand(ctx, bson.D{{Key: "split", Value: "app.sh"}, {Key: "bounds", Value: bson.A{first.Min, first.Max}}}).Err()
		if err != nil {
			t.Fatalf("split hashed by bounds: %v", err)
		}
		_, after := sc.collEntry(ctx, t, "app.sh")
		if len(after) != len(before)+1 || !bytes.Equal(after[0].Min, first.Min) || !bytes.Equal(after[1].Max, first.Max) ||
			after[1].Min.Lookup("h").Type != bson.TypeInt64 {
			t.Fatalf("hashed chunks after split: %v (before %v)", after, before)
		}
		// A chunk holding a single key value is indivisible.
		if _, err := shardColl("app.one", key(bson.D{{Key: "k", Value: 1}})); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := sc.router.Database("app").Collection("one").InsertOne(ctx, bson.D{{Key: "k", Value: 5}}); err != nil {
				t.Fatal(err)
			}
		}
		expectCode(t, "split single key", admin.RunCommand(ctx, bson.D{{Key: "split", Value: "app.one"}, {Key: "find", Value: bson.D{{Key: "k", Value: 5}}}}).Err(),
			mongoerr.CannotSplit, "Unable to find median in chunk because chunk is indivisible.")
	})

	t.Run("concurrentSplits", func(t *testing.T) {
		if _, err := shardColl("app.cs", key(bson.D{{Key: "k", Value: 1}})); err != nil {
			t.Fatal(err)
		}
		entry, chunks := sc.collEntry(ctx, t, "app.cs")
		epoch := entry.Lookup("lastmodEpoch").ObjectID()
		tt, ti := entry.Lookup("timestamp").Timestamp()
		// Two splitChunk requests for the same chunk, sent straight to its owner at once:
		// exactly one commits, the other fails cleanly and nothing else changes.
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = sc.shards["sh0"].Database("admin").RunCommand(ctx, bson.D{{Key: "splitChunk", Value: "app.cs"},
					{Key: "from", Value: "sh0"}, {Key: "keyPattern", Value: bson.D{{Key: "k", Value: 1}}},
					{Key: "epoch", Value: epoch}, {Key: "timestamp", Value: bson.Timestamp{T: tt, I: ti}},
					{Key: "min", Value: chunks[0].Min}, {Key: "max", Value: chunks[0].Max},
					{Key: "splitKeys", Value: bson.A{bson.D{{Key: "k", Value: 100 * (i + 1)}}}}}).Err()
			}()
		}
		wg.Wait()
		ok, failed := 0, 0
		for _, err := range errs {
			if err == nil {
				ok++
				continue
			}
			if ce := commandErr(t, err); ce.Code == int32(mongoerr.ConflictingOperationInProgress) {
				failed++
			} else {
				t.Errorf("losing split: %v", err)
			}
		}
		if ok != 1 || failed != 1 {
			t.Fatalf("concurrent splits: %v", errs)
		}
		// The config server validates what it commits.
		_, cur := sc.collEntry(ctx, t, "app.cs")
		splitChunk := func(ep bson.ObjectID, min, max bson.Raw, keys ...int) error {
			arr := bson.A{}
			for _, k := range keys {
				arr = append(arr, bson.D{{Key: "k", Value: k}})
			}
			return sc.shards["sh0"].Database("admin").RunCommand(ctx, bson.D{{Key: "splitChunk", Value: "app.cs"},
				{Key: "from", Value: "sh0"}, {Key: "keyPattern", Value: bson.D{{Key: "k", Value: 1}}},
				{Key: "epoch", Value: ep}, {Key: "timestamp", Value: bson.Timestamp{T: tt, I: ti}},
				{Key: "min", Value: min}, {Key: "max", Value: max}, {Key: "splitKeys", Value: arr}}).Err()
		}
		last := cur[len(cur)-1]
		lo := last.Min.Lookup("k").AsInt64()
		expectCode(t, "split point outside", splitChunk(epoch, last.Min, last.Max, int(lo)-1), mongoerr.InvalidOptions, "not contained within chunk")
		expectCode(t, "decreasing split points", splitChunk(epoch, last.Min, last.Max, int(lo)+20, int(lo)+10), mongoerr.InvalidOptions, "strictly increasing order")
		expectCode(t, "split on the lower bound", splitChunk(epoch, last.Min, last.Max, int(lo)), mongoerr.InvalidOptions, "Split on lower bound of chunk")
		expectCode(t, "stale epoch", splitChunk(bson.NewObjectID(), last.Min, last.Max, int(lo)+10), mongoerr.StaleEpoch, "Epoch of collection 'app.cs' has changed")
		_, after := sc.collEntry(ctx, t, "app.cs")
		if len(after) != 2 || after[0].Lastmod != (bson.Timestamp{T: 1, I: 1}) || after[1].Lastmod != (bson.Timestamp{T: 1, I: 2}) {
			t.Errorf("chunks after concurrent splits: %v", after)
		}
	})
}

func keyString(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeMinKey:
		return "min"
	case bson.TypeMaxKey:
		return "max"
	}
	return fmt.Sprint(v.AsInt64())
}

func mustValues(t *testing.T, a bson.RawArray) []bson.RawValue {
	t.Helper()
	vals, err := a.Values()
	if err != nil {
		t.Fatal(err)
	}
	return vals
}
