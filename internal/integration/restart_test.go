package integration

import (
	"fmt"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/mongoerr"
)

// TestIntegrationRestart inserts data and builds indexes, stops humongod cleanly (SIGTERM),
// starts it again on the same dbpath, and checks every document, every index and the unique
// constraint survived, and that the planner uses the indexes again.
func TestIntegrationRestart(t *testing.T) {
	s := newServer(t, "")
	cl := connect(t, s.uri())
	db := cl.Database("restart")
	coll := db.Collection("c")
	const n = 2000
	docs := make([]any, n)
	for i := range n {
		docs[i] = d("_id", int32(i), "k", fmt.Sprintf("key-%05d", i), "g", int32(i%7), "pad", fmt.Sprintf("%0100d", i))
	}
	if _, err := coll.InsertMany(ctxT(t), docs); err != nil {
		t.Fatal(err)
	}
	run(t, db, d("createIndexes", "c", "indexes", a(
		d("key", d("k", 1), "name", "k_1", "unique", true),
		d("key", d("g", 1, "_id", -1), "name", "g_1__id_-1"),
	)))
	run(t, db, d("create", "capped", "capped", true, "size", 100000))
	if _, err := db.Collection("other").UpdateOne(ctxT(t), d("_id", "x"), d("$set", d("v", 1)), options.UpdateOne().SetUpsert(true)); err != nil {
		t.Fatal(err)
	}
	// Writes after the index builds, so the restart must keep index entries of plain writes too.
	if _, err := coll.UpdateMany(ctxT(t), d("g", 3), d("$set", d("g", int32(30)))); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteMany(ctxT(t), d("g", 6)); err != nil {
		t.Fatal(err)
	}
	wantDocsBefore := findAll(t, coll, bson.D{}, optsSortID())
	idxBefore := run(t, db, d("listIndexes", "c"))
	collsBefore := run(t, db, d("listCollections", 1, "nameOnly", true))

	if err := cl.Disconnect(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.stop(); err != nil {
		t.Fatalf("clean shutdown: %v\n%s", err, s.tail(20))
	}
	s2 := newServer(t, s.dbPath)
	cl = connect(t, s2.uri())
	db = cl.Database("restart")
	coll = db.Collection("c")

	got := findAll(t, coll, bson.D{}, optsSortID())
	if len(got) != len(wantDocsBefore) {
		t.Fatalf("after restart: %d documents, want %d", len(got), len(wantDocsBefore))
	}
	wantDocs(t, "documents after restart", got, canonAll(t, wantDocsBefore)...)
	wantDocs(t, "listIndexes after restart", array(t, lookup(t, run(t, db, d("listIndexes", "c")), "cursor.firstBatch")),
		canonAll(t, array(t, lookup(t, idxBefore, "cursor.firstBatch")))...)
	names := func(r bson.Raw) []string {
		var out []string
		for _, e := range array(t, lookup(t, r, "cursor.firstBatch")) {
			out = append(out, lookup(t, e, "name").StringValue())
		}
		return out
	}
	if b, a := names(collsBefore), names(run(t, db, d("listCollections", 1, "nameOnly", true))); fmt.Sprint(sortedStrings(b)) != fmt.Sprint(sortedStrings(a)) {
		t.Errorf("collections before %v, after %v", b, a)
	}
	// Index contents: lookups through each index find exactly the right documents.
	if got := findAll(t, coll, d("k", "key-00042"), options.Find().SetHint("k_1")); len(got) != 1 || lookup(t, got[0], "_id").Int32() != 42 {
		t.Errorf("k_1 lookup after restart: %v", got)
	}
	if got := findAll(t, coll, d("g", 30), options.Find().SetHint("g_1__id_-1")); len(got) != 286 {
		t.Errorf("g_1__id_-1 lookup after restart: %d documents, want 286", len(got))
	}
	if got := findAll(t, coll, d("g", 6), options.Find().SetHint("g_1__id_-1")); len(got) != 0 {
		t.Errorf("deleted documents found through the index after restart: %d", len(got))
	}
	r := run(t, db, d("explain", d("find", "c", "filter", d("k", "key-00001")), "verbosity", "queryPlanner"))
	if in, err := r.LookupErr("queryPlanner", "winningPlan", "inputStage", "indexName"); err != nil || in.StringValue() != "k_1" {
		t.Errorf("planner does not use k_1 after restart: %s", r)
	}
	_, err := coll.InsertOne(ctxT(t), d("_id", int32(n), "k", "key-00007"))
	if !mongo.IsDuplicateKeyError(err) {
		t.Errorf("unique k_1 not enforced after restart: %v", err)
	}
	r = run(t, db, d("validate", "c"))
	if !lookup(t, r, "valid").Boolean() {
		t.Errorf("validate after restart: %s", r)
	}
	// Writes work after the restart and survive a second one.
	if _, err := coll.InsertOne(ctxT(t), d("_id", int32(n), "k", "new")); err != nil {
		t.Fatal(err)
	}
	runErr(t, db, d("create", "capped", "capped", false), mongoerr.NamespaceExists)
	if err := cl.Disconnect(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := s2.stop(); err != nil {
		t.Fatalf("second clean shutdown: %v", err)
	}
	s3 := newServer(t, s.dbPath)
	cl = connect(t, s3.uri())
	if n2, err := countDocs(t, cl.Database("restart").Collection("c"), bson.D{}); err != nil || n2 != int64(len(wantDocsBefore)+1) {
		t.Errorf("after second restart count = %d, %v; want %d", n2, err, len(wantDocsBefore)+1)
	}
	if err := s3.stop(); err != nil {
		t.Errorf("third clean shutdown: %v", err)
	}
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
