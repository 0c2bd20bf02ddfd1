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

	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
)

// TestRouterLookupFamily runs $lookup, $graphLookup and $unionWith through the router with a
// sharded local side, a sharded foreign side or both, and compares each answer with the same
// pipeline on one node holding all the data (readCluster: app.s sharded over both shards,
// app.u unsharded on shard0, ref.all the same documents as either).
func TestRouterLookupFamily(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dr := drainer(t, ctx)
	d := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	sortedAs := func(field string) bson.D { // the joined array in _id order (its order is unspecified)
		return d("$set", d(field, bson.D{{Key: "$sortArray", Value: bson.D{{Key: "input", Value: "$" + field}, {Key: "sortBy", Value: d("_id", 1)}}}}))
	}
	type pipeFn func(from string) bson.A
	lookupEq := func(local, foreign string) pipeFn {
		return func(from string) bson.A {
			return bson.A{d("$match", d("v", d("$lt", 8))),
				d("$lookup", bson.D{{Key: "from", Value: from}, {Key: "localField", Value: local}, {Key: "foreignField", Value: foreign}, {Key: "as", Value: "j"}}),
				sortedAs("j"), d("$sort", d("_id", 1))}
		}
	}
	lookupLet := func(from string) bson.A {
		return bson.A{d("$match", d("g", 1)),
			d("$lookup", bson.D{{Key: "from", Value: from}, {Key: "let", Value: bson.D{{Key: "kk", Value: "$k"}, {Key: "vv", Value: "$v"}}},
				{Key: "pipeline", Value: bson.A{
					d("$match", d("$expr", bson.D{{Key: "$and", Value: bson.A{
						d("$eq", bson.A{"$v", "$$vv"}), d("$ne", bson.A{"$k", "$$kk"})}}})),
					d("$project", bson.D{{Key: "k", Value: 1}, {Key: "sum", Value: d("$add", bson.A{"$k", "$$kk"})}})}},
				{Key: "as", Value: "j"}}),
			sortedAs("j"), d("$sort", d("_id", 1))}
	}
	graph := func(from string) bson.A {
		return bson.A{d("$match", d("k", d("$in", bson.A{-50, -3, 7, 40}))),
			d("$graphLookup", bson.D{{Key: "from", Value: from}, {Key: "startWith", Value: "$v"}, {Key: "connectFromField", Value: "g"},
				{Key: "connectToField", Value: "_id"}, {Key: "as", Value: "path"}, {Key: "maxDepth", Value: 2}, {Key: "depthField", Value: "depth"}}),
			sortedAs("path"), d("$sort", d("_id", 1))}
	}
	union := func(from string) bson.A {
		return bson.A{d("$match", d("k", d("$gte", 40))), d("$project", bson.D{{Key: "k", Value: 1}}),
			d("$unionWith", bson.D{{Key: "coll", Value: from}, {Key: "pipeline", Value: bson.A{
				d("$match", d("k", d("$lt", -40))), d("$project", bson.D{{Key: "k", Value: 1}, {Key: "from", Value: "other"}})}}}),
			d("$sort", bson.D{{Key: "k", Value: 1}, {Key: "_id", Value: 1}})}
	}
	ref := rc.ref.Collection("all")
	for _, tc := range []struct {
		name, local, foreign string
		pl                   pipeFn
		wantN                int
	}{
		{"sharded local, unsharded foreign", "s", "u", lookupEq("g", "_id"), 35},
		{"unsharded local, sharded foreign, by the shard key", "u", "s", lookupEq("v", "k"), 35},
		{"sharded local and foreign, by the shard key", "s", "s", lookupEq("k", "k"), 35},
		{"sharded local and foreign, not by the shard key", "s", "s", lookupEq("g", "v"), 35},
		{"let and pipeline, sharded foreign", "u", "s", lookupLet, 20},
		{"let and pipeline, both sharded", "s", "s", lookupLet, 20},
		{"graphLookup over a sharded collection", "u", "s", graph, 4},
		{"graphLookup from a sharded collection", "s", "u", graph, 4},
		{"unionWith a sharded collection", "u", "s", union, 20},
		{"unionWith from a sharded collection", "s", "u", union, 20},
		{"unionWith, both sharded", "s", "s", union, 20},
	} {
		got := dr(rc.app.Collection(tc.local, options.Collection().SetReadConcern(readconcern.Majority())).
			Aggregate(ctx, tc.pl(tc.foreign), options.Aggregate().SetBatchSize(3)))
		want := dr(ref.Aggregate(ctx, tc.pl("all")))
		if len(want) < tc.wantN {
			t.Fatalf("%s: the reference has %d documents, want at least %d", tc.name, len(want), tc.wantN)
		}
		sameDocs(t, tc.name, got, want)
	}
	// A foreign collection in a database that does not exist joins nothing.
	got := dr(rc.app.Collection("s").Aggregate(ctx, bson.A{d("$match", d("k", 0)),
		d("$lookup", bson.D{{Key: "from", Value: bson.D{{Key: "db", Value: "nodb"}, {Key: "coll", Value: "x"}}}, {Key: "localField", Value: "k"}, {Key: "foreignField", Value: "k"}, {Key: "as", Value: "j"}})}))
	if len(got) != 1 || len(got[0].Lookup("j").Array()) > 5 {
		t.Fatalf("$lookup from a missing database: %v", got)
	}
}

// TestRouterOutMerge runs $out and $merge through the router from a sharded collection into
// unsharded targets (same and another database) and compares the targets with the same
// pipelines on one node; a sharded target is refused.
func TestRouterOutMerge(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dr := drainer(t, ctx)
	d := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	s, ref := rc.app.Collection("s"), rc.ref.Collection("all")
	contents := func(c *mongo.Collection) []bson.Raw {
		return dr(c.Find(ctx, bson.D{}, options.Find().SetSort(d("_id", 1))))
	}

	// $out into a new collection of the same database, then over it again (replacing it,
	// keeping its indexes), then into another database.
	outPl := func(to any) bson.A {
		return bson.A{d("$group", bson.D{{Key: "_id", Value: "$g"}, {Key: "n", Value: d("$sum", 1)}, {Key: "ks", Value: d("$sum", "$k")}}), d("$out", to)}
	}
	dr(s.Aggregate(ctx, outPl("outc")))
	dr(ref.Aggregate(ctx, outPl("outc")))
	sameDocs(t, "$out", contents(rc.app.Collection("outc")), contents(rc.ref.Collection("outc")))
	if _, err := rc.app.Collection("outc").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: d("n", 1)}); err != nil {
		t.Fatal(err)
	}
	dr(s.Aggregate(ctx, bson.A{d("$match", d("k", d("$gte", 0))), d("$group", bson.D{{Key: "_id", Value: "$v"}, {Key: "n", Value: d("$sum", 1)}}), d("$out", "outc")}))
	dr(ref.Aggregate(ctx, bson.A{d("$match", d("k", d("$gte", 0))), d("$group", bson.D{{Key: "_id", Value: "$v"}, {Key: "n", Value: d("$sum", 1)}}), d("$out", "outc")}))
	sameDocs(t, "$out over an existing target", contents(rc.app.Collection("outc")), contents(rc.ref.Collection("outc")))
	specs, err := rc.app.Collection("outc").Indexes().ListSpecifications(ctx)
	if err != nil || len(specs) != 2 {
		t.Fatalf("$out keeps the target's indexes: %v %v", specs, err)
	}
	// otherdb's primary is shard1 (the test's config server is no configsvr: it cannot
	// create databases, so the entry is written here).
	if _, err := rc.cfg.Client.Database("config", options.Database().SetWriteConcern(writeconcern.Majority())).Collection("databases").InsertOne(ctx,
		bson.Raw(configclient.DatabaseDoc(catalogcache.Database{Name: "otherdb", Primary: "shard1",
			Version: routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 100, I: 1})}))); err != nil {
		t.Fatal(err)
	}
	dr(s.Aggregate(ctx, outPl(bson.D{{Key: "db", Value: "otherdb"}, {Key: "coll", Value: "o"}})))
	dr(ref.Aggregate(ctx, outPl(bson.D{{Key: "db", Value: "refother"}, {Key: "coll", Value: "o"}})))
	sameDocs(t, "$out into another database", contents(rc.router.Database("otherdb").Collection("o")),
		contents(rc.cfg.Client.Database("refother").Collection("o")))
	if n, err := rc.sh1.Client.Database("app").Collection("outc").CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("$out's target must live on the primary shard only; shard1 has %d (%v)", n, err)
	}
	if n, err := rc.sh1.Client.Database("otherdb").Collection("o").CountDocuments(ctx, bson.D{}); err != nil || n != 5 {
		t.Fatalf("$out into otherdb must write its primary shard1; it has %d (%v)", n, err)
	}

	// $merge with each whenMatched mode into a target holding some documents.
	for _, mode := range []bson.D{
		{{Key: "whenMatched", Value: "merge"}, {Key: "whenNotMatched", Value: "insert"}},
		{{Key: "whenMatched", Value: "replace"}, {Key: "whenNotMatched", Value: "discard"}},
		{{Key: "whenMatched", Value: "keepExisting"}, {Key: "whenNotMatched", Value: "insert"}},
		{{Key: "whenMatched", Value: bson.A{d("$set", d("n", d("$add", bson.A{"$n", "$$new.n"})))}}, {Key: "whenNotMatched", Value: "insert"}},
	} {
		for _, c := range []*mongo.Collection{rc.app.Collection("mt"), rc.ref.Collection("mt")} {
			// Emptied, not dropped: a drop through the router runs on the primary shard's
			// drop coordinator, which these plain replica-set "shards" do not have.
			if _, err := c.DeleteMany(ctx, bson.D{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 0}, {Key: "n", Value: 100}, {Key: "old", Value: true}},
				bson.D{{Key: "_id", Value: 3}, {Key: "n", Value: 300}}, bson.D{{Key: "_id", Value: 99}, {Key: "n", Value: 9}}}); err != nil {
				t.Fatal(err)
			}
		}
		pl := bson.A{d("$group", bson.D{{Key: "_id", Value: "$g"}, {Key: "n", Value: d("$sum", 1)}}),
			d("$merge", append(bson.D{{Key: "into", Value: "mt"}}, mode...))}
		dr(s.Aggregate(ctx, pl))
		dr(ref.Aggregate(ctx, pl))
		sameDocs(t, fmt.Sprint("$merge ", mode), contents(rc.app.Collection("mt")), contents(rc.ref.Collection("mt")))
	}
	// whenMatched fail: the duplicate is the shard's error.
	_, err = s.Aggregate(ctx, bson.A{d("$merge", bson.D{{Key: "into", Value: "mt"}, {Key: "whenMatched", Value: "fail"}})})
	var ce mongo.ServerError
	if !errors.As(err, &ce) || !ce.HasErrorCode(int(mongoerr.DuplicateKey)) {
		t.Fatalf("$merge whenMatched fail: %v", err)
	}

	// Sharded targets.
	_, err = rc.app.Collection("u").Aggregate(ctx, bson.A{d("$out", "s")})
	if !errors.As(err, &ce) || !ce.HasErrorCode(28769) {
		t.Fatalf("$out into a sharded collection: %v", err)
	}
	_, err = s.Aggregate(ctx, bson.A{d("$merge", d("into", "s"))})
	if !errors.As(err, &ce) || !ce.HasErrorCode(int(mongoerr.CommandNotSupported)) {
		t.Fatalf("$merge into a sharded collection: %v", err)
	}
}

// TestRouterResolverTargets checks the foreign-read seam: a probe by the foreign collection's
// shard key reaches one shard and is reported as index-served (so later probes are targeted
// queries too); any other probe is a scatter-gather with no index, and both return exactly
// the matching documents.
func TestRouterResolverTargets(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := clusterOf(rc.st).Load()
	rr := &routerResolver{c: c}
	count := func(what string, filter bson.D, wantIndex string, wantShards, wantDocs int) {
		t.Helper()
		src, index, err := rr.Query(ctx, "app", "s", mustDoc(filter))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		if index != wantIndex {
			t.Fatalf("%s: index %q, want %q", what, index, wantIndex)
		}
		if n := len(src.(*mergeSource).cursors); n != wantShards {
			t.Fatalf("%s: %d shards, want %d", what, n, wantShards)
		}
		n := 0
		for {
			_, ok, err := src.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			n++
		}
		if n != wantDocs {
			t.Fatalf("%s: %d documents, want %d", what, n, wantDocs)
		}
	}
	count("by the shard key", bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{3, 7, 9}}}}}, "shardKey", 1, 3)
	count("by the shard key on both shards", bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{-3, 7}}}}}, "", 2, 2)
	count("by another field", bson.D{{Key: "g", Value: 2}}, "", 2, 20)
	all, err := rr.Open(ctx, "app", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	n := 0
	for {
		_, ok, err := all.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		n++
	}
	if n != readDocs {
		t.Fatalf("Open: %d documents, want %d", n, readDocs)
	}
	if src, err := rr.Open(ctx, "nodb", "x"); err != nil {
		t.Fatal(err)
	} else if _, ok, _ := src.Next(ctx); ok {
		t.Fatal("a collection of a missing database has documents")
	}
}

// BenchmarkRouterLookup times a $lookup of all 100 documents of the sharded app.s into the
// unsharded app.u (and the reverse, into the sharded side by its shard key) through the
// router, next to the same pipeline on one node holding all the data.
func BenchmarkRouterLookup(b *testing.B) {
	rc := startReadCluster(b)
	ctx := context.Background()
	d := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	pl := func(from, local, foreign string) bson.A {
		return bson.A{d("$lookup", bson.D{{Key: "from", Value: from}, {Key: "localField", Value: local}, {Key: "foreignField", Value: foreign}, {Key: "as", Value: "j"}})}
	}
	run := func(b *testing.B, c *mongo.Collection, p bson.A) {
		for b.Loop() {
			cur, err := c.Aggregate(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			var out []bson.Raw
			if err := cur.All(ctx, &out); err != nil || len(out) != readDocs {
				b.Fatalf("%d documents, %v", len(out), err)
			}
		}
	}
	b.Run("router/sharded-into-unsharded", func(b *testing.B) { run(b, rc.app.Collection("s"), pl("u", "g", "_id")) })
	b.Run("router/unsharded-into-sharded-by-key", func(b *testing.B) { run(b, rc.app.Collection("u"), pl("s", "v", "k")) })
	b.Run("one-node", func(b *testing.B) { run(b, rc.ref.Collection("all"), pl("all", "g", "_id")) })
}

// TestRouterExplainRouterJoins: explain of a pipeline whose $lookup or $out runs on the router
// shows the split (the join and the output in the merger part) and writes nothing.
func TestRouterExplainRouterJoins(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	for _, tc := range []struct {
		coll string
		pl   bson.A
	}{
		{"u", bson.A{d("$match", d("g", 1)), d("$lookup", bson.D{{Key: "from", Value: "s"}, {Key: "localField", Value: "k"}, {Key: "foreignField", Value: "k"}, {Key: "as", Value: "j"}})}},
		{"s", bson.A{d("$match", d("g", 1)), d("$out", "explained")}},
	} {
		var ex struct {
			MergeType     string `bson:"mergeType"`
			SplitPipeline struct {
				ShardsPart []bson.Raw `bson:"shardsPart"`
				MergerPart []bson.Raw `bson:"mergerPart"`
			} `bson:"splitPipeline"`
		}
		if err := rc.app.RunCommand(ctx, bson.D{{Key: "aggregate", Value: tc.coll}, {Key: "pipeline", Value: tc.pl}, {Key: "explain", Value: true}}).Decode(&ex); err != nil {
			t.Fatal(err)
		}
		if ex.MergeType != "mongos" || len(ex.SplitPipeline.ShardsPart) != 1 || len(ex.SplitPipeline.MergerPart) != 2 {
			t.Fatalf("explain of %v: %+v", tc.pl, ex)
		}
	}
	names, err := rc.app.ListCollectionNames(ctx, d("name", "explained"))
	if err != nil || len(names) != 0 {
		t.Fatalf("explain wrote its $out: %v %v", names, err)
	}
}
