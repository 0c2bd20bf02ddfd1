package commands_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The $lookup family's foreign reads and memory bounds (issue 10).

func lookupSetParam(t *testing.T, db *mongo.Database, name string, v int64) {
	t.Helper()
	if err := db.Client().Database("admin").RunCommand(context.Background(), D("setParameter", 1, name, v)).Err(); err != nil {
		t.Fatalf("setParameter %s: %v", name, err)
	}
}

func lookupIndexOps(t *testing.T, c *mongo.Collection, index string) int64 {
	t.Helper()
	cur, err := c.Aggregate(context.Background(), bson.A{D("$indexStats", bson.D{})})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(context.Background(), &docs); err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.Lookup("name").StringValue() == index {
			return d.Lookup("accesses", "ops").AsInt64()
		}
	}
	t.Fatalf("no index %s", index)
	return 0
}

func lookupRun(t *testing.T, c *mongo.Collection, pipeline bson.A) []bson.Raw {
	t.Helper()
	cur, err := c.Aggregate(context.Background(), pipeline)
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.Raw
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func lookupRender(docs []bson.Raw) string {
	var b strings.Builder
	for _, d := range docs {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestLookupForeignIndex: with an index on foreignField (connectToField), $lookup and
// $graphLookup query the foreign collection through it, one index access per probe, and
// answer what the hash join and the streamed scan answer.
func TestLookupForeignIndex(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	local, foreign := db.Collection("l"), db.Collection("f")
	for i := range 20 {
		aggInsert(t, local, D("_id", i, "k", i%7, "arr", bson.A{i, i + 100}))
		aggInsert(t, foreign, D("_id", i, "v", i%5, "next", i+1, "s", fmt.Sprint("x", i)))
	}
	aggInsert(t, foreign, D("_id", 100, "v", bson.A{3, 4}), D("_id", 101), D("_id", 102, "v", nil))
	aggInsert(t, local, D("_id", 50), D("_id", 51, "k", nil))
	pipelines := []bson.A{
		{D("$lookup", D("from", "f", "localField", "k", "foreignField", "v", "as", "j")), D("$sort", D("_id", 1))},
		{D("$lookup", D("from", "f", "localField", "arr", "foreignField", "v", "as", "j")), D("$sort", D("_id", 1))},
		{D("$lookup", D("from", "f", "localField", "k", "foreignField", "v", "as", "j",
			"pipeline", bson.A{D("$project", D("s", 1))})), D("$sort", D("_id", 1))},
		{D("$graphLookup", D("from", "f", "startWith", "$k", "connectFromField", "next", "connectToField", "_id",
			"as", "g", "maxDepth", 3, "depthField", "d")), D("$sort", D("_id", 1))},
		{D("$graphLookup", D("from", "f", "startWith", "$k", "connectFromField", "next", "connectToField", "v",
			"as", "g", "depthField", "d")), D("$sort", D("_id", 1))},
		{D("$lookup", D("from", "f", "let", D("kk", "$k"), "as", "j",
			"pipeline", bson.A{D("$match", D("$expr", D("$eq", bson.A{"$v", "$$kk"}))), D("$project", D("s", 1))})), D("$sort", D("_id", 1))},
	}
	indexOf := []string{"v_1", "v_1", "v_1", "_id_", "v_1", "v_1"}
	norm := func(docs []bson.Raw) string {
		// Matches come in index order from an index and in natural order otherwise: compare
		// each document's matches as a set.
		var out []string
		for _, d := range docs {
			var m bson.M
			if err := bson.Unmarshal(d, &m); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"j", "g"} {
				if a, ok := m[f].(bson.A); ok {
					s := make([]string, len(a))
					for i, e := range a {
						s[i] = fmt.Sprint(e)
					}
					sortStrings(s)
					m[f] = strings.Join(s, "|")
				}
			}
			out = append(out, fmt.Sprint(m["_id"], m["j"], m["g"]))
		}
		return strings.Join(out, "\n")
	}
	var hashed, scanned []string
	for _, p := range pipelines {
		hashed = append(hashed, norm(lookupRun(t, local, p)))
	}
	// A foreign collection larger than the cache is scanned per probe.
	lookupSetParam(t, db, "internalDocumentSourceLookupCacheSizeBytes", 1)
	for i, p := range pipelines {
		scanned = append(scanned, norm(lookupRun(t, local, p)))
		if scanned[i] != hashed[i] {
			t.Errorf("pipeline %d: scan\n%s\nhash join\n%s", i, scanned[i], hashed[i])
		}
	}
	if _, err := foreign.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: D("v", 1)}); err != nil {
		t.Fatal(err)
	}
	for i, p := range pipelines {
		before := lookupIndexOps(t, foreign, indexOf[i])
		got := norm(lookupRun(t, local, p))
		if got != hashed[i] {
			t.Errorf("pipeline %d: indexed\n%s\nhash join\n%s", i, got, hashed[i])
		}
		// One probe per input document (one fewer for $graphLookup, whose missing
		// startWith probes nothing).
		if n := lookupIndexOps(t, foreign, indexOf[i]) - before; n < 21 {
			t.Errorf("pipeline %d: %d accesses of %s, want one per input document or more", i, n, indexOf[i])
		}
	}
	// A view as the foreign side: its pipeline runs, then the probe's $match.
	if err := db.RunCommand(ctx, D("create", "fv", "viewOn", "f", "pipeline", bson.A{D("$match", D("_id", D("$lt", 1000)))})).Err(); err != nil {
		t.Fatal(err)
	}
	for i, p := range pipelines {
		vp := append(bson.A{}, p...)
		st := vp[0].(bson.D)
		spec := append(bson.D{}, st[0].Value.(bson.D)...)
		spec[0].Value = "fv"
		vp[0] = bson.D{{Key: st[0].Key, Value: spec}}
		if got := norm(lookupRun(t, local, vp)); got != hashed[i] {
			t.Errorf("pipeline %d from a view\n%s\nwant\n%s", i, got, hashed[i])
		}
	}
	// An index helps even when the cache would hold the collection.
	lookupSetParam(t, db, "internalDocumentSourceLookupCacheSizeBytes", 100<<20)
	before := lookupIndexOps(t, foreign, "v_1")
	if got := norm(lookupRun(t, local, pipelines[0])); got != hashed[0] {
		t.Errorf("indexed with cache\n%s\nwant\n%s", got, hashed[0])
	}
	if n := lookupIndexOps(t, foreign, "v_1") - before; n < 21 {
		t.Errorf("%d accesses of v_1, want 21 or more", n)
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func lookupWantErr(t *testing.T, err error, code int32, name, msg string) {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		var se mongo.ServerError
		if errors.As(err, &se) && se.HasErrorCode(int(code)) {
			return
		}
		t.Fatalf("got %v, want %d (%s)", err, code, name)
	}
	if ce.Code != code || ce.Name != name || (msg != "" && ce.Message != msg) {
		t.Errorf("got %d (%s) %q\nwant %d (%s) %q", ce.Code, ce.Name, ce.Message, code, name, msg)
	}
}

// TestLookupResultTooLarge: one document's $lookup matches may not exceed
// internalLookupStageIntermediateDocumentMaxSizeBytes (its smallest allowed value is
// BSONObjMaxInternalSize, 16 MB + 16 KB): 4568, as in document_source_lookup.cpp.
func TestLookupResultTooLarge(t *testing.T) {
	db := aggServer(t)
	local, foreign := db.Collection("l"), db.Collection("big")
	const limit = 16*1024*1024 + 16*1024
	lookupSetParam(t, db, "internalLookupStageIntermediateDocumentMaxSizeBytes", limit)
	pad := strings.Repeat("x", 1<<20)
	for i := range 18 {
		aggInsert(t, foreign, D("_id", i, "k", 1, "pad", pad))
	}
	aggInsert(t, local, D("_id", 1, "k", 1))
	for _, p := range []bson.A{
		{D("$lookup", D("from", "big", "localField", "k", "foreignField", "k", "as", "j"))},
		{D("$lookup", D("from", "big", "pipeline", bson.A{}, "as", "j"))},
	} {
		_, err := local.Aggregate(context.Background(), p)
		lookupWantErr(t, err, 4568, "Location4568",
			fmt.Sprintf("Total size of documents in big matching pipeline's $lookup stage exceeds %d bytes", limit))
	}
	// Under the limit it runs.
	lookupRun(t, local, bson.A{D("$lookup", D("from", "big", "localField", "k", "foreignField", "k", "as", "j",
		"pipeline", bson.A{D("$limit", 3)}))})
}

// TestGraphLookupMemoryLimit: $graphLookup's visited documents and frontier are bounded by
// internalDocumentSourceGraphLookupMaxMemoryBytes: 40099, as in
// document_source_graph_lookup.cpp (7.0 does not spill them).
func TestGraphLookupMemoryLimit(t *testing.T) {
	db := aggServer(t)
	local, foreign := db.Collection("l"), db.Collection("chain")
	for i := range 50 {
		aggInsert(t, foreign, D("_id", i, "next", i+1, "pad", strings.Repeat("y", 100)))
	}
	aggInsert(t, local, D("_id", 1, "start", 0))
	p := bson.A{D("$graphLookup", D("from", "chain", "startWith", "$start", "connectFromField", "next",
		"connectToField", "_id", "as", "g"))}
	out := lookupRun(t, local, p)
	if n := lookupLen(t, out[0], "g"); n != 50 {
		t.Fatalf("%d documents found, want 50", n)
	}
	lookupSetParam(t, db, "internalDocumentSourceGraphLookupMaxMemoryBytes", 2000)
	_, err := local.Aggregate(context.Background(), p)
	lookupWantErr(t, err, 40099, "Location40099", "$graphLookup reached maximum memory consumption")
	// A search that fits still runs.
	p[0] = D("$graphLookup", D("from", "chain", "startWith", "$start", "connectFromField", "next",
		"connectToField", "_id", "as", "g", "maxDepth", 2))
	if out := lookupRun(t, local, p); lookupLen(t, out[0], "g") != 3 {
		t.Fatalf("maxDepth 2: %s", lookupRender(out))
	}
}

// TestUnionWithStreams: $unionWith reads its collection in chunks, each under its own lock
// and snapshot: a chunk read after a getMore sees what was inserted meanwhile (as a find
// cursor that yields does), and a cursor paused inside it does not hold the foreign
// collection: a drop of that collection between getMores does not wait for the cursor.
func TestUnionWithStreams(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	local, foreign := db.Collection("l"), db.Collection("u")
	aggInsert(t, local, D("_id", -1))
	docs := make([]bson.D, 3000)
	for i := range docs {
		docs[i] = D("_id", i)
	}
	aggInsert(t, foreign, docs...)
	cur, err := local.Aggregate(ctx, bson.A{D("$unionWith", "u")}, options.Aggregate().SetBatchSize(10))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	n := 0
	for n < 20 && cur.Next(ctx) {
		n++
	}
	if n != 20 {
		t.Fatalf("read %d documents: %v", n, cur.Err())
	}
	// Later chunks are read later: a document inserted now, past the first chunk, is seen
	// (the whole collection read at the first batch would not have it).
	aggInsert(t, foreign, D("_id", 5000))
	seen := false
	for cur.Next(ctx) {
		n++
		if cur.Current.Lookup("_id").AsInt64() == 5000 {
			seen = true
		}
	}
	if err := cur.Err(); err != nil || n != 3002 || !seen {
		t.Fatalf("read %d documents (want 3002), inserted one seen: %v, err %v", n, seen, err)
	}
	cur, err = local.Aggregate(ctx, bson.A{D("$unionWith", "u")}, options.Aggregate().SetBatchSize(10))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	for n = 0; n < 20 && cur.Next(ctx); n++ {
	}
	dctx, cancel := context.WithTimeout(ctx, 10e9)
	defer cancel()
	if err := foreign.Drop(dctx); err != nil {
		t.Fatalf("drop while a $unionWith cursor is open: %v", err)
	}
}

func lookupLen(t *testing.T, d bson.Raw, field string) int {
	t.Helper()
	vals, err := d.Lookup(field).Array().Values()
	if err != nil {
		t.Fatal(err)
	}
	return len(vals)
}
