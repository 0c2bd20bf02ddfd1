package integration

import (
	"slices"
	"strconv"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/mongoerr"
)

// TestIntegrationFindGetMore covers find's options and reply shape, and cursor batching.
func TestIntegrationFindGetMore(t *testing.T) {
	db := testDB(t)
	coll := db.Collection("c")
	insertN(t, coll, 250, 10)
	ns := db.Name() + ".c"

	t.Run("default batches", func(t *testing.T) {
		r := run(t, db, d("find", "c"))
		wantKeys(t, r, "cursor", "ok")
		cur := lookup(t, r, "cursor").Document()
		wantKeys(t, cur, "firstBatch", "id", "ns")
		if lookup(t, cur, "ns").StringValue() != ns {
			t.Errorf("ns: %s", cur)
		}
		idv := lookup(t, cur, "id")
		if idv.Type != bson.TypeInt64 || idv.Int64() == 0 {
			t.Fatalf("cursor id %v, want non-zero int64", idv)
		}
		if n := len(array(t, lookup(t, cur, "firstBatch"))); n != 101 {
			t.Errorf("firstBatch has %d documents, want 101", n)
		}
		r = run(t, db, d("getMore", idv.Int64(), "collection", "c"))
		wantKeys(t, r, "cursor", "ok")
		cur = lookup(t, r, "cursor").Document()
		wantKeys(t, cur, "nextBatch", "id", "ns")
		if n := len(array(t, lookup(t, cur, "nextBatch"))); n != 149 {
			t.Errorf("nextBatch has %d documents, want 149", n)
		}
		if lookup(t, cur, "id").Int64() != 0 {
			t.Errorf("exhausted cursor id: %s", cur)
		}
		ce := runErr(t, db, d("getMore", idv.Int64(), "collection", "c"), mongoerr.CursorNotFound)
		if want := "cursor id " + itoa(idv.Int64()) + " not found"; ce.Message != want {
			t.Errorf("errmsg %q, want %q", ce.Message, want)
		}
	})

	t.Run("batchSize and limit", func(t *testing.T) {
		r := run(t, db, d("find", "c", "filter", d("a", 3), "sort", d("_id", 1), "batchSize", 2))
		id := lookup(t, r, "cursor.id").Int64()
		all := array(t, lookup(t, r, "cursor.firstBatch"))
		if len(all) != 2 || id == 0 {
			t.Fatalf("batchSize 2: %s", r)
		}
		for rounds := 0; id != 0; rounds++ {
			if rounds > 20 {
				t.Fatal("cursor never exhausted")
			}
			r = run(t, db, d("getMore", id, "collection", "c", "batchSize", 10))
			batch := array(t, lookup(t, r, "cursor.nextBatch"))
			if len(batch) > 10 {
				t.Errorf("getMore batchSize 10 returned %d", len(batch))
			}
			all = append(all, batch...)
			id = lookup(t, r, "cursor.id").Int64()
		}
		if len(all) != 25 {
			t.Fatalf("a=3 across batches: %d documents, want 25", len(all))
		}
		for i, doc := range all {
			if got := lookup(t, doc, "_id").Int32(); got != int32(3+10*i) {
				t.Fatalf("document %d has _id %d, want %d (sorted, no gaps or repeats)", i, got, 3+10*i)
			}
		}
		// limit across batches: 2 + 2 + 1 and then the cursor is closed.
		r = run(t, db, d("find", "c", "sort", d("_id", 1), "limit", 5, "batchSize", 2))
		id = lookup(t, r, "cursor.id").Int64()
		r = run(t, db, d("getMore", id, "collection", "c", "batchSize", 2))
		r = run(t, db, d("getMore", lookup(t, r, "cursor.id").Int64(), "collection", "c", "batchSize", 2))
		if n := len(array(t, lookup(t, r, "cursor.nextBatch"))); n != 1 || lookup(t, r, "cursor.id").Int64() != 0 {
			t.Errorf("limit 5 third batch: %s", r)
		}
		// singleBatch closes the cursor after the first batch.
		r = run(t, db, d("find", "c", "batchSize", 3, "singleBatch", true))
		if n := len(array(t, lookup(t, r, "cursor.firstBatch"))); n != 3 || lookup(t, r, "cursor.id").Int64() != 0 {
			t.Errorf("singleBatch: %s", r)
		}
		// The driver iterates across getMores transparently.
		got := findAll(t, coll, d("a", d("$in", a(1, 2))), options.Find().SetBatchSize(7).SetSort(d("_id", -1)))
		if len(got) != 50 || lookup(t, got[0], "_id").Int32() != 242 || lookup(t, got[49], "_id").Int32() != 1 {
			t.Errorf("driver Find with batchSize 7: %d documents", len(got))
		}
	})

	t.Run("filter sort skip limit projection", func(t *testing.T) {
		r := run(t, db, d("find", "c", "filter", d("a", d("$gte", 8)), "sort", d("_id", -1), "skip", 1, "limit", 3, "projection", d("a", 0)))
		wantDocs(t, "find", array(t, lookup(t, r, "cursor.firstBatch")), `{"_id":248}`, `{"_id":239}`, `{"_id":238}`)
		// Blocking sort on a compound key.
		got := findAll(t, coll, d("_id", d("$lt", 40)), options.Find().SetSort(d("a", -1, "_id", 1)).SetLimit(3))
		wantDocs(t, "sort a desc, _id asc", got, `{"_id":9,"a":9}`, `{"_id":19,"a":9}`, `{"_id":29,"a":9}`)
		got = findAll(t, coll, d("$or", a(d("_id", 5), d("_id", 7))), options.Find().SetProjection(d("_id", 0, "a", 1)).SetSort(d("_id", 1)))
		wantDocs(t, "$or with projection", got, `{"a":5}`, `{"a":7}`)
		r = run(t, db, d("find", "missing"))
		if n := len(array(t, lookup(t, r, "cursor.firstBatch"))); n != 0 || lookup(t, r, "cursor.id").Int64() != 0 {
			t.Errorf("find on a missing collection: %s", r)
		}
	})

	t.Run("hint min max returnKey showRecordId", func(t *testing.T) {
		run(t, db, d("createIndexes", "c", "indexes", a(d("key", d("a", 1), "name", "a_1"))))
		r := run(t, db, d("find", "c", "filter", d("a", 3), "hint", d("a", 1), "returnKey", true, "limit", 2))
		wantDocs(t, "returnKey", array(t, lookup(t, r, "cursor.firstBatch")), `{"a":3}`, `{"a":3}`)
		r = run(t, db, d("find", "c", "filter", d("_id", 4), "showRecordId", true))
		batch := array(t, lookup(t, r, "cursor.firstBatch"))
		if len(batch) != 1 {
			t.Fatalf("showRecordId: %s", r)
		}
		if _, err := batch[0].LookupErr("$recordId"); err != nil {
			t.Errorf("showRecordId: no $recordId in %s", batch[0])
		}
		r = run(t, db, d("find", "c", "min", d("a", 2), "max", d("a", 4), "hint", "a_1", "batchSize", 100))
		if n := len(array(t, lookup(t, r, "cursor.firstBatch"))); n != 50 {
			t.Errorf("min a:2 max a:4 returned %d documents, want 50", n)
		}
		runErr(t, db, d("find", "c", "min", d("a", 2)), mongoerr.Location51173)
		runErr(t, db, d("find", "c", "hint", d("nope", 1)), mongoerr.BadValue)
		runErr(t, db, d("find", "c", "hint", "nope_1"), mongoerr.BadValue)
	})

	t.Run("errors", func(t *testing.T) {
		ce := runErr(t, db, d("find", "c", "filter", d("a", d("$foo", 1))), mongoerr.BadValue)
		if ce.Message != "unknown operator: $foo" {
			t.Errorf("errmsg %q", ce.Message)
		}
		ce = runErr(t, db, d("find", "c", "filter", 1), mongoerr.TypeMismatch)
		if ce.Message != "BSON field 'FindCommandRequest.filter' is the wrong type 'int', expected type 'object'" {
			t.Errorf("errmsg %q", ce.Message)
		}
		ce = runErr(t, db, d("find", "c", "foo", 1), mongoerr.Location40415)
		if ce.Message != "BSON field 'FindCommandRequest.foo' is an unknown field." {
			t.Errorf("errmsg %q", ce.Message)
		}
		runErr(t, db, d("find", "c", "limit", -1), mongoerr.Location51024)
		runErr(t, db, d("find", "c", "skip", -1), mongoerr.Location51024)
		runErr(t, db, d("find", "c", "batchSize", -1), mongoerr.Location51024)
		runErr(t, db, d("find", "c", "sort", d("a", 2)), mongoerr.Location15975)
		runErr(t, db, d("find", "c", "projection", d("a", 1, "b", 0)), mongoerr.Location31254)
		runErr(t, db, d("find", "c", "filter", d("$where", "true")), mongoerr.BadValue)
		// Generic arguments are accepted.
		run(t, db, d("find", "c", "limit", 1, "comment", "hi", "maxTimeMS", 5000, "readConcern", d("level", "local")))
	})

	t.Run("getMore errors", func(t *testing.T) {
		r := run(t, db, d("find", "c", "batchSize", 1))
		id := lookup(t, r, "cursor.id").Int64()
		runErr(t, db, d("getMore", id, "collection", "other"), mongoerr.Unauthorized)
		runErr(t, db, d("getMore", int32(id), "collection", "c"), mongoerr.TypeMismatch)
		runErr(t, db, d("getMore", int64(123456789), "collection", "c"), mongoerr.CursorNotFound)
		runErr(t, db, d("getMore", id), mongoerr.Location40414)
		// The cursor survived the bad requests.
		r = run(t, db, d("getMore", id, "collection", "c", "batchSize", 1))
		if n := len(array(t, lookup(t, r, "cursor.nextBatch"))); n != 1 {
			t.Errorf("getMore after errors: %s", r)
		}
		run(t, db, d("killCursors", "c", "cursors", a(id)))
	})
}

// TestIntegrationKillCursors covers killCursors' reply and its effect, and the driver closing
// an unexhausted cursor.
func TestIntegrationKillCursors(t *testing.T) {
	db := testDB(t)
	coll := db.Collection("c")
	insertN(t, coll, 20, 2)
	r := run(t, db, d("find", "c", "batchSize", 2))
	id := lookup(t, r, "cursor.id").Int64()
	if id == 0 {
		t.Fatalf("no cursor: %s", r)
	}
	r = run(t, db, d("killCursors", "c", "cursors", a(id, int64(12345))))
	wantKeys(t, r, "cursorsKilled", "cursorsNotFound", "cursorsAlive", "cursorsUnknown", "ok")
	wantDocs(t, "killCursors reply", []bson.Raw{r},
		`{"cursorsKilled":[{"$numberLong":"`+itoa(id)+`"}],"cursorsNotFound":[{"$numberLong":"12345"}],"cursorsAlive":[],"cursorsUnknown":[],"ok":1.0}`)
	runErr(t, db, d("getMore", id, "collection", "c"), mongoerr.CursorNotFound)
	runErr(t, db, d("killCursors", "c"), mongoerr.Location40414)
	runErr(t, db, d("killCursors", "c", "cursors", a("x")), mongoerr.TypeMismatch)

	// The driver kills a cursor it closes early.
	cur, err := coll.Find(ctxT(t), bson.D{}, options.Find().SetBatchSize(3))
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Next(ctxT(t)) {
		t.Fatal(cur.Err())
	}
	id = cur.ID()
	if err := cur.Close(ctxT(t)); err != nil {
		t.Fatalf("cursor Close (killCursors): %v", err)
	}
	r = run(t, db, d("killCursors", "c", "cursors", a(id)))
	if got := array0(t, lookup(t, r, "cursorsNotFound")); len(got) != 1 {
		t.Errorf("driver-closed cursor %d still alive: %s", id, r)
	}
}

// TestIntegrationCountDistinct covers count and distinct.
func TestIntegrationCountDistinct(t *testing.T) {
	db := testDB(t)
	coll := db.Collection("c")
	insertN(t, coll, 100, 4)
	if _, err := coll.InsertMany(ctxT(t), []any{d("_id", "t1", "tags", a("x", "y")), d("_id", "t2", "tags", "x"), d("_id", "t3", "tags", a(a("z")))}); err != nil {
		t.Fatal(err)
	}

	r := run(t, db, d("count", "c", "query", d("a", 3)))
	wantKeys(t, r, "n", "ok")
	wantInt32(t, r, "n", 25)
	r = run(t, db, d("count", "c", "query", d("a", 3), "skip", 20, "limit", 10))
	wantInt32(t, r, "n", 5)
	r = run(t, db, d("count", "c"))
	wantInt32(t, r, "n", 103)
	r = run(t, db, d("count", "missing"))
	wantInt32(t, r, "n", 0)
	if n, err := coll.EstimatedDocumentCount(ctxT(t)); err != nil || n != 103 {
		t.Errorf("EstimatedDocumentCount = %d, %v", n, err)
	}
	runErr(t, db, d("count", "c", "query", 1), mongoerr.TypeMismatch)
	runErr(t, db, d("count", "c", "bogus", 1), mongoerr.Location40415)

	r = run(t, db, d("distinct", "c", "key", "a", "query", d("a", d("$lt", 3))))
	wantKeys(t, r, "values", "ok")
	vals := sortedInts(t, lookup(t, r, "values"))
	if !slices.Equal(vals, []int64{0, 1, 2}) {
		t.Errorf("distinct a: %v", vals)
	}
	// Arrays are unwound one level; a nested array is a value.
	r = run(t, db, d("distinct", "c", "key", "tags"))
	wantDocs(t, "distinct tags", []bson.Raw{mustMarshal(t, d("v", lookup(t, r, "values")))}, `{"v":["x","y",["z"]]}`)
	res := coll.Distinct(ctxT(t), "a", d("a", d("$gte", 2)))
	var got []int32
	if err := res.Decode(&got); err != nil {
		t.Fatalf("driver Distinct: %v", err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int32{2, 3}) {
		t.Errorf("driver Distinct: %v", got)
	}
	r = run(t, db, d("distinct", "missing", "key", "a"))
	if n := len(array0(t, lookup(t, r, "values"))); n != 0 {
		t.Errorf("distinct on missing collection: %s", r)
	}
	ce := runErr(t, db, d("distinct", "c"), mongoerr.Location40414)
	if ce.Message != "BSON field 'distinct.key' is missing but a required field" {
		t.Errorf("errmsg %q", ce.Message)
	}
	runErr(t, db, d("distinct", "c", "key", 1), mongoerr.TypeMismatch)
}

// TestIntegrationExplain covers explain of find, count, distinct, update, delete and
// findAndModify, and that explain shows index use.
func TestIntegrationExplain(t *testing.T) {
	db := testDB(t)
	coll := db.Collection("c")
	insertN(t, coll, 200, 10)
	run(t, db, d("createIndexes", "c", "indexes", a(d("key", d("a", 1), "name", "a_1"))))

	explain := func(t *testing.T, cmd bson.D, verbosity string) bson.Raw {
		t.Helper()
		r := run(t, db, d("explain", cmd, "verbosity", verbosity))
		lookup(t, r, "queryPlanner")
		if ns := lookup(t, r, "queryPlanner.namespace").StringValue(); ns != db.Name()+".c" {
			t.Errorf("queryPlanner.namespace %q", ns)
		}
		return r
	}
	stage := func(t *testing.T, plan bson.Raw) string {
		t.Helper()
		return lookup(t, plan, "stage").StringValue()
	}

	t.Run("index scan", func(t *testing.T) {
		r := explain(t, d("find", "c", "filter", d("a", 3)), "executionStats")
		plan := lookup(t, r, "queryPlanner.winningPlan").Document()
		if stage(t, plan) != "FETCH" {
			t.Fatalf("winningPlan %s, want FETCH over IXSCAN", plan)
		}
		in := lookup(t, plan, "inputStage").Document()
		if stage(t, in) != "IXSCAN" || lookup(t, in, "indexName").StringValue() != "a_1" {
			t.Errorf("inputStage %s, want IXSCAN a_1", in)
		}
		wantDocs(t, "keyPattern", []bson.Raw{lookup(t, in, "keyPattern").Document()}, `{"a":1}`)
		es := lookup(t, r, "executionStats").Document()
		if !lookup(t, es, "executionSuccess").Boolean() {
			t.Errorf("executionSuccess: %s", es)
		}
		wantNum(t, es, "nReturned", 20)
		wantNum(t, es, "totalKeysExamined", 20)
		wantNum(t, es, "totalDocsExamined", 20)
	})
	t.Run("collection scan", func(t *testing.T) {
		r := explain(t, d("find", "c", "filter", d("b", 3)), "executionStats")
		if s := stage(t, lookup(t, r, "queryPlanner.winningPlan").Document()); s != "COLLSCAN" {
			t.Errorf("winningPlan stage %s, want COLLSCAN", s)
		}
		wantNum(t, r, "executionStats.nReturned", 0)
		wantNum(t, r, "executionStats.totalKeysExamined", 0)
		wantNum(t, r, "executionStats.totalDocsExamined", 200)
	})
	t.Run("blocking sort", func(t *testing.T) {
		r := explain(t, d("find", "c", "filter", bson.D{}, "sort", d("b", 1)), "queryPlanner")
		plan := lookup(t, r, "queryPlanner.winningPlan").Document()
		if stage(t, plan) != "SORT" || stage(t, lookup(t, plan, "inputStage").Document()) != "COLLSCAN" {
			t.Errorf("winningPlan %s, want SORT over COLLSCAN", plan)
		}
		if _, err := r.LookupErr("executionStats"); err == nil {
			t.Errorf("queryPlanner verbosity has executionStats")
		}
	})
	t.Run("covered", func(t *testing.T) {
		r := explain(t, d("find", "c", "filter", d("a", 3), "projection", d("_id", 0, "a", 1)), "executionStats")
		plan := lookup(t, r, "queryPlanner.winningPlan").Document()
		if stage(t, plan) != "PROJECTION_COVERED" || stage(t, lookup(t, plan, "inputStage").Document()) != "IXSCAN" {
			t.Errorf("winningPlan %s, want PROJECTION_COVERED over IXSCAN", plan)
		}
		wantNum(t, r, "executionStats.totalDocsExamined", 0)
		wantNum(t, r, "executionStats.nReturned", 20)
	})
	t.Run("sort by index", func(t *testing.T) {
		r := explain(t, d("find", "c", "filter", d("a", d("$gt", 7)), "sort", d("a", 1)), "queryPlanner")
		plan := lookup(t, r, "queryPlanner.winningPlan").Document()
		if stage(t, plan) != "FETCH" || stage(t, lookup(t, plan, "inputStage").Document()) != "IXSCAN" {
			t.Errorf("winningPlan %s, want FETCH over IXSCAN with no SORT", plan)
		}
	})
	t.Run("count distinct", func(t *testing.T) {
		r := explain(t, d("count", "c", "query", d("a", 3)), "executionStats")
		if s := stage(t, lookup(t, r, "queryPlanner.winningPlan").Document()); s != "COUNT" {
			t.Errorf("count winningPlan stage %s, want COUNT", s)
		}
		explain(t, d("distinct", "c", "key", "a"), "queryPlanner")
	})
	t.Run("writes change nothing", func(t *testing.T) {
		r := explain(t, d("update", "c", "updates", a(d("q", d("a", 3), "u", d("$set", d("z", 1)), "multi", true))), "executionStats")
		if s := stage(t, lookup(t, r, "queryPlanner.winningPlan").Document()); s != "UPDATE" {
			t.Errorf("update winningPlan stage %s, want UPDATE", s)
		}
		r = explain(t, d("delete", "c", "deletes", a(d("q", d("a", 4), "limit", 0))), "executionStats")
		if s := stage(t, lookup(t, r, "queryPlanner.winningPlan").Document()); s != "DELETE" {
			t.Errorf("delete winningPlan stage %s, want DELETE", s)
		}
		r = explain(t, d("findAndModify", "c", "query", d("a", 5), "remove", true), "executionStats")
		if s := stage(t, lookup(t, r, "queryPlanner.winningPlan").Document()); s != "DELETE" {
			t.Errorf("findAndModify remove winningPlan stage %s, want DELETE", s)
		}
		if n, _ := countDocs(t, coll, d("z", 1)); n != 0 {
			t.Errorf("explain update modified %d documents", n)
		}
		if n, _ := countDocs(t, coll, bson.D{}); n != 200 {
			t.Errorf("explain delete/findAndModify: count %d, want 200", n)
		}
	})
	t.Run("errors", func(t *testing.T) {
		runErr(t, db, d("explain", d("find", "c"), "verbosity", "loud"), mongoerr.BadValue)
		runErr(t, db, d("explain", d("nosuch", "c")), mongoerr.CommandNotFound)
		runErr(t, db, d("explain", d("find", "c", "filter", d("a", d("$foo", 1)))), mongoerr.BadValue)
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// array0 returns the values of an array value.
func array0(t testing.TB, v bson.RawValue) []bson.RawValue {
	t.Helper()
	arr, ok := v.ArrayOK()
	if !ok {
		t.Fatalf("not an array: %v", v)
	}
	vals, err := arr.Values()
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func sortedInts(t testing.TB, v bson.RawValue) []int64 {
	t.Helper()
	var out []int64
	for _, x := range array0(t, v) {
		n, ok := x.AsInt64OK()
		if !ok {
			t.Fatalf("not an integer: %v in %v", x, v)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
