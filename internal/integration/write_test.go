package integration

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/mongoerr"
)

// wantWriteErrors checks a write reply's writeErrors: their indexes and codes, in order.
func wantWriteErrors(t testing.TB, r bson.Raw, want ...[2]int32) []bson.Raw {
	t.Helper()
	v, err := r.LookupErr("writeErrors")
	if err != nil {
		t.Fatalf("no writeErrors in %s, want %v", r, want)
	}
	we := array(t, v)
	if len(we) != len(want) {
		t.Fatalf("writeErrors %s, want (index, code) %v", v, want)
	}
	for i, w := range want {
		wantInt32(t, we[i], "index", w[0])
		wantInt32(t, we[i], "code", w[1])
		if lookup(t, we[i], "errmsg").StringValue() == "" {
			t.Errorf("writeError without errmsg: %s", we[i])
		}
	}
	return we
}

// TestIntegrationInsert covers insert: reply shape, _id generation, ordered and unordered
// batches with duplicate keys, and bad input.
func TestIntegrationInsert(t *testing.T) {
	db := testDB(t)
	coll := db.Collection("c")

	r := run(t, db, d("insert", "c", "documents", a(d("_id", 1, "a", 1), d("a", 2, "_id", 2), d("a", 3))))
	wantKeys(t, r, "n", "ok")
	wantInt32(t, r, "n", 3)
	got := findAll(t, coll, d("a", d("$gte", 2)), options.Find().SetSort(d("a", 1)))
	if len(got) != 2 {
		t.Fatalf("find: %v", got)
	}
	// _id is moved to the front; a missing _id is generated as an ObjectId.
	wantKeys(t, got[0], "_id", "a")
	wantKeys(t, got[1], "_id", "a")
	if v := lookup(t, got[1], "_id"); v.Type != bson.TypeObjectID {
		t.Errorf("generated _id is %v, want ObjectId", v.Type)
	}
	res, err := coll.InsertOne(ctxT(t), d("x", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.InsertedID.(bson.ObjectID); !ok {
		t.Errorf("InsertOne InsertedID %T", res.InsertedID)
	}

	t.Run("ordered duplicate stops", func(t *testing.T) {
		r := run(t, db, d("insert", "c", "documents", a(d("_id", 10), d("_id", 1), d("_id", 11))))
		wantInt32(t, r, "n", 1)
		we := wantWriteErrors(t, r, [2]int32{1, 11000})
		wantKeys(t, we[0], "index", "code", "keyPattern", "keyValue", "errmsg")
		wantMsg := "E11000 duplicate key error collection: " + db.Name() + ".c index: _id_ dup key: { _id: 1 }"
		if msg := lookup(t, we[0], "errmsg").StringValue(); msg != wantMsg {
			t.Errorf("errmsg %q, want %q", msg, wantMsg)
		}
		if n, _ := countDocs(t, coll, d("_id", 11)); n != 0 {
			t.Errorf("ordered insert continued after an error")
		}
	})
	t.Run("unordered duplicate continues", func(t *testing.T) {
		r := run(t, db, d("insert", "c", "documents", a(d("_id", 1), d("_id", 20), d("_id", 20), d("_id", 21)), "ordered", false))
		wantInt32(t, r, "n", 2)
		wantWriteErrors(t, r, [2]int32{0, 11000}, [2]int32{2, 11000})
		if n, _ := countDocs(t, coll, d("_id", d("$in", a(20, 21)))); n != 2 {
			t.Errorf("unordered insert: %d of _id 20, 21 present", n)
		}
		_, err := coll.InsertMany(ctxT(t), []any{d("_id", 30), d("_id", 30)}, options.InsertMany().SetOrdered(false))
		var bwe mongo.BulkWriteException
		if !mongo.IsDuplicateKeyError(err) || !asBulk(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 1 {
			t.Errorf("driver InsertMany unordered: %v", err)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		r := run(t, db, d("insert", "c", "documents", a(d("_id", a(1, 2)))))
		wantInt32(t, r, "n", 0)
		we := wantWriteErrors(t, r, [2]int32{0, int32(mongoerr.InvalidIdField)})
		if msg := lookup(t, we[0], "errmsg").StringValue(); msg != "The '_id' value cannot be of type array" {
			t.Errorf("errmsg %q", msg)
		}
		ce := runErr(t, db, d("insert", "c"), mongoerr.Location40414)
		if ce.Message != "BSON field 'insert.documents' is missing but a required field" {
			t.Errorf("errmsg %q", ce.Message)
		}
		runErr(t, db, d("insert", "c", "documents", 1), mongoerr.TypeMismatch)
		runErr(t, db, d("insert", "c", "documents", a()), mongoerr.InvalidLength)
		runErr(t, db, d("insert", "", "documents", a(d("x", 1))), mongoerr.InvalidNamespace)
		runErr(t, db, d("insert", "c", "documents", a(d("x", 1)), "bogus", 1), mongoerr.Location40415)
		if n, _ := countDocs(t, coll, bson.D{}); n != 8 {
			t.Errorf("count %d after bad inserts, want 8", n)
		}
	})
}

func asBulk(err error, bwe *mongo.BulkWriteException) bool {
	e, ok := err.(mongo.BulkWriteException)
	if ok {
		*bwe = e
	}
	return ok
}

// TestIntegrationUpdate covers update: operators, multi, upsert semantics, arrayFilters,
// positional updates, pipelines, no-op detection and errors.
func TestIntegrationUpdate(t *testing.T) {
	db := testDB(t)
	coll := db.Collection("c")
	insertN(t, coll, 10, 2)
	upd := func(stmts ...bson.D) bson.D {
		arr := bson.A{}
		for _, s := range stmts {
			arr = append(arr, s)
		}
		return d("update", "c", "updates", arr)
	}
	one := func(t *testing.T, id any) bson.Raw {
		t.Helper()
		got := findAll(t, coll, d("_id", id))
		if len(got) != 1 {
			t.Fatalf("_id %v: %v", id, got)
		}
		return got[0]
	}

	t.Run("set inc multi noop", func(t *testing.T) {
		r := run(t, db, upd(d("q", d("_id", 1), "u", d("$set", d("s", "x"), "$inc", d("a", 5)))))
		wantKeys(t, r, "n", "nModified", "ok")
		wantInt32(t, r, "n", 1)
		wantInt32(t, r, "nModified", 1)
		wantDocs(t, "after $set/$inc", []bson.Raw{one(t, 1)}, `{"_id":1,"a":6,"s":"x"}`)
		// Setting the same value matches but modifies nothing.
		r = run(t, db, upd(d("q", d("_id", 1), "u", d("$set", d("s", "x")))))
		wantInt32(t, r, "n", 1)
		wantInt32(t, r, "nModified", 0)
		// multi defaults to false.
		r = run(t, db, upd(d("q", d("a", 0), "u", d("$set", d("m", 1)))))
		wantInt32(t, r, "n", 1)
		r = run(t, db, upd(d("q", d("a", 0), "u", d("$set", d("m", 2)), "multi", true)))
		wantInt32(t, r, "n", 5)
		wantInt32(t, r, "nModified", 5)
		// Replacement keeps _id.
		r = run(t, db, upd(d("q", d("_id", 2), "u", d("r", 1))))
		wantInt32(t, r, "nModified", 1)
		wantDocs(t, "replacement", []bson.Raw{one(t, 2)}, `{"_id":2,"r":1}`)
		res, err := coll.UpdateMany(ctxT(t), d("a", 1), d("$unset", d("a", "")))
		if err != nil || res.MatchedCount != 4 || res.ModifiedCount != 4 {
			t.Errorf("driver UpdateMany: %+v %v", res, err)
		}
	})

	t.Run("upsert", func(t *testing.T) {
		r := run(t, db, upd(d("q", d("x", 5, "y", d("$gt", 1), "p.q", 7), "u", d("$set", d("z", 1), "$setOnInsert", d("w", 2)), "upsert", true)))
		// mongod's order: upserted comes before nModified.
		wantKeys(t, r, "n", "upserted", "nModified", "ok")
		wantInt32(t, r, "n", 1)
		wantInt32(t, r, "nModified", 0)
		ups := array(t, lookup(t, r, "upserted"))
		if len(ups) != 1 {
			t.Fatalf("upserted: %s", r)
		}
		wantKeys(t, ups[0], "index", "_id")
		wantInt32(t, ups[0], "index", 0)
		id := lookup(t, ups[0], "_id")
		if id.Type != bson.TypeObjectID {
			t.Errorf("upserted _id %v, want ObjectId", id)
		}
		// Equality fields of the query seed the new document; ranges do not. Since MongoDB 5.0
		// update operators (and the seeding) add fields in lexicographic order.
		wantDocs(t, "upserted document", []bson.Raw{one(t, id.ObjectID())},
			`{"_id":{"$oid":"`+id.ObjectID().Hex()+`"},"p":{"q":7},"x":5,"w":2,"z":1}`)
		// The same upsert now matches: $setOnInsert does nothing.
		r = run(t, db, upd(d("q", d("x", 5), "u", d("$set", d("z", 2), "$setOnInsert", d("w", 3)), "upsert", true)))
		wantKeys(t, r, "n", "nModified", "ok")
		wantInt32(t, r, "nModified", 1)
		wantDocs(t, "updated upsert", []bson.Raw{one(t, id.ObjectID())},
			`{"_id":{"$oid":"`+id.ObjectID().Hex()+`"},"p":{"q":7},"x":5,"w":2,"z":2}`)
		// _id from the query; upserted indexes refer to the statements.
		r = run(t, db, upd(
			d("q", d("_id", 1), "u", d("$inc", d("a", 1))),
			d("q", d("_id", "u1"), "u", d("$inc", d("n", 1)), "upsert", true),
		))
		wantInt32(t, r, "n", 2)
		wantInt32(t, r, "nModified", 1)
		wantDocs(t, "upserted", array(t, lookup(t, r, "upserted")), `{"index":1,"_id":"u1"}`)
		wantDocs(t, "upsert with _id", []bson.Raw{one(t, "u1")}, `{"_id":"u1","n":1}`)
		// A replacement upsert takes only _id from the query.
		run(t, db, upd(d("q", d("_id", "u2", "k", 1), "u", d("v", 2), "upsert", true)))
		wantDocs(t, "replacement upsert", []bson.Raw{one(t, "u2")}, `{"_id":"u2","v":2}`)
		res, err := coll.UpdateOne(ctxT(t), d("_id", "u3"), d("$set", d("v", 1)), options.UpdateOne().SetUpsert(true))
		if err != nil || res.UpsertedID != "u3" || res.UpsertedCount != 1 {
			t.Errorf("driver upsert: %+v %v", res, err)
		}
	})

	t.Run("arrays", func(t *testing.T) {
		if _, err := coll.InsertOne(ctxT(t), d("_id", "g", "grades", a(80, 90, 95), "items", a(d("sku", "a", "qty", 1), d("sku", "b", "qty", 2)))); err != nil {
			t.Fatal(err)
		}
		r := run(t, db, upd(d("q", d("_id", "g"), "u", d("$set", d("grades.$[h]", 100)), "arrayFilters", a(d("h", d("$gte", 90))))))
		wantInt32(t, r, "nModified", 1)
		r = run(t, db, upd(d("q", d("_id", "g"), "u", d("$inc", d("items.$[i].qty", 10)), "arrayFilters", a(d("i.sku", "b")))))
		wantInt32(t, r, "nModified", 1)
		wantDocs(t, "arrayFilters", []bson.Raw{one(t, "g")},
			`{"_id":"g","grades":[80,100,100],"items":[{"sku":"a","qty":1},{"sku":"b","qty":12}]}`)
		run(t, db, upd(d("q", d("_id", "g", "grades", 80), "u", d("$set", d("grades.$", 81)))))
		run(t, db, upd(d("q", d("_id", "g"), "u", d("$inc", d("grades.$[]", 1)), "multi", false)))
		run(t, db, upd(d("q", d("_id", "g"), "u", d("$push", d("grades", d("$each", a(1, 2), "$sort", -1, "$slice", 3))))))
		wantDocs(t, "positional, $[] and $push", []bson.Raw{one(t, "g")},
			`{"_id":"g","grades":[101,101,82],"items":[{"sku":"a","qty":1},{"sku":"b","qty":12}]}`)
		res, err := coll.UpdateOne(ctxT(t), d("_id", "g"), d("$set", d("items.$[x].qty", 0)),
			options.UpdateOne().SetArrayFilters([]any{d("x.qty", d("$gt", 5))}))
		if err != nil || res.ModifiedCount != 1 {
			t.Errorf("driver UpdateOne with arrayFilters: %+v %v", res, err)
		}
		// An unused array filter is an error.
		r = run(t, db, upd(d("q", d("_id", "g"), "u", d("$set", d("grades.0", 1)), "arrayFilters", a(d("q", 1)))))
		wantWriteErrors(t, r, [2]int32{0, int32(mongoerr.FailedToParse)})
	})

	t.Run("pipeline", func(t *testing.T) {
		r := run(t, db, upd(d("q", d("_id", 4), "u", a(d("$set", d("b", "$m"))))))
		wantInt32(t, r, "nModified", 1)
		wantDocs(t, "pipeline update", []bson.Raw{one(t, 4)}, `{"_id":4,"a":0,"m":2,"b":2}`)
	})

	t.Run("errors change nothing", func(t *testing.T) {
		before := findAll(t, coll, bson.D{}, optsSortID())
		cases := []struct {
			name string
			u    any
			code mongoerr.Code
		}{
			{"$inc non-numeric", d("$inc", d("s", 1)), mongoerr.TypeMismatch},
			{"immutable _id", d("$set", d("_id", 99)), mongoerr.ImmutableField},
			{"conflict", d("$set", d("a", 1), "$inc", d("a", 1)), mongoerr.ConflictingUpdateOperators},
			{"unknown modifier", d("$foo", d("a", 1)), mongoerr.FailedToParse},
		}
		for _, c := range cases {
			r := run(t, db, upd(d("q", d("_id", 1), "u", c.u)))
			wantInt32(t, r, "n", 0)
			wantInt32(t, r, "nModified", 0)
			t.Run(c.name, func(t *testing.T) { wantWriteErrors(t, r, [2]int32{0, int32(c.code)}) })
		}
		// Ordered: the second statement does not run after the first fails.
		r := run(t, db, upd(d("q", d("_id", 1), "u", d("$inc", d("s", 1))), d("q", d("_id", 4), "u", d("$set", d("never", 1)))))
		wantWriteErrors(t, r, [2]int32{0, int32(mongoerr.TypeMismatch)})
		runErr(t, db, d("update", "c"), mongoerr.Location40414)
		runErr(t, db, d("update", "c", "updates", a(d("q", bson.D{}))), mongoerr.Location40414)
		runErr(t, db, d("update", "c", "updates", a(d("q", bson.D{}, "u", bson.D{}, "bogus", 1))), mongoerr.Location40415)
		after := findAll(t, coll, bson.D{}, optsSortID())
		wantDocs(t, "documents after failed updates", after, canonAll(t, before)...)
	})
}

func canonAll(t testing.TB, docs []bson.Raw) []string {
	out := make([]string, len(docs))
	for i, doc := range docs {
		out[i] = canon(t, doc)
	}
	return out
}

// TestIntegrationDelete covers delete with limit 0 and 1, and errors.
func TestIntegrationDelete(t *testing.T) {
	db := testDB(t)
	coll := db.Collection("c")
	insertN(t, coll, 20, 4)
	r := run(t, db, d("delete", "c", "deletes", a(d("q", d("a", 1), "limit", 1))))
	wantKeys(t, r, "n", "ok")
	wantInt32(t, r, "n", 1)
	r = run(t, db, d("delete", "c", "deletes", a(d("q", d("a", 1), "limit", 0), d("q", d("_id", 0), "limit", 1))))
	wantInt32(t, r, "n", 5)
	r = run(t, db, d("delete", "c", "deletes", a(d("q", d("a", 42), "limit", 0))))
	wantInt32(t, r, "n", 0)
	res, err := coll.DeleteMany(ctxT(t), d("a", 2))
	if err != nil || res.DeletedCount != 5 {
		t.Errorf("driver DeleteMany: %+v %v", res, err)
	}
	res, err = coll.DeleteOne(ctxT(t), d("a", 3))
	if err != nil || res.DeletedCount != 1 {
		t.Errorf("driver DeleteOne: %+v %v", res, err)
	}
	runErr(t, db, d("delete", "c", "deletes", a(d("q", bson.D{}, "limit", 2))), mongoerr.FailedToParse)
	runErr(t, db, d("delete", "c", "deletes", a(d("limit", 0))), mongoerr.Location40414)
	runErr(t, db, d("delete", "c"), mongoerr.Location40414)
	r = run(t, db, d("delete", "c", "deletes", a(d("q", d("a", d("$foo", 1)), "limit", 0))))
	wantWriteErrors(t, r, [2]int32{0, int32(mongoerr.BadValue)})
	if n, _ := countDocs(t, coll, bson.D{}); n != 8 {
		t.Errorf("count %d, want 8", n)
	}
	r = run(t, db, d("delete", "missing", "deletes", a(d("q", bson.D{}, "limit", 0))))
	wantInt32(t, r, "n", 0)
}

// TestIntegrationFindAndModify covers findAndModify's update, remove and upsert forms.
func TestIntegrationFindAndModify(t *testing.T) {
	db := testDB(t)
	coll := db.Collection("c")
	insertN(t, coll, 5, 5)
	fam := func(kv ...any) bson.D { return append(d("findAndModify", "c"), d(kv...)...) }

	r := run(t, db, fam("query", d("_id", 1), "update", d("$inc", d("a", 10)), "new", true))
	wantKeys(t, r, "lastErrorObject", "value", "ok")
	leo := lookup(t, r, "lastErrorObject").Document()
	wantKeys(t, leo, "n", "updatedExisting")
	wantInt32(t, leo, "n", 1)
	if !lookup(t, leo, "updatedExisting").Boolean() {
		t.Errorf("updatedExisting: %s", leo)
	}
	wantDocs(t, "new:true value", []bson.Raw{lookup(t, r, "value").Document()}, `{"_id":1,"a":11}`)
	r = run(t, db, fam("query", d("_id", 1), "update", d("$inc", d("a", 1)), "fields", d("_id", 0)))
	wantDocs(t, "pre-image with fields", []bson.Raw{lookup(t, r, "value").Document()}, `{"a":11}`)

	// sort picks the document; remove returns it.
	r = run(t, db, fam("query", bson.D{}, "sort", d("a", -1), "remove", true))
	wantKeys(t, lookup(t, r, "lastErrorObject").Document(), "n")
	wantDocs(t, "removed", []bson.Raw{lookup(t, r, "value").Document()}, `{"_id":1,"a":12}`)
	if n, _ := countDocs(t, coll, d("_id", 1)); n != 0 {
		t.Errorf("remove did not remove")
	}

	// No match.
	r = run(t, db, fam("query", d("_id", 99), "update", d("$set", d("x", 1))))
	wantDocs(t, "no match", []bson.Raw{r}, `{"lastErrorObject":{"n":0,"updatedExisting":false},"value":null,"ok":1.0}`)
	r = run(t, db, fam("query", d("_id", 99), "remove", true))
	wantDocs(t, "no match remove", []bson.Raw{r}, `{"lastErrorObject":{"n":0},"value":null,"ok":1.0}`)

	// Upserts.
	r = run(t, db, fam("query", d("_id", "u1", "k", 3), "update", d("$set", d("v", 1)), "upsert", true))
	wantDocs(t, "upsert new:false", []bson.Raw{r}, `{"lastErrorObject":{"n":1,"updatedExisting":false,"upserted":"u1"},"value":null,"ok":1.0}`)
	r = run(t, db, fam("query", d("_id", "u2"), "update", d("$set", d("v", 2)), "upsert", true, "new", true))
	wantDocs(t, "upsert new:true value", []bson.Raw{lookup(t, r, "value").Document()}, `{"_id":"u2","v":2}`)
	wantDocs(t, "upserted document", findAll(t, coll, d("_id", "u1")), `{"_id":"u1","k":3,"v":1}`)

	// arrayFilters.
	if _, err := coll.InsertOne(ctxT(t), d("_id", "arr", "xs", a(1, 5, 9))); err != nil {
		t.Fatal(err)
	}
	r = run(t, db, fam("query", d("_id", "arr"), "update", d("$set", d("xs.$[e]", 0)), "arrayFilters", a(d("e", d("$gt", 4))), "new", true))
	wantDocs(t, "arrayFilters", []bson.Raw{lookup(t, r, "value").Document()}, `{"_id":"arr","xs":[1,0,0]}`)

	// The driver's helpers.
	var out bson.Raw
	err := coll.FindOneAndUpdate(ctxT(t), d("_id", 2), d("$set", d("a", 20)),
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&out)
	if err != nil {
		t.Fatal(err)
	}
	wantDocs(t, "FindOneAndUpdate", []bson.Raw{out}, `{"_id":2,"a":20}`)
	if err := coll.FindOneAndDelete(ctxT(t), d("_id", 404)).Err(); err != mongo.ErrNoDocuments {
		t.Errorf("FindOneAndDelete no match: %v", err)
	}

	// Errors, and nothing changes.
	before := findAll(t, coll, bson.D{}, optsSortID())
	ce := runErr(t, db, fam("query", d("_id", 2), "update", d("$set", d("a", 1)), "remove", true), mongoerr.FailedToParse)
	if ce.Message != "Cannot specify both an update and remove=true" {
		t.Errorf("errmsg %q", ce.Message)
	}
	ce = runErr(t, db, fam("query", d("_id", 2)), mongoerr.FailedToParse)
	if ce.Message != "Either an update or remove=true must be specified" {
		t.Errorf("errmsg %q", ce.Message)
	}
	runErr(t, db, fam("query", d("_id", 2), "remove", true, "new", true), mongoerr.FailedToParse)
	runErr(t, db, fam("query", d("_id", 2), "update", d("$set", d("_id", 5))), mongoerr.ImmutableField)
	runErr(t, db, fam("query", d("_id", 2), "update", d("$inc", d("a", "x"))), mongoerr.TypeMismatch)
	runErr(t, db, fam("query", 1, "remove", true), mongoerr.TypeMismatch)
	runErr(t, db, fam("query", d("_id", 2), "remove", true, "bogus", 1), mongoerr.Location40415)
	run(t, db, d("createIndexes", "c", "indexes", a(d("key", d("v", 1), "name", "v_1", "unique", true, "sparse", true))))
	runErr(t, db, fam("query", d("_id", "u2"), "update", d("$set", d("v", 1))), mongoerr.DuplicateKey)
	wantDocs(t, "documents after failed findAndModify", findAll(t, coll, bson.D{}, optsSortID()), canonAll(t, before)...)
}

// TestIntegrationBulkWrite drives the driver's ordered bulk API (insert, update, delete
// commands in one sequence).
func TestIntegrationBulkWrite(t *testing.T) {
	db := testDB(t)
	coll := db.Collection("c")
	models := []mongo.WriteModel{
		mongo.NewInsertOneModel().SetDocument(d("_id", 1, "n", 1)),
		mongo.NewInsertOneModel().SetDocument(d("_id", 2, "n", 2)),
		mongo.NewUpdateOneModel().SetFilter(d("_id", 1)).SetUpdate(d("$inc", d("n", 10))),
		mongo.NewReplaceOneModel().SetFilter(d("_id", 3)).SetReplacement(d("n", 3)).SetUpsert(true),
		mongo.NewDeleteOneModel().SetFilter(d("_id", 2)),
	}
	res, err := coll.BulkWrite(ctxT(t), models)
	if err != nil {
		t.Fatal(err)
	}
	if res.InsertedCount != 2 || res.MatchedCount != 1 || res.ModifiedCount != 1 || res.UpsertedCount != 1 || res.DeletedCount != 1 {
		t.Errorf("BulkWrite result %+v", res)
	}
	wantDocs(t, "after bulk", findAll(t, coll, bson.D{}, optsSortID()), `{"_id":1,"n":11}`, `{"_id":3,"n":3}`)
}

// TestIntegrationInsertLimits covers documents mongod refuses to store: over 16 MiB
// (BadValue "object to insert too large", from fixDocumentForInsert) and nested deeper than 100
// levels (Overflow); neither is stored and the rest of an unordered batch is.
func TestIntegrationInsertLimits(t *testing.T) {
	db := testDB(t)
	big := d("_id", "big", "s", strings.Repeat("x", 16*1024*1024))
	r := run(t, db, d("insert", "c", "documents", a(big, d("_id", "ok")), "ordered", false))
	wantInt32(t, r, "n", 1)
	we := wantWriteErrors(t, r, [2]int32{0, int32(mongoerr.BadValue)})
	if msg := lookup(t, we[0], "errmsg").StringValue(); !strings.HasPrefix(msg, "object to insert too large") {
		t.Errorf("errmsg %q", msg)
	}
	deep := bson.D{{Key: "leaf", Value: 1}}
	for range 100 {
		deep = bson.D{{Key: "n", Value: deep}}
	}
	r = run(t, db, d("insert", "c", "documents", a(d("_id", "deep", "n", deep))))
	wantWriteErrors(t, r, [2]int32{0, int32(mongoerr.Overflow)})
	ok := bson.D{{Key: "leaf", Value: 1}}
	for range 97 {
		ok = bson.D{{Key: "n", Value: ok}}
	}
	run(t, db, d("insert", "c", "documents", a(d("_id", "deep-ok", "n", ok))))
	wantDocs(t, "stored", findAll(t, db.Collection("c"), bson.D{}, options.Find().SetProjection(d("_id", 1)).SetSort(d("_id", 1))),
		`{"_id":"deep-ok"}`, `{"_id":"ok"}`)
}
