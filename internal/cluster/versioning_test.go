package cluster

// Versioning through two routers (spec: sharding.md "Shard versioning and database
// versioning", "When the routing table cache will refresh"; checklist-sharding.md §1
// "Lazy refresh", "Full vs incremental", "Version protocol", "Transitions", "Conventions"):
// router B caches a namespace's routing, router A changes it (split, merge, drop and
// re-create sharded on another key or unsharded, dropDatabase and re-create on another
// primary), and B's first request must give the right answer, with StaleConfig /
// StaleDbVersion never surfacing through a router, while a stale version sent directly to a
// shard gets MongoDB's error and fields.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
)

// versioning is the state of one versioning test: the cluster, router A (which changes the
// routing) and router B (which cached it before), and a reader of the authoritative catalog.
type versioning struct {
	t    *testing.T
	ctx  context.Context
	d    *Deployment
	a, b *mongo.Client
	cfg  *configclient.Client
}

func (v *versioning) run(cl *mongo.Client, db string, cmd bson.D) bson.Raw {
	v.t.Helper()
	raw, err := cl.Database(db).RunCommand(v.ctx, cmd).Raw()
	if err != nil {
		v.t.Fatalf("%v: %v", cmd, err)
	}
	return raw
}

// catalog reads ns's authoritative routing from the config server: the database entry and
// the routing table (nil when ns is not sharded).
func (v *versioning) catalog(ns string) (catalogcache.Database, *routing.RoutingTable) {
	v.t.Helper()
	db, _, _ := strings.Cut(ns, ".")
	dbe, err := v.cfg.Database(v.ctx, db)
	if err != nil {
		v.t.Fatalf("config.databases %s: %v", db, err)
	}
	coll, chunks, sharded, err := v.cfg.Collection(v.ctx, ns, nil)
	if err != nil {
		v.t.Fatalf("config.collections %s: %v", ns, err)
	}
	if !sharded {
		return dbe, nil
	}
	rt, err := routing.New(coll.UUID, coll.Pattern, coll.Gen, chunks)
	if err != nil {
		v.t.Fatalf("routing table of %s: %v", ns, err)
	}
	return dbe, rt
}

// shardIDs returns the _ids of ns's documents on shard i, read directly (unversioned: every
// document, orphans included), and fails when one is not owned by that shard according to
// the config server.
func (v *versioning) shardIDs(ns string, i int, dbe catalogcache.Database, rt *routing.RoutingTable) []int {
	v.t.Helper()
	db, coll, _ := strings.Cut(ns, ".")
	name := v.d.Shards[i].Topology.Name
	cur, err := v.d.Shards[i].Client.Database(db).Collection(coll).Find(v.ctx, bson.D{})
	if err != nil {
		v.t.Fatalf("direct find on %s: %v", name, err)
	}
	var docs []bson.Raw
	if err := cur.All(v.ctx, &docs); err != nil {
		v.t.Fatalf("direct find on %s: %v", name, err)
	}
	var ids []int
	for _, d := range docs {
		owner := dbe.Primary
		if rt != nil {
			if owner, err = rt.ShardForDoc(bsoncore.Document(d)); err != nil {
				v.t.Fatalf("owner of %s: %v", d, err)
			}
		}
		if owner != name {
			v.t.Errorf("%s: document %s is on %s, its owner is %s", ns, d, name, owner)
		}
		ids = append(ids, intID(v.t, d))
	}
	return ids
}

// placement checks that ns's documents are exactly want, each on the shard owning it, and
// returns how many each shard holds.
func (v *versioning) placement(ns string, want []int) []int {
	v.t.Helper()
	dbe, rt := v.catalog(ns)
	var all []int
	per := make([]int, len(v.d.Shards))
	for i := range v.d.Shards {
		ids := v.shardIDs(ns, i, dbe, rt)
		per[i] = len(ids)
		all = append(all, ids...)
	}
	slices.Sort(all)
	if !slices.Equal(all, want) {
		v.t.Fatalf("%s: the shards hold %d documents %v, want %d %v", ns, len(all), shortIDs(all), len(want), shortIDs(want))
	}
	return per
}

// routerIDs reads every document of ns through cl in small batches (the router's getMore)
// and checks they are exactly want, each once.
func (v *versioning) routerIDs(cl *mongo.Client, ns string, want []int) {
	v.t.Helper()
	db, coll, _ := strings.Cut(ns, ".")
	cur, err := cl.Database(db).Collection(coll).Find(v.ctx, bson.D{}, options.Find().SetBatchSize(7))
	if err != nil {
		v.t.Fatalf("find %s through the router: %v", ns, err)
	}
	var docs []bson.Raw
	if err := cur.All(v.ctx, &docs); err != nil {
		v.t.Fatalf("find %s through the router: %v", ns, err)
	}
	got := make([]int, len(docs))
	for i, d := range docs {
		got[i] = intID(v.t, d)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		v.t.Fatalf("%s through the router: %d documents %v, want %d %v", ns, len(got), shortIDs(got), len(want), shortIDs(want))
	}
}

// routerCount runs the count command through cl and checks n.
func (v *versioning) routerCount(cl *mongo.Client, ns string, filter bson.D, want int) {
	v.t.Helper()
	db, coll, _ := strings.Cut(ns, ".")
	var r struct {
		N int `bson:"n"`
	}
	if err := cl.Database(db).RunCommand(v.ctx, bson.D{{Key: "count", Value: coll}, {Key: "query", Value: filter}}).Decode(&r); err != nil {
		v.t.Fatalf("count %s %v through the router: %v", ns, filter, err)
	}
	if r.N != want {
		v.t.Fatalf("count %s %v through the router: %d, want %d", ns, filter, r.N, want)
	}
}

// insert inserts documents {_id: i, k: i, j: (i*37)%1000} for i in [from, to) through cl,
// unordered: the router sends its per-shard batches at once, with the versions it cached.
func (v *versioning) insert(cl *mongo.Client, ns string, from, to int) {
	v.t.Helper()
	db, coll, _ := strings.Cut(ns, ".")
	docs := make([]any, 0, to-from)
	for i := from; i < to; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "j", Value: (i * 37) % 1000}})
	}
	if _, err := cl.Database(db).Collection(coll).InsertMany(v.ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
		v.t.Fatalf("insert [%d, %d) into %s: %v", from, to, ns, err)
	}
}

// splitHalf splits ns's i-th chunk (of a key hashed on its one field) in the middle of its
// hash range through cl.
func (v *versioning) splitHalf(cl *mongo.Client, ns string, i int) {
	v.t.Helper()
	_, rt := v.catalog(ns)
	ch := rt.Chunks()[i]
	bound := func(d bsoncore.Document, inf int64) int64 {
		e, err := d.IndexErr(0)
		if err != nil {
			v.t.Fatalf("chunk bound %s: %v", d, err)
		}
		if n, ok := e.Value().Int64OK(); ok {
			return n
		}
		return inf // MinKey or MaxKey
	}
	lo, hi := bound(ch.Min, math.MinInt64), bound(ch.Max, math.MaxInt64)
	field := rt.Pattern().Fields()[0]
	v.run(cl, "admin", bson.D{{Key: "split", Value: ns}, {Key: "middle", Value: bson.D{{Key: field, Value: lo/2 + hi/2}}}})
}

// staleDirect sends cmd (with the given versions) to shard i directly and returns the
// command error, which must have code (else the test fails, and ok is false).
func (v *versioning) staleDirect(i int, db string, cmd bson.D, code mongoerr.Code) (ce mongo.CommandError, ok bool) {
	v.t.Helper()
	err := v.d.Shards[i].Client.Database(db).RunCommand(v.ctx, cmd).Err()
	if !errors.As(err, &ce) || ce.Code != int32(code) || ce.Name != code.String() {
		v.t.Errorf("%v sent to %s: %v, want %s", cmd, v.d.Shards[i].Topology.Name, err, code)
		return ce, false
	}
	return ce, true
}

func intID(t *testing.T, d bson.Raw) int {
	t.Helper()
	id, ok := d.Lookup("_id").AsInt64OK()
	if !ok {
		t.Fatalf("document without an integer _id: %s", d)
	}
	return int(id)
}

func idRange(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func shortIDs(ids []int) string {
	if len(ids) <= 12 {
		return fmt.Sprint(ids)
	}
	return fmt.Sprintf("%v...%v", ids[:6], ids[len(ids)-6:])
}

func shardVersionRaw(v routing.ChunkVersion) bson.Raw { return bson.Raw(v.ShardVersionDoc()) }

func chunkVersionField(t *testing.T, raw bson.Raw, field string) routing.ChunkVersion {
	t.Helper()
	val, err := raw.LookupErr(field)
	if err != nil {
		t.Fatalf("no %s in %s", field, raw)
	}
	cv, err := routing.ParseShardVersion(bsoncore.Value{Type: bsoncore.Type(val.Type), Data: val.Value})
	if err != nil {
		t.Fatalf("%s in %s: %v", field, raw, err)
	}
	return cv
}

func dbVersionField(t *testing.T, raw bson.Raw, field string) routing.DatabaseVersion {
	t.Helper()
	val, err := raw.LookupErr(field)
	if err != nil {
		t.Fatalf("no %s in %s", field, raw)
	}
	dv, err := routing.ParseDatabaseVersion(bsoncore.Value{Type: bsoncore.Type(val.Type), Data: val.Value})
	if err != nil {
		t.Fatalf("%s in %s: %v", field, raw, err)
	}
	return dv
}

// A stale router (B cached the routing table before) routes correctly on its first request
// after splits and merges, after drop and re-create of the namespace (sharded on another key,
// unsharded, sharded again) and after dropDatabase and re-create on another primary shard; a
// router cursor opened before a split returns every document once; stale versions sent
// directly to a shard get StaleConfig / StaleDbVersion with MongoDB's fields.
func TestShardedStaleRouterVersioning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	start := time.Now()
	d := Start(t, Topology{Kind: Sharded, Shards: 2, Routers: 2}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	v := &versioning{t: t, ctx: ctx, d: d, a: d.RouterClient(t, 0), b: d.RouterClient(t, 1), cfg: configclient.New(d.Config.Client)}
	const ns = "app.c"
	last := time.Now()
	step := func(name string) { // logs how long the steps before took
		t.Logf("%v; now %s", time.Since(last).Round(time.Millisecond), name)
		last = time.Now()
	}
	c := func(cl *mongo.Client) *mongo.Collection { return cl.Database("app").Collection("c") }

	// Incarnation 1: hashed on k, two chunks per shard; B writes and reads it (and caches
	// its routing).
	v.run(v.a, "admin", bson.D{{Key: "enableSharding", Value: "app"}, {Key: "primaryShard", Value: "shard0"}})
	v.run(v.a, "admin", bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "k", Value: "hashed"}}}})
	v.insert(v.b, ns, 0, 200)
	v.routerIDs(v.b, ns, idRange(0, 200))
	if per := v.placement(ns, idRange(0, 200)); per[0] == 0 || per[1] == 0 {
		t.Fatalf("hashed key: documents per shard %v", per)
	}
	_, rt1 := v.catalog(ns)
	if rt1.NumChunks() != 4 || rt1.Version().Major != 1 || rt1.Version().Minor != 3 {
		t.Fatalf("initial chunks: %d, collection version %v", rt1.NumChunks(), rt1.Version())
	}
	gen1 := rt1.Generation()

	step("split")
	// Split (A): a split of one chunk into two is <Mcv, mcv+1>, <Mcv, mcv+2>; B's first
	// request after it is a read.
	v.splitHalf(v.a, ns, 1)
	_, rt := v.catalog(ns)
	if want := (routing.ChunkVersion{Major: 1, Minor: 5, Generation: gen1}); rt.NumChunks() != 5 || !rt.Version().Equal(want) {
		t.Fatalf("after a split: %d chunks, collection version %v, want 5 and %v", rt.NumChunks(), rt.Version(), want)
	}
	v.routerIDs(v.b, ns, idRange(0, 200))
	// Another split, then B's first request is a targeted count and a write.
	v.splitHalf(v.a, ns, 3)
	v.routerCount(v.b, ns, bson.D{{Key: "k", Value: 150}}, 1)
	v.insert(v.b, ns, 200, 300)
	v.placement(ns, idRange(0, 300))

	step("merge")
	// Merge (A) of two neighbouring chunks of one shard: <Mcv, mcv+1>. B's first request is
	// an update of every document, then a delete by shard key.
	_, rt = v.catalog(ns)
	before := rt.Version()
	var merged bool
	chunks := rt.Chunks()
	for i := 0; i+1 < len(chunks) && !merged; i++ {
		if chunks[i].Shard != chunks[i+1].Shard {
			continue
		}
		v.run(v.a, "admin", bson.D{{Key: "mergeChunks", Value: ns},
			{Key: "bounds", Value: bson.A{bson.Raw(chunks[i].Min), bson.Raw(chunks[i+1].Max)}}})
		merged = true
	}
	if !merged {
		t.Fatalf("no neighbouring chunks on one shard: %v", chunks)
	}
	_, rt = v.catalog(ns)
	if want := (routing.ChunkVersion{Major: before.Major, Minor: before.Minor + 1, Generation: gen1}); !rt.Version().Equal(want) {
		t.Fatalf("after a merge: collection version %v, want %v", rt.Version(), want)
	}
	res, err := c(v.b).UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "seen", Value: true}}}})
	if err != nil || res.MatchedCount != 300 || res.ModifiedCount != 300 {
		t.Fatalf("update through B after a merge: %+v %v", res, err)
	}
	if dr, err := c(v.b).DeleteOne(ctx, bson.D{{Key: "k", Value: 299}}); err != nil || dr.DeletedCount != 1 {
		t.Fatalf("delete through B after a merge: %+v %v", dr, err)
	}
	v.routerCount(v.b, ns, bson.D{{Key: "seen", Value: true}}, 299)
	v.placement(ns, idRange(0, 299))

	step("cursor")
	// A router cursor opened before a split returns every document once.
	cur, err := c(v.b).Find(ctx, bson.D{}, options.Find().SetBatchSize(5))
	if err != nil || !cur.Next(ctx) {
		t.Fatalf("open a cursor through B: %v %v", err, cur.Err())
	}
	seen := map[int]int{intID(t, cur.Current): 1}
	v.splitHalf(v.a, ns, 0)
	v.splitHalf(v.b, ns, 2)
	for cur.Next(ctx) {
		seen[intID(t, cur.Current)]++
	}
	if err := cur.Err(); err != nil {
		t.Fatalf("getMore through B after splits: %v", err)
	}
	for _, i := range idRange(0, 299) {
		if seen[i] != 1 {
			t.Fatalf("cursor across splits: document %d seen %d times (%d distinct)", i, seen[i], len(seen))
		}
	}
	if len(seen) != 299 {
		t.Fatalf("cursor across splits: %d distinct documents", len(seen))
	}
	// Both routers route identically now.
	v.routerIDs(v.a, ns, idRange(0, 299))
	_, rt1 = v.catalog(ns)
	old0, old1 := rt1.ShardVersion("shard0"), rt1.ShardVersion("shard1")

	// Direct to a shard: a version of the current generation that is ahead of the shard (a
	// router that knows of a migration the shard has not seen) and UNSHARDED for a sharded
	// collection are StaleConfig, with ns, vReceived, vWanted and shardId. (vWanted is the
	// shard's known version: splits and merges move nothing, so a shard does not refresh
	// for them and may know an older minor version.)
	ahead := routing.ChunkVersion{Major: old0.Major + 1, Generation: gen1}
	ce, _ := v.staleDirect(0, "app", bson.D{{Key: "find", Value: "c"}, {Key: "shardVersion", Value: shardVersionRaw(ahead)}}, mongoerr.StaleConfig)
	if ns2, _ := ce.Raw.Lookup("ns").StringValueOK(); ns2 != ns || ce.Raw.Lookup("shardId").StringValue() != "shard0" ||
		!chunkVersionField(t, ce.Raw, "vReceived").Equal(ahead) || !chunkVersionField(t, ce.Raw, "vWanted").IsWriteCompatibleWith(old0) {
		t.Fatalf("StaleConfig of a version ahead: %s", ce.Raw)
	}
	ce, _ = v.staleDirect(1, "app", bson.D{{Key: "find", Value: "c"}, {Key: "shardVersion", Value: shardVersionRaw(routing.Unsharded())}}, mongoerr.StaleConfig)
	// (MongoDB checks the generation first: UNSHARDED has none, so "timestamp mismatch".)
	if !strings.Contains(ce.Message, "timestamp mismatch detected for app.c") || !chunkVersionField(t, ce.Raw, "vWanted").IsWriteCompatibleWith(old1) {
		t.Fatalf("StaleConfig of UNSHARDED for a sharded collection: %s", ce.Raw)
	}

	step("incarnation 2")
	// Incarnation 2: A drops and re-shards on another key, hashed on j (a new epoch,
	// timestamp and uuid). B's first request is a write, routed by its old table unless it
	// learns of the new incarnation.
	v.run(v.a, "app", bson.D{{Key: "drop", Value: "c"}})
	v.run(v.a, "admin", bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "j", Value: "hashed"}}}})
	_, rt2 := v.catalog(ns)
	if gen2 := rt2.Generation(); gen2.Epoch == gen1.Epoch || gen1.Timestamp.Compare(gen2.Timestamp) >= 0 || rt2.UUID() == rt1.UUID() {
		t.Fatalf("re-created collection: generation %v uuid %v, dropped one %v %v", gen2, rt2.UUID(), gen1, rt1.UUID())
	}
	v.insert(v.b, ns, 1000, 1100)
	v.placement(ns, idRange(1000, 1100))
	v.routerIDs(v.b, ns, idRange(1000, 1100))
	v.routerCount(v.a, ns, bson.D{{Key: "j", Value: 37}}, 1)

	// Direct to a shard: the dropped incarnation's version is StaleConfig on both shards.
	if ce, ok := v.staleDirect(0, "app", bson.D{{Key: "find", Value: "c"}, {Key: "shardVersion", Value: shardVersionRaw(old0)}}, mongoerr.StaleConfig); ok &&
		(!strings.Contains(ce.Message, "timestamp mismatch detected for app.c") || ce.Raw.Lookup("shardId").StringValue() != "shard0" ||
			!chunkVersionField(t, ce.Raw, "vReceived").Equal(old0) || !chunkVersionField(t, ce.Raw, "vWanted").Equal(rt2.ShardVersion("shard0"))) {
		t.Errorf("StaleConfig of the dropped incarnation: %s", ce.Raw)
	}
	v.staleDirect(1, "app", bson.D{{Key: "find", Value: "c"}, {Key: "shardVersion", Value: shardVersionRaw(old1)}}, mongoerr.StaleConfig)
	// A write with the old version changes nothing.
	r, err := v.d.Shards[1].Client.Database("app").RunCommand(ctx, bson.D{{Key: "insert", Value: "c"},
		{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: -1}, {Key: "k", Value: -1}}}}, {Key: "shardVersion", Value: shardVersionRaw(old1)}}).Raw()
	if code, _ := r.Lookup("writeErrors", "0", "code").AsInt64OK(); code != int64(mongoerr.StaleConfig) || len(r) == 0 {
		t.Errorf("stale versioned insert on shard1: %s %v", r, err)
	}
	v.placement(ns, idRange(1000, 1100))

	step("incarnation 3")
	// Incarnation 3: unsharded, written by A. B's first request is a read, sent with the
	// versions of the hashed incarnation to both shards unless it learns of the new one.
	v.run(v.a, "app", bson.D{{Key: "drop", Value: "c"}})
	v.insert(v.a, ns, 2000, 2050)
	if _, rt := v.catalog(ns); rt != nil {
		t.Fatal("the re-created collection is sharded")
	}
	v.routerIDs(v.b, ns, idRange(2000, 2050))
	v.insert(v.b, ns, 2050, 2060)
	v.routerCount(v.b, ns, bson.D{}, 60)
	if per := v.placement(ns, idRange(2000, 2060)); per[0] != 60 {
		t.Fatalf("unsharded collection off its primary shard: %v", per)
	}
	for i := range 2 {
		if ce, ok := v.staleDirect(i, "app", bson.D{{Key: "find", Value: "c"}, {Key: "shardVersion", Value: shardVersionRaw(rt2.ShardVersion(fmt.Sprintf("shard%d", i)))}},
			mongoerr.StaleConfig); ok && i == 0 && !chunkVersionField(t, ce.Raw, "vWanted").Equal(routing.Unsharded()) {
			t.Errorf("StaleConfig of a sharded version for an unsharded collection: %s", ce.Raw)
		}
	}

	step("incarnation 4")
	// Incarnation 4: sharded again, hashed on k (B cached it unsharded). B's first request is
	// a write, which must reach both shards.
	v.run(v.a, "app", bson.D{{Key: "drop", Value: "c"}})
	v.run(v.a, "admin", bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "k", Value: "hashed"}}}})
	v.insert(v.b, ns, 3000, 3200)
	if per := v.placement(ns, idRange(3000, 3200)); per[0] == 0 || per[1] == 0 {
		t.Fatalf("hashed key: documents per shard %v", per)
	}
	v.routerIDs(v.b, ns, idRange(3000, 3200))

	step("incarnation 5")
	// Incarnation 5: sharded on a ranged key, j, split once (both chunks on the primary); A
	// writes, B's first request is a count, then a find.
	v.run(v.a, "app", bson.D{{Key: "drop", Value: "c"}})
	v.run(v.a, "admin", bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "j", Value: 1}}}})
	// A new range-sharded collection is one chunk at 1|0 on the primary shard.
	if _, rt := v.catalog(ns); rt.NumChunks() != 1 || rt.Version().Major != 1 || rt.Version().Minor != 0 || rt.Chunks()[0].Shard != "shard0" {
		t.Fatalf("new range-sharded collection: %d chunks, version %v", rt.NumChunks(), rt.Version())
	}
	v.run(v.a, "admin", bson.D{{Key: "split", Value: ns}, {Key: "middle", Value: bson.D{{Key: "j", Value: 500}}}})
	v.insert(v.a, ns, 4000, 4100)
	v.routerCount(v.b, ns, bson.D{}, 100)
	v.routerCount(v.b, ns, bson.D{{Key: "j", Value: bson.D{{Key: "$lt", Value: 500}}}}, countJ(4000, 4100, 500))
	v.routerIDs(v.b, ns, idRange(4000, 4100))
	v.placement(ns, idRange(4000, 4100))

	step("drop only")
	// A drop by the stale router: A re-creates the collection (hashed on k), B, which cached
	// incarnation 5, drops it: the current incarnation's catalog entries go, not only what B
	// knew of.
	v.run(v.a, "app", bson.D{{Key: "drop", Value: "c"}})
	v.run(v.a, "admin", bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "k", Value: "hashed"}}}})
	_, rt6 := v.catalog(ns)
	v.run(v.b, "app", bson.D{{Key: "drop", Value: "c"}})
	if _, rt := v.catalog(ns); rt != nil {
		t.Fatalf("config.collections still has %s after a stale router's drop", ns)
	}
	uuid6 := rt6.UUID()
	if n, err := d.Config.Client.Database("config").Collection("chunks").CountDocuments(ctx,
		bson.D{{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: uuid6[:]}}}); err != nil || n != 0 {
		t.Fatalf("config.chunks of the dropped collection after a stale router's drop: %d %v", n, err)
	}
	// A drop without re-creation, seen by A, which cached incarnation 6: its first requests
	// find nothing, its write creates an unsharded collection on the primary shard.
	v.routerIDs(v.a, ns, nil)
	v.routerCount(v.a, ns, bson.D{}, 0)
	v.insert(v.a, ns, 5000, 5010)
	if per := v.placement(ns, idRange(5000, 5010)); per[0] != 10 {
		t.Fatalf("implicitly created unsharded collection: %v", per)
	}

	step("database versions")
	// Database versions: app2 on shard0, B writes and reads its unsharded collection; A drops
	// the database and re-creates it on shard1 (a new database version): B's first request
	// finds the new incarnation's documents only, its writes land on the new primary.
	const ns2 = "app2.u"
	v.run(v.a, "admin", bson.D{{Key: "enableSharding", Value: "app2"}, {Key: "primaryShard", Value: "shard0"}})
	v.insert(v.b, ns2, 0, 20)
	v.routerIDs(v.b, ns2, idRange(0, 20))
	dbv1, _ := v.catalog(ns2)
	v.run(v.a, "app2", bson.D{{Key: "dropDatabase", Value: 1}})
	v.run(v.a, "admin", bson.D{{Key: "enableSharding", Value: "app2"}, {Key: "primaryShard", Value: "shard1"}})
	v.insert(v.a, ns2, 100, 110)
	dbv2, _ := v.catalog(ns2)
	if dbv2.Primary != "shard1" || dbv2.Version.UUID == dbv1.Version.UUID || dbv2.Version.LastMod != 1 {
		t.Fatalf("re-created database: %+v, dropped %+v", dbv2, dbv1)
	}
	v.routerIDs(v.b, ns2, idRange(100, 110))
	v.insert(v.b, ns2, 110, 120)
	v.routerCount(v.b, ns2, bson.D{}, 20)
	if per := v.placement(ns2, idRange(100, 120)); per[1] != 20 {
		t.Fatalf("documents per shard of app2.u: %v", per)
	}
	// Direct: the dropped database's version is StaleDbVersion with db, vReceived and
	// vWanted, on the new primary and on the old one.
	direct := bson.D{{Key: "find", Value: "u"}, {Key: "shardVersion", Value: shardVersionRaw(routing.Unsharded())},
		{Key: "databaseVersion", Value: bson.Raw(dbv1.Version.Doc())}}
	for _, i := range []int{1, 0} {
		ce, ok := v.staleDirect(i, "app2", direct, mongoerr.StaleDbVersion)
		if !ok {
			continue
		}
		if db, _ := ce.Raw.Lookup("db").StringValueOK(); db != "app2" || dbVersionField(t, ce.Raw, "vReceived") != dbv1.Version {
			t.Fatalf("StaleDbVersion on shard%d: %s", i, ce.Raw)
		}
		if i == 1 && dbVersionField(t, ce.Raw, "vWanted") != dbv2.Version {
			t.Fatalf("StaleDbVersion on the new primary: %s", ce.Raw)
		}
	}
	// Again, back to shard0, and B's first request is a write: it lands on the new primary.
	v.run(v.a, "app2", bson.D{{Key: "dropDatabase", Value: 1}})
	v.run(v.a, "admin", bson.D{{Key: "enableSharding", Value: "app2"}, {Key: "primaryShard", Value: "shard0"}})
	v.insert(v.b, ns2, 200, 210)
	if per := v.placement(ns2, idRange(200, 210)); per[0] != 10 {
		t.Fatalf("documents per shard of app2.u: %v", per)
	}
	v.routerIDs(v.a, ns2, idRange(200, 210))

	step("done")
	t.Logf("versioning scenarios done in %v (cluster start included)", time.Since(start))
}

// countJ counts i in [from, to) whose j = (i*37)%1000 is below limit.
func countJ(from, to, limit int) int {
	n := 0
	for i := from; i < to; i++ {
		if (i*37)%1000 < limit {
			n++
		}
	}
	return n
}

// A router whose config server is frozen (SIGSTOP) keeps routing from its cache; a request
// that must refresh fails with mongos's FailedToSatisfyReadPreference in bounded time rather
// than hanging
// (checklist-sharding.md §1 "Refresh caveats"), and routing resumes once the config server
// does.
func TestShardedRouterConfigServerPaused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2, Routers: 2}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	v := &versioning{t: t, ctx: ctx, d: d, a: d.RouterClient(t, 0), b: d.RouterClient(t, 1), cfg: configclient.New(d.Config.Client)}
	const ns = "app.c"
	v.run(v.a, "admin", bson.D{{Key: "enableSharding", Value: "app"}, {Key: "primaryShard", Value: "shard0"}})
	v.run(v.a, "admin", bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "k", Value: "hashed"}}}})
	v.insert(v.b, ns, 0, 100)
	v.routerIDs(v.b, ns, idRange(0, 100))

	cfg := d.Config.Nodes[0]
	if err := cfg.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cfg.Paused() {
			_ = cfg.Resume()
		}
	})
	// From the cache: reads and writes need no refresh.
	t0 := time.Now()
	v.routerIDs(v.b, ns, idRange(0, 100))
	v.insert(v.b, ns, 100, 110)
	v.routerCount(v.b, ns, bson.D{}, 110)
	t.Logf("routed from the cache with the config server paused in %v", time.Since(t0))

	// After flushRouterConfig the router must refresh: an error, in bounded time.
	v.run(v.b, "admin", bson.D{{Key: "flushRouterConfig", Value: ns}})
	t0 = time.Now()
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer rcancel()
	err := v.b.Database("app").RunCommand(rctx, bson.D{{Key: "find", Value: "c"}}).Err()
	took := time.Since(t0)
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.FailedToSatisfyReadPreference) {
		t.Fatalf("find needing a refresh with the config server paused: %v after %v, want FailedToSatisfyReadPreference", err, took)
	}
	t.Logf("find needing a refresh with the config server paused: %s (%d) after %v: %s", ce.Name, ce.Code, took, ce.Message)

	if err := cfg.Resume(); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	v.routerIDs(v.b, ns, idRange(0, 110))
	t.Logf("routing again %v after the config server resumed", time.Since(t0))
}
