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
	"humongo/internal/failpoint"
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

// readCluster is a config server, two shards and a router (server over the Cluster),
// with app.s sharded on {k: 1} (k < 0 on shard0, k >= 0 on shard1), app.u unsharded on
// shard0 (the database's primary), and ref.all: the same documents as app.s on one node,
// the expected answers.
type readCluster struct {
	cfg, sh0, sh1 *repltest.Node
	router        *mongo.Client
	app, ref      *mongo.Database
	st            *service.State
}

const readDocs = 100

func readDoc(i int) bson.D {
	return bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i - readDocs/2}, {Key: "v", Value: (i * 37) % 23},
		{Key: "g", Value: i % 5}, {Key: "s", Value: fmt.Sprintf("s%02d", (i*7)%31)}, {Key: "a", Value: bson.A{i % 3, i % 4}}}
}

func startReadCluster(t testing.TB) *readCluster {
	t.Helper()
	rc := &readCluster{cfg: repltest.StartPrimary(t), sh0: repltest.StartPrimary(t), sh1: repltest.StartPrimary(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	config := rc.cfg.Client.Database("config", options.Database().SetWriteConcern(writeconcern.Majority()))
	insert := func(coll string, d bsoncore.Document) {
		t.Helper()
		if _, err := config.Collection(coll).InsertOne(ctx, bson.Raw(d)); err != nil {
			t.Fatal(err)
		}
	}
	insert("shards", shardregistry.Shard{ID: "shard0", Host: "rs0/" + rc.sh0.Host}.Doc())
	insert("shards", shardregistry.Shard{ID: "shard1", Host: "rs0/" + rc.sh1.Host}.Doc())
	insert("databases", configclient.DatabaseDoc(catalogcache.Database{Name: "app", Primary: "shard0",
		Version: routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 100, I: 1})}))
	p := shardkey.MustParse(mustDoc(bson.D{{Key: "k", Value: 1}}))
	coll := catalogcache.Collection{NS: "app.s", UUID: catalog.NewUUID(), Pattern: p,
		Gen: routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 100, I: 2}}}
	insert("collections", configclient.CollectionDoc(coll, 0))
	mid := mustDoc(bson.D{{Key: "k", Value: 0}})
	for i, ch := range []routing.Chunk{
		{Min: p.GlobalMin(), Max: mid, Shard: "shard0"},
		{Min: mid, Max: p.GlobalMax(), Shard: "shard1"},
	} {
		ch.ID, ch.CollectionUUID = bson.NewObjectID(), coll.UUID
		ch.Version = routing.ChunkVersion{Major: 1, Minor: uint32(i), Generation: coll.Gen}
		insert("chunks", ch.ConfigDoc())
	}
	var docs0, docs1, all []any
	for i := 0; i < readDocs; i++ {
		d := readDoc(i)
		all = append(all, d)
		if i < readDocs/2 {
			docs0 = append(docs0, d)
		} else {
			docs1 = append(docs1, d)
		}
	}
	for _, x := range []struct {
		n    *repltest.Node
		db   string
		docs []any
	}{{rc.sh0, "app", docs0}, {rc.sh1, "app", docs1}, {rc.cfg, "ref", all}} {
		c := "s"
		if x.db == "ref" {
			c = "all"
		}
		// Majority-committed: tests read at majority too (a $lookup's foreign reads carry
		// the aggregate's read concern), and a w:1 write may not be in the snapshot yet.
		if _, err := x.n.Client.Database(x.db).Collection(c, majorityWrites).InsertMany(ctx, x.docs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rc.sh0.Client.Database("app").Collection("u", majorityWrites).InsertMany(ctx, all); err != nil {
		t.Fatal(err)
	}
	cl, err := NewCluster(client.ReplicaSetHosts{SetName: "rs0", Seeds: []string{rc.cfg.Host}},
		client.Options{AppName: "humongos-test", ServerSelectionTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rc.st = service.NewState(service.Config{Params: service.NewParams(ParamSpecs())})
	s, err := server.New(server.Config{Name: "humongos", State: rc.st, Registry: NewRegistry(), Role: Role{}})
	if err != nil {
		t.Fatal(err)
	}
	Attach(rc.st, cl)
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		cl.Close()
	})
	rc.router, err = mongo.Connect(options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.router.Disconnect(context.Background()) })
	rc.app, rc.ref = rc.router.Database("app"), rc.cfg.Client.Database("ref")
	return rc
}

func drainer(t *testing.T, ctx context.Context) func(*mongo.Cursor, error) []bson.Raw {
	return func(cur *mongo.Cursor, err error) []bson.Raw { t.Helper(); return drain(t, ctx, cur, err) }
}

func drain(t *testing.T, ctx context.Context, cur *mongo.Cursor, err error) []bson.Raw {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.Raw
	for cur.Next(ctx) {
		out = append(out, append(bson.Raw(nil), cur.Current...))
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameDocs(t *testing.T, what string, got, want []bson.Raw) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d documents, want %d\n got %v\nwant %v", what, len(got), len(want), got, want)
	}
	for i := range got {
		if !bytesEqual(got[i], want[i]) {
			t.Fatalf("%s: document %d is %s, want %s", what, i, got[i], want[i])
		}
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// explainStage is the router's queryPlanner.winningPlan.stage and its shards' names.
func explainStage(t *testing.T, ctx context.Context, db *mongo.Database, inner bson.D) (string, []string) {
	t.Helper()
	var ex struct {
		QueryPlanner struct {
			WinningPlan struct {
				Stage  string
				Shards []struct {
					ShardName string `bson:"shardName"`
				}
			} `bson:"winningPlan"`
		} `bson:"queryPlanner"`
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "explain", Value: inner}, {Key: "verbosity", Value: "executionStats"}}).Decode(&ex); err != nil {
		t.Fatalf("explain %v: %v", inner, err)
	}
	var names []string
	for _, s := range ex.QueryPlanner.WinningPlan.Shards {
		names = append(names, s.ShardName)
	}
	return ex.QueryPlanner.WinningPlan.Stage, names
}

func TestRouterFind(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dr := drainer(t, ctx)
	s, ref := rc.app.Collection("s"), rc.ref.Collection("all")

	// Targeted: one shard, by the shard key.
	got := dr(s.Find(ctx, bson.D{{Key: "k", Value: 7}}))
	want := dr(ref.Find(ctx, bson.D{{Key: "k", Value: 7}}))
	sameDocs(t, "targeted find", got, want)
	if stage, shards := explainStage(t, ctx, rc.app, bson.D{{Key: "find", Value: "s"}, {Key: "filter", Value: bson.D{{Key: "k", Value: 7}}}}); stage != "SINGLE_SHARD" || !slices.Equal(shards, []string{"shard1"}) {
		t.Fatalf("explain of a targeted find: %s on %v", stage, shards)
	}
	if stage, shards := explainStage(t, ctx, rc.app, bson.D{{Key: "find", Value: "s"}, {Key: "filter", Value: bson.D{{Key: "v", Value: 3}}}}); stage != "SHARD_MERGE" || len(shards) != 2 {
		t.Fatalf("explain of a scatter find: %s on %v", stage, shards)
	}
	if stage, _ := explainStage(t, ctx, rc.app, bson.D{{Key: "find", Value: "s"}, {Key: "sort", Value: bson.D{{Key: "v", Value: 1}}}}); stage != "SHARD_MERGE_SORT" {
		t.Fatalf("explain of a sorted scatter find: %s", stage)
	}

	// Sorted merges across both shards with small batches (getMore on the router pulling
	// from the shards), skip, limit and projections (one dropping a sort field).
	for _, tc := range []struct {
		name string
		opts *options.FindOptionsBuilder
		f    bson.D
	}{
		{"sort v,_id batch 3", options.Find().SetSort(bson.D{{Key: "v", Value: 1}, {Key: "_id", Value: 1}}).SetBatchSize(3), bson.D{}},
		{"sort desc skip limit", options.Find().SetSort(bson.D{{Key: "s", Value: -1}, {Key: "_id", Value: -1}}).SetSkip(7).SetLimit(31).SetBatchSize(4), bson.D{}},
		{"range filter sort k", options.Find().SetSort(bson.D{{Key: "k", Value: 1}}).SetBatchSize(5), bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: -10}, {Key: "$lt", Value: 12}}}}},
		{"projection without the sort field", options.Find().SetSort(bson.D{{Key: "v", Value: -1}, {Key: "k", Value: 1}}).SetProjection(bson.D{{Key: "s", Value: 1}, {Key: "_id", Value: 0}}).SetBatchSize(6).SetLimit(40), bson.D{}},
		{"array sort key", options.Find().SetSort(bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: 1}}).SetBatchSize(7), bson.D{}},
		{"skip past the end", options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetSkip(readDocs + 5), bson.D{}},
	} {
		got := dr(s.Find(ctx, tc.f, tc.opts))
		want := dr(ref.Find(ctx, tc.f, tc.opts))
		sameDocs(t, tc.name, got, want)
	}
	// Unsorted scatter: the same set.
	got = dr(s.Find(ctx, bson.D{}, options.Find().SetBatchSize(9)))
	if len(got) != readDocs {
		t.Fatalf("scatter find: %d documents", len(got))
	}
	// limit without sort across shards: exactly limit documents.
	got = dr(s.Find(ctx, bson.D{}, options.Find().SetLimit(13).SetBatchSize(2)))
	if len(got) != 13 {
		t.Fatalf("scatter find with limit 13: %d documents", len(got))
	}
	// An unsharded collection: its primary shard, cursor through the router.
	got = dr(rc.app.Collection("u").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetBatchSize(10)))
	want = dr(ref.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: -1}})))
	sameDocs(t, "unsharded find", got, want)
	// A database that does not exist: no documents.
	if got := dr(rc.router.Database("nodb").Collection("x").Find(ctx, bson.D{})); len(got) != 0 {
		t.Fatalf("find on a missing database: %v", got)
	}
	// singleBatch closes the cursor after the first batch.
	var fr struct {
		Cursor struct {
			ID         int64      `bson:"id"`
			FirstBatch []bson.Raw `bson:"firstBatch"`
		}
	}
	if err := rc.app.RunCommand(ctx, bson.D{{Key: "find", Value: "s"}, {Key: "batchSize", Value: 5}, {Key: "singleBatch", Value: true}}).Decode(&fr); err != nil || fr.Cursor.ID != 0 || len(fr.Cursor.FirstBatch) != 5 {
		t.Fatalf("singleBatch: %+v %v", fr, err)
	}
}

func TestRouterCursors(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var fr struct {
		Cursor struct {
			ID         int64      `bson:"id"`
			NS         string     `bson:"ns"`
			FirstBatch []bson.Raw `bson:"firstBatch"`
		}
	}
	if err := rc.app.RunCommand(ctx, bson.D{{Key: "find", Value: "s"}, {Key: "sort", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "batchSize", Value: 2}}).Decode(&fr); err != nil {
		t.Fatal(err)
	}
	if fr.Cursor.ID == 0 || fr.Cursor.NS != "app.s" || len(fr.Cursor.FirstBatch) != 2 {
		t.Fatalf("first batch: %+v", fr.Cursor)
	}
	openOn := func(n *repltest.Node) int64 {
		var ss struct {
			Metrics struct {
				Cursor struct {
					Open struct {
						Total int64 `bson:"total"`
					} `bson:"open"`
				} `bson:"cursor"`
			} `bson:"metrics"`
		}
		if err := n.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&ss); err != nil {
			t.Fatal(err)
		}
		return ss.Metrics.Cursor.Open.Total
	}
	if o0, o1 := openOn(rc.sh0), openOn(rc.sh1); o0 != 1 || o1 != 1 {
		t.Fatalf("shard cursors open: %d, %d; want 1 each", o0, o1)
	}
	// getMore with a batchSize, then maxTimeMS refused for a non-tailable cursor.
	var gm struct {
		Cursor struct {
			ID        int64      `bson:"id"`
			NextBatch []bson.Raw `bson:"nextBatch"`
		}
	}
	// (Without a deadline: the driver turns one into maxTimeMS, which getMore refuses. The find
	// above carried one: its leftover bounds this getMore on the router, and the router's
	// getMores to the shards must not turn it into maxTimeMS.)
	if err := rc.app.RunCommand(context.Background(), bson.D{{Key: "getMore", Value: fr.Cursor.ID}, {Key: "collection", Value: "s"}, {Key: "batchSize", Value: 3}}).Decode(&gm); err != nil {
		t.Fatal(err)
	}
	if len(gm.Cursor.NextBatch) != 3 || gm.Cursor.ID != fr.Cursor.ID {
		t.Fatalf("getMore: %+v", gm.Cursor)
	}
	if k := bson.Raw(gm.Cursor.NextBatch[0]).Lookup("k").Int32(); k != -48 {
		t.Fatalf("getMore continues the merge: first k %d, want -48", k)
	}
	var ce mongo.CommandError
	err := rc.app.RunCommand(ctx, bson.D{{Key: "getMore", Value: fr.Cursor.ID}, {Key: "collection", Value: "s"}, {Key: "maxTimeMS", Value: 100}}).Err()
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.BadValue) {
		t.Fatalf("getMore with maxTimeMS: %v", err)
	}
	// Wrong namespace.
	err = rc.app.RunCommand(context.Background(), bson.D{{Key: "getMore", Value: fr.Cursor.ID}, {Key: "collection", Value: "u"}}).Err()
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.Unauthorized) {
		t.Fatalf("getMore on another namespace: %v", err)
	}
	// killCursors kills the router cursor and the shards' cursors.
	var kr struct {
		Killed   []int64 `bson:"cursorsKilled"`
		NotFound []int64 `bson:"cursorsNotFound"`
	}
	if err := rc.app.RunCommand(ctx, bson.D{{Key: "killCursors", Value: "s"}, {Key: "cursors", Value: bson.A{fr.Cursor.ID, int64(12345)}}}).Decode(&kr); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kr.Killed, []int64{fr.Cursor.ID}) || !slices.Equal(kr.NotFound, []int64{12345}) {
		t.Fatalf("killCursors: %+v", kr)
	}
	if o0, o1 := openOn(rc.sh0), openOn(rc.sh1); o0 != 0 || o1 != 0 {
		t.Fatalf("shard cursors open after killCursors: %d, %d", o0, o1)
	}
	err = rc.app.RunCommand(context.Background(), bson.D{{Key: "getMore", Value: fr.Cursor.ID}, {Key: "collection", Value: "s"}}).Err()
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.CursorNotFound) {
		t.Fatalf("getMore after killCursors: %v", err)
	}
	// An exhausted cursor is gone from the router too.
	cur, err := rc.app.Collection("s").Find(ctx, bson.D{}, options.Find().SetBatchSize(30))
	if got := drain(t, ctx, cur, err); len(got) != readDocs {
		t.Fatalf("drained %d", len(got))
	}
	if n := rc.st.Cursors().Len(); n != 0 {
		t.Fatalf("%d router cursors left open", n)
	}
	// The idle reaper (cursorTimeoutMillis) closes router cursors and their shard cursors.
	if err := rc.app.RunCommand(ctx, bson.D{{Key: "find", Value: "s"}, {Key: "batchSize", Value: 1}}).Decode(&fr); err != nil || fr.Cursor.ID == 0 {
		t.Fatalf("find: %+v %v", fr, err)
	}
	if n := rc.st.Cursors().ReapIdle(time.Now().Add(11 * time.Minute)); n != 1 {
		t.Fatalf("reaped %d router cursors, want 1", n)
	}
	if o0, o1 := openOn(rc.sh0), openOn(rc.sh1); o0 != 0 || o1 != 0 {
		t.Fatalf("shard cursors open after the reaper: %d, %d", o0, o1)
	}
}

func TestRouterCountDistinctList(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, q := range []bson.D{
		{},
		{{Key: "k", Value: bson.D{{Key: "$gte", Value: 10}}}},
		{{Key: "v", Value: bson.D{{Key: "$lt", Value: 9}}}},
	} {
		for _, lim := range [][2]int64{{0, 0}, {5, 0}, {0, 20}, {7, 15}, {90, 30}} {
			cmd := bson.D{{Key: "count", Value: "s"}, {Key: "query", Value: q}}
			refCmd := bson.D{{Key: "count", Value: "all"}, {Key: "query", Value: q}}
			if lim[0] > 0 {
				cmd, refCmd = append(cmd, bson.E{Key: "skip", Value: lim[0]}), append(refCmd, bson.E{Key: "skip", Value: lim[0]})
			}
			if lim[1] > 0 {
				cmd, refCmd = append(cmd, bson.E{Key: "limit", Value: lim[1]}), append(refCmd, bson.E{Key: "limit", Value: lim[1]})
			}
			var got, want struct{ N int64 }
			if err := rc.app.RunCommand(ctx, cmd).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if err := rc.ref.RunCommand(ctx, refCmd).Decode(&want); err != nil {
				t.Fatal(err)
			}
			if got.N != want.N {
				t.Fatalf("count %v skip/limit %v: %d, want %d", q, lim, got.N, want.N)
			}
		}
	}
	for _, key := range []string{"v", "g", "a", "s"} {
		var got, want struct{ Values []any }
		if err := rc.app.RunCommand(ctx, bson.D{{Key: "distinct", Value: "s"}, {Key: "key", Value: key}}).Decode(&got); err != nil {
			t.Fatal(err)
		}
		if err := rc.ref.RunCommand(ctx, bson.D{{Key: "distinct", Value: "all"}, {Key: "key", Value: key}}).Decode(&want); err != nil {
			t.Fatal(err)
		}
		strs := func(vs []any) []string {
			out := make([]string, 0, len(vs))
			for _, v := range vs {
				out = append(out, fmt.Sprintf("%T:%v", v, v))
			}
			slices.Sort(out)
			return out
		}
		g, w := strs(got.Values), strs(want.Values)
		if !slices.Equal(g, w) {
			t.Fatalf("distinct %s: %s, want %s", key, g, w)
		}
	}
	// Collated: "Zz" on shard0 and "zZ" on shard1 are one value at strength 2, and a sorted
	// merge orders them by the collation.
	if _, err := rc.sh0.Client.Database("app").Collection("s").InsertOne(ctx, bson.D{{Key: "_id", Value: "c0"}, {Key: "k", Value: -1000}, {Key: "s", Value: "Zz"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.sh1.Client.Database("app").Collection("s").InsertOne(ctx, bson.D{{Key: "_id", Value: "c1"}, {Key: "k", Value: 1000}, {Key: "s", Value: "zZ"}}); err != nil {
		t.Fatal(err)
	}
	ci := bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 2}}
	var dv struct{ Values []any }
	if err := rc.app.RunCommand(ctx, bson.D{{Key: "distinct", Value: "s"}, {Key: "key", Value: "s"},
		{Key: "query", Value: bson.D{{Key: "s", Value: bson.D{{Key: "$gt", Value: "y"}}}}}, {Key: "collation", Value: ci}}).Decode(&dv); err != nil {
		t.Fatal(err)
	}
	if len(dv.Values) != 1 {
		t.Fatalf("collated distinct: %v, want one of Zz/zZ", dv.Values)
	}
	cur, err := rc.app.Collection("s").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "s", Value: -1}, {Key: "k", Value: 1}}).
		SetCollation(&options.Collation{Locale: "en", Strength: 1}).SetLimit(3).SetBatchSize(1))
	got := drain(t, ctx, cur, err)
	if len(got) != 3 || got[0].Lookup("_id").StringValue() != "c0" || got[1].Lookup("_id").StringValue() != "c1" {
		t.Fatalf("collated sorted merge: %v", got)
	}
	// config.* lives on the config servers (sh.status() reads it through the router).
	shards := drainer(t, ctx)(rc.router.Database("config").Collection("shards").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})))
	if len(shards) != 2 || shards[0].Lookup("_id").StringValue() != "shard0" {
		t.Fatalf("config.shards through the router: %v", shards)
	}
	if n, err := rc.router.Database("config").Collection("chunks").CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("config.chunks count through the router: %d %v", n, err)
	}
	names, err := rc.app.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"s", "u"}) {
		t.Fatalf("listCollections: %v", names)
	}
	specs, err := rc.app.Collection("s").Indexes().ListSpecifications(ctx)
	if err != nil || len(specs) != 1 || specs[0].Name != "_id_" {
		t.Fatalf("listIndexes: %v %v", specs, err)
	}
}

func TestRouterAggregate(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dr := drainer(t, ctx)
	s, ref := rc.app.Collection("s"), rc.ref.Collection("all")
	type pipe = bson.A
	d := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	for _, tc := range []struct {
		name     string
		pl       pipe
		unsorted bool // compare as sets
	}{
		{"group all accumulators", pipe{
			d("$match", d("k", d("$gte", -20))),
			d("$group", bson.D{{Key: "_id", Value: "$g"}, {Key: "sum", Value: d("$sum", "$v")}, {Key: "avg", Value: d("$avg", "$v")},
				{Key: "min", Value: d("$min", "$s")}, {Key: "max", Value: d("$max", "$k")}, {Key: "n", Value: d("$count", bson.D{})},
				{Key: "one", Value: d("$sum", 1)}}),
			d("$sort", d("_id", 1)),
		}, false},
		{"group push and addToSet (sorted after)", pipe{
			d("$group", bson.D{{Key: "_id", Value: "$v"}, {Key: "ks", Value: d("$push", "$k")}, {Key: "gs", Value: d("$addToSet", "$g")}}),
			d("$project", bson.D{{Key: "ks", Value: d("$sortArray", bson.D{{Key: "input", Value: "$ks"}, {Key: "sortBy", Value: 1}})},
				{Key: "gs", Value: d("$sortArray", bson.D{{Key: "input", Value: "$gs"}, {Key: "sortBy", Value: 1}})}}),
			d("$sort", d("_id", -1)),
		}, false},
		{"group with a router-only accumulator", pipe{
			d("$group", bson.D{{Key: "_id", Value: "$g"}, {Key: "sd", Value: d("$stdDevPop", "$v")}}),
			d("$sort", d("_id", 1)),
		}, false},
		{"sort skip limit", pipe{d("$sort", bson.D{{Key: "v", Value: -1}, {Key: "_id", Value: 1}}), d("$skip", 3), d("$limit", 17)}, false},
		{"project then sort", pipe{d("$project", bson.D{{Key: "x", Value: d("$multiply", bson.A{"$v", "$g"})}}), d("$sort", bson.D{{Key: "x", Value: 1}, {Key: "_id", Value: 1}})}, false},
		{"count", pipe{d("$match", d("v", d("$gt", 4))), d("$count", "n")}, false},
		{"count nothing", pipe{d("$match", d("v", d("$gt", 400))), d("$count", "n")}, false},
		{"targeted", pipe{d("$match", d("k", d("$gte", 10))), d("$sort", d("k", 1))}, false},
		{"unwind and group", pipe{d("$unwind", "$a"), d("$group", bson.D{{Key: "_id", Value: "$a"}, {Key: "n", Value: d("$sum", 1)}}), d("$sort", d("_id", 1))}, false},
		{"limit unsorted", pipe{d("$limit", 200), d("$project", d("k", 1))}, true},
		{"sort then group first", pipe{d("$sort", bson.D{{Key: "k", Value: -1}}), d("$group", bson.D{{Key: "_id", Value: "$g"}, {Key: "first", Value: d("$first", "$k")}}), d("$sort", d("_id", 1))}, false},
	} {
		got := dr(s.Aggregate(ctx, tc.pl, options.Aggregate().SetBatchSize(4)))
		want := dr(ref.Aggregate(ctx, tc.pl))
		if tc.unsorted {
			cmp := func(a, b bson.Raw) int { return int(a.Lookup("_id").Int32() - b.Lookup("_id").Int32()) }
			slices.SortFunc(got, func(a, b bson.Raw) int { return int(cmp(a, b)) })
			slices.SortFunc(want, func(a, b bson.Raw) int { return int(cmp(a, b)) })
		}
		sameDocs(t, tc.name, got, want)
	}
	var ce mongo.CommandError
	// Between unsharded collections on the same primary shard: passed through.
	joined := dr(rc.app.Collection("u").Aggregate(ctx, pipe{d("$match", d("k", d("$lt", -45))), d("$sort", d("_id", 1)),
		d("$lookup", bson.D{{Key: "from", Value: "u"}, {Key: "localField", Value: "g"}, {Key: "foreignField", Value: "_id"}, {Key: "as", Value: "j"}})}))
	if len(joined) != 5 {
		t.Fatalf("$lookup between unsharded collections: %d documents", len(joined))
	}
	for _, j := range joined {
		if arr, ok := j.Lookup("j").ArrayOK(); !ok || len(mustValues(t, arr)) != 1 {
			t.Fatalf("$lookup between unsharded collections: %s", j)
		}
	}
	_, err := s.Aggregate(ctx, pipe{d("$count", "$bad")})
	if !errors.As(err, &ce) || ce.Code != 40158 {
		t.Fatalf("$count with a bad field: %v", err)
	}
	// explain of a split pipeline.
	var ex struct {
		MergeType     string `bson:"mergeType"`
		SplitPipeline struct {
			ShardsPart []bson.Raw `bson:"shardsPart"`
			MergerPart []bson.Raw `bson:"mergerPart"`
		} `bson:"splitPipeline"`
		Shards bson.Raw `bson:"shards"`
	}
	if err := rc.app.RunCommand(ctx, bson.D{{Key: "aggregate", Value: "s"}, {Key: "pipeline", Value: pipe{d("$group", bson.D{{Key: "_id", Value: "$g"}, {Key: "n", Value: d("$sum", 1)}})}},
		{Key: "explain", Value: true}}).Decode(&ex); err != nil {
		t.Fatal(err)
	}
	if ex.MergeType != "mongos" || len(ex.SplitPipeline.ShardsPart) != 1 || len(ex.SplitPipeline.MergerPart) != 2 ||
		ex.Shards.Lookup("shard0").Type == 0 || ex.Shards.Lookup("shard1").Type == 0 {
		t.Fatalf("aggregate explain: %+v", ex)
	}
}

// BenchmarkRouterFind compares, on the same machine and data, a find by shard key and a
// scatter-gather find with sort and limit 100 through the router against the same queries on
// one node holding all the documents (issue 12's router overhead targets).
func BenchmarkRouterFind(b *testing.B) {
	rc := startReadCluster(b)
	ctx := context.Background()
	s, ref := rc.app.Collection("s"), rc.ref.Collection("all")
	sortLimit := options.Find().SetSort(bson.D{{Key: "v", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(100)
	for _, bc := range []struct {
		name string
		coll *mongo.Collection
		run  func(c *mongo.Collection) error
	}{
		{"byShardKey/router", s, func(c *mongo.Collection) error { return c.FindOne(ctx, bson.D{{Key: "k", Value: 7}}).Err() }},
		{"byShardKey/node", ref, func(c *mongo.Collection) error { return c.FindOne(ctx, bson.D{{Key: "k", Value: 7}}).Err() }},
		{"sortLimit100/router", s, func(c *mongo.Collection) error {
			cur, err := c.Find(ctx, bson.D{}, sortLimit)
			if err != nil {
				return err
			}
			return cur.All(ctx, &[]bson.Raw{})
		}},
		{"sortLimit100/node", ref, func(c *mongo.Collection) error {
			cur, err := c.Find(ctx, bson.D{}, sortLimit)
			if err != nil {
				return err
			}
			return cur.All(ctx, &[]bson.Raw{})
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.run(bc.coll); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A shard answering StaleConfig makes the router refresh and retry (the client never sees
// it); another error from a shard reaches the client with the shard's code.
func TestRouterStaleRetryAndShardErrors(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fp := failpoint.Get("failCommand")
	t.Cleanup(fp.Disable)
	// Only the router's connections to its shards carry this appName; they are internal
	// (a member's handshake), which failCommand spares unless told otherwise.
	fail := func(code int32, times int64) {
		fp.Configure(failpoint.Times, times, 0, mustDoc(bson.D{{Key: "failCommands", Value: bson.A{"count", "distinct"}},
			{Key: "appName", Value: "humongos-test"}, {Key: "failInternalCommands", Value: true}, {Key: "errorCode", Value: code},
			{Key: "errorExtraInfo", Value: bson.D{{Key: "ns", Value: "app.s"}}}}))
	}
	before := fp.TimesEntered()
	fail(int32(mongoerr.StaleConfig), 2)
	var cnt struct{ N int64 }
	if err := rc.app.RunCommand(ctx, bson.D{{Key: "count", Value: "s"}}).Decode(&cnt); err != nil || cnt.N != readDocs {
		t.Fatalf("count after StaleConfig: %+v %v", cnt, err)
	}
	if entered := fp.TimesEntered() - before; entered < 2 {
		t.Fatalf("the fail point was entered %d times, want 2", entered)
	}
	fail(int32(mongoerr.BadValue), 1)
	var ce mongo.CommandError
	err := rc.app.RunCommand(ctx, bson.D{{Key: "distinct", Value: "s"}, {Key: "key", Value: "v"}}).Err()
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.BadValue) {
		t.Fatalf("distinct with a failing shard: %v", err)
	}
}

func mustValues(t *testing.T, a bson.RawArray) []bson.RawValue {
	t.Helper()
	vs, err := a.Values()
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// majorityWrites makes a test's set-up writes majority-committed.
var majorityWrites = options.Collection().SetWriteConcern(writeconcern.Majority())
