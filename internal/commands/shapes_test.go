package commands_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Reply shapes MongoDB 7.0 gives and drivers, tools and the shell read (issue 10, "Shapes").

// shapeRun runs cmd on db and returns the reply, failing t on an error.
func shapeRun(t *testing.T, ts *testServer, db string, cmd bson.D) bson.Raw {
	t.Helper()
	r, err := ts.cl.Database(db).RunCommand(context.Background(), cmd).Raw()
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	return r
}

func TestShapeHelloConnectionID(t *testing.T) {
	ts := startTestServer(t)
	r := shapeRun(t, ts, "admin", bson.D{{Key: "hello", Value: 1}})
	if v := r.Lookup("connectionId"); v.Type != bson.TypeInt32 || v.Int32() <= 0 {
		t.Errorf("connectionId %v (%v), want a positive int32", v, v.Type)
	}
}

func TestShapeCollStats(t *testing.T) {
	ts := startTestServer(t)
	shapeRun(t, ts, "t", bson.D{{Key: "create", Value: "cap"}, {Key: "capped", Value: true}, {Key: "size", Value: 8192}})
	r := shapeRun(t, ts, "t", bson.D{{Key: "collStats", Value: "cap"}})
	if v := r.Lookup("maxSize"); v.Type != bson.TypeInt32 || v.Int32() != 8192 {
		t.Errorf("maxSize %v (%v), want int32 8192", v, v.Type)
	}
	// A missing collection: ok with zero statistics (MongoDB 7.0's collStats ignores
	// appendCollectionStorageStats' NamespaceNotFound).
	r = shapeRun(t, ts, "t", bson.D{{Key: "collStats", Value: "missing"}})
	want := []string{"ns", "size", "count", "numOrphanDocs", "storageSize", "totalSize", "nindexes",
		"totalIndexSize", "indexDetails", "indexSizes", "scaleFactor", "ok"}
	elems, _ := r.Elements()
	if len(elems) != len(want) {
		t.Fatalf("collStats of a missing collection: %v", r)
	}
	for i, e := range elems {
		if e.Key() != want[i] {
			t.Fatalf("field %d is %q, want %q: %v", i, e.Key(), want[i], r)
		}
	}
	if r.Lookup("ns").StringValue() != "t.missing" || r.Lookup("count").Int32() != 0 || r.Lookup("scaleFactor").Int32() != 1 {
		t.Errorf("collStats of a missing collection: %v", r)
	}
}

func TestShapeExplainCommandDB(t *testing.T) {
	ts := startTestServer(t)
	shapeRun(t, ts, "t", ins(bson.D{{Key: "a", Value: 1}}))
	for _, inner := range []bson.D{
		{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 1}}}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}},
		{{Key: "count", Value: "c"}},
	} {
		r := shapeRun(t, ts, "t", bson.D{{Key: "explain", Value: inner}})
		if db, ok := r.Lookup("command", "$db").StringValueOK(); !ok || db != "t" {
			t.Errorf("explain %v: command %v, want $db t", inner, r.Lookup("command"))
		}
	}
}

func TestShapeGetParameterAll(t *testing.T) {
	ts := startTestServer(t)
	r := shapeRun(t, ts, "admin", bson.D{{Key: "getParameter", Value: "*"}})
	if v := r.Lookup("authSchemaVersion"); v.Type != bson.TypeInt32 || v.Int32() != 5 {
		t.Errorf("authSchemaVersion %v", v)
	}
	if v := r.Lookup("allowDiskUseByDefault"); v.Type != bson.TypeBoolean || !v.Boolean() {
		t.Errorf("allowDiskUseByDefault %v", v)
	}
}

// TestShapeAllowDiskUseByDefault: a sort (find, or aggregate's $sort) over the memory limit
// spills without allowDiskUse while allowDiskUseByDefault is true (its default since 6.0), and
// fails with 292 when the command says allowDiskUse: false or the parameter is false.
func TestShapeAllowDiskUseByDefault(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	pad := make([]byte, 1000)
	docs := bson.A{}
	for i := range 300 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: (i * 7919) % 300}, {Key: "pad", Value: pad}})
	}
	shapeRun(t, ts, "t", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}})
	shapeRun(t, ts, "admin", bson.D{{Key: "setParameter", Value: 1},
		{Key: "internalQueryMaxBlockingSortMemoryUsageBytes", Value: 50000}})
	sortFind := bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "batchSize", Value: 300}}
	sortAgg := agg(bson.D{{Key: "$sort", Value: bson.D{{Key: "k", Value: 1}}}})
	sortAgg[2].Value = bson.D{{Key: "batchSize", Value: 300}}
	count := func(t *testing.T, cmd bson.D) int {
		t.Helper()
		r := shapeRun(t, ts, "t", cmd)
		vals, _ := r.Lookup("cursor", "firstBatch").Array().Values()
		return len(vals)
	}
	fails := func(t *testing.T, cmd bson.D) {
		t.Helper()
		findCode(t, ts.cl.Database("t").RunCommand(ctx, cmd).Err(), 292)
	}
	withFalse := func(cmd bson.D) bson.D {
		return append(append(bson.D{}, cmd...), bson.E{Key: "allowDiskUse", Value: false})
	}
	for _, cmd := range []bson.D{sortFind, sortAgg} {
		if n := count(t, cmd); n == 0 {
			t.Errorf("%v without allowDiskUse: %d documents", cmd[0], n)
		}
		fails(t, withFalse(cmd))
	}
	if _, ok := ts.params.Spec("allowDiskUseByDefault"); !ok {
		t.Fatal("no allowDiskUseByDefault parameter")
	}
	shapeRun(t, ts, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "allowDiskUseByDefault", Value: false}})
	for _, cmd := range []bson.D{sortFind, sortAgg} {
		fails(t, cmd)
		if n := count(t, append(append(bson.D{}, cmd...), bson.E{Key: "allowDiskUse", Value: true})); n == 0 {
			t.Errorf("%v with allowDiskUse: %d documents", cmd[0], n)
		}
	}
}
