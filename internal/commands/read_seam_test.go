package commands_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/query/plan"
	"humongo/internal/server"
)

// hideK3 is an ownership filter on the shard key k: the document with k 3 is an orphan.
// Documents without k are owned. on switches it off so the test can look at the orphan.
type hideK3 struct{ on *atomic.Bool }

func (h hideK3) KeyBelongs(doc bsoncore.Document) bool {
	k, ok := doc.Lookup("k").AsInt64OK()
	return !h.on.Load() || !ok || k != 3
}

// Every read of user data goes through the read seam: with an ownership filter installed
// that hides one document of seam.c, no read command sees it and no write targets it, while
// dbHash and dataSize (which MongoDB runs without a shard filter) still count it.
func TestReadSeamOwnershipFilter(t *testing.T) {
	ctx := context.Background()
	var on atomic.Bool
	ts := startServerWith(t, t.TempDir(), func(s *server.Server) error {
		s.State().DB.OwnershipFilterFor = func(ns string) plan.OwnershipFilter {
			if ns != "seam.c" {
				return nil
			}
			return hideK3{&on}
		}
		return nil
	})
	t.Cleanup(func() { ts.close(t) })
	db := ts.cl.Database("seam")
	c := db.Collection("c")
	var docs []any
	for i := 1; i <= 6; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "g", Value: i % 2}})
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("l").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "a"}, {Key: "ref", Value: 3}},
		bson.D{{Key: "_id", Value: "b"}, {Key: "ref", Value: 4}},
	}); err != nil {
		t.Fatal(err)
	}
	on.Store(true)

	ids := func(t *testing.T, open func() (*mongo.Cursor, error)) []int32 {
		t.Helper()
		cur, err := open()
		if err != nil {
			t.Fatal(err)
		}
		var out []bson.Raw
		if err := cur.All(ctx, &out); err != nil {
			t.Fatal(err)
		}
		var got []int32
		for _, d := range out {
			if v, ok := d.Lookup("_id").Int32OK(); ok {
				got = append(got, v)
			}
		}
		return got
	}
	run := func(t *testing.T, cmd bson.D) bson.Raw {
		t.Helper()
		r, err := db.RunCommand(ctx, cmd).Raw()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return r
	}
	countOf := func(t *testing.T, r bson.Raw) int32 {
		t.Helper()
		n, ok := r.Lookup("n").AsInt64OK()
		if !ok {
			t.Fatalf("no n in %v", r)
		}
		return int32(n)
	}

	t.Run("find", func(t *testing.T) {
		for _, f := range []bson.D{
			{},
			{{Key: "k", Value: bson.D{{Key: "$gte", Value: 2}, {Key: "$lte", Value: 4}}}}, // IXSCAN
			{{Key: "g", Value: 1}},
		} {
			got := ids(t, func() (*mongo.Cursor, error) { return c.Find(ctx, f) })
			if slices.Contains(got, 3) || len(got) == 0 {
				t.Errorf("find %v: %v", f, got)
			}
		}
		// The _id point lookup (IDHACK) and a sorted, limited find.
		if got := ids(t, func() (*mongo.Cursor, error) { return c.Find(ctx, bson.D{{Key: "_id", Value: 3}}) }); len(got) != 0 {
			t.Errorf("find {_id: 3}: %v", got)
		}
		got := ids(t, func() (*mongo.Cursor, error) {
			return c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "k", Value: -1}}).SetSkip(2).SetLimit(2))
		})
		if !slices.Equal(got, []int32{4, 2}) {
			t.Errorf("sorted find: %v, want [4 2]", got)
		}
	})

	t.Run("count", func(t *testing.T) {
		if n := countOf(t, run(t, bson.D{{Key: "count", Value: "c"}})); n != 5 {
			t.Errorf("count (fast count path): %d, want 5", n)
		}
		if n := countOf(t, run(t, bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "g", Value: 1}}}})); n != 2 {
			t.Errorf("count {g: 1}: %d, want 2", n)
		}
		if n := countOf(t, run(t, bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 3}}}})); n != 0 {
			t.Errorf("count {_id: 3}: %d, want 0", n)
		}
	})

	t.Run("distinct", func(t *testing.T) {
		r := run(t, bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: "k"}})
		vals, _ := r.Lookup("values").Array().Values()
		if len(vals) != 5 {
			t.Errorf("distinct: %v", vals)
		}
		for _, v := range vals {
			if v.Int32() == 3 {
				t.Errorf("distinct sees the orphan: %v", vals)
			}
		}
	})

	t.Run("aggregate", func(t *testing.T) {
		got := ids(t, func() (*mongo.Cursor, error) {
			return c.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "g", Value: 1}}}}})
		})
		if !slices.Equal(got, []int32{1, 5}) {
			t.Errorf("aggregate $match: %v", got)
		}
		// The $lookup / $graphLookup foreign side and $unionWith read seam.c from seam.l.
		cur, err := db.Collection("l").Aggregate(ctx, mongo.Pipeline{
			{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "c"}, {Key: "localField", Value: "ref"}, {Key: "foreignField", Value: "k"}, {Key: "as", Value: "j"}}}},
			{{Key: "$graphLookup", Value: bson.D{{Key: "from", Value: "c"}, {Key: "startWith", Value: "$ref"}, {Key: "connectFromField", Value: "k"}, {Key: "connectToField", Value: "k"}, {Key: "as", Value: "gl"}}}},
			{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var joined []bson.Raw
		if err := cur.All(ctx, &joined); err != nil {
			t.Fatal(err)
		}
		if len(joined) != 2 {
			t.Fatalf("$lookup: %v", joined)
		}
		for i, want := range []int{0, 1} { // ref 3 joins nothing, ref 4 its document
			for _, as := range []string{"j", "gl"} {
				if vals, _ := joined[i].Lookup(as).Array().Values(); len(vals) != want {
					t.Errorf("%s of %v: %d documents, want %d", as, joined[i].Lookup("_id"), len(vals), want)
				}
			}
		}
		got = ids(t, func() (*mongo.Cursor, error) {
			return db.Collection("l").Aggregate(ctx, mongo.Pipeline{{{Key: "$unionWith", Value: "c"}}})
		})
		if len(got) != 5 || slices.Contains(got, 3) {
			t.Errorf("$unionWith: %v", got)
		}
	})

	t.Run("explain", func(t *testing.T) {
		r := run(t, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: 1}}}}}}},
			{Key: "verbosity", Value: "executionStats"}})
		wp := r.Lookup("queryPlanner", "winningPlan").Document()
		if st := wp.Lookup("stage").StringValue(); st != "SHARDING_FILTER" {
			t.Errorf("winningPlan root %s, want SHARDING_FILTER: %v", st, wp)
		}
		es := r.Lookup("executionStats", "executionStages").Document()
		if es.Lookup("stage").StringValue() != "SHARDING_FILTER" || es.Lookup("chunkSkips").AsInt64() != 1 {
			t.Errorf("executionStages: %v", es)
		}
		// Unfiltered namespaces show no SHARDING_FILTER.
		r = run(t, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "l"}}}})
		if st := r.Lookup("queryPlanner", "winningPlan", "stage").StringValue(); st != "COLLSCAN" {
			t.Errorf("unfiltered winningPlan root %s", st)
		}
	})

	// dbHash and dataSize see every record: the orphan is hashed and sized (as in mongod).
	t.Run("raw scans", func(t *testing.T) {
		hash := func() string {
			return run(t, bson.D{{Key: "dbHash", Value: 1}, {Key: "collections", Value: bson.A{"c"}}}).Lookup("collections", "c").StringValue()
		}
		ds := bson.D{{Key: "dataSize", Value: "seam.c"}, {Key: "keyPattern", Value: bson.D{{Key: "k", Value: 1}}},
			{Key: "min", Value: bson.D{{Key: "k", Value: 0}}}, {Key: "max", Value: bson.D{{Key: "k", Value: 100}}}}
		hidden, dsHidden := hash(), run(t, ds).Lookup("numObjects").AsInt64()
		on.Store(false)
		visible, dsVisible := hash(), run(t, ds).Lookup("numObjects").AsInt64()
		on.Store(true)
		if hidden != visible || dsHidden != 6 || dsVisible != 6 {
			t.Errorf("dbHash %s vs %s, dataSize %d vs %d (want 6)", hidden, visible, dsHidden, dsVisible)
		}
	})

	// The orphan as stored, read with the filter switched off.
	orphan := func(t *testing.T) bson.Raw {
		t.Helper()
		on.Store(false)
		defer on.Store(true)
		r, err := c.FindOne(ctx, bson.D{{Key: "_id", Value: 3}}).Raw()
		if err != nil {
			t.Fatalf("the orphan is gone: %v", err)
		}
		return r
	}

	t.Run("findAndModify", func(t *testing.T) {
		var got bson.Raw
		err := c.FindOneAndUpdate(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: 3}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "fam", Value: true}}}},
			options.FindOneAndUpdate().SetSort(bson.D{{Key: "k", Value: 1}})).Decode(&got)
		if err != nil {
			t.Fatal(err)
		}
		if id := got.Lookup("_id").Int32(); id != 4 {
			t.Errorf("findAndModify picked _id %d, want 4", id)
		}
		if err := c.FindOneAndDelete(ctx, bson.D{{Key: "_id", Value: 3}}).Err(); err != mongo.ErrNoDocuments {
			t.Errorf("findAndModify remove {_id: 3}: %v", err)
		}
		if _, ok := orphan(t).Lookup("fam").BooleanOK(); ok {
			t.Errorf("findAndModify wrote the orphan")
		}
	})

	t.Run("update delete", func(t *testing.T) {
		res, err := c.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: 1}}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.MatchedCount != 5 {
			t.Errorf("updateMany matched %d, want 5", res.MatchedCount)
		}
		if res, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: 2}}}}); err != nil || res.MatchedCount != 0 {
			t.Errorf("updateOne {_id: 3}: %+v, %v", res, err)
		}
		if _, ok := orphan(t).Lookup("u").Int32OK(); ok {
			t.Errorf("an update wrote the orphan")
		}
		if res, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: 3}}); err != nil || res.DeletedCount != 0 {
			t.Errorf("deleteOne {_id: 3}: %+v, %v", res, err)
		}
		dres, err := c.DeleteMany(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$lte", Value: 4}}}})
		if err != nil {
			t.Fatal(err)
		}
		if dres.DeletedCount != 3 {
			t.Errorf("deleteMany deleted %d, want 3", dres.DeletedCount)
		}
		orphan(t) // still there
		if n := countOf(t, run(t, bson.D{{Key: "count", Value: "c"}})); n != 2 {
			t.Errorf("count after deleteMany: %d, want 2", n)
		}
	})
}

// Plans over user data are built only in the read seam (internal/operation/read.go): a
// plan.Prepare/Targets/Count call anywhere else under internal/ (the planner itself aside)
// would read without the ownership filter.
func TestReadSeamIsTheOnlyPlanner(t *testing.T) {
	root := filepath.Join("..")
	seam := filepath.Join(root, "operation", "read.go")
	planner := filepath.Join(root, "query", "plan")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == planner {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == seam {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for _, call := range []string{"plan.Prepare(", "plan.Targets(", "plan.Count("} {
			if strings.Contains(string(src), call) {
				t.Errorf("%s calls %s outside the read seam (%s)", path, call, seam)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The seam itself must still be where this test looks for it.
	src, err := os.ReadFile(seam)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "plan.Prepare(") || checked < 100 {
		t.Fatalf("read seam not found in %s or too few files checked (%d)", seam, checked)
	}
}
