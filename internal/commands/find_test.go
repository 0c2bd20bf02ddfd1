package commands_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/failpoint"
	"humongo/internal/index"
	"humongo/internal/operation"
	"humongo/internal/service"
)

// findEnv is an in-process server with storage and a driver client.
type findEnv struct {
	t      *testing.T
	db     *operation.DB
	params *service.Params
	cl     *mongo.Client
}

func findStart(t *testing.T) *findEnv {
	t.Helper()
	ts := startTestServer(t)
	return &findEnv{t: t, db: ts.db, params: ts.params, cl: ts.cl}
}

// insert writes docs straight through the collection write path (not the insert command, so
// these tests exercise only the read side).
func (e *findEnv) insert(ns string, docs ...bson.D) {
	e.t.Helper()
	raw := make([]bsoncore.Document, len(docs))
	for i, d := range docs {
		b, err := bson.Marshal(d)
		if err != nil {
			e.t.Fatal(err)
		}
		raw[i] = b
	}
	op := e.db.NewOp(context.Background())
	defer op.Close()
	err := op.WriteCollection(context.Background(), ns, true, func(coll *index.Collection) error {
		_, err := coll.InsertDocuments(op.RU, raw)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *findEnv) run(cmd bson.D) (bson.Raw, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if len(cmd) > 0 && cmd[0].Key == "getMore" {
		// A deadline makes the driver send maxTimeMS, which MongoDB refuses on a getMore
		// of a non-awaitData cursor.
		ctx = context.Background()
	}
	return e.cl.Database("test").RunCommand(ctx, cmd).Raw()
}

func (e *findEnv) must(cmd bson.D) bson.Raw {
	e.t.Helper()
	r, err := e.run(cmd)
	if err != nil {
		e.t.Fatalf("%v: %v", cmd, err)
	}
	return r
}

func findCode(t *testing.T, err error, code int32) {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		var se mongo.ServerError
		if errors.As(err, &se) && se.HasErrorCode(int(code)) {
			return
		}
		t.Fatalf("want error code %d, got %v", code, err)
	}
	if ce.Code != code {
		t.Fatalf("want error code %d, got %d (%s)", code, ce.Code, ce.Message)
	}
}

func (e *findEnv) seq(ns string, n int) {
	e.t.Helper()
	docs := make([]bson.D, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 10}, {Key: "b", Value: i}, {Key: "s", Value: fmt.Sprintf("k%04d", i)}}
	}
	e.insert(ns, docs...)
}

func batchLen(r bson.Raw, field string) (int, int64) {
	cur := r.Lookup("cursor").Document()
	arr, _ := cur.Lookup(field).Array().Values()
	return len(arr), cur.Lookup("id").Int64()
}

func TestFindBatchingAcrossGetMore(t *testing.T) {
	e := findStart(t)
	e.seq("test.c", 250)
	r := e.must(bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 100}})
	n, id := batchLen(r, "firstBatch")
	if n != 100 || id == 0 {
		t.Fatalf("first batch %d id %d", n, id)
	}
	if ns := r.Lookup("cursor", "ns").StringValue(); ns != "test.c" {
		t.Fatalf("ns %q", ns)
	}
	// find's cursor document lists firstBatch before id and ns.
	els, _ := r.Lookup("cursor").Document().Elements()
	if els[0].Key() != "firstBatch" || els[1].Key() != "id" || els[2].Key() != "ns" {
		t.Fatalf("cursor field order %v", r.Lookup("cursor"))
	}
	r = e.must(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 100}})
	if n, id2 := batchLen(r, "nextBatch"); n != 100 || id2 != id {
		t.Fatalf("second batch %d id %d", n, id2)
	}
	r = e.must(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 100}})
	if n, id2 := batchLen(r, "nextBatch"); n != 50 || id2 != 0 {
		t.Fatalf("third batch %d id %d", n, id2)
	}
	_, err := e.run(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}})
	findCode(t, err, 43)

	// Default first batch is 101; the driver's cursor sees all documents in _id order.
	r = e.must(bson.D{{Key: "find", Value: "c"}})
	if n, _ := batchLen(r, "firstBatch"); n != 101 {
		t.Fatalf("default first batch %d", n)
	}
	cur, err := e.cl.Database("test").Collection("c").Find(context.Background(), bson.D{}, options.Find().SetBatchSize(7))
	if err != nil {
		t.Fatal(err)
	}
	var all []bson.M
	if err := cur.All(context.Background(), &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 250 {
		t.Fatalf("driver cursor saw %d docs", len(all))
	}
}

func TestFindKillCursorsAndErrors(t *testing.T) {
	e := findStart(t)
	e.seq("test.c", 20)
	// One explicit session for the find and the wrong-namespace getMore: the driver's pool
	// may hand two implicit commands different sessions, and the session check (50738)
	// comes before the namespace check.
	sess, err := e.cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	sctx := mongo.NewSessionContext(context.Background(), sess)
	r, err := e.cl.Database("test").RunCommand(sctx, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 2}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	_, id := batchLen(r, "firstBatch")
	err = e.cl.Database("test").RunCommand(sctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "other"}}).Err()
	findCode(t, err, 13)
	r = e.must(bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{id, int64(12345)}}})
	killed, _ := r.Lookup("cursorsKilled").Array().Values()
	nf, _ := r.Lookup("cursorsNotFound").Array().Values()
	if len(killed) != 1 || killed[0].Int64() != id || len(nf) != 1 || nf[0].Int64() != 12345 {
		t.Fatalf("killCursors reply %v", r)
	}
	for _, k := range []string{"cursorsAlive", "cursorsUnknown"} {
		if _, err := r.LookupErr(k); err != nil {
			t.Fatalf("missing %s in %v", k, r)
		}
	}
	_, err = e.run(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}})
	findCode(t, err, 43)

	cases := []struct {
		cmd  bson.D
		code int32
	}{
		{bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: "x"}}, 14},
		{bson.D{{Key: "find", Value: "c"}, {Key: "skip", Value: -1}}, 51024},
		{bson.D{{Key: "find", Value: "c"}, {Key: "limit", Value: -1}}, 51024},
		{bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "a", Value: 2}}}}, 15975},
		{bson.D{{Key: "find", Value: "c"}, {Key: "hint", Value: "nope"}}, 2},
		{bson.D{{Key: "find", Value: "c"}, {Key: "hint", Value: bson.D{{Key: "zz", Value: 1}}}}, 2},
		{bson.D{{Key: "find", Value: "c"}, {Key: "min", Value: bson.D{{Key: "a", Value: 1}}}}, 51173},
		{bson.D{{Key: "find", Value: "c"}, {Key: "foo", Value: 1}}, 40415},
		{bson.D{{Key: "find", Value: "c"}, {Key: "tailable", Value: true}}, 2},
		{bson.D{{Key: "find", Value: "c"}, {Key: "awaitData", Value: true}}, 9},
		{bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "$where", Value: "1"}}}}, 2},
		{bson.D{{Key: "getMore", Value: int32(1)}, {Key: "collection", Value: "c"}}, 14},
		{bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: 1}}, 14},
		{bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: 1}}, 14},
	}
	for _, c := range cases {
		_, err := e.run(c.cmd)
		findCode(t, err, c.code)
	}
}

func TestFindMissingCollectionAndSkipLimit(t *testing.T) {
	e := findStart(t)
	r := e.must(bson.D{{Key: "find", Value: "nothere"}})
	if n, id := batchLen(r, "firstBatch"); n != 0 || id != 0 {
		t.Fatalf("missing collection: %v", r)
	}
	e.seq("test.c", 30)
	r = e.must(bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "b", Value: -1}}}, {Key: "skip", Value: 5}, {Key: "limit", Value: 3}})
	vals, _ := r.Lookup("cursor", "firstBatch").Array().Values()
	if len(vals) != 3 || vals[0].Document().Lookup("b").Int32() != 24 || r.Lookup("cursor", "id").Int64() != 0 {
		t.Fatalf("skip/limit: %v", r)
	}
	// A negative limit in the driver means a single batch.
	cur, err := e.cl.Database("test").Collection("c").Find(context.Background(), bson.D{}, options.Find().SetLimit(-5))
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := cur.All(context.Background(), &got); err != nil || len(got) != 5 {
		t.Fatalf("negative limit: %d %v", len(got), err)
	}
	r = e.must(bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 0}})
	if n, id := batchLen(r, "firstBatch"); n != 0 || id == 0 {
		t.Fatalf("batchSize 0: %v", r)
	}
	r = e.must(bson.D{{Key: "find", Value: "c"}, {Key: "singleBatch", Value: true}, {Key: "batchSize", Value: 4}})
	if n, id := batchLen(r, "firstBatch"); n != 4 || id != 0 {
		t.Fatalf("singleBatch: %v", r)
	}
}

func (e *findEnv) explain(cmd bson.D, verbosity string) bson.Raw {
	e.t.Helper()
	return e.must(bson.D{{Key: "explain", Value: cmd}, {Key: "verbosity", Value: verbosity}})
}

func stageNames(plan bson.Raw) []string {
	var out []string
	for {
		out = append(out, plan.Lookup("stage").StringValue())
		in, err := plan.LookupErr("inputStage")
		if err != nil {
			return out
		}
		plan = in.Document()
	}
}

func TestFindExplainIndexUse(t *testing.T) {
	e := findStart(t)
	e.seq("test.c", 200)
	e.must(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}, {Key: "name", Value: "a_1_b_1"}}}}})

	// COLLSCAN without a usable index.
	r := e.explain(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "s", Value: "k0001"}}}}, "executionStats")
	if got := stageNames(r.Lookup("queryPlanner", "winningPlan").Document()); got[len(got)-1] != "COLLSCAN" {
		t.Fatalf("plan %v", got)
	}
	if n := r.Lookup("executionStats", "totalDocsExamined").Int32(); n != 200 {
		t.Fatalf("docsExamined %d", n)
	}

	// IXSCAN with bounds, FETCH above it.
	r = e.explain(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 3}, {Key: "b", Value: bson.D{{Key: "$gte", Value: 50}}}}}}, "executionStats")
	wp := r.Lookup("queryPlanner", "winningPlan").Document()
	got := stageNames(wp)
	if len(got) != 2 || got[0] != "FETCH" || got[1] != "IXSCAN" {
		t.Fatalf("plan %v", got)
	}
	ix := wp.Lookup("inputStage").Document()
	if ix.Lookup("indexName").StringValue() != "a_1_b_1" {
		t.Fatalf("index %v", ix)
	}
	ab, _ := ix.Lookup("indexBounds", "a").Array().Values()
	bb, _ := ix.Lookup("indexBounds", "b").Array().Values()
	if ab[0].StringValue() != "[3, 3]" || bb[0].StringValue() != "[50, inf.0]" {
		t.Fatalf("bounds %v", ix.Lookup("indexBounds"))
	}
	es := r.Lookup("executionStats").Document()
	if es.Lookup("nReturned").Int32() != 15 || es.Lookup("totalKeysExamined").Int32() != 15 || es.Lookup("totalDocsExamined").Int32() != 15 {
		t.Fatalf("stats %v", es)
	}

	// Covered: projection only of index fields, no FETCH.
	r = e.explain(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 3}}}, {Key: "projection", Value: bson.D{{Key: "_id", Value: 0}, {Key: "a", Value: 1}, {Key: "b", Value: 1}}}}, "executionStats")
	got = stageNames(r.Lookup("queryPlanner", "winningPlan").Document())
	if len(got) != 2 || got[0] != "PROJECTION_COVERED" || got[1] != "IXSCAN" {
		t.Fatalf("covered plan %v", got)
	}
	if r.Lookup("executionStats", "totalDocsExamined").Int32() != 0 {
		t.Fatalf("covered examined docs")
	}
	res := e.must(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 3}}}, {Key: "projection", Value: bson.D{{Key: "_id", Value: 0}, {Key: "a", Value: 1}, {Key: "b", Value: 1}}}, {Key: "limit", Value: 2}})
	first := res.Lookup("cursor", "firstBatch", "0").Document()
	if first.String() != `{"a": {"$numberInt":"3"},"b": {"$numberInt":"3"}}` {
		t.Fatalf("covered result %s", first)
	}

	// Sort provided by the index: no SORT stage; otherwise a blocking SORT.
	r = e.explain(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 4}}}, {Key: "sort", Value: bson.D{{Key: "b", Value: -1}}}}, "queryPlanner")
	got = stageNames(r.Lookup("queryPlanner", "winningPlan").Document())
	for _, s := range got {
		if s == "SORT" {
			t.Fatalf("index sort expected: %v", got)
		}
	}
	if r.Lookup("queryPlanner", "winningPlan", "inputStage", "direction").StringValue() != "backward" {
		t.Fatalf("direction %v", r.Lookup("queryPlanner", "winningPlan"))
	}
	r = e.explain(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 4}}}, {Key: "sort", Value: bson.D{{Key: "s", Value: 1}}}}, "queryPlanner")
	if got = stageNames(r.Lookup("queryPlanner", "winningPlan").Document()); got[0] != "SORT" {
		t.Fatalf("blocking sort expected: %v", got)
	}
	// IDHACK for _id point queries.
	r = e.explain(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 7}}}}, "executionStats")
	if got = stageNames(r.Lookup("queryPlanner", "winningPlan").Document()); got[0] != "IDHACK" {
		t.Fatalf("idhack expected: %v", got)
	}
	// $in gives several intervals; results come back in index order.
	res = e.must(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{7, 2}}}}}}, {Key: "projection", Value: bson.D{{Key: "_id", Value: 0}, {Key: "a", Value: 1}, {Key: "b", Value: 1}}}, {Key: "batchSize", Value: 1000}})
	vals, _ := res.Lookup("cursor", "firstBatch").Array().Values()
	if len(vals) != 40 || vals[0].Document().Lookup("a").Int32() != 2 || vals[39].Document().Lookup("a").Int32() != 7 {
		t.Fatalf("$in results %d", len(vals))
	}
	// count and distinct explain.
	r = e.explain(bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "a", Value: 1}}}}, "queryPlanner")
	if got = stageNames(r.Lookup("queryPlanner", "winningPlan").Document()); got[0] != "COUNT" {
		t.Fatalf("count explain %v", got)
	}
	// hint by key pattern and by name.
	r = e.explain(bson.D{{Key: "find", Value: "c"}, {Key: "hint", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}}, "executionStats")
	if r.Lookup("executionStats", "totalKeysExamined").Int32() != 200 {
		t.Fatalf("hinted full index scan %v", r.Lookup("executionStats"))
	}
}

func TestFindSortMemoryLimit(t *testing.T) {
	e := findStart(t)
	docs := make([]bson.D, 300)
	pad := make([]byte, 1000)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "k", Value: (i * 7919) % 300}, {Key: "pad", Value: pad}}
	}
	e.insert("test.big", docs...)
	if _, err := e.cl.Database("admin").RunCommand(context.Background(),
		bson.D{{Key: "setParameter", Value: 1}, {Key: "internalQueryMaxBlockingSortMemoryUsageBytes", Value: 50000}}).Raw(); err != nil {
		t.Fatal(err)
	}
	_, err := e.run(bson.D{{Key: "find", Value: "big"}, {Key: "sort", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "allowDiskUse", Value: false}})
	findCode(t, err, 292)
	cur, err := e.cl.Database("test").Collection("big").Find(context.Background(), bson.D{},
		options.Find().SetSort(bson.D{{Key: "k", Value: 1}}).SetAllowDiskUse(true).SetProjection(bson.D{{Key: "pad", Value: 0}}))
	if err != nil {
		t.Fatal(err)
	}
	var got []struct{ K int }
	if err := cur.All(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 300 {
		t.Fatalf("got %d", len(got))
	}
	for i, d := range got {
		if d.K != i {
			t.Fatalf("position %d has k=%d", i, d.K)
		}
	}
}

func TestFindSortSemanticsAndProjection(t *testing.T) {
	e := findStart(t)
	e.insert("test.s",
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{5, 1}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 3}},
		bson.D{{Key: "_id", Value: 3}},
		bson.D{{Key: "_id", Value: 4}, {Key: "a", Value: "x"}},
	)
	ids := func(r bson.Raw) []int32 {
		vals, _ := r.Lookup("cursor", "firstBatch").Array().Values()
		var out []int32
		for _, v := range vals {
			out = append(out, v.Document().Lookup("_id").Int32())
		}
		return out
	}
	// Ascending uses an array's smallest element; missing sorts as null (first).
	if got := fmt.Sprint(ids(e.must(bson.D{{Key: "find", Value: "s"}, {Key: "sort", Value: bson.D{{Key: "a", Value: 1}}}}))); got != "[3 1 2 4]" {
		t.Fatalf("asc %s", got)
	}
	// Descending uses the largest element.
	if got := fmt.Sprint(ids(e.must(bson.D{{Key: "find", Value: "s"}, {Key: "sort", Value: bson.D{{Key: "a", Value: -1}}}}))); got != "[4 1 2 3]" {
		t.Fatalf("desc %s", got)
	}
	r := e.must(bson.D{{Key: "find", Value: "s"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "projection", Value: bson.D{{Key: "a", Value: 0}}}, {Key: "showRecordId", Value: true}})
	d := r.Lookup("cursor", "firstBatch", "0").Document()
	if _, err := d.LookupErr("a"); err == nil {
		t.Fatalf("projection kept a: %s", d)
	}
	if _, err := d.LookupErr("$recordId"); err != nil {
		t.Fatalf("no $recordId: %s", d)
	}
	// returnKey over a collection scan returns empty documents; over the _id index, the key.
	r = e.must(bson.D{{Key: "find", Value: "s"}, {Key: "returnKey", Value: true}, {Key: "filter", Value: bson.D{{Key: "a", Value: 3}}}})
	if d := r.Lookup("cursor", "firstBatch", "0").Document(); len(d) != 5 {
		t.Fatalf("returnKey: %s", d)
	}
	r = e.must(bson.D{{Key: "find", Value: "s"}, {Key: "returnKey", Value: true}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 2}}}})
	if d := r.Lookup("cursor", "firstBatch", "0").Document(); d.String() != `{"_id": {"$numberInt":"2"}}` {
		t.Fatalf("returnKey: %s", d)
	}
	// returnKey drops the record id, so showRecordId adds nothing (ReturnKeyStage).
	r = e.must(bson.D{{Key: "find", Value: "s"}, {Key: "returnKey", Value: true}, {Key: "showRecordId", Value: true},
		{Key: "filter", Value: bson.D{{Key: "_id", Value: 2}}}})
	if d := r.Lookup("cursor", "firstBatch", "0").Document(); d.String() != `{"_id": {"$numberInt":"2"}}` {
		t.Fatalf("returnKey with showRecordId: %s", d)
	}
	// count and distinct.
	r = e.must(bson.D{{Key: "count", Value: "s"}})
	if r.Lookup("n").Type != bson.TypeInt32 || r.Lookup("n").Int32() != 4 {
		t.Fatalf("count %v", r)
	}
	r = e.must(bson.D{{Key: "count", Value: "s"}, {Key: "query", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 3}}}}}})
	if r.Lookup("n").Int32() != 2 {
		t.Fatalf("count query %v", r)
	}
	r = e.must(bson.D{{Key: "count", Value: "s"}, {Key: "skip", Value: 1}, {Key: "limit", Value: 2}})
	if r.Lookup("n").Int32() != 2 {
		t.Fatalf("count skip/limit %v", r)
	}
	r = e.must(bson.D{{Key: "distinct", Value: "s"}, {Key: "key", Value: "a"}})
	if got := r.Lookup("values").String(); got != `[{"$numberInt":"1"},{"$numberInt":"3"},{"$numberInt":"5"},"x"]` {
		t.Fatalf("distinct %s", got)
	}
}

func TestFindMinMaxReturnKey(t *testing.T) {
	e := findStart(t)
	e.seq("test.m", 50)
	e.must(bson.D{{Key: "createIndexes", Value: "m"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "b", Value: 1}}}, {Key: "name", Value: "b_1"}}}}})
	r := e.must(bson.D{{Key: "find", Value: "m"}, {Key: "hint", Value: "b_1"}, {Key: "min", Value: bson.D{{Key: "b", Value: 10}}}, {Key: "max", Value: bson.D{{Key: "b", Value: 13}}}, {Key: "returnKey", Value: true}})
	vals, _ := r.Lookup("cursor", "firstBatch").Array().Values()
	if len(vals) != 3 || vals[0].Document().String() != `{"b": {"$numberInt":"10"}}` {
		t.Fatalf("min/max returnKey %v", vals)
	}
}

func TestFindTailableCursor(t *testing.T) {
	e := findStart(t)
	e.must(bson.D{{Key: "create", Value: "cap"}, {Key: "capped", Value: true}, {Key: "size", Value: 100000}})
	e.insert("test.cap", bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}})
	r := e.must(bson.D{{Key: "find", Value: "cap"}, {Key: "tailable", Value: true}})
	n, id := batchLen(r, "firstBatch")
	if n != 2 || id == 0 {
		t.Fatalf("tailable first batch %v", r)
	}
	r = e.must(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "cap"}})
	if n, id2 := batchLen(r, "nextBatch"); n != 0 || id2 != id {
		t.Fatalf("tailable empty getMore %v", r)
	}
	e.insert("test.cap", bson.D{{Key: "_id", Value: 3}})
	r = e.must(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "cap"}})
	vals, _ := r.Lookup("cursor", "nextBatch").Array().Values()
	if len(vals) != 1 || vals[0].Document().Lookup("_id").Int32() != 3 {
		t.Fatalf("tailable new doc %v", r)
	}
}

func TestFindMaxTimeMS(t *testing.T) {
	e := findStart(t)
	docs := make([]bson.D, 200)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "x", Value: i}}
	}
	e.insert("test.slow", docs...)
	// MongoDB's maxTimeAlwaysTimeOut fail point makes the expiry deterministic: no test may
	// depend on a scan being slower than its time limit.
	fp := failpoint.Get("maxTimeAlwaysTimeOut")
	fp.Configure(failpoint.AlwaysOn, 0, 0, nil)
	defer fp.Disable()
	find := bson.D{{Key: "find", Value: "slow"}, {Key: "filter", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$gte", Value: 0}}}}}, {Key: "sort", Value: bson.D{{Key: "x", Value: -1}}}, {Key: "maxTimeMS", Value: 1000}}
	_, err := e.run(find)
	findCode(t, err, 50)
	fp.Disable()
	if _, err := e.run(find); err != nil {
		t.Fatalf("with the fail point off the same find must succeed: %v", err)
	}
}
