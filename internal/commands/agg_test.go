package commands_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// aggServer starts an in-process server with storage and returns a database handle.
func aggServer(t testing.TB) *mongo.Database {
	t.Helper()
	return startTestServer(t).cl.Database("aggtest")
}

func aggInsert(t *testing.T, c *mongo.Collection, docs ...bson.D) {
	t.Helper()
	in := make([]any, len(docs))
	for i, d := range docs {
		in[i] = d
	}
	if _, err := c.InsertMany(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

// aggRun runs pipeline on c and returns the results as extended JSON (canonical-free,
// relaxed) strings for readable comparisons.
func aggRun(t *testing.T, c *mongo.Collection, pipeline any) []string {
	t.Helper()
	cur, err := c.Aggregate(context.Background(), pipeline)
	if err != nil {
		t.Fatalf("aggregate %v: %v", pipeline, err)
	}
	var out []bson.Raw
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatalf("aggregate %v: %v", pipeline, err)
	}
	return aggJSON(out)
}

func aggJSON(docs []bson.Raw) []string {
	s := make([]string, len(docs))
	for i, d := range docs {
		b, err := bson.MarshalExtJSON(d, false, false)
		if err != nil {
			s[i] = err.Error()
			continue
		}
		s[i] = string(b)
	}
	return s
}

func aggWant(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if len(want) == 0 {
		want = nil
	}
	if len(got) == 0 {
		got = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// D builds a bson.D from key, value pairs (keeps the tables short and vet-clean).
func D(kv ...any) bson.D {
	d := make(bson.D, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return d
}

func aggCode(err error) int32 {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, c := range []int{5, 9, 14, 26, 40324, 73, 165, 166, 167, 48, 11000, 20, 40602} {
			if se.HasErrorCode(c) {
				return int32(c)
			}
		}
	}
	return -1
}

func TestAggStageFamilies(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	c := db.Collection("items")
	aggInsert(t, c,
		D("_id", 1, "cat", "a", "n", 1, "tags", bson.A{"x", "y"}),
		D("_id", 2, "cat", "b", "n", 2, "tags", bson.A{"y"}),
		D("_id", 3, "cat", "a", "n", 3, "tags", bson.A{}),
		D("_id", 4, "cat", nil, "n", 4),
	)
	cases := []struct {
		name     string
		pipeline bson.A
		want     []string
	}{
		{"match+project", bson.A{D("$match", D("n", D("$gte", 3))), D("$project", D("n", 1))},
			[]string{`{"_id":3,"n":3}`, `{"_id":4,"n":4}`}},
		{"addFields+set+unset", bson.A{D("$match", D("_id", 1)), D("$addFields", D("m", D("$multiply", bson.A{"$n", 10}))),
			D("$set", D("k", "v")), D("$unset", bson.A{"tags", "cat"})},
			[]string{`{"_id":1,"n":1,"m":10,"k":"v"}`}},
		{"group+sort (null key)", bson.A{D("$group", D("_id", "$cat", "s", D("$sum", "$n"))), D("$sort", D("_id", 1))},
			[]string{`{"_id":null,"s":4}`, `{"_id":"a","s":4}`, `{"_id":"b","s":2}`}},
		{"sort+skip+limit", bson.A{D("$sort", D("n", -1)), D("$skip", 1), D("$limit", 2), D("$project", D("_id", 1))},
			[]string{`{"_id":3}`, `{"_id":2}`}},
		{"count", bson.A{D("$match", D("cat", "a")), D("$count", "c")}, []string{`{"c":2}`}},
		{"unwind", bson.A{D("$unwind", D("path", "$tags", "preserveNullAndEmptyArrays", true, "includeArrayIndex", "i")), D("$project", D("tags", 1, "i", 1))},
			[]string{`{"_id":1,"tags":"x","i":0}`, `{"_id":1,"tags":"y","i":1}`, `{"_id":2,"tags":"y","i":0}`, `{"_id":3,"i":null}`, `{"_id":4,"i":null}`}},
		{"facet", bson.A{D("$facet", D("n", bson.A{D("$count", "k")}, "m", bson.A{D("$match", D("_id", 2)), D("$project", D("_id", 1))}))},
			[]string{`{"n":[{"k":4}],"m":[{"_id":2}]}`}},
		{"bucket", bson.A{D("$bucket", D("groupBy", "$n", "boundaries", bson.A{0, 3, 10}))},
			[]string{`{"_id":0,"count":2}`, `{"_id":3,"count":2}`}},
		{"bucketAuto", bson.A{D("$bucketAuto", D("groupBy", "$n", "buckets", 2))},
			[]string{`{"_id":{"min":1,"max":3},"count":2}`, `{"_id":{"min":3,"max":4},"count":2}`}},
		{"sortByCount", bson.A{D("$match", D("cat", D("$ne", nil))), D("$sortByCount", "$cat")},
			[]string{`{"_id":"a","count":2}`, `{"_id":"b","count":1}`}},
		{"replaceRoot+replaceWith", bson.A{D("$match", D("_id", 2)), D("$replaceRoot", D("newRoot", D("x", "$n"))), D("$replaceWith", D("y", "$x"))},
			[]string{`{"y":2}`}},
		{"sample size", bson.A{D("$sample", D("size", 2)), D("$count", "c")}, []string{`{"c":2}`}},
		{"redact", bson.A{D("$match", D("_id", D("$lte", 2))), D("$redact", D("$cond", bson.A{D("$eq", bson.A{"$cat", "a"}), "$$KEEP", "$$PRUNE"})), D("$project", D("_id", 1))},
			[]string{`{"_id":1}`}},
		{"setWindowFields", bson.A{D("$setWindowFields", D("sortBy", D("n", 1), "output", D("run", D("$sum", "$n", "window", D("documents", bson.A{"unbounded", "current"}))))), D("$project", D("run", 1))},
			[]string{`{"_id":1,"run":1}`, `{"_id":2,"run":3}`, `{"_id":3,"run":6}`, `{"_id":4,"run":10}`}},
		{"densify+fill", bson.A{D("$match", D("_id", D("$in", bson.A{1, 3}))), D("$project", D("_id", 0, "n", 1, "cat", 1)),
			D("$densify", D("field", "n", "range", D("step", 1, "bounds", "full"))), D("$fill", D("sortBy", D("n", 1), "output", D("cat", D("method", "locf"))))},
			[]string{`{"cat":"a","n":1}`, `{"n":2,"cat":"a"}`, `{"cat":"a","n":3}`}},
	}
	for _, tc := range cases {
		got := aggRun(t, c, tc.pipeline)
		if tc.name == "sample size" || tc.name == "densify+fill" {
			// Field order of generated documents is the engine's business; compare loosely.
			if len(got) != len(tc.want) {
				t.Errorf("%s: got %q want %q", tc.name, got, tc.want)
			}
			continue
		}
		aggWant(t, tc.name, got, tc.want...)
	}

	// Joins across two collections.
	o := db.Collection("orders")
	aggInsert(t, o, D("_id", 10, "item", 1), D("_id", 11, "item", 2), D("_id", 12, "item", 9))
	got := aggRun(t, o, bson.A{
		D("$lookup", D("from", "items", "localField", "item", "foreignField", "_id", "as", "it")),
		D("$project", D("c", D("$size", "$it"))),
	})
	aggWant(t, "$lookup", got, `{"_id":10,"c":1}`, `{"_id":11,"c":1}`, `{"_id":12,"c":0}`)
	got = aggRun(t, o, bson.A{
		D("$match", D("_id", 10)),
		D("$lookup", D("from", "items", "let", D("i", "$item"), "pipeline", bson.A{
			D("$match", D("$expr", D("$gt", bson.A{"$n", "$$i"}))), D("$project", D("_id", 1))}, "as", "bigger")),
	})
	aggWant(t, "$lookup pipeline", got, `{"_id":10,"item":1,"bigger":[{"_id":2},{"_id":3},{"_id":4}]}`)
	got = aggRun(t, o, bson.A{D("$unionWith", D("coll", "items", "pipeline", bson.A{D("$match", D("_id", 1)), D("$project", D("_id", 1))})), D("$count", "c")})
	aggWant(t, "$unionWith", got, `{"c":4}`)
	e := db.Collection("emps")
	aggInsert(t, e, D("_id", "a"), D("_id", "b", "boss", "a"), D("_id", "c", "boss", "b"))
	got = aggRun(t, e, bson.A{D("$match", D("_id", "c")),
		D("$graphLookup", D("from", "emps", "startWith", "$boss", "connectFromField", "boss", "connectToField", "_id", "as", "chain")),
		D("$project", D("n", D("$size", "$chain")))})
	aggWant(t, "$graphLookup", got, `{"_id":"c","n":2}`)

	// Collectionless $documents.
	cur, err := db.Aggregate(ctx, bson.A{D("$documents", bson.A{D("x", 1), D("x", 2)}), D("$match", D("x", 2))})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	aggWant(t, "$documents", aggJSON(docs), `{"x":2}`)

	// let variables.
	cur, err = c.Aggregate(ctx, bson.A{D("$match", D("$expr", D("$eq", bson.A{"$n", "$$want"}))), D("$project", D("_id", 1))},
		options.Aggregate().SetLet(D("want", 2)))
	if err != nil {
		t.Fatal(err)
	}
	docs = nil
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	aggWant(t, "let", aggJSON(docs), `{"_id":2}`)
}

func TestAggGetMoreAndCountDocuments(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	c := db.Collection("big")
	const n = 5000
	docs := make([]bson.D, n)
	for i := range docs {
		docs[i] = D("_id", i, "g", i%7, "pad", strings.Repeat("p", 50))
	}
	aggInsert(t, c, docs...)
	// A streaming pipeline across many getMores; writes between batches must not disturb it.
	cur, err := c.Aggregate(ctx, bson.A{D("$match", D("g", D("$ne", 3))), D("$project", D("g", 1))},
		options.Aggregate().SetBatchSize(100))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	batches := 0
	for cur.Next(ctx) {
		seen++
		if cur.RemainingBatchLength() == 0 {
			batches++
			if batches == 3 {
				if _, err := c.InsertOne(ctx, D("_id", -1, "g", 3)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	want := n - (n+3)/7 // g == 3 for i = 3, 10, ...
	if seen != want || batches < 40 {
		t.Fatalf("streamed %d docs in %d batches, want %d docs in >= 40 batches", seen, batches, want)
	}
	// A blocking pipeline's output across getMores.
	cur, err = c.Aggregate(ctx, bson.A{D("$sort", D("g", 1, "_id", -1)), D("$project", D("_id", 1))},
		options.Aggregate().SetBatchSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	var all []bson.Raw
	if err := cur.All(ctx, &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != n+1 {
		t.Fatalf("sorted %d docs, want %d", len(all), n+1)
	}
	// countDocuments is aggregate [{$match}, {$group: {_id: 1, n: {$sum: 1}}}].
	got, err := c.CountDocuments(ctx, D("g", 2))
	if err != nil || got != int64((n-2+6)/7) {
		t.Fatalf("countDocuments = %d, %v; want %d", got, err, (n-2+6)/7)
	}
	got, err = c.CountDocuments(ctx, bson.D{}, options.Count().SetSkip(10).SetLimit(20))
	if err != nil || got != 20 {
		t.Fatalf("countDocuments skip/limit = %d, %v", got, err)
	}
	got, err = db.Collection("missing").CountDocuments(ctx, bson.D{})
	if err != nil || got != 0 {
		t.Fatalf("countDocuments on a missing collection = %d, %v", got, err)
	}
}

func TestAggExplainIXSCAN(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	c := db.Collection("ex")
	for i := 0; i < 50; i++ {
		aggInsert(t, c, D("_id", i, "a", i%10, "b", i))
	}
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: D("a", 1)}); err != nil {
		t.Fatal(err)
	}
	check := func(what string, res bson.Raw, wantStages bool) {
		t.Helper()
		s := res.String()
		if !strings.Contains(s, `"IXSCAN"`) || !strings.Contains(s, `"a_1"`) {
			t.Errorf("%s: no IXSCAN on a_1 in %s", what, s)
		}
		if _, err := res.LookupErr("stages"); (err == nil) != wantStages {
			t.Errorf("%s: stages present = %v, want %v: %s", what, err == nil, wantStages, s)
		}
	}
	pipeline := bson.A{D("$match", D("a", 5)), D("$group", D("_id", "$a", "n", D("$sum", 1)))}
	var res bson.Raw
	err := db.RunCommand(ctx, D("aggregate", "ex", "pipeline", pipeline, "explain", true)).Decode(&res)
	if err != nil {
		t.Fatal(err)
	}
	check("aggregate explain:true", res, true)
	if v := res.Lookup("stages", "0", "$cursor", "queryPlanner", "winningPlan"); v.Type == 0 {
		t.Errorf("no stages[0].$cursor.queryPlanner.winningPlan: %s", res)
	}
	if v := res.Lookup("stages", "1", "$group"); v.Type == 0 {
		t.Errorf("no $group stage after $cursor: %s", res)
	}
	err = db.RunCommand(ctx, D("explain", D("aggregate", "ex", "pipeline", pipeline, "cursor", bson.D{}), "verbosity", "executionStats")).Decode(&res)
	if err != nil {
		t.Fatal(err)
	}
	check("explain command", res, true)
	if v := res.Lookup("stages", "0", "$cursor", "executionStats", "nReturned"); v.Type == 0 {
		t.Errorf("no executionStats.nReturned: %s", res)
	}
	// The whole pipeline pushed down: the find-like shape.
	err = db.RunCommand(ctx, D("aggregate", "ex", "pipeline", bson.A{D("$match", D("a", 5)), D("$sort", D("a", 1))}, "explain", true)).Decode(&res)
	if err != nil {
		t.Fatal(err)
	}
	check("fully pushed down", res, false)
	// And the results use the index correctly.
	got := aggRun(t, c, bson.A{D("$match", D("a", 5)), D("$group", D("_id", "$a", "n", D("$sum", 1)))})
	aggWant(t, "indexed $match + $group", got, `{"_id":5,"n":5}`)
	got = aggRun(t, c, bson.A{D("$sort", D("b", -1)), D("$limit", 2), D("$project", D("b", 1))})
	aggWant(t, "top-k", got, `{"_id":49,"b":49}`, `{"_id":48,"b":48}`)
}

func TestAggOutMerge(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	src := db.Collection("src")
	aggInsert(t, src, D("_id", 1, "k", "a", "v", 1), D("_id", 2, "k", "b", "v", 2), D("_id", 3, "k", "a", "v", 3))
	aggRun(t, src, bson.A{D("$group", D("_id", "$k", "s", D("$sum", "$v"))), D("$out", "totals")})
	tot := db.Collection("totals")
	got := aggRun(t, tot, bson.A{D("$sort", D("_id", 1))})
	aggWant(t, "$out", got, `{"_id":"a","s":4}`, `{"_id":"b","s":2}`)

	// $out replaces the target's contents and keeps its indexes.
	if _, err := tot.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: D("s", 1)}); err != nil {
		t.Fatal(err)
	}
	aggRun(t, src, bson.A{D("$match", D("k", "b")), D("$project", D("_id", 0, "k", 1)), D("$out", "totals")})
	var raw []bson.Raw
	cur, err := tot.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 1 || raw[0].Lookup("k").StringValue() != "b" || raw[0].Lookup("_id").Type != bson.TypeObjectID {
		t.Errorf("$out replace: %v", aggJSON(raw))
	}
	specs, err := tot.Indexes().ListSpecifications(ctx)
	if err != nil || len(specs) != 2 {
		t.Errorf("indexes after $out: %v, %v", specs, err)
	}

	// $out over its own source collection.
	aggRun(t, src, bson.A{D("$match", D("v", D("$gt", 1))), D("$out", "src")})
	if n, _ := src.CountDocuments(ctx, bson.D{}); n != 2 {
		t.Errorf("$out onto its source: %d docs, want 2", n)
	}

	// $out onto its source while the input is still open ($limit stops before its end): the
	// rename must not wait for the pipeline's own read lock.
	aggInsert(t, src, D("_id", 7, "k", "c", "v", 7), D("_id", 8, "k", "c", "v", 8))
	aggRun(t, src, bson.A{D("$addFields", D("v", "$v")), D("$limit", 2), D("$out", "src")})
	if n, _ := src.CountDocuments(ctx, bson.D{}); n != 2 {
		t.Errorf("$out onto its source after $limit: %d docs, want 2", n)
	}

	// Validators apply to $out/$merge output unless bypassDocumentValidation is set.
	if err := db.CreateCollection(ctx, "strict", options.CreateCollection().SetValidator(D("v", D("$gt", 2)))); err != nil {
		t.Fatal(err)
	}
	_, err = src.Aggregate(ctx, bson.A{D("$merge", D("into", "strict"))})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 121 {
		t.Errorf("$merge into a validated collection: %v, want 121", err)
	}
	if _, err := src.Aggregate(ctx, bson.A{D("$merge", D("into", "strict"))}, options.Aggregate().SetBypassDocumentValidation(true)); err != nil {
		t.Errorf("$merge with bypassDocumentValidation: %v", err)
	}
	if n, _ := db.Collection("strict").CountDocuments(ctx, bson.D{}); n != 2 {
		t.Errorf("strict has %d docs after bypassed $merge, want 2", n)
	}

	// $merge: merge into matches, insert the rest.
	m := db.Collection("merged")
	aggInsert(t, m, D("_id", 2, "old", true))
	aggRun(t, src, bson.A{D("$merge", D("into", "merged", "whenMatched", "merge", "whenNotMatched", "insert"))})
	got = aggRun(t, m, bson.A{D("$sort", D("_id", 1))})
	aggWant(t, "$merge", got, `{"_id":2,"old":true,"k":"b","v":2}`, `{"_id":3,"k":"a","v":3}`)
	_, err = src.Aggregate(ctx, bson.A{D("$merge", D("into", "merged", "whenMatched", "fail"))})
	if err == nil {
		t.Error("$merge whenMatched fail on a match succeeded")
	}

	// Invalid targets are rejected before any write.
	for _, bad := range []bson.D{D("$out", "system.bad"), D("$out", D("db", "aggtest", "coll", "a$b"))} {
		if _, err := src.Aggregate(ctx, bson.A{bad}); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "tmp.") || strings.HasPrefix(n, "system.bad") {
			t.Errorf("left-over collection %q", n)
		}
	}
}

func TestAggViews(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	base := db.Collection("people")
	aggInsert(t, base,
		D("_id", 1, "name", "ann", "age", 30, "city", "x"),
		D("_id", 2, "name", "bob", "age", 17, "city", "y"),
		D("_id", 3, "name", "cy", "age", 45, "city", "x"),
		D("_id", 4, "name", "di", "age", 52, "city", "z"),
	)
	if err := db.CreateView(ctx, "adults", "people", bson.A{D("$match", D("age", D("$gte", 18)))}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateView(ctx, "adultNames", "adults", bson.A{D("$project", D("name", 1, "city", 1))}); err != nil {
		t.Fatal(err)
	}
	v := db.Collection("adultNames")
	cur, err := v.Find(ctx, D("city", "x"), options.Find().SetSort(D("name", -1)).SetProjection(D("_id", 0, "name", 1)))
	if err != nil {
		t.Fatal(err)
	}
	var raw []bson.Raw
	if err := cur.All(ctx, &raw); err != nil {
		t.Fatal(err)
	}
	aggWant(t, "find on a view of a view", aggJSON(raw), `{"name":"cy"}`, `{"name":"ann"}`)
	cur, err = v.Find(ctx, bson.D{}, options.Find().SetSort(D("_id", 1)).SetSkip(1).SetLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	raw = nil
	if err := cur.All(ctx, &raw); err != nil {
		t.Fatal(err)
	}
	aggWant(t, "find skip/limit on a view", aggJSON(raw), `{"_id":3,"name":"cy","city":"x"}`)
	if n, err := db.Collection("adults").CountDocuments(ctx, D("city", "x")); err != nil || n != 2 {
		t.Errorf("countDocuments on a view = %d, %v", n, err)
	}
	var cnt bson.Raw
	if err := db.RunCommand(ctx, D("count", "adults", "query", D("age", D("$gt", 40)))).Decode(&cnt); err != nil {
		t.Fatal(err)
	} else if n, _ := cnt.Lookup("n").AsInt64OK(); n != 2 {
		t.Errorf("count on a view: %s", cnt)
	}
	res := v.Distinct(ctx, "city", bson.D{})
	var cities []string
	if err := res.Decode(&cities); err != nil || !reflect.DeepEqual(cities, []string{"x", "z"}) {
		t.Errorf("distinct on a view = %v, %v", cities, err)
	}
	got := aggRun(t, v, bson.A{D("$group", D("_id", "$city", "n", D("$sum", 1))), D("$sort", D("_id", 1))})
	aggWant(t, "aggregate on a view", got, `{"_id":"x","n":2}`, `{"_id":"z","n":1}`)
	// $lookup from a view.
	got = aggRun(t, base, bson.A{D("$match", D("_id", 2)),
		D("$lookup", D("from", "adults", "localField", "city", "foreignField", "city", "as", "same")),
		D("$project", D("n", D("$size", "$same")))})
	aggWant(t, "$lookup from a view", got, `{"_id":2,"n":0}`)

	// Explain through a view shows the resolved pipeline over the base collection.
	var ex bson.Raw
	if err := db.RunCommand(ctx, D("explain", D("find", "adults", "filter", D("city", "x")))).Decode(&ex); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(ex.String(), "aggtest.people") {
		t.Errorf("explain of find on a view: %s", ex)
	}

	// listCollections.
	specs, err := db.ListCollectionSpecifications(ctx, D("type", "view"))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Name != "adultNames" || specs[0].Type != "view" || !specs[0].ReadOnly {
		t.Errorf("listCollections views: %+v", specs)
	}
	var lc bson.Raw
	if err := db.RunCommand(ctx, D("listCollections", 1, "filter", D("name", "adults"))).Decode(&lc); err != nil {
		t.Fatal(err)
	}
	if s := lc.Lookup("cursor", "firstBatch", "0", "options", "viewOn"); s.Type != bson.TypeString || s.StringValue() != "people" {
		t.Errorf("listCollections options.viewOn: %s", lc)
	}

	// Bad definitions.
	err = db.CreateView(ctx, "adults", "people", bson.A{})
	if aggCode(err) != 48 {
		t.Errorf("re-create with another definition: %v", err)
	}
	if err := db.CreateView(ctx, "adults", "people", bson.A{D("$match", D("age", D("$gte", 18)))}); err != nil {
		t.Errorf("identical re-create: %v", err)
	}
	if err := db.CreateCollection(ctx, "adults"); aggCode(err) != 48 {
		t.Errorf("create collection over a view: %v", err)
	}
	if err := db.CreateView(ctx, "v1", "v2", bson.A{}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateView(ctx, "v2", "v1", bson.A{}); aggCode(err) != 5 {
		t.Errorf("view cycle: %v", err)
	}
	prev := "people"
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("d%d", i)
		if err := db.CreateView(ctx, name, prev, bson.A{}); err != nil {
			t.Fatalf("depth %d: %v", i, err)
		}
		prev = name
	}
	if err := db.CreateView(ctx, "d20", prev, bson.A{}); aggCode(err) != 165 {
		t.Errorf("view depth 21: %v", err)
	}
	if err := db.CreateView(ctx, "vo", "people", bson.A{D("$out", "x")}); aggCode(err) != 167 {
		t.Errorf("$out in a view: %v", err)
	}
	if err := db.CreateView(ctx, "vu", "people", bson.A{D("$bogus", 1)}); aggCode(err) != 40324 {
		t.Errorf("unknown stage in a view: %v", err)
	}
	if _, err := base.Aggregate(ctx, bson.A{D("$out", "adults")}); aggCode(err) != 166 {
		t.Errorf("$out into a view: %v", err)
	}

	// Writes to a view are refused (the write path's check, valid_views.go; 166).
	if _, err := db.Collection("adults").InsertOne(ctx, D("x", 1)); aggCode(err) != 166 {
		t.Errorf("insert into a view: %v, want 166", err)
	}

	// drop removes the definition.
	if err := db.Collection("adultNames").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	specs, _ = db.ListCollectionSpecifications(ctx, D("name", "adultNames"))
	if len(specs) != 0 {
		t.Errorf("view still listed after drop: %+v", specs)
	}
}

func TestAggServerStages(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	c := db.Collection("st")
	aggInsert(t, c, D("_id", 1), D("_id", 2))
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: D("x", 1)}); err != nil {
		t.Fatal(err)
	}
	one := func(cur *mongo.Cursor, err error) []bson.Raw {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []bson.Raw
		if err := cur.All(ctx, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	cs := one(c.Aggregate(ctx, bson.A{D("$collStats", D("count", bson.D{}, "storageStats", bson.D{}, "latencyStats", bson.D{}))}))
	if len(cs) != 1 || cs[0].Lookup("count").AsInt64() != 2 || cs[0].Lookup("storageStats", "count").AsInt64() != 2 ||
		cs[0].Lookup("latencyStats", "reads", "ops").Type == 0 || cs[0].Lookup("ns").StringValue() != "aggtest.st" {
		t.Errorf("$collStats: %v", aggJSON(cs))
	}
	// A capped collection's limits, as collStats shows them (the unified format's
	// collectionData-createOptions.json reads storageStats.maxSize).
	if err := db.CreateCollection(ctx, "capped", options.CreateCollection().SetCapped(true).SetSizeInBytes(4096).SetMaxDocuments(10)); err != nil {
		t.Fatal(err)
	}
	cs = one(db.Collection("capped").Aggregate(ctx, bson.A{D("$collStats", D("storageStats", bson.D{}))}))
	capped := func(f string) int64 {
		n, _ := cs[0].Lookup("storageStats", f).AsInt64OK()
		return n
	}
	if len(cs) != 1 || !cs[0].Lookup("storageStats", "capped").Boolean() || capped("maxSize") != 4096 || capped("max") != 10 {
		t.Errorf("$collStats of a capped collection: %v", aggJSON(cs))
	}
	is := one(c.Aggregate(ctx, bson.A{D("$indexStats", bson.D{}), D("$sort", D("name", 1))}))
	if len(is) != 2 || is[0].Lookup("name").StringValue() != "_id_" || is[1].Lookup("key", "x").Type == 0 ||
		is[0].Lookup("accesses", "since").Type != bson.TypeDateTime || is[0].Lookup("host").Type != bson.TypeString {
		t.Errorf("$indexStats: %v", aggJSON(is))
	}
	admin := db.Client().Database("admin")
	lc := one(admin.Aggregate(ctx, bson.A{D("$listCatalog", bson.D{}), D("$match", D("ns", "aggtest.st"))}))
	if len(lc) != 1 || lc[0].Lookup("md", "indexes").Type != bson.TypeArray || lc[0].Lookup("type").StringValue() != "collection" {
		t.Errorf("$listCatalog: %v", aggJSON(lc))
	}
	co := one(admin.Aggregate(ctx, bson.A{D("$currentOp", bson.D{}), D("$match", D("command.aggregate", 1))}))
	if len(co) != 1 {
		t.Errorf("$currentOp should see itself: %v", aggJSON(co))
	}
	if _, err := db.Aggregate(ctx, bson.A{D("$currentOp", bson.D{})}); aggCode(err) != 73 {
		t.Errorf("$currentOp outside admin: %v", err)
	}
	sess, err := db.Client().StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	_ = mongo.WithSession(ctx, sess, func(sc context.Context) error {
		_, err := c.CountDocuments(sc, bson.D{})
		return err
	})
	ls := one(db.Aggregate(ctx, bson.A{D("$listLocalSessions", bson.D{})}))
	if len(ls) == 0 || ls[0].Lookup("_id", "id").Type != bson.TypeBinary {
		t.Errorf("$listLocalSessions: %v", aggJSON(ls))
	}
	if pc := one(c.Aggregate(ctx, bson.A{D("$planCacheStats", bson.D{})})); len(pc) != 0 {
		t.Errorf("$planCacheStats: %v", aggJSON(pc))
	}
	if _, err := c.Aggregate(ctx, bson.A{D("$match", bson.D{}), D("$indexStats", bson.D{})}); aggCode(err) != 40602 {
		t.Errorf("$indexStats not first: %v", err)
	}
}

func TestAggErrors(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	cases := []struct {
		cmd  bson.D
		code int32
	}{
		{D("aggregate", "c", "pipeline", bson.A{D("$bogus", 1)}, "cursor", bson.D{}), 40324},
		{D("aggregate", "c", "pipeline", D("$match", bson.D{}), "cursor", bson.D{}), 14},
		{D("aggregate", "c", "pipeline", bson.A{1}, "cursor", bson.D{}), 14},
		{D("aggregate", "c", "pipeline", bson.A{}), 9},
		{D("aggregate", true, "pipeline", bson.A{}, "cursor", bson.D{}), 9},
		{D("aggregate", 1, "pipeline", bson.A{D("$match", bson.D{})}, "cursor", bson.D{}), 73},
		{D("aggregate", "c", "pipeline", bson.A{}, "cursor", 1), 14},
		{D("aggregate", "c", "pipeline", bson.A{}, "cursor", bson.D{}, "collation", D("locale", "xx_nope")), 2}, // unknown locale: BadValue
		{D("aggregate", "c", "pipeline", bson.A{D("$out", "x"), D("$match", bson.D{})}, "cursor", bson.D{}), 40601},
	}
	for _, tc := range cases {
		err := db.RunCommand(ctx, tc.cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%v: got %v, want code %d", tc.cmd, err, tc.code)
		}
	}
	// A pipeline on a missing collection is empty, not an error.
	cur, err := db.Collection("nope").Aggregate(ctx, bson.A{D("$group", D("_id", nil, "n", D("$sum", 1)))})
	if err != nil {
		t.Fatal(err)
	}
	if cur.Next(ctx) {
		t.Errorf("missing collection produced %s", cur.Current)
	}
	_ = cur.Close(ctx)
}
