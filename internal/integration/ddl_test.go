package integration

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/mongoerr"
)

// TestIntegrationCreateDrop covers create, drop and their errors.
func TestIntegrationCreateDrop(t *testing.T) {
	db := testDB(t)
	r := run(t, db, d("create", "c"))
	wantKeys(t, r, "ok")

	t.Run("exists", func(t *testing.T) {
		// Different options: NamespaceExists in every MongoDB version.
		runErr(t, db, d("create", "c", "capped", true, "size", 4096), mongoerr.NamespaceExists)
	})
	t.Run("bad input", func(t *testing.T) {
		runErr(t, db, d("create", ""), mongoerr.InvalidNamespace)
		ce0 := runErr(t, db, d("create", 1), mongoerr.InvalidNamespace)
		if ce0.Message != "collection name has invalid type int" {
			t.Errorf("errmsg %q", ce0.Message)
		}
		ce := runErr(t, db, d("create", "x", "foo", 1), mongoerr.Location40415)
		if ce.Message != "BSON field 'create.foo' is an unknown field." {
			t.Errorf("errmsg %q", ce.Message)
		}
		runErr(t, db, d("create", "x", "capped", true), mongoerr.InvalidOptions)
		names, err := db.ListCollectionNames(ctxT(t), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(names, ",") != "c" {
			t.Errorf("failed creates changed the catalog: collections %v", names)
		}
	})
	t.Run("capped", func(t *testing.T) {
		run(t, db, d("create", "cap", "capped", true, "size", 4096, "max", 3))
		coll := db.Collection("cap")
		for i := range 5 {
			if _, err := coll.InsertOne(ctxT(t), d("_id", int32(i))); err != nil {
				t.Fatal(err)
			}
		}
		cur, err := coll.Find(ctxT(t), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var got []bson.Raw
		if err := cur.All(ctxT(t), &got); err != nil {
			t.Fatal(err)
		}
		wantDocs(t, "capped with max 3 keeps the newest, in insertion order", got, `{"_id":2}`, `{"_id":3}`, `{"_id":4}`)
	})
	t.Run("drop", func(t *testing.T) {
		run(t, db, d("createIndexes", "c", "indexes", a(d("key", d("a", 1), "name", "a_1"))))
		r := run(t, db, d("drop", "c"))
		wantKeys(t, r, "nIndexesWas", "ns", "ok")
		wantInt32(t, r, "nIndexesWas", 2)
		if ns := lookup(t, r, "ns").StringValue(); ns != db.Name()+".c" {
			t.Errorf("ns %q", ns)
		}
		names, err := db.ListCollectionNames(ctxT(t), d("name", "c"))
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 0 {
			t.Errorf("c still listed after drop")
		}
		runErr(t, db, d("drop", 5), mongoerr.InvalidNamespace)
	})
}

// TestIntegrationDropDatabaseListDatabases covers dropDatabase and listDatabases.
func TestIntegrationDropDatabaseListDatabases(t *testing.T) {
	db := testDB(t)
	admin := db.Client().Database("admin")
	if _, err := db.Collection("c").InsertOne(ctxT(t), d("x", 1)); err != nil {
		t.Fatal(err)
	}
	r := run(t, admin, d("listDatabases", 1))
	wantKeys(t, r, "databases", "totalSize", "totalSizeMb", "ok")
	found := false
	for _, e := range array(t, lookup(t, r, "databases")) {
		if lookup(t, e, "name").StringValue() == db.Name() {
			found = true
			wantKeys(t, e, "name", "sizeOnDisk", "empty")
			if lookup(t, e, "empty").Boolean() {
				t.Errorf("database with a document reported empty: %s", e)
			}
		}
	}
	if !found {
		t.Errorf("listDatabases does not list %s: %s", db.Name(), r)
	}
	r = run(t, admin, d("listDatabases", 1, "nameOnly", true, "filter", d("name", db.Name())))
	wantKeys(t, r, "databases", "ok")
	dbs := array(t, lookup(t, r, "databases"))
	if len(dbs) != 1 {
		t.Fatalf("filtered listDatabases: %s", r)
	}
	wantKeys(t, dbs[0], "name")
	runErr(t, db, d("listDatabases", 1), mongoerr.Unauthorized)

	r = run(t, db, d("dropDatabase", 1))
	if v, err := r.LookupErr("dropped"); err != nil || v.StringValue() != db.Name() {
		t.Errorf("dropDatabase reply %s, want dropped: %q", r, db.Name())
	}
	r = run(t, admin, d("listDatabases", 1, "nameOnly", true, "filter", d("name", db.Name())))
	if n := len(array(t, lookup(t, r, "databases"))); n != 0 {
		t.Errorf("dropped database still listed: %s", r)
	}
	n, err := countDocs(t, db.Collection("c"), bson.D{})
	if err != nil || n != 0 {
		t.Errorf("after dropDatabase count = %d, %v", n, err)
	}
}

// TestIntegrationListCollections covers listCollections: shape, filter, nameOnly, batching.
func TestIntegrationListCollections(t *testing.T) {
	db := testDB(t)
	for _, c := range []string{"a", "b", "c"} {
		run(t, db, d("create", c))
	}
	r := run(t, db, d("listCollections", 1, "filter", d("name", "b")))
	cur := lookup(t, r, "cursor").Document()
	wantKeys(t, cur, "id", "ns", "firstBatch")
	if lookup(t, cur, "id").Int64() != 0 || lookup(t, cur, "ns").StringValue() != db.Name()+".$cmd.listCollections" {
		t.Errorf("cursor %s", cur)
	}
	batch := array(t, lookup(t, cur, "firstBatch"))
	if len(batch) != 1 {
		t.Fatalf("filter name b: %s", r)
	}
	wantKeys(t, batch[0], "name", "type", "options", "info", "idIndex")
	if lookup(t, batch[0], "type").StringValue() != "collection" {
		t.Errorf("type: %s", batch[0])
	}
	info := lookup(t, batch[0], "info").Document()
	wantKeys(t, info, "readOnly", "uuid")
	if st, _ := lookup(t, info, "uuid").Binary(); st != 4 {
		t.Errorf("info.uuid subtype %d, want 4 (UUID)", st)
	}
	wantDocs(t, "idIndex", []bson.Raw{lookup(t, batch[0], "idIndex").Document()}, `{"v":2,"key":{"_id":1},"name":"_id_"}`)

	r = run(t, db, d("listCollections", 1, "nameOnly", true))
	batch = array(t, lookup(t, r, "cursor.firstBatch"))
	var names []string
	for _, b := range batch {
		wantKeys(t, b, "name", "type")
		names = append(names, lookup(t, b, "name").StringValue())
	}
	if len(names) != 3 {
		t.Errorf("nameOnly: %v", names)
	}

	// cursor.batchSize: the rest comes by getMore on "$cmd.listCollections".
	r = run(t, db, d("listCollections", 1, "cursor", d("batchSize", 1)))
	id := lookup(t, r, "cursor.id").Int64()
	if n := len(array(t, lookup(t, r, "cursor.firstBatch"))); n != 1 || id == 0 {
		t.Fatalf("batchSize 1: %s", r)
	}
	r = run(t, db, d("getMore", id, "collection", "$cmd.listCollections"))
	if n := len(array(t, lookup(t, r, "cursor.nextBatch"))); n != 2 || lookup(t, r, "cursor.id").Int64() != 0 {
		t.Errorf("getMore on listCollections cursor: %s", r)
	}
	runErr(t, db, d("listCollections", 1, "filter", 1), mongoerr.TypeMismatch)
}

// TestIntegrationIndexes covers createIndexes, listIndexes and dropIndexes, with errors.
func TestIntegrationIndexes(t *testing.T) {
	db := testDB(t)
	coll := db.Collection("c")

	// Implicit creation of the collection.
	r := run(t, db, d("createIndexes", "c", "indexes", a(d("key", d("a", 1), "name", "a_1", "unique", true))))
	wantKeys(t, r, "numIndexesBefore", "numIndexesAfter", "createdCollectionAutomatically", "ok")
	wantInt32(t, r, "numIndexesBefore", 1)
	wantInt32(t, r, "numIndexesAfter", 2)
	if !lookup(t, r, "createdCollectionAutomatically").Boolean() {
		t.Errorf("createdCollectionAutomatically: %s", r)
	}
	r = run(t, db, d("createIndexes", "c", "indexes", a(
		d("key", d("b", 1, "c", -1), "name", "b_1_c_-1"),
		d("key", d("t", 1), "name", "t_1", "expireAfterSeconds", int32(3600)),
	)))
	wantInt32(t, r, "numIndexesBefore", 2)
	wantInt32(t, r, "numIndexesAfter", 4)
	if lookup(t, r, "createdCollectionAutomatically").Boolean() {
		t.Errorf("createdCollectionAutomatically on existing collection: %s", r)
	}
	// Same index again: a no-op with a note.
	r = run(t, db, d("createIndexes", "c", "indexes", a(d("key", d("a", 1), "name", "a_1", "unique", true))))
	wantInt32(t, r, "numIndexesBefore", 4)
	wantInt32(t, r, "numIndexesAfter", 4)
	if v, err := r.LookupErr("note"); err != nil || v.StringValue() != "all indexes already exist" {
		t.Errorf("note: %s", r)
	}

	t.Run("listIndexes", func(t *testing.T) {
		r := run(t, db, d("listIndexes", "c"))
		cur := lookup(t, r, "cursor").Document()
		wantKeys(t, cur, "id", "ns", "firstBatch")
		// mongod names listIndexes cursors <db>.$cmd.listIndexes.<coll>.
		if lookup(t, cur, "ns").StringValue() != db.Name()+".$cmd.listIndexes.c" || lookup(t, cur, "id").Int64() != 0 {
			t.Errorf("cursor: %s", cur)
		}
		wantDocs(t, "listIndexes", array(t, lookup(t, cur, "firstBatch")),
			`{"v":2,"key":{"_id":1},"name":"_id_"}`,
			`{"v":2,"key":{"a":1},"name":"a_1","unique":true}`,
			`{"v":2,"key":{"b":1,"c":-1},"name":"b_1_c_-1"}`,
			`{"v":2,"key":{"t":1},"name":"t_1","expireAfterSeconds":3600}`)
		runErr(t, db, d("listIndexes", "nope"), mongoerr.NamespaceNotFound)
	})

	t.Run("createIndexes errors", func(t *testing.T) {
		runErr(t, db, d("createIndexes", "c", "indexes", a(d("key", d("z", 1), "name", "a_1"))), mongoerr.IndexKeySpecsConflict)
		ce := runErr(t, db, d("createIndexes", "c", "indexes", a(d("key", d("a", 1), "name", "other"))), mongoerr.IndexOptionsConflict)
		if ce.Message != "Index already exists with a different name: a_1" {
			t.Errorf("errmsg %q", ce.Message)
		}
		ce = runErr(t, db, d("createIndexes", "c", "indexes", a(d("key", d("a", 1), "name", "a_1", "unique", false))), mongoerr.IndexOptionsConflict)
		if !strings.HasPrefix(ce.Message, "An equivalent index already exists with the same name but different options.") {
			t.Errorf("errmsg %q", ce.Message)
		}
		ce = runErr(t, db, d("createIndexes", "c", "indexes", a(d("key", d("z", "foo"), "name", "z_foo"))), mongoerr.CannotCreateIndex)
		if ce.Message != "Unknown index plugin 'foo'" {
			t.Errorf("errmsg %q", ce.Message)
		}
		runErr(t, db, d("createIndexes", "c", "indexes", a()), mongoerr.BadValue)
		ce = runErr(t, db, d("createIndexes", "c"), mongoerr.Location40414)
		if ce.Message != "BSON field 'createIndexes.indexes' is missing but a required field" {
			t.Errorf("errmsg %q", ce.Message)
		}
		runErr(t, db, d("createIndexes", "c", "indexes", a(d("key", d("z", 1), "name", "z_1")), "bogus", 1), mongoerr.Location40415)
		// Nothing of the failed requests exists.
		r := run(t, db, d("listIndexes", "c"))
		if n := len(array(t, lookup(t, r, "cursor.firstBatch"))); n != 4 {
			t.Errorf("failed createIndexes changed the catalog: %s", r)
		}
	})

	t.Run("unique violation", func(t *testing.T) {
		if _, err := coll.InsertOne(ctxT(t), d("_id", 1, "a", 7)); err != nil {
			t.Fatal(err)
		}
		r := run(t, db, d("insert", "c", "documents", a(d("_id", 2, "a", 7))))
		wantInt32(t, r, "n", 0)
		we := array(t, lookup(t, r, "writeErrors"))
		if len(we) != 1 {
			t.Fatalf("writeErrors: %s", r)
		}
		wantInt32(t, we[0], "index", 0)
		wantInt32(t, we[0], "code", 11000)
		wantMsg := "E11000 duplicate key error collection: " + db.Name() + ".c index: a_1 dup key: { a: 7 }"
		if msg := lookup(t, we[0], "errmsg").StringValue(); msg != wantMsg {
			t.Errorf("errmsg %q, want %q", msg, wantMsg)
		}
		wantDocs(t, "keyPattern", []bson.Raw{lookup(t, we[0], "keyPattern").Document()}, `{"a":1}`)
		wantDocs(t, "keyValue", []bson.Raw{lookup(t, we[0], "keyValue").Document()}, `{"a":7}`)
		// The driver classifies it.
		_, err := coll.InsertOne(ctxT(t), d("_id", 3, "a", 7))
		if !mongo.IsDuplicateKeyError(err) {
			t.Errorf("driver InsertOne: want duplicate key error, got %v", err)
		}
		// Building a unique index over duplicates fails with 11000 and leaves no index.
		if _, err := coll.InsertOne(ctxT(t), d("_id", 4, "a", 100, "dup", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := coll.InsertOne(ctxT(t), d("_id", 5, "a", 101, "dup", 1)); err != nil {
			t.Fatal(err)
		}
		runErr(t, db, d("createIndexes", "c", "indexes", a(d("key", d("dup", 1), "name", "dup_1", "unique", true))), mongoerr.DuplicateKey)
		r = run(t, db, d("listIndexes", "c"))
		if n := len(array(t, lookup(t, r, "cursor.firstBatch"))); n != 4 {
			t.Errorf("failed unique build left an index: %s", r)
		}
	})

	t.Run("collMod TTL", func(t *testing.T) {
		r := run(t, db, d("collMod", "c", "index", d("keyPattern", d("t", 1), "expireAfterSeconds", int32(100))))
		wantKeys(t, r, "expireAfterSeconds_old", "expireAfterSeconds_new", "ok")
		wantNum(t, r, "expireAfterSeconds_old", 3600)
		wantNum(t, r, "expireAfterSeconds_new", 100)
		r = run(t, db, d("collMod", "c", "index", d("name", "t_1", "expireAfterSeconds", int32(200))))
		wantNum(t, r, "expireAfterSeconds_old", 100)
		r = run(t, db, d("listIndexes", "c"))
		last := array(t, lookup(t, r, "cursor.firstBatch"))[3]
		wantNum(t, last, "expireAfterSeconds", 200)
		runErr(t, db, d("collMod", "nope", "index", d("name", "t_1", "expireAfterSeconds", 1)), mongoerr.NamespaceNotFound)
		runErr(t, db, d("collMod", "c", "index", d("name", "nope", "expireAfterSeconds", 1)), mongoerr.IndexNotFound)
	})

	t.Run("dropIndexes", func(t *testing.T) {
		runErr(t, db, d("dropIndexes", "c", "index", "_id_"), mongoerr.InvalidOptions)
		ce := runErr(t, db, d("dropIndexes", "c", "index", "nope"), mongoerr.IndexNotFound)
		if ce.Message != "index not found with name [nope]" {
			t.Errorf("errmsg %q", ce.Message)
		}
		runErr(t, db, d("dropIndexes", "c", "index", d("zz", 1)), mongoerr.IndexNotFound)
		runErr(t, db, d("dropIndexes", "nope", "index", "a_1"), mongoerr.NamespaceNotFound)
		r := run(t, db, d("dropIndexes", "c", "index", d("b", 1, "c", -1)))
		wantKeys(t, r, "nIndexesWas", "ok")
		wantInt32(t, r, "nIndexesWas", 4)
		r = run(t, db, d("dropIndexes", "c", "index", a("a_1")))
		wantInt32(t, r, "nIndexesWas", 3)
		r = run(t, db, d("dropIndexes", "c", "index", "*"))
		wantInt32(t, r, "nIndexesWas", 2)
		r = run(t, db, d("listIndexes", "c"))
		wantDocs(t, "after dropIndexes *", array(t, lookup(t, r, "cursor.firstBatch")), `{"v":2,"key":{"_id":1},"name":"_id_"}`)
		// The unique constraint went with a_1.
		if _, err := coll.InsertOne(ctxT(t), d("_id", 9, "a", 7)); err != nil {
			t.Errorf("insert after dropping the unique index: %v", err)
		}
	})
}

// TestIntegrationRenameCollection covers renameCollection within and across databases.
func TestIntegrationRenameCollection(t *testing.T) {
	db := testDB(t)
	admin := db.Client().Database("admin")
	other := db.Client().Database(db.Name() + "_to")
	t.Cleanup(func() { _ = other.Drop(ctxT(t)) })
	insertN(t, db.Collection("src"), 10, 3)
	run(t, db, d("createIndexes", "src", "indexes", a(d("key", d("a", 1), "name", "a_1"))))
	ns := func(c string) string { return db.Name() + "." + c }

	runErr(t, db, d("renameCollection", ns("src"), "to", ns("dst")), mongoerr.Unauthorized)
	runErr(t, admin, d("renameCollection", ns("missing"), "to", ns("dst")), mongoerr.NamespaceNotFound)
	r := run(t, admin, d("renameCollection", ns("src"), "to", ns("dst")))
	wantKeys(t, r, "ok")
	if n, _ := countDocs(t, db.Collection("dst"), bson.D{}); n != 10 {
		t.Errorf("dst count %d", n)
	}
	if n, _ := countDocs(t, db.Collection("src"), bson.D{}); n != 0 {
		t.Errorf("src count %d after rename", n)
	}
	r = run(t, db, d("listIndexes", "dst"))
	if n := len(array(t, lookup(t, r, "cursor.firstBatch"))); n != 2 {
		t.Errorf("indexes did not follow the rename: %s", r)
	}

	insertN(t, db.Collection("other"), 2, 1)
	runErr(t, admin, d("renameCollection", ns("other"), "to", ns("dst")), mongoerr.NamespaceExists)
	run(t, admin, d("renameCollection", ns("other"), "to", ns("dst"), "dropTarget", true))
	if n, _ := countDocs(t, db.Collection("dst"), bson.D{}); n != 2 {
		t.Errorf("dropTarget: dst count %d, want 2", n)
	}

	// Across databases.
	run(t, admin, d("renameCollection", ns("dst"), "to", other.Name()+".moved"))
	cur, err := other.Collection("moved").Find(ctxT(t), bson.D{}, optsSortID())
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.Raw
	if err := cur.All(ctxT(t), &got); err != nil {
		t.Fatal(err)
	}
	wantDocs(t, "cross-database rename", got, `{"_id":0,"a":0}`, `{"_id":1,"a":0}`)
}

// TestIntegrationStatsValidate covers validate, dbStats, collStats and dataSize.
func TestIntegrationStatsValidate(t *testing.T) {
	db := testDB(t)
	insertN(t, db.Collection("c"), 50, 5)
	run(t, db, d("createIndexes", "c", "indexes", a(d("key", d("a", 1), "name", "a_1"))))
	run(t, db, d("create", "empty"))

	t.Run("validate", func(t *testing.T) {
		r := run(t, db, d("validate", "c"))
		if !lookup(t, r, "valid").Boolean() {
			t.Errorf("not valid: %s", r)
		}
		if lookup(t, r, "ns").StringValue() != db.Name()+".c" {
			t.Errorf("ns: %s", r)
		}
		wantNum(t, r, "nrecords", 50)
		wantNum(t, r, "nIndexes", 2)
		wantNum(t, r, "keysPerIndex._id_", 50)
		wantNum(t, r, "keysPerIndex.a_1", 50)
		for _, k := range []string{"warnings", "errors"} {
			if vals, _ := lookup(t, r, k).Array().Values(); len(vals) != 0 {
				t.Errorf("%s: %s", k, r)
			}
		}
		r = run(t, db, d("validate", "c", "full", true))
		if !lookup(t, r, "valid").Boolean() {
			t.Errorf("full: not valid: %s", r)
		}
		runErr(t, db, d("validate", "nope"), mongoerr.NamespaceNotFound)
	})
	t.Run("dbStats", func(t *testing.T) {
		r := run(t, db, d("dbStats", 1))
		if lookup(t, r, "db").StringValue() != db.Name() {
			t.Errorf("db: %s", r)
		}
		wantNum(t, r, "collections", 2)
		wantNum(t, r, "objects", 50)
		wantNum(t, r, "indexes", 3)
		if n, _ := lookup(t, r, "dataSize").AsInt64OK(); n <= 0 {
			if f, _ := lookup(t, r, "dataSize").DoubleOK(); f <= 0 {
				t.Errorf("dataSize: %s", r)
			}
		}
	})
	t.Run("collStats", func(t *testing.T) {
		r := run(t, db, d("collStats", "c"))
		if lookup(t, r, "ns").StringValue() != db.Name()+".c" {
			t.Errorf("ns: %s", r)
		}
		wantNum(t, r, "count", 50)
		wantNum(t, r, "nindexes", 2)
		lookup(t, r, "indexSizes.a_1")
		lookup(t, r, "size")
	})
	t.Run("dataSize", func(t *testing.T) {
		r := run(t, db, d("dataSize", db.Name()+".c"))
		wantNum(t, r, "numObjects", 50)
		if n, ok := lookup(t, r, "size").AsInt64OK(); !ok || n <= 0 {
			t.Errorf("size: %s", r)
		}
	})
}

// TestIntegrationIndexKinds checks multikey, sparse, partial and hashed indexes end to end:
// constraints, and that the planner uses them.
func TestIntegrationIndexKinds(t *testing.T) {
	db := testDB(t)
	coll := db.Collection("c")
	run(t, db, d("createIndexes", "c", "indexes", a(
		d("key", d("tags", 1), "name", "tags_1"),
		d("key", d("email", 1), "name", "email_1", "unique", true, "partialFilterExpression", d("active", true)),
		d("key", d("sku", 1), "name", "sku_1", "unique", true, "sparse", true),
		d("key", d("h", "hashed"), "name", "h_hashed"),
	)))
	if _, err := coll.InsertMany(ctxT(t), []any{
		d("_id", 1, "tags", a("x", "y"), "email", "a@x", "active", true, "h", 1),
		d("_id", 2, "tags", a("y", "z"), "email", "a@x", "active", false, "h", 2), // outside the partial filter
		d("_id", 3, "tags", "x", "h", 3),                                          // no sku: sparse
		d("_id", 4, "tags", a(), "h", 3),                                          // no sku: sparse
	}); err != nil {
		t.Fatalf("inserts allowed by partial and sparse unique indexes: %v", err)
	}
	if _, err := coll.InsertOne(ctxT(t), d("_id", 5, "email", "a@x", "active", true)); !mongo.IsDuplicateKeyError(err) {
		t.Errorf("partial unique index inside its filter: want duplicate key, got %v", err)
	}
	if _, err := coll.InsertOne(ctxT(t), d("_id", 6, "sku", "s1")); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctxT(t), d("_id", 7, "sku", "s1")); !mongo.IsDuplicateKeyError(err) {
		t.Errorf("sparse unique index: want duplicate key, got %v", err)
	}
	plan := func(filter bson.D) (string, bson.Raw) {
		r := run(t, db, d("explain", d("find", "c", "filter", filter), "verbosity", "executionStats"))
		in, err := r.LookupErr("queryPlanner", "winningPlan", "inputStage")
		if err != nil {
			return "", r
		}
		name, _ := in.Document().Lookup("indexName").StringValueOK()
		return name, r
	}
	for _, c := range []struct {
		filter bson.D
		index  string
		ids    []string
	}{
		{d("tags", "x"), "tags_1", []string{`{"_id":1}`, `{"_id":3}`}},
		{d("tags", "y"), "tags_1", []string{`{"_id":1}`, `{"_id":2}`}},
		{d("h", 3), "h_hashed", []string{`{"_id":3}`, `{"_id":4}`}},
		{d("email", "a@x", "active", true), "email_1", []string{`{"_id":1}`}},
	} {
		if name, r := plan(c.filter); name != c.index {
			t.Errorf("%s: winning plan does not use %s: %s", fmtDoc(c.filter), c.index, lookup(t, r, "queryPlanner.winningPlan"))
		}
		wantDocs(t, fmtDoc(c.filter), findAll(t, coll, c.filter, options.Find().SetProjection(d("_id", 1)).SetSort(d("_id", 1))), c.ids...)
	}
	// The multikey index returns each document once even when several keys match.
	wantDocs(t, "multikey $in dedup", findAll(t, coll, d("tags", d("$in", a("x", "y"))), options.Find().SetProjection(d("_id", 1)).SetSort(d("_id", 1)).SetHint("tags_1")),
		`{"_id":1}`, `{"_id":2}`, `{"_id":3}`)
	r := run(t, db, d("validate", "c"))
	if !lookup(t, r, "valid").Boolean() {
		t.Errorf("validate: %s", r)
	}
}
