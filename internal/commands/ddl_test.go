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

	"humongo/internal/commands"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/server"
)

// ddlEnv is an in-process humongod with storage in dir and a connected Go driver client.
type ddlEnv struct {
	t   *testing.T
	dir string
	srv *server.Server
	db  *operation.DB
	cl  *mongo.Client
}

func ddlStart(t *testing.T, dir string) *ddlEnv {
	t.Helper()
	ts := startServer(t, dir)
	e := &ddlEnv{t: t, dir: dir, srv: ts.srv, db: ts.db, cl: ts.cl}
	t.Cleanup(e.stop)
	return e
}

func (e *ddlEnv) stop() {
	if e.srv == nil {
		return
	}
	_ = e.cl.Disconnect(context.Background())
	if err := e.srv.Close(); err != nil {
		e.t.Errorf("close: %v", err)
	}
	e.srv = nil
}

func (e *ddlEnv) run(db string, cmd bson.D) (bson.Raw, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.cl.Database(db).RunCommand(ctx, cmd).Raw()
}

func (e *ddlEnv) must(db string, cmd bson.D) bson.Raw {
	e.t.Helper()
	r, err := e.run(db, cmd)
	if err != nil {
		e.t.Fatalf("%v: %v", cmd, err)
	}
	return r
}

// fail runs cmd and checks it fails with code (and codeName, when MongoDB names it).
func (e *ddlEnv) fail(db string, cmd bson.D, code mongoerr.Code) mongo.CommandError {
	e.t.Helper()
	_, err := e.run(db, cmd)
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		e.t.Fatalf("%v: want error %d, got %v", cmd, code, err)
	}
	if ce.Code != int32(code) || ce.Name != code.Name() {
		e.t.Fatalf("%v: want %d %s, got %d %s: %s", cmd, code, code.Name(), ce.Code, ce.Name, ce.Message)
	}
	return ce
}

// insert writes documents straight through the storage write path (independent of the insert
// command, which another engineer owns).
func (e *ddlEnv) insert(ns string, docs ...bson.D) {
	e.t.Helper()
	op := e.db.NewOp(context.Background())
	defer op.Close()
	var raws []bsoncore.Document
	for _, d := range docs {
		b, err := bson.Marshal(d)
		if err != nil {
			e.t.Fatal(err)
		}
		raws = append(raws, b)
	}
	err := op.WriteCollection(context.Background(), ns, true, func(coll *index.Collection) error {
		_, err := coll.InsertDocuments(op.RU, raws)
		return err
	})
	if err != nil {
		e.t.Fatalf("insert into %s: %v", ns, err)
	}
}

func (e *ddlEnv) count(ns string) int64 {
	m, ok := e.db.Catalog.Latest().ByNS(ns)
	if !ok {
		return -1
	}
	n, _ := e.db.Engine.Counts(m.Ident)
	return n
}

func ddlBatch(t *testing.T, r bson.Raw) []bson.Raw {
	t.Helper()
	cur := r.Lookup("cursor").Document()
	if cur.Lookup("id").Int64() != 0 {
		t.Fatalf("cursor id: %v", cur)
	}
	vals, err := cur.Lookup("firstBatch").Array().Values()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bson.Raw, len(vals))
	for i, v := range vals {
		out[i] = v.Document()
	}
	return out
}

func ddlKeys(t *testing.T, d bson.Raw) []string {
	t.Helper()
	elems, err := d.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range elems {
		out = append(out, e.Key())
	}
	return out
}

func ddlSame(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestDDLCreateListDrop(t *testing.T) {
	e := ddlStart(t, t.TempDir())
	e.must("test", bson.D{{Key: "create", Value: "c"}})
	// MongoDB 7.0: identical options are ok, different ones NamespaceExists.
	e.must("test", bson.D{{Key: "create", Value: "c"}})
	e.fail("test", bson.D{{Key: "create", Value: "c"}, {Key: "capped", Value: true}, {Key: "size", Value: 1000}}, mongoerr.NamespaceExists)
	e.must("test", bson.D{{Key: "create", Value: "capped"}, {Key: "capped", Value: true}, {Key: "size", Value: 1000}, {Key: "max", Value: 10}})
	e.must("test", bson.D{{Key: "create", Value: "capped"}, {Key: "capped", Value: true}, {Key: "size", Value: 1000}, {Key: "max", Value: 10}})
	e.must("test", bson.D{{Key: "create", Value: "cl"}, {Key: "clusteredIndex", Value: bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "unique", Value: true}}},
		{Key: "expireAfterSeconds", Value: 3600}})
	e.must("test", bson.D{{Key: "create", Value: "v"}, {Key: "validator", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$exists", Value: true}}}}},
		{Key: "validationLevel", Value: "moderate"}, {Key: "validationAction", Value: "warn"}})

	for _, tc := range []struct {
		cmd  bson.D
		code mongoerr.Code
	}{
		{bson.D{{Key: "create", Value: 1}}, mongoerr.InvalidNamespace},
		{bson.D{{Key: "create", Value: ""}}, mongoerr.InvalidNamespace},
		{bson.D{{Key: "create", Value: "x"}, {Key: "foo", Value: 1}}, mongoerr.Location40415},
		{bson.D{{Key: "create", Value: "x"}, {Key: "capped", Value: true}}, mongoerr.InvalidOptions},
		{bson.D{{Key: "create", Value: "x"}, {Key: "size", Value: 100}}, mongoerr.InvalidOptions},
		{bson.D{{Key: "create", Value: "x"}, {Key: "expireAfterSeconds", Value: 10}}, mongoerr.InvalidOptions},
		{bson.D{{Key: "create", Value: "x"}, {Key: "clusteredIndex", Value: bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "unique", Value: true}}}}, mongoerr.InvalidIndexSpecificationOption},
		{bson.D{{Key: "create", Value: "x"}, {Key: "clusteredIndex", Value: bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "unique", Value: false}}}}, mongoerr.Location5979700},
		{bson.D{{Key: "create", Value: "x"}, {Key: "viewOn", Value: "c"}, {Key: "pipeline", Value: 1}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "create", Value: "x"}, {Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "t"}}}}, mongoerr.NotImplemented},
		{bson.D{{Key: "create", Value: "x"}, {Key: "validationLevel", Value: "bogus"}}, mongoerr.BadValue},
		{bson.D{{Key: "create", Value: "x"}, {Key: "validator", Value: 1}}, mongoerr.TypeMismatch},
	} {
		e.fail("test", tc.cmd, tc.code)
	}
	if _, ok := e.db.Catalog.Latest().ByNS("test.x"); ok {
		t.Fatal("a failed create created the collection")
	}

	r := e.must("test", bson.D{{Key: "listCollections", Value: 1}})
	if ns := r.Lookup("cursor", "ns").StringValue(); ns != "test.$cmd.listCollections" {
		t.Errorf("cursor ns %q", ns)
	}
	byName := map[string]bson.Raw{}
	for _, d := range ddlBatch(t, r) {
		byName[d.Lookup("name").StringValue()] = d
	}
	if len(byName) != 4 {
		t.Fatalf("listCollections: %v", byName)
	}
	c := byName["c"]
	if !ddlSame(ddlKeys(t, c), []string{"name", "type", "options", "info", "idIndex"}) || c.Lookup("type").StringValue() != "collection" {
		t.Errorf("entry shape: %v", c)
	}
	if sub, data := c.Lookup("info", "uuid").Binary(); sub != 4 || len(data) != 16 || c.Lookup("info", "readOnly").Boolean() {
		t.Errorf("info: %v", c.Lookup("info"))
	}
	if got := c.Lookup("idIndex").String(); got != `{"v": {"$numberInt":"2"},"key": {"_id": {"$numberInt":"1"}},"name": "_id_"}` {
		t.Errorf("idIndex: %s", got)
	}
	if got := byName["capped"].Lookup("options").String(); got != `{"capped": true,"size": {"$numberInt":"1024"},"max": {"$numberInt":"10"}}` {
		t.Errorf("capped options: %s", got)
	}
	cl := byName["cl"]
	if _, err := cl.LookupErr("idIndex"); err == nil {
		t.Errorf("clustered collection has idIndex: %v", cl)
	}
	if got := cl.Lookup("options", "clusteredIndex").String(); got != `{"v": {"$numberInt":"2"},"key": {"_id": {"$numberInt":"1"}},"name": "_id_","unique": true}` {
		t.Errorf("clusteredIndex: %s", got)
	}
	if got := byName["v"].Lookup("options", "validationLevel").StringValue(); got != "moderate" {
		t.Errorf("validator options: %v", byName["v"])
	}
	// nameOnly and filter.
	r = e.must("test", bson.D{{Key: "listCollections", Value: 1}, {Key: "nameOnly", Value: true}, {Key: "filter", Value: bson.D{{Key: "name", Value: bson.D{{Key: "$in", Value: bson.A{"c", "v"}}}}}}})
	got := ddlBatch(t, r)
	if len(got) != 2 || !ddlSame(ddlKeys(t, got[0]), []string{"name", "type"}) {
		t.Errorf("nameOnly+filter: %v", got)
	}
	r = e.must("test", bson.D{{Key: "listCollections", Value: 1}, {Key: "filter", Value: bson.D{{Key: "options.capped", Value: true}}}})
	if got := ddlBatch(t, r); len(got) != 1 || got[0].Lookup("name").StringValue() != "capped" {
		t.Errorf("filter on options: %v", got)
	}
	e.fail("test", bson.D{{Key: "listCollections", Value: 1}, {Key: "filter", Value: 1}}, mongoerr.TypeMismatch)
	// Clustered: _id uniqueness holds and listIndexes shows the clustered index.
	r = e.must("test", bson.D{{Key: "listIndexes", Value: "cl"}})
	if got := ddlBatch(t, r); len(got) != 1 || !got[0].Lookup("clustered").Boolean() {
		t.Errorf("clustered listIndexes: %v", got)
	}

	// drop: reply shape; a missing collection is ok (7.0).
	r = e.must("test", bson.D{{Key: "drop", Value: "c"}})
	if !ddlSame(ddlKeys(t, r), []string{"nIndexesWas", "ns", "ok"}) || r.Lookup("nIndexesWas").Int32() != 1 || r.Lookup("ns").StringValue() != "test.c" {
		t.Errorf("drop reply: %v", r)
	}
	r = e.must("test", bson.D{{Key: "drop", Value: "c"}})
	if !ddlSame(ddlKeys(t, r), []string{"ok"}) {
		t.Errorf("drop of a missing collection: %v", r)
	}
	e.fail("test", bson.D{{Key: "drop", Value: "system.version"}}, mongoerr.IllegalOperation)

	// dropDatabase.
	e.insert("other.a", bson.D{{Key: "_id", Value: 1}})
	r = e.must("other", bson.D{{Key: "dropDatabase", Value: 1}})
	if r.Lookup("dropped").StringValue() != "other" {
		t.Errorf("dropDatabase: %v", r)
	}
	if len(e.db.Catalog.Latest().Collections("other")) != 0 {
		t.Error("dropDatabase left collections")
	}
	r = e.must("other", bson.D{{Key: "dropDatabase", Value: 1}})
	if !ddlSame(ddlKeys(t, r), []string{"ok"}) {
		t.Errorf("dropDatabase of a missing db: %v", r)
	}
	e.fail("admin", bson.D{{Key: "dropDatabase", Value: 1}}, mongoerr.IllegalOperation)
}

func TestDDLIndexes(t *testing.T) {
	e := ddlStart(t, t.TempDir())
	idx := func(specs ...bson.D) bson.D {
		a := bson.A{}
		for _, s := range specs {
			a = append(a, s)
		}
		return bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: a}}
	}
	spec := func(name string, key bson.D, extra ...bson.E) bson.D {
		return append(bson.D{{Key: "key", Value: key}, {Key: "name", Value: name}}, extra...)
	}
	// Implicit creation, empty collection.
	r := e.must("test", idx(spec("a_1", bson.D{{Key: "a", Value: 1}}), spec("b_-1", bson.D{{Key: "b", Value: -1}}, bson.E{Key: "sparse", Value: true})))
	if !ddlSame(ddlKeys(t, r), []string{"numIndexesBefore", "numIndexesAfter", "createdCollectionAutomatically", "ok"}) ||
		r.Lookup("numIndexesBefore").Int32() != 1 || r.Lookup("numIndexesAfter").Int32() != 3 || !r.Lookup("createdCollectionAutomatically").Boolean() {
		t.Errorf("createIndexes: %v", r)
	}
	r = e.must("test", idx(spec("a_1", bson.D{{Key: "a", Value: 1}})))
	if r.Lookup("note").StringValue() != "all indexes already exist" || r.Lookup("numIndexesAfter").Int32() != 3 {
		t.Errorf("existing index: %v", r)
	}
	// Non-empty collection: hybrid build, and a unique build failing on duplicates.
	var docs []bson.D
	for i := 0; i < 300; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 7}, {Key: "u", Value: i}, {Key: "t", Value: "x"}})
	}
	e.insert("test.c", docs...)
	r = e.must("test", idx(spec("u_1", bson.D{{Key: "u", Value: 1}}, bson.E{Key: "unique", Value: true}),
		spec("a_1_u_-1", bson.D{{Key: "a", Value: 1}, {Key: "u", Value: -1}})))
	if r.Lookup("numIndexesAfter").Int32() != 5 || r.Lookup("createdCollectionAutomatically").Boolean() {
		t.Errorf("build: %v", r)
	}
	e.fail("test", idx(spec("t_1", bson.D{{Key: "t", Value: 1}}, bson.E{Key: "unique", Value: true})), mongoerr.DuplicateKey)

	for _, tc := range []struct {
		cmd  bson.D
		code mongoerr.Code
	}{
		{idx(spec("a_1", bson.D{{Key: "a", Value: 1}}, bson.E{Key: "unique", Value: true})), mongoerr.IndexOptionsConflict},
		{idx(spec("a_1", bson.D{{Key: "z", Value: 1}})), mongoerr.IndexKeySpecsConflict},
		{idx(spec("other", bson.D{{Key: "a", Value: 1}})), mongoerr.IndexOptionsConflict},
		{idx(spec("bad", bson.D{{Key: "a", Value: true}})), mongoerr.CannotCreateIndex},
		{idx(spec("bad", bson.D{{Key: "a", Value: 0}})), mongoerr.CannotCreateIndex},
		{idx(spec("txt", bson.D{{Key: "a", Value: "text"}})), mongoerr.CannotCreateIndex},
		{idx(spec("geo", bson.D{{Key: "a", Value: "2dsphere"}})), mongoerr.CannotCreateIndex},
		{idx(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}}), mongoerr.FailedToParse},
		{idx(bson.D{{Key: "name", Value: "x"}}), mongoerr.FailedToParse},
		{idx(spec("x", bson.D{{Key: "x", Value: 1}}, bson.E{Key: "foo", Value: 1})), mongoerr.InvalidIndexSpecificationOption},
		{idx(spec("x", bson.D{{Key: "x", Value: 1}, {Key: "y", Value: 1}}, bson.E{Key: "expireAfterSeconds", Value: 10})), mongoerr.CannotCreateIndex},
		{idx(spec("x", bson.D{{Key: "x", Value: 1}}, bson.E{Key: "sparse", Value: true}, bson.E{Key: "partialFilterExpression", Value: bson.D{{Key: "x", Value: 1}}})), mongoerr.CannotCreateIndex},
		{bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{}}}, mongoerr.BadValue},
		{bson.D{{Key: "createIndexes", Value: "c"}}, mongoerr.Location40414},
	} {
		e.fail("test", tc.cmd, tc.code)
	}

	// listIndexes: normalised specs in catalog order.
	r = e.must("test", bson.D{{Key: "listIndexes", Value: "c"}})
	if ns := r.Lookup("cursor", "ns").StringValue(); ns != "test.$cmd.listIndexes.c" {
		t.Errorf("listIndexes ns %q", ns)
	}
	specs := ddlBatch(t, r)
	var names []string
	for _, s := range specs {
		names = append(names, s.Lookup("name").StringValue())
	}
	if !ddlSame(names, []string{"_id_", "a_1", "b_-1", "u_1", "a_1_u_-1"}) {
		t.Fatalf("listIndexes names: %v", names)
	}
	if !ddlSame(ddlKeys(t, specs[2]), []string{"v", "key", "name", "sparse"}) || specs[2].Lookup("v").Int32() != 2 {
		t.Errorf("spec shape: %v", specs[2])
	}
	e.fail("test", bson.D{{Key: "listIndexes", Value: "nope"}}, mongoerr.NamespaceNotFound)

	// The unique index is enforced by the write path.
	op := e.db.NewOp(context.Background())
	err := op.WriteCollection(context.Background(), "test.c", false, func(coll *index.Collection) error {
		b, _ := bson.Marshal(bson.D{{Key: "_id", Value: 1000}, {Key: "u", Value: 5}})
		_, err := coll.InsertDocument(op.RU, b)
		return err
	})
	op.Close()
	if !mongoerr.Is(err, mongoerr.DuplicateKey) {
		t.Errorf("unique index not enforced: %v", err)
	}

	// dropIndexes.
	e.fail("test", bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "_id_"}}, mongoerr.InvalidOptions)
	e.fail("test", bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: bson.D{{Key: "_id", Value: 1}}}}, mongoerr.InvalidOptions)
	e.fail("test", bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "nope"}}, mongoerr.IndexNotFound)
	e.fail("test", bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: bson.A{"a_1", "nope"}}}, mongoerr.IndexNotFound)
	e.fail("test", bson.D{{Key: "dropIndexes", Value: "nope"}, {Key: "index", Value: "*"}}, mongoerr.NamespaceNotFound)
	r = e.must("test", bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "a_1"}})
	if !ddlSame(ddlKeys(t, r), []string{"nIndexesWas", "ok"}) || r.Lookup("nIndexesWas").Int32() != 5 {
		t.Errorf("dropIndexes: %v", r)
	}
	e.must("test", bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: bson.D{{Key: "b", Value: -1}}}})
	e.must("test", bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: bson.A{"u_1"}}})
	r = e.must("test", bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "*"}})
	if r.Lookup("nIndexesWas").Int32() != 2 {
		t.Errorf("dropIndexes *: %v", r)
	}
	if got := ddlBatch(t, e.must("test", bson.D{{Key: "listIndexes", Value: "c"}})); len(got) != 1 {
		t.Errorf("after dropIndexes *: %v", got)
	}
	// The collection still validates after all that.
	r = e.must("test", bson.D{{Key: "validate", Value: "c"}, {Key: "full", Value: true}})
	if !r.Lookup("valid").Boolean() || r.Lookup("nrecords").Int32() != 300 {
		t.Errorf("validate: %v", r)
	}
}

func TestDDLCollMod(t *testing.T) {
	e := ddlStart(t, t.TempDir())
	e.insert("test.c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "d", Value: time.Now()}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 2}})
	e.must("test", bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "d", Value: 1}}}, {Key: "name", Value: "ttl"}, {Key: "expireAfterSeconds", Value: 100}},
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}},
	}}})
	r := e.must("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "ttl"}, {Key: "expireAfterSeconds", Value: 50}}}})
	if !ddlSame(ddlKeys(t, r), []string{"expireAfterSeconds_old", "expireAfterSeconds_new", "ok"}) ||
		r.Lookup("expireAfterSeconds_old").AsInt64() != 100 || r.Lookup("expireAfterSeconds_new").AsInt64() != 50 {
		t.Errorf("collMod ttl: %v", r)
	}
	r = e.must("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "keyPattern", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "hidden", Value: true}}}})
	if !r.Lookup("hidden_new").Boolean() || r.Lookup("hidden_old").Boolean() {
		t.Errorf("collMod hidden: %v", r)
	}
	e.fail("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "a_1"}, {Key: "unique", Value: true}}}}, mongoerr.InvalidOptions)
	e.must("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "a_1"}, {Key: "prepareUnique", Value: true}}}})
	for _, dry := range []bool{true, false} {
		ce := e.fail("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "a_1"}, {Key: "unique", Value: true}}}, {Key: "dryRun", Value: dry}},
			mongoerr.CannotConvertIndexToUnique)
		v := bson.Raw(ce.Raw).Lookup("violations")
		if got := v.String(); got != `[{"ids": [{"$numberInt":"1"},{"$numberInt":"2"}]}]` {
			t.Errorf("violations: %s (%v)", got, ce.Raw)
		}
	}
	e.fail("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "nope"}, {Key: "hidden", Value: true}}}}, mongoerr.IndexNotFound)
	e.fail("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "a_1"}}}}, mongoerr.InvalidOptions)
	e.fail("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "_id_"}, {Key: "hidden", Value: true}}}}, mongoerr.BadValue)
	e.fail("test", bson.D{{Key: "collMod", Value: "nope"}, {Key: "validationLevel", Value: "off"}}, mongoerr.NamespaceNotFound)
	e.fail("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "foo", Value: 1}}, mongoerr.Location40415)

	// Resolve the duplicate, then convert.
	op := e.db.NewOp(context.Background())
	err := op.WriteCollection(context.Background(), "test.c", false, func(coll *index.Collection) error {
		rid, doc, found, err := coll.FindByID(op.RU, bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 2)})
		if err != nil || !found {
			return fmt.Errorf("find: %v %v", found, err)
		}
		return coll.DeleteDocument(op.RU, rid, doc)
	})
	op.Close()
	if err != nil {
		t.Fatal(err)
	}
	e.must("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "a_1"}, {Key: "unique", Value: true}}}, {Key: "dryRun", Value: true}})
	r = e.must("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "a_1"}, {Key: "unique", Value: true}}}})
	if !r.Lookup("unique_new").Boolean() {
		t.Errorf("unique conversion: %v", r)
	}
	specs := ddlBatch(t, e.must("test", bson.D{{Key: "listIndexes", Value: "c"}}))
	if got := specs[2].String(); got != `{"v": {"$numberInt":"2"},"key": {"a": {"$numberInt":"1"}},"name": "a_1","hidden": true,"unique": true}` {
		t.Errorf("converted spec: %s", got)
	}
	// Validator options land in listCollections.
	e.must("test", bson.D{{Key: "collMod", Value: "c"}, {Key: "validator", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 0}}}}}, {Key: "validationAction", Value: "warn"}})
	got := ddlBatch(t, e.must("test", bson.D{{Key: "listCollections", Value: 1}}))
	if opts := got[0].Lookup("options"); opts.Document().Lookup("validationAction").StringValue() != "warn" {
		t.Errorf("options after collMod: %v", opts)
	}
}

func TestDDLRename(t *testing.T) {
	e := ddlStart(t, t.TempDir())
	e.insert("a.src", bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 2}})
	e.must("a", bson.D{{Key: "createIndexes", Value: "src"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}, {Key: "unique", Value: true}}}}})
	uuid := e.db.Catalog.Latest().Collections("a")[0].UUID
	ren := func(from, to string, extra ...bson.E) bson.D {
		return append(bson.D{{Key: "renameCollection", Value: from}, {Key: "to", Value: to}}, extra...)
	}
	e.fail("a", ren("a.src", "a.dst"), mongoerr.Unauthorized) // admin only
	e.must("admin", ren("a.src", "a.dst"))
	if m, ok := e.db.Catalog.Latest().ByNS("a.dst"); !ok || m.UUID != uuid {
		t.Fatal("same-database rename must keep the UUID")
	}
	e.fail("admin", ren("a.src", "a.x"), mongoerr.NamespaceNotFound)
	e.fail("admin", ren("a.dst", "a.dst"), mongoerr.IllegalOperation)
	e.fail("admin", ren("a.dst", "a.system.foo"), mongoerr.IllegalOperation)
	e.fail("admin", ren("a.dst", "bad"), mongoerr.InvalidNamespace)
	e.insert("a.other", bson.D{{Key: "_id", Value: 1}})
	e.fail("admin", ren("a.dst", "a.other"), mongoerr.NamespaceExists)

	// Across databases: documents and indexes are copied, the source is gone.
	e.insert("b.existing", bson.D{{Key: "_id", Value: 9}})
	e.must("admin", ren("a.dst", "b.existing", bson.E{Key: "dropTarget", Value: true}))
	if _, ok := e.db.Catalog.Latest().ByNS("a.dst"); ok {
		t.Fatal("source survived a cross-database rename")
	}
	if n := e.count("b.existing"); n != 2 {
		t.Fatalf("target has %d documents", n)
	}
	specs := ddlBatch(t, e.must("b", bson.D{{Key: "listIndexes", Value: "existing"}}))
	if len(specs) != 2 || !specs[1].Lookup("unique").Boolean() {
		t.Errorf("indexes after cross-db rename: %v", specs)
	}
	var names []string
	for _, m := range e.db.Catalog.Latest().Collections("b") {
		names = append(names, m.NS)
	}
	if !ddlSame(names, []string{"b.existing"}) {
		t.Errorf("temporary collections left: %v", names)
	}
	r := e.must("b", bson.D{{Key: "validate", Value: "existing"}})
	if !r.Lookup("valid").Boolean() || r.Lookup("nrecords").Int32() != 2 {
		t.Errorf("validate after rename: %v", r)
	}
}

func TestDDLStats(t *testing.T) {
	e := ddlStart(t, t.TempDir())
	e.insert("s.c", bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 5}}, bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: 9}})
	e.must("s", bson.D{{Key: "create", Value: "empty"}})
	sc, _ := e.db.Catalog.Latest().ByNS("s.c")
	_, dataSize := e.db.Engine.Counts(sc.Ident)

	r := e.must("s", bson.D{{Key: "dbStats", Value: 1}})
	want := []string{"db", "collections", "views", "objects", "avgObjSize", "dataSize", "storageSize", "indexes",
		"indexSize", "totalSize", "scaleFactor", "fsUsedSize", "fsTotalSize", "ok"}
	if !ddlSame(ddlKeys(t, r), want) || r.Lookup("collections").AsInt64() != 2 || r.Lookup("objects").AsInt64() != 3 ||
		r.Lookup("indexes").AsInt64() != 2 || r.Lookup("fsTotalSize").Double() <= 0 {
		t.Errorf("dbStats: %v", r)
	}
	e.fail("s", bson.D{{Key: "dbStats", Value: 1}, {Key: "scale", Value: 0}}, mongoerr.Location51024)

	r = e.must("s", bson.D{{Key: "collStats", Value: "c"}, {Key: "scale", Value: 1}})
	if r.Lookup("ns").StringValue() != "s.c" || r.Lookup("count").Int32() != 3 || r.Lookup("nindexes").Int32() != 1 ||
		r.Lookup("indexSizes", "_id_").Int32() <= 0 || r.Lookup("capped").Boolean() {
		t.Errorf("collStats: %v", r)
	}
	if r.Lookup("size").AsInt64() != dataSize || dataSize == 0 || r.Lookup("avgObjSize").AsInt64() != dataSize/3 {
		t.Errorf("collStats size %v, want %d", r.Lookup("size"), dataSize)
	}
	// MongoDB 7.0 answers ok with zero statistics for a missing collection.
	r = e.must("s", bson.D{{Key: "collStats", Value: "nope"}})
	if r.Lookup("ns").StringValue() != "s.nope" || r.Lookup("count").Int32() != 0 || r.Lookup("nindexes").Int32() != 0 {
		t.Errorf("collStats of a missing collection: %v", r)
	}

	r = e.must("s", bson.D{{Key: "dataSize", Value: "s.c"}})
	if !ddlSame(ddlKeys(t, r), []string{"size", "numObjects", "millis", "ok"}) || r.Lookup("numObjects").Int32() != 3 {
		t.Errorf("dataSize: %v", r)
	}
	r = e.must("s", bson.D{{Key: "dataSize", Value: "s.c"}, {Key: "keyPattern", Value: bson.D{{Key: "k", Value: 1}}},
		{Key: "min", Value: bson.D{{Key: "k", Value: 2}}}, {Key: "max", Value: bson.D{{Key: "k", Value: 9}}}})
	if r.Lookup("numObjects").Int32() != 1 {
		t.Errorf("dataSize range: %v", r)
	}
	r = e.must("s", bson.D{{Key: "dataSize", Value: "s.nope"}})
	if r.Lookup("size").Int32() != 0 || r.Lookup("numObjects").Int32() != 0 {
		t.Errorf("dataSize missing: %v", r)
	}

	r = e.must("admin", bson.D{{Key: "listDatabases", Value: 1}})
	if !ddlSame(ddlKeys(t, r), []string{"databases", "totalSize", "totalSizeMb", "ok"}) {
		t.Errorf("listDatabases: %v", r)
	}
	dbs, _ := r.Lookup("databases").Array().Values()
	if len(dbs) != 1 || !ddlSame(ddlKeys(t, dbs[0].Document()), []string{"name", "sizeOnDisk", "empty"}) ||
		dbs[0].Document().Lookup("sizeOnDisk").Int64() <= 0 || dbs[0].Document().Lookup("empty").Boolean() {
		t.Errorf("listDatabases entries: %v", dbs)
	}
	r = e.must("admin", bson.D{{Key: "listDatabases", Value: 1}, {Key: "nameOnly", Value: true}, {Key: "filter", Value: bson.D{{Key: "name", Value: "zzz"}}}})
	if got := r.Lookup("databases").String(); got != "[]" || !ddlSame(ddlKeys(t, r), []string{"databases", "ok"}) {
		t.Errorf("listDatabases filter: %v", r)
	}
	e.fail("s", bson.D{{Key: "listDatabases", Value: 1}}, mongoerr.Unauthorized)
	e.fail("s", bson.D{{Key: "validate", Value: "nope"}}, mongoerr.NamespaceNotFound)
	e.fail("s", bson.D{{Key: "validate", Value: "c"}, {Key: "full", Value: true}, {Key: "background", Value: true}}, mongoerr.InvalidOptions)
	r = e.must("s", bson.D{{Key: "validate", Value: "c"}, {Key: "background", Value: true}})
	want = []string{"ns", "uuid", "nInvalidDocuments", "nNonCompliantDocuments", "nrecords", "nIndexes", "keysPerIndex",
		"indexDetails", "valid", "repaired", "warnings", "errors", "extraIndexEntries", "missingIndexEntries", "corruptRecords", "ok"}
	if !ddlSame(ddlKeys(t, r), want) || !r.Lookup("valid").Boolean() {
		t.Errorf("validate: %v", r)
	}
}

// TestDDLRestart checks that collections, options and indexes survive a clean restart.
func TestDDLRestart(t *testing.T) {
	dir := t.TempDir()
	e := ddlStart(t, dir)
	e.must("r", bson.D{{Key: "create", Value: "capped"}, {Key: "capped", Value: true}, {Key: "size", Value: 4096}})
	e.insert("r.c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	e.must("r", bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "unique", Value: true}}}}})
	before := ddlBatch(t, e.must("r", bson.D{{Key: "listCollections", Value: 1}}))
	e.stop()

	e = ddlStart(t, dir)
	after := ddlBatch(t, e.must("r", bson.D{{Key: "listCollections", Value: 1}}))
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("collections changed across restart:\n%v\n%v", before, after)
	}
	specs := ddlBatch(t, e.must("r", bson.D{{Key: "listIndexes", Value: "c"}}))
	if len(specs) != 2 || specs[1].Lookup("name").StringValue() != "a_1" || !specs[1].Lookup("unique").Boolean() {
		t.Errorf("indexes after restart: %v", specs)
	}
	if n := e.count("r.c"); n != 1 {
		t.Errorf("documents after restart: %d", n)
	}
}

// TestDDLTTLMonitor wires the TTL monitor to a server and checks that an expired document is
// deleted and that ttlMonitorEnabled is honoured.
func TestDDLTTLMonitor(t *testing.T) {
	e := ddlStart(t, t.TempDir())
	st := e.srv.State()
	if _, err := st.Params.SetValue("ttlMonitorSleepSecs", bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 1)}); err != nil {
		t.Fatal(err)
	}
	stop := commands.StartTTLMonitor(context.Background(), st)
	defer stop()
	old := time.Now().Add(-time.Hour)
	e.insert("ttl.c", bson.D{{Key: "_id", Value: 1}, {Key: "at", Value: old}}, bson.D{{Key: "_id", Value: 2}, {Key: "at", Value: time.Now().Add(time.Hour)}},
		bson.D{{Key: "_id", Value: 3}, {Key: "at", Value: "not a date"}})
	e.must("ttl", bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "at", Value: 1}}}, {Key: "name", Value: "at_1"}, {Key: "expireAfterSeconds", Value: 60}}}}})
	// A clustered collection's expireAfterSeconds expires by the _id date.
	e.must("ttl", bson.D{{Key: "create", Value: "cl"}, {Key: "clusteredIndex", Value: bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "unique", Value: true}}},
		{Key: "expireAfterSeconds", Value: 60}})
	e.insert("ttl.cl", bson.D{{Key: "_id", Value: old}}, bson.D{{Key: "_id", Value: time.Now().Add(time.Hour)}})
	deadline := time.Now().Add(10 * time.Second)
	for e.count("ttl.c") != 2 || e.count("ttl.cl") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("TTL monitor did not delete the expired document: %d left", e.count("ttl.c"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m := st.DB.Colls.TTLMonitor(); m == nil || m.Passes() == 0 || m.Deleted() != 2 {
		var passes, deleted int64
		if m != nil {
			passes, deleted = m.Passes(), m.Deleted()
		}
		t.Errorf("counters: passes %d deleted %d", passes, deleted)
	}
	// Turning clustered TTL off keeps the option out of listCollections.
	e.must("ttl", bson.D{{Key: "collMod", Value: "cl"}, {Key: "expireAfterSeconds", Value: "off"}})
	got := ddlBatch(t, e.must("ttl", bson.D{{Key: "listCollections", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: "cl"}}}}))
	if _, err := got[0].Lookup("options").Document().LookupErr("expireAfterSeconds"); err == nil {
		t.Errorf("expireAfterSeconds still set: %v", got[0])
	}
	e.fail("ttl", bson.D{{Key: "collMod", Value: "c"}, {Key: "expireAfterSeconds", Value: 5}}, mongoerr.InvalidOptions)
	// _id uniqueness holds on a clustered collection.
	op := e.db.NewOp(context.Background())
	defer op.Close()
	err := op.WriteCollection(context.Background(), "ttl.cl", false, func(coll *index.Collection) error {
		b, _ := bson.Marshal(bson.D{{Key: "_id", Value: 7}})
		if _, err := coll.InsertDocument(op.RU, b); err != nil {
			return err
		}
		_, err := coll.InsertDocument(op.RU, b)
		return err
	})
	if !mongoerr.Is(err, mongoerr.DuplicateKey) {
		t.Errorf("clustered _id uniqueness: %v", err)
	}
}

// TestDDLListCursors pages listCollections and listIndexes through getMore with the driver.
func TestDDLListCursors(t *testing.T) {
	e := ddlStart(t, t.TempDir())
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		e.must("lc", bson.D{{Key: "create", Value: fmt.Sprintf("c%d", i)}})
	}
	r := e.must("lc", bson.D{{Key: "listCollections", Value: 1}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 2}}}})
	if r.Lookup("cursor", "id").Int64() == 0 || len(r.Lookup("cursor", "firstBatch").Array().String()) == 0 {
		t.Fatalf("batchSize 2 must leave a cursor open: %v", r)
	}
	names, err := e.cl.Database("lc").ListCollectionNames(ctx, bson.D{}, options.ListCollections().SetBatchSize(2))
	if err != nil || len(names) != 5 {
		t.Fatalf("ListCollectionNames: %v %v", names, err)
	}
	var keys []bson.D
	for i := 0; i < 4; i++ {
		keys = append(keys, bson.D{{Key: fmt.Sprintf("f%d", i), Value: 1}})
	}
	for _, k := range keys {
		if _, err := e.cl.Database("lc").Collection("c0").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: k}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := e.cl.Database("lc").Collection("c0").Indexes().List(ctx, options.ListIndexes().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	var specs []bson.M
	if err := cur.All(ctx, &specs); err != nil || len(specs) != 5 {
		t.Fatalf("listIndexes through getMore: %v %v", specs, err)
	}
	e.fail("lc", bson.D{{Key: "listIndexes", Value: "c0"}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: -1}}}}, mongoerr.Location51024)
	e.fail("lc", bson.D{{Key: "listIndexes", Value: "c0"}, {Key: "cursor", Value: bson.D{{Key: "foo", Value: 1}}}}, mongoerr.Location40415)
}

// TestDDLBuildWithConcurrentWrites builds indexes on a non-empty collection while writers
// insert, update and delete through the lock-managed write path; the result must validate.
func TestDDLBuildWithConcurrentWrites(t *testing.T) {
	e := ddlStart(t, t.TempDir())
	var docs []bson.D
	for i := 0; i < 3000; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 50}, {Key: "u", Value: i}})
	}
	e.insert("bw.c", docs...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		op := e.db.NewOp(context.Background())
		defer op.Close()
		for i := 3000; ctx.Err() == nil; i++ {
			b, _ := bson.Marshal(bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 50}, {Key: "u", Value: i}, {Key: "arr", Value: bson.A{1, 2}}})
			err := op.WriteCollection(ctx, "bw.c", false, func(coll *index.Collection) error {
				if _, err := coll.InsertDocument(op.RU, b); err != nil {
					return err
				}
				id := bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, int32(i-3000))}
				rid, old, found, err := coll.FindByID(op.RU, id)
				if err != nil || !found {
					return err
				}
				return coll.DeleteDocument(op.RU, rid, old)
			})
			if err != nil && ctx.Err() == nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	r, err := e.run("bw", bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}, {Key: "arr", Value: 1}}}, {Key: "name", Value: "a_arr"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "u", Value: 1}}}, {Key: "name", Value: "u_1"}, {Key: "unique", Value: true}},
	}}})
	cancel()
	if werr := <-done; werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	if err != nil || r.Lookup("numIndexesAfter").Int32() != 3 {
		t.Fatalf("createIndexes: %v %v", r, err)
	}
	r = e.must("bw", bson.D{{Key: "validate", Value: "c"}, {Key: "full", Value: true}})
	if !r.Lookup("valid").Boolean() {
		t.Fatalf("validate after concurrent build: %v", r)
	}
}
