package commands_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/commands"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/server"
	"humongo/internal/service"
)

// writeTestServer starts an in-process server with storage and returns it with a connected
// driver client.
func writeTestServer(t testing.TB) (*server.Server, *mongo.Client) {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	params := service.NewParams(commands.DefaultParamSpecs())
	mongod := commands.NewMongod(db, service.Config{Params: params})
	s, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role, Closers: []server.Closer{db}})
	if err != nil {
		_ = db.Close()
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	o := options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())).
		SetServerSelectionTimeout(30 * time.Second).SetRetryWrites(false).SetRetryReads(false)
	cl, err := mongo.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	return s, cl
}

func writeRun(t testing.TB, cl *mongo.Client, cmd bson.D) (bson.Raw, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cl.Database("test").RunCommand(ctx, cmd).Raw()
	var we mongo.WriteException
	if errors.As(err, &we) && len(r) > 0 {
		// The driver turns writeErrors into an error; the tests check the raw reply.
		return r, nil
	}
	return r, err
}

func writeMust(t testing.TB, cl *mongo.Client, cmd bson.D) bson.Raw {
	t.Helper()
	r, err := writeRun(t, cl, cmd)
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	return r
}

func writeWantCode(t testing.TB, err error, code mongoerr.Code) {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("want command error %d, got %v", code, err)
	}
	if ce.Code != int32(code) || ce.Name != code.Name() {
		t.Fatalf("want code %d %s, got %d %s: %s", code, code.Name(), ce.Code, ce.Name, ce.Message)
	}
}

// writeDocs returns the documents of test.<coll> in RecordId order, read straight from
// storage (independent of the find command).
func writeDocs(t testing.TB, s *server.Server, coll string) []bson.Raw {
	t.Helper()
	db := s.State().DB
	op := db.NewOp(context.Background())
	defer op.Close()
	_, c, release, err := op.ReadCollection(context.Background(), "test."+coll)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if c == nil {
		return nil
	}
	cur, err := c.RecordStore().NewCursor(op.RU, false)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var out []bson.Raw
	for {
		_, d, ok := cur.Next()
		if !ok {
			break
		}
		out = append(out, append(bson.Raw(nil), d...))
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeJSON(t testing.TB, docs []bson.Raw) string {
	t.Helper()
	parts := make([]string, len(docs))
	for i, d := range docs {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

func writeExtJSON(t testing.TB, s string) bson.Raw {
	t.Helper()
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &raw); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	return raw
}

// writeKeys returns the field names of a reply in order.
func writeKeys(r bson.Raw) []string {
	els, _ := r.Elements()
	ks := make([]string, len(els))
	for i, e := range els {
		ks[i] = e.Key()
	}
	return ks
}

func writeCreateIndex(t testing.TB, cl *mongo.Client, coll string, key bson.D, unique bool) {
	t.Helper()
	spec := bson.D{{Key: "key", Value: key}, {Key: "name", Value: fmt.Sprint(key[0].Key, "_1")}}
	if unique {
		spec = append(spec, bson.E{Key: "unique", Value: true})
	}
	writeMust(t, cl, bson.D{{Key: "createIndexes", Value: coll}, {Key: "indexes", Value: bson.A{spec}}})
}

func TestWriteInsertOrderedUnorderedDuplicate(t *testing.T) {
	s, cl := writeTestServer(t)
	docs := bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}
	r := writeMust(t, cl, bson.D{{Key: "insert", Value: "o"}, {Key: "documents", Value: docs}})
	if got := writeKeys(r); strings.Join(got, ",") != "n,writeErrors,ok" {
		t.Fatalf("reply fields %v: %v", got, r)
	}
	if r.Lookup("n").Int32() != 1 {
		t.Fatalf("ordered n: %v", r)
	}
	we := writeErr0(r)
	if strings.Join(writeKeys(we), ",") != "index,code,keyPattern,keyValue,errmsg" {
		t.Fatalf("writeError shape: %v", we)
	}
	if we.Lookup("index").Int32() != 1 || we.Lookup("code").Int32() != 11000 ||
		we.Lookup("keyPattern").String() != `{"_id": {"$numberInt":"1"}}` ||
		we.Lookup("keyValue").String() != `{"_id": {"$numberInt":"1"}}` ||
		we.Lookup("errmsg").StringValue() != "E11000 duplicate key error collection: test.o index: _id_ dup key: { _id: 1 }" {
		t.Fatalf("writeError: %v", we)
	}
	if got := len(writeDocs(t, s, "o")); got != 1 {
		t.Fatalf("ordered stored %d docs", got)
	}

	r = writeMust(t, cl, bson.D{{Key: "insert", Value: "u"}, {Key: "documents", Value: docs}, {Key: "ordered", Value: false}})
	if r.Lookup("n").Int32() != 2 || len(r.Lookup("writeErrors").Array().DebugString()) == 0 {
		t.Fatalf("unordered: %v", r)
	}
	if got := len(writeDocs(t, s, "u")); got != 2 {
		t.Fatalf("unordered stored %d docs", got)
	}

	// The same through the driver's InsertMany (document sequences).
	_, err := cl.Database("test").Collection("o").InsertMany(context.Background(), []any{bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "_id", Value: 1}}})
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 1 || bwe.WriteErrors[0].Code != 11000 {
		t.Fatalf("InsertMany: %v", err)
	}
}

func TestWriteInsertIDAndValidation(t *testing.T) {
	s, cl := writeTestServer(t)
	r := writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: "x"}},
		bson.D{{Key: "a", Value: 2}},
		bson.D{{Key: "$price", Value: 3}},
		bson.D{{Key: "_id", Value: bson.A{1}}},
		bson.D{{Key: "_id", Value: bson.D{{Key: "$bad", Value: 1}}}},
		bson.D{{Key: "_id", Value: bson.Regex{Pattern: "a"}}},
	}}, {Key: "ordered", Value: false}})
	if r.Lookup("n").Int32() != 3 {
		t.Fatalf("n: %v", r)
	}
	errs, _ := r.Lookup("writeErrors").Array().Values()
	want := []struct {
		index int32
		code  mongoerr.Code
		msg   string
	}{
		{3, mongoerr.InvalidIdField, "The '_id' value cannot be of type array"},
		{4, mongoerr.DollarPrefixedFieldName, "_id fields may not contain '$'-prefixed fields: $bad is not valid for storage."},
		{5, mongoerr.InvalidIdField, "The '_id' value cannot be of type regex"},
	}
	if len(errs) != len(want) {
		t.Fatalf("writeErrors: %v", r)
	}
	for i, w := range want {
		d := errs[i].Document()
		if d.Lookup("index").Int32() != w.index || d.Lookup("code").Int32() != int32(w.code) || d.Lookup("errmsg").StringValue() != w.msg {
			t.Errorf("writeErrors[%d] = %v, want %+v", i, d, w)
		}
	}
	docs := writeDocs(t, s, "c")
	if len(docs) != 3 {
		t.Fatalf("docs: %s", writeJSON(t, docs))
	}
	// _id moved first; generated ObjectId first.
	if docs[0].String() != `{"_id": "x","a": {"$numberInt":"1"}}` {
		t.Errorf("doc 0: %v", docs[0])
	}
	if e, _ := docs[1].IndexErr(0); e.Key() != "_id" || e.Value().Type != bson.TypeObjectID {
		t.Errorf("doc 1: %v", docs[1])
	}
	if docs[2].Lookup("$price").Int32() != 3 {
		t.Errorf("doc 2: %v", docs[2])
	}
}

func TestWriteInsertLimits(t *testing.T) {
	s, cl := writeTestServer(t)
	// Nesting: 100 levels (top document included) is fine, 101 is Overflow.
	nest := func(levels int) bson.D {
		d := bson.D{{Key: "x", Value: 1}}
		for i := 1; i < levels; i++ {
			d = bson.D{{Key: "x", Value: d}}
		}
		return d
	}
	r := writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{nest(100), nest(101)}}})
	if r.Lookup("n").Int32() != 1 {
		t.Fatalf("depth: %v", r)
	}
	we := writeErr0(r)
	if we.Lookup("code").Int32() != int32(mongoerr.Overflow) || we.Lookup("index").Int32() != 1 ||
		we.Lookup("errmsg").StringValue() != "cannot insert document because it exceeds 100 levels of nesting" {
		t.Fatalf("depth error: %v", we)
	}

	// Batch size bounds.
	_, err := writeRun(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{}}})
	writeWantCode(t, err, mongoerr.InvalidLength)
	big := make(bson.A, 100001)
	for i := range big {
		big[i] = bson.D{{Key: "_id", Value: int32(i)}}
	}
	_, err = writeRun(t, cl, bson.D{{Key: "insert", Value: "big"}, {Key: "documents", Value: big}})
	writeWantCode(t, err, mongoerr.InvalidLength)
	if !strings.Contains(err.Error(), "Write batch sizes must be between 1 and 100000. Got 100001 operations.") {
		t.Errorf("message: %v", err)
	}
	if len(writeDocs(t, s, "big")) != 0 {
		t.Fatal("oversized batch wrote documents")
	}

	// A document over 16 MiB (sent inside the command body, which may reach 16 MiB + 16 KiB).
	huge := bson.D{{Key: "s", Value: strings.Repeat("x", 16*1024*1024-10)}}
	r, err = writeRun(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{huge}}})
	if err != nil {
		t.Fatalf("huge: %v", err)
	}
	we = writeErr0(r)
	if we.Lookup("code").Int32() != int32(mongoerr.BadValue) ||
		!strings.HasPrefix(we.Lookup("errmsg").StringValue(), "object to insert too large. size in bytes: 167772") ||
		!strings.HasSuffix(we.Lookup("errmsg").StringValue(), ", max size: 16777216") {
		t.Fatalf("huge error: %v", we)
	}
}

func TestWriteBadInput(t *testing.T) {
	s, cl := writeTestServer(t)
	cases := []struct {
		cmd  bson.D
		code mongoerr.Code
	}{
		{bson.D{{Key: "insert", Value: 1}, {Key: "documents", Value: bson.A{bson.D{}}}}, mongoerr.BadValue},
		{bson.D{{Key: "insert", Value: ""}, {Key: "documents", Value: bson.A{bson.D{}}}}, mongoerr.InvalidNamespace},
		{bson.D{{Key: "insert", Value: "system.foo"}, {Key: "documents", Value: bson.A{bson.D{}}}}, mongoerr.InvalidNamespace},
		{bson.D{{Key: "insert", Value: "system.profile"}, {Key: "documents", Value: bson.A{bson.D{}}}}, mongoerr.InvalidNamespace},
		{bson.D{{Key: "insert", Value: "c"}}, mongoerr.Location40414},
		{bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: 1}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{1}}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "foo", Value: 1}}, mongoerr.Location40415},
		{bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "ordered", Value: "x"}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: 2}}}}, mongoerr.BadValue},
		{bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}}}}}, mongoerr.Location40414},
		{bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: 1}}}}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{}}, {Key: "bogus", Value: 1}}}}}, mongoerr.Location40415},
		{bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{}}}, mongoerr.InvalidLength},
		{bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{}}, {Key: "collation", Value: bson.D{{Key: "locale", Value: "xx_NOPE"}}}}}}}, mongoerr.BadValue},
		{bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 2}}}}}, mongoerr.FailedToParse},
		{bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}}}}}, mongoerr.Location40414},
		{bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: 5}, {Key: "limit", Value: 1}}}}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "findAndModify", Value: "c"}, {Key: "remove", Value: true}, {Key: "update", Value: bson.D{}}}, mongoerr.FailedToParse},
		{bson.D{{Key: "findAndModify", Value: "c"}}, mongoerr.FailedToParse},
		{bson.D{{Key: "findAndModify", Value: "c"}, {Key: "remove", Value: true}, {Key: "upsert", Value: true}}, mongoerr.FailedToParse},
		{bson.D{{Key: "findAndModify", Value: "c"}, {Key: "remove", Value: true}, {Key: "new", Value: true}}, mongoerr.FailedToParse},
		{bson.D{{Key: "findAndModify", Value: "c"}, {Key: "update", Value: 3}}, mongoerr.FailedToParse},
		{bson.D{{Key: "findAndModify", Value: "c"}, {Key: "update", Value: bson.D{}}, {Key: "foo", Value: 1}}, mongoerr.Location40415},
		{bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: 1}, {Key: "remove", Value: true}}, mongoerr.TypeMismatch},
	}
	for _, c := range cases {
		_, err := writeRun(t, cl, c.cmd)
		t.Run(fmt.Sprint(c.cmd), func(t *testing.T) { writeWantCode(t, err, c.code) })
	}
	if got := writeDocs(t, s, "c"); len(got) != 0 {
		t.Fatalf("bad input wrote: %s", writeJSON(t, got))
	}
	_, err := writeRun(t, cl, bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 2}}}}})
	if !strings.Contains(err.Error(), "The limit field in delete objects must be 0 or 1. Got 2") {
		t.Errorf("limit message: %v", err)
	}
}

func TestWriteUpdateBasics(t *testing.T) {
	s, cl := writeTestServer(t)
	writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		writeExtJSON(t, `{"_id": 1, "a": 1, "arr": [1, 2, 3], "g": [{"k": 1, "v": 0}, {"k": 2, "v": 0}]}`),
		writeExtJSON(t, `{"_id": 2, "a": 2, "arr": [4, 5, 6]}`),
	}}})
	upd := func(stmts ...bson.D) bson.Raw {
		a := bson.A{}
		for _, s := range stmts {
			a = append(a, s)
		}
		return writeMust(t, cl, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: a}})
	}
	stmt := func(q, u string, extra ...bson.E) bson.D {
		d := bson.D{{Key: "q", Value: writeExtJSON(t, q)}, {Key: "u", Value: writeExtJSON(t, u)}}
		return append(d, extra...)
	}
	// Plain update, then the same again: matched but not modified.
	r := upd(stmt(`{"_id": 1}`, `{"$set": {"b": 1}}`))
	if r.String() != `{"n": {"$numberInt":"1"},"nModified": {"$numberInt":"1"},"ok": {"$numberDouble":"1.0"}}` {
		t.Fatalf("update reply: %v", r)
	}
	r = upd(stmt(`{"_id": 1}`, `{"$set": {"b": 1}}`))
	if r.Lookup("n").Int32() != 1 || r.Lookup("nModified").Int32() != 0 {
		t.Fatalf("no-op: %v", r)
	}
	// Positional $, $[] and $[x] with arrayFilters.
	upd(stmt(`{"_id": 1, "arr": 2}`, `{"$set": {"arr.$": 20}}`))
	upd(stmt(`{"_id": 2}`, `{"$inc": {"arr.$[]": 1}}`))
	upd(stmt(`{"_id": 1}`, `{"$set": {"g.$[e].v": 9}}`, bson.E{Key: "arrayFilters", Value: bson.A{writeExtJSON(t, `{"e.k": 2}`)}}))
	docs := writeDocs(t, s, "c")
	if got := docs[0].String(); got != writeExtJSON(t, `{"_id": 1, "a": 1, "arr": [1, 20, 3], "g": [{"k": 1, "v": 0}, {"k": 2, "v": 9}], "b": 1}`).String() {
		t.Errorf("doc 1: %s", got)
	}
	if got := docs[1].String(); got != writeExtJSON(t, `{"_id": 2, "a": 2, "arr": [5, 6, 7]}`).String() {
		t.Errorf("doc 2: %s", got)
	}
	// Replacement keeps _id; changing _id is ImmutableField as a write error; multi with a
	// replacement is FailedToParse.
	upd(stmt(`{"_id": 2}`, `{"z": 1}`))
	if got := writeDocs(t, s, "c")[1].String(); got != writeExtJSON(t, `{"_id": 2, "z": 1}`).String() {
		t.Errorf("replacement: %s", got)
	}
	r = upd(stmt(`{"_id": 2}`, `{"$set": {"_id": 3}}`), stmt(`{}`, `{"z": 2}`, bson.E{Key: "multi", Value: true}))
	we := writeErr0(r)
	if strings.Join(writeKeys(r), ",") != "n,writeErrors,nModified,ok" || we.Lookup("code").Int32() != int32(mongoerr.ImmutableField) {
		t.Fatalf("immutable: %v", r)
	}
	r = writeMust(t, cl, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{stmt(`{}`, `{"z": 2}`, bson.E{Key: "multi", Value: true})}}})
	we = writeErr0(r)
	if we.Lookup("code").Int32() != int32(mongoerr.FailedToParse) || we.Lookup("errmsg").StringValue() != "multi update is not supported for replacement-style update" {
		t.Fatalf("multi replacement: %v", r)
	}
	// Pipeline updates may only use the stages MongoDB allows in updates.
	r = writeMust(t, cl, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: 1}}}}}}}}}})
	if we := writeErr0(r); we.Lookup("code").Int32() != int32(mongoerr.InvalidOptions) {
		t.Fatalf("pipeline: %v", r)
	}
	// Multi update through the driver.
	res, err := cl.Database("test").Collection("c").UpdateMany(context.Background(), bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "m", Value: true}}}})
	if err != nil || res.MatchedCount != 2 || res.ModifiedCount != 2 {
		t.Fatalf("UpdateMany: %+v %v", res, err)
	}
}

func TestWriteUpsert(t *testing.T) {
	s, cl := writeTestServer(t)
	r := writeMust(t, cl, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: writeExtJSON(t, `{"a": 1, "b.c": 2, "$or": [{"x": 1}, {"y": 2}], "n": {"$gt": 3}}`)},
			{Key: "u", Value: writeExtJSON(t, `{"$set": {"s": 1}, "$setOnInsert": {"ins": true}}`)}, {Key: "upsert", Value: true}},
		bson.D{{Key: "q", Value: writeExtJSON(t, `{"_id": 7, "k": 1}`)}, {Key: "u", Value: writeExtJSON(t, `{"r": 1}`)}, {Key: "upsert", Value: true}},
	}}})
	if strings.Join(writeKeys(r), ",") != "n,upserted,nModified,ok" || r.Lookup("n").Int32() != 2 || r.Lookup("nModified").Int32() != 0 {
		t.Fatalf("upsert reply: %v", r)
	}
	ups, _ := r.Lookup("upserted").Array().Values()
	if len(ups) != 2 || ups[0].Document().Lookup("index").Int32() != 0 || ups[1].Document().String() != `{"index": {"$numberInt":"1"},"_id": {"$numberInt":"7"}}` {
		t.Fatalf("upserted: %v", r)
	}
	docs := writeDocs(t, s, "c")
	if len(docs) != 2 {
		t.Fatalf("docs: %s", writeJSON(t, docs))
	}
	id := docs[0].Lookup("_id").ObjectID()
	want := fmt.Sprintf(`{"_id": {"$oid":"%s"}, "a": 1, "b": {"c": 2}, "ins": true, "s": 1}`, id.Hex())
	if docs[0].String() != writeExtJSON(t, want).String() {
		t.Errorf("seeded doc: %s", docs[0])
	}
	if ups[0].Document().Lookup("_id").ObjectID() != id {
		t.Errorf("upserted _id mismatch")
	}
	if docs[1].String() != writeExtJSON(t, `{"_id": 7, "r": 1}`).String() {
		t.Errorf("replacement upsert: %s", docs[1])
	}
	// Second run matches: no upsert, and $setOnInsert does not apply.
	r = writeMust(t, cl, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 7}}}, {Key: "u", Value: writeExtJSON(t, `{"$setOnInsert": {"q": 1}}`)}, {Key: "upsert", Value: true}},
	}}})
	if r.Lookup("n").Int32() != 1 || r.Lookup("nModified").Int32() != 0 || r.Lookup("upserted").Type != 0 {
		t.Fatalf("second upsert: %v", r)
	}
}

func TestWriteMultiUpdateIndexKeyChange(t *testing.T) {
	s, cl := writeTestServer(t)
	var docs bson.A
	for i := range 300 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i}})
	}
	writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}})
	writeCreateIndex(t, cl, "c", bson.D{{Key: "a", Value: 1}}, false)
	r := writeMust(t, cl, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: writeExtJSON(t, `{"a": {"$gte": 0}}`)}, {Key: "u", Value: writeExtJSON(t, `{"$inc": {"a": 1000}}`)}, {Key: "multi", Value: true}, {Key: "hint", Value: "a_1"}},
	}}})
	if r.Lookup("n").Int32() != 300 || r.Lookup("nModified").Int32() != 300 {
		t.Fatalf("multi: %v", r)
	}
	for i, d := range writeDocs(t, s, "c") {
		if d.Lookup("a").Int32() != int32(i+1000) {
			t.Fatalf("doc %d updated wrongly: %v", i, d)
		}
	}
}

func TestWriteUniqueIndexViolation(t *testing.T) {
	s, cl := writeTestServer(t)
	writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "e", Value: "a"}}, bson.D{{Key: "_id", Value: 2}, {Key: "e", Value: "b"}}}}})
	writeCreateIndex(t, cl, "c", bson.D{{Key: "e", Value: 1}}, true)
	r := writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 3}, {Key: "e", Value: "a"}}}}})
	we := writeErr0(r)
	if we.Lookup("code").Int32() != 11000 || we.Lookup("keyPattern").String() != `{"e": {"$numberInt":"1"}}` ||
		we.Lookup("keyValue").String() != `{"e": "a"}` {
		t.Fatalf("unique insert: %v", we)
	}
	r = writeMust(t, cl, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "u", Value: writeExtJSON(t, `{"$set": {"e": "a"}}`)}},
	}}})
	we = writeErr0(r)
	if we.Lookup("code").Int32() != 11000 || r.Lookup("nModified").Int32() != 0 {
		t.Fatalf("unique update: %v", r)
	}
	// findAndModify reports it as a command error carrying keyPattern/keyValue.
	raw, err := writeRun(t, cl, bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "update", Value: writeExtJSON(t, `{"$set": {"e": "a"}}`)}})
	writeWantCode(t, err, mongoerr.DuplicateKey)
	_ = raw
	if got := writeJSON(t, writeDocs(t, s, "c")); got != `{"_id": {"$numberInt":"1"},"e": "a"},{"_id": {"$numberInt":"2"},"e": "b"}` {
		t.Fatalf("docs changed: %s", got)
	}
}

func TestWriteDelete(t *testing.T) {
	s, cl := writeTestServer(t)
	var docs bson.A
	for i := range 10 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "p", Value: i % 2}})
	}
	writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}})
	r := writeMust(t, cl, bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "p", Value: 1}}}, {Key: "limit", Value: 1}},
		bson.D{{Key: "q", Value: bson.D{{Key: "p", Value: 0}}}, {Key: "limit", Value: 0}},
	}}})
	if r.String() != `{"n": {"$numberInt":"6"},"ok": {"$numberDouble":"1.0"}}` {
		t.Fatalf("delete: %v", r)
	}
	if got := len(writeDocs(t, s, "c")); got != 4 {
		t.Fatalf("left %d", got)
	}
	r = writeMust(t, cl, bson.D{{Key: "delete", Value: "nothere"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}})
	if r.Lookup("n").Int32() != 0 {
		t.Fatalf("missing coll: %v", r)
	}
}

func TestWriteFindAndModify(t *testing.T) {
	s, cl := writeTestServer(t)
	writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: 1}, {Key: "p", Value: 5}, {Key: "v", Value: 0}},
		bson.D{{Key: "_id", Value: 2}, {Key: "p", Value: 9}, {Key: "v", Value: 0}},
		bson.D{{Key: "_id", Value: 3}, {Key: "p", Value: 7}, {Key: "v", Value: 0}},
	}}})
	fam := func(extra ...bson.E) bson.Raw {
		return writeMust(t, cl, append(bson.D{{Key: "findAndModify", Value: "c"}}, extra...))
	}
	// Update, highest priority first, returning the old document.
	r := fam(bson.E{Key: "sort", Value: bson.D{{Key: "p", Value: -1}}}, bson.E{Key: "update", Value: writeExtJSON(t, `{"$inc": {"v": 1}}`)})
	if r.String() != writeExtJSON(t, `{"lastErrorObject": {"n": 1, "updatedExisting": true}, "value": {"_id": 2, "p": 9, "v": 0}, "ok": 1.0}`).String() {
		t.Fatalf("update old: %v", r)
	}
	// new: true with a projection.
	r = fam(bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: 2}}}, bson.E{Key: "update", Value: writeExtJSON(t, `{"$inc": {"v": 1}}`)},
		bson.E{Key: "new", Value: true}, bson.E{Key: "fields", Value: bson.D{{Key: "v", Value: 1}, {Key: "_id", Value: 0}}})
	if r.Lookup("value").String() != `{"v": {"$numberInt":"2"}}` {
		t.Fatalf("update new: %v", r)
	}
	// No match.
	r = fam(bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: 99}}}, bson.E{Key: "update", Value: writeExtJSON(t, `{"$set": {"x": 1}}`)})
	if r.String() != writeExtJSON(t, `{"lastErrorObject": {"n": 0, "updatedExisting": false}, "value": null, "ok": 1.0}`).String() {
		t.Fatalf("no match: %v", r)
	}
	// Upsert, returning the new document.
	r = fam(bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: 4}}}, bson.E{Key: "update", Value: writeExtJSON(t, `{"$set": {"p": 1}}`)},
		bson.E{Key: "upsert", Value: true}, bson.E{Key: "new", Value: true})
	if r.String() != writeExtJSON(t, `{"lastErrorObject": {"n": 1, "updatedExisting": false, "upserted": 4}, "value": {"_id": 4, "p": 1}, "ok": 1.0}`).String() {
		t.Fatalf("upsert: %v", r)
	}
	// Upsert with new: false returns null.
	r = fam(bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: 5}}}, bson.E{Key: "update", Value: writeExtJSON(t, `{"q": 1}`)}, bson.E{Key: "upsert", Value: true})
	if r.Lookup("value").Type != bson.TypeNull || r.Lookup("lastErrorObject", "upserted").Int32() != 5 {
		t.Fatalf("upsert old: %v", r)
	}
	// Remove the lowest priority.
	r = fam(bson.E{Key: "query", Value: writeExtJSON(t, `{"p": {"$gte": 5}}`)}, bson.E{Key: "sort", Value: bson.D{{Key: "p", Value: 1}}}, bson.E{Key: "remove", Value: true})
	if r.String() != writeExtJSON(t, `{"lastErrorObject": {"n": 1}, "value": {"_id": 1, "p": 5, "v": 0}, "ok": 1.0}`).String() {
		t.Fatalf("remove: %v", r)
	}
	r = writeMust(t, cl, bson.D{{Key: "findandmodify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "remove", Value: true}})
	if r.String() != writeExtJSON(t, `{"lastErrorObject": {"n": 0}, "value": null, "ok": 1.0}`).String() {
		t.Fatalf("remove none: %v", r)
	}
	if got := len(writeDocs(t, s, "c")); got != 4 {
		t.Fatalf("left %d", got)
	}
	// Driver helpers.
	var out bson.M
	err := cl.Database("test").Collection("c").FindOneAndUpdate(context.Background(), bson.D{{Key: "_id", Value: 3}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&out)
	if err != nil || out["w"] != int32(1) {
		t.Fatalf("FindOneAndUpdate: %v %v", out, err)
	}
}

func TestWriteConcernAndCounters(t *testing.T) {
	s, cl := writeTestServer(t)
	before := s.State().Counters.Insert.Load()
	r := writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}, bson.D{}, bson.D{}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}, {Key: "j", Value: true}}}})
	if r.Lookup("n").Int32() != 3 {
		t.Fatalf("j:true: %v", r)
	}
	if got := s.State().Counters.Insert.Load() - before; got != 3 {
		t.Errorf("opcounters.insert += %d, want 3", got)
	}
	if got := s.State().Counters.DocsInserted.Load(); got != 3 {
		t.Errorf("metrics.document.inserted = %d", got)
	}
	writeMust(t, cl, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: writeExtJSON(t, `{"$set": {"x": 1}}`)}, {Key: "multi", Value: true}},
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: writeExtJSON(t, `{"$set": {"x": 1}}`)}},
	}}})
	if got := s.State().Counters.Update.Load(); got != 2 {
		t.Errorf("opcounters.update = %d, want 2", got)
	}
	if got := s.State().Counters.DocsUpdated.Load(); got != 3 {
		t.Errorf("metrics.document.updated = %d, want 3", got)
	}
	_, err := writeRun(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 2}}}})
	writeWantCode(t, err, mongoerr.BadValue)
	if !strings.Contains(err.Error(), "cannot use 'w' > 1 when a host is not replicated") {
		t.Errorf("w:2: %v", err)
	}
	// w:0 through the driver (unacknowledged, moreToCome).
	coll := cl.Database("test").Collection("c", options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
	if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "w0", Value: true}}); err != nil {
		t.Fatalf("w0: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(writeDocs(t, s, "c")) != 4 {
		if time.Now().After(deadline) {
			t.Fatal("w:0 insert never landed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeErr0 returns the first writeErrors entry of a reply.
func writeErr0(r bson.Raw) bson.Raw {
	arr, ok := r.Lookup("writeErrors").ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	if len(vals) == 0 {
		return nil
	}
	return vals[0].Document()
}

func TestWriteExplain(t *testing.T) {
	s, cl := writeTestServer(t)
	var docs bson.A
	for i := range 20 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i}})
	}
	writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}})
	writeCreateIndex(t, cl, "c", bson.D{{Key: "a", Value: 1}}, false)
	cases := []struct {
		inner bson.D
		stage string
	}{
		{bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "a", Value: 5}}}, {Key: "u", Value: writeExtJSON(t, `{"$set": {"x": 1}}`)}}}}}, "UPDATE"},
		{bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: writeExtJSON(t, `{"a": {"$gt": 3}}`)}, {Key: "limit", Value: 0}}}}}, "DELETE"},
		{bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "a", Value: 7}}}, {Key: "remove", Value: true}}, "DELETE"},
		{bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "a", Value: 7}}}, {Key: "update", Value: writeExtJSON(t, `{"$inc": {"a": 1}}`)}}, "UPDATE"},
	}
	for _, c := range cases {
		r := writeMust(t, cl, bson.D{{Key: "explain", Value: c.inner}, {Key: "verbosity", Value: "executionStats"}})
		wp := r.Lookup("queryPlanner", "winningPlan").Document()
		if wp.Lookup("stage").StringValue() != c.stage || !strings.Contains(wp.String(), `"IXSCAN"`) {
			t.Errorf("%v: winningPlan %v", c.inner, wp)
		}
		if r.Lookup("executionStats", "executionStages", "stage").StringValue() != c.stage {
			t.Errorf("%v: executionStats %v", c.inner, r.Lookup("executionStats"))
		}
	}
	// Explain writes nothing.
	for i, d := range writeDocs(t, s, "c") {
		if d.String() != fmt.Sprintf(`{"_id": {"$numberInt":"%d"},"a": {"$numberInt":"%d"}}`, i, i) {
			t.Fatalf("explain modified data: %v", d)
		}
	}
	_, err := writeRun(t, cl, bson.D{{Key: "explain", Value: bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}, bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}}}})
	writeWantCode(t, err, mongoerr.InvalidLength)
}

func BenchmarkWriteInsertOne(b *testing.B) {
	_, cl := writeTestServer(b)
	coll := cl.Database("test").Collection("bench")
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "i", Value: i}, {Key: "s", Value: "some payload text"}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}

func BenchmarkWriteInsertMany1000(b *testing.B) {
	_, cl := writeTestServer(b)
	coll := cl.Database("test").Collection("bench")
	ctx := context.Background()
	batch := make([]any, 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range batch {
			batch[j] = bson.D{{Key: "i", Value: j}, {Key: "s", Value: "some payload text"}}
		}
		if _, err := coll.InsertMany(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "docs/s")
}

func BenchmarkWriteUpdateOneByID(b *testing.B) {
	_, cl := writeTestServer(b)
	coll := cl.Database("test").Collection("bench")
	ctx := context.Background()
	docs := make([]any, 1000)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "n", Value: 0}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: i % 1000}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestWriteCappedInsert(t *testing.T) {
	s, cl := writeTestServer(t)
	writeMust(t, cl, bson.D{{Key: "create", Value: "cap"}, {Key: "capped", Value: true}, {Key: "size", Value: 4096}, {Key: "max", Value: 5}})
	for i := range 12 {
		writeMust(t, cl, bson.D{{Key: "insert", Value: "cap"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: i}}}}})
	}
	var docs bson.A
	for i := 12; i < 20; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	writeMust(t, cl, bson.D{{Key: "insert", Value: "cap"}, {Key: "documents", Value: docs}})
	got := writeDocs(t, s, "cap")
	if len(got) != 5 || got[0].Lookup("_id").Int32() != 15 || got[4].Lookup("_id").Int32() != 19 {
		t.Fatalf("capped kept %s", writeJSON(t, got))
	}
}

// Concurrent updates of one document conflict in storage; every one must still apply once
// (WriteConflict is retried inside the command, never surfaced).
func TestWriteConcurrentUpdatesRetryConflicts(t *testing.T) {
	s, cl := writeTestServer(t)
	writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}}}})
	const workers, each = 4, 50
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			coll := cl.Database("test").Collection("c")
			for i := 0; i < each; i++ {
				var err error
				if i%2 == 0 {
					_, err = coll.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
				} else {
					err = coll.FindOneAndUpdate(context.Background(), bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}).Err()
				}
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if got := writeDocs(t, s, "c")[0].Lookup("n").Int32(); got != workers*each {
		t.Fatalf("n = %d, want %d", got, workers*each)
	}
}
