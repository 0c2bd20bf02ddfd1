package commands_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/catalog"
	"humongo/internal/changestream/images"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

func runOn(cl *mongo.Client, db string, cmd bson.D) (bson.Raw, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Database(db).RunCommand(ctx, cmd).Raw()
}

// collOptions is listCollections' options of test.<name>.
func collOptions(t *testing.T, cl *mongo.Client, name string) bson.Raw {
	t.Helper()
	r, err := runOn(cl, "test", bson.D{{Key: "listCollections", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: name}}}})
	if err != nil {
		t.Fatal(err)
	}
	batch, _ := r.Lookup("cursor", "firstBatch").Array().Values()
	if len(batch) != 1 {
		t.Fatalf("listCollections %s: %v", name, r)
	}
	return batch[0].Document().Lookup("options").Document()
}

func preAndPost(enabled any) bson.E {
	return bson.E{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: enabled}}}
}

// TestChangeStreamPreAndPostImagesOption: create and collMod validate the option as MongoDB's
// IDL and namespace rules do, store it only while enabled (listCollections shows
// {enabled: true}), and the catalog's metadata follows it.
func TestChangeStreamPreAndPostImagesOption(t *testing.T) {
	ts := startTestServer(t)
	cl := ts.cl
	const f = "changeStreamPreAndPostImages"
	for _, c := range []struct {
		db   string
		cmd  bson.D
		code mongoerr.Code
	}{
		{"test", bson.D{{Key: "create", Value: "bad"}, {Key: f, Value: true}}, mongoerr.TypeMismatch},
		{"test", bson.D{{Key: "create", Value: "bad"}, {Key: f, Value: bson.D{}}}, mongoerr.Location40414},
		{"test", bson.D{{Key: "create", Value: "bad"}, preAndPost(1)}, mongoerr.TypeMismatch},
		{"test", bson.D{{Key: "create", Value: "bad"}, {Key: f, Value: bson.D{{Key: "enabled", Value: true}, {Key: "x", Value: 1}}}}, mongoerr.Location40415},
		{"admin", bson.D{{Key: "create", Value: "bad"}, preAndPost(true)}, mongoerr.InvalidOptions},
		{"config", bson.D{{Key: "create", Value: "bad"}, preAndPost(true)}, mongoerr.InvalidOptions},
		{"local", bson.D{{Key: "create", Value: "bad"}, preAndPost(true)}, mongoerr.InvalidOptions},
		{"test", bson.D{{Key: "create", Value: "v"}, {Key: "viewOn", Value: "c"}, preAndPost(true)}, mongoerr.InvalidOptions},
	} {
		_, err := runOn(cl, c.db, c.cmd)
		writeWantCode(t, err, c.code)
	}
	_, err := runOn(cl, "admin", bson.D{{Key: "create", Value: "bad"}, preAndPost(true)})
	wantCode(t, err, int32(mongoerr.InvalidOptions), "InvalidOptions", "changeStreamPreAndPostImages collection option is not supported on the admin database")

	// Disabled on create and on internal databases is fine (and not stored).
	for _, db := range []string{"test", "admin"} {
		if _, err := runOn(cl, db, bson.D{{Key: "create", Value: "off"}, preAndPost(false)}); err != nil {
			t.Fatal(err)
		}
	}
	if o := collOptions(t, cl, "off"); o.Lookup(f).Type != 0 {
		t.Errorf("disabled option stored: %v", o)
	}
	if _, err := runOn(cl, "test", bson.D{{Key: "create", Value: "on"}, preAndPost(true)}); err != nil {
		t.Fatal(err)
	}
	// The same create again is not an error; a disabled one differs.
	if _, err := runOn(cl, "test", bson.D{{Key: "create", Value: "on"}, preAndPost(true)}); err != nil {
		t.Fatal(err)
	}
	if o := collOptions(t, cl, "on"); o.Lookup(f).String() != `{"enabled": true}` {
		t.Errorf("options %v", o)
	}
	enabled := func(name string) bool {
		m, ok := ts.db.Catalog.Latest().ByNS("test." + name)
		return ok && m.PreAndPostImages
	}
	if !enabled("on") || enabled("off") {
		t.Fatalf("metadata: on %v, off %v", enabled("on"), enabled("off"))
	}

	// collMod: the same validation; a view and internal databases refuse it.
	if _, err := runOn(cl, "test", bson.D{{Key: "create", Value: "v"}, {Key: "viewOn", Value: "on"}, preAndPost(false)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		db   string
		cmd  bson.D
		code mongoerr.Code
	}{
		{"test", bson.D{{Key: "collMod", Value: "off"}, {Key: f, Value: "yes"}}, mongoerr.TypeMismatch},
		{"test", bson.D{{Key: "collMod", Value: "off"}, {Key: f, Value: bson.D{{Key: "x", Value: 1}}}}, mongoerr.Location40415},
		{"test", bson.D{{Key: "collMod", Value: "v"}, preAndPost(true)}, mongoerr.InvalidOptions},
		{"admin", bson.D{{Key: "collMod", Value: "off"}, preAndPost(true)}, mongoerr.InvalidOptions},
	} {
		_, err := runOn(cl, c.db, c.cmd)
		writeWantCode(t, err, c.code)
	}
	if _, err := runOn(cl, "test", bson.D{{Key: "collMod", Value: "off"}, preAndPost(true)}); err != nil {
		t.Fatal(err)
	}
	if !enabled("off") || collOptions(t, cl, "off").Lookup(f).String() != `{"enabled": true}` {
		t.Errorf("collMod did not enable: %v", collOptions(t, cl, "off"))
	}
	// Other collMod options leave it alone; disabling removes it.
	if _, err := runOn(cl, "test", bson.D{{Key: "collMod", Value: "off"}, {Key: "validationLevel", Value: "off"}}); err != nil {
		t.Fatal(err)
	}
	if !enabled("off") {
		t.Error("validationLevel change disabled pre-images")
	}
	if _, err := runOn(cl, "test", bson.D{{Key: "collMod", Value: "off"}, preAndPost(false)}); err != nil {
		t.Fatal(err)
	}
	if enabled("off") || collOptions(t, cl, "off").Lookup(f).Type != 0 {
		t.Errorf("collMod did not disable: %v", collOptions(t, cl, "off"))
	}
}

// preImageOf reads test.<coll>'s pre-image for the operation at (ts, index) on db's node.
func preImageOf(t *testing.T, db *operation.DB, uuid catalog.UUID, ts optime.Timestamp, index int) (bson.Raw, bool) {
	t.Helper()
	ru := db.Engine.NewRecoveryUnit()
	defer ru.Close()
	d, ok, err := images.PreImage(context.Background(), ru, db.Colls, uuid, ts, index)
	if err != nil {
		t.Fatal(err)
	}
	return bson.Raw(d), ok
}

// oplogOf returns the member's oplog entries (ts order).
func oplogOf(t *testing.T, db *operation.DB) []bson.Raw {
	t.Helper()
	meta, _ := db.Catalog.Latest().ByNS(oplog.NS)
	ru := db.Engine.NewRecoveryUnit()
	defer ru.Close()
	c, err := ru.NewCursor(meta.Ident, storage.CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []bson.Raw
	for ok := c.First(); ok; ok = c.Next() {
		out = append(out, append(bson.Raw(nil), c.Value()...))
	}
	return out
}

// TestPreImagesThroughCommands: on a replica-set member, findAndModify and a driver
// transaction on a collection with the option record pre-images (the transaction's at its
// applyOps entry and index), and setClusterParameter/getClusterParameter manage
// changeStreamOptions (admin only, not on a standalone, BadValue for bad values).
func TestPreImagesThroughCommands(t *testing.T) {
	ts, rc := startMember(t, t.TempDir(), 0)
	t.Cleanup(func() { rc.Close(); ts.close(t) })
	cl := ts.cl
	ctx := context.Background()
	if _, err := runOn(cl, "test", bson.D{{Key: "create", Value: "c"}, preAndPost(true)}); err != nil {
		t.Fatal(err)
	}
	meta, _ := ts.db.Catalog.Latest().ByNS("test.c")
	coll := cl.Database("test").Collection("c")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := runOn(cl, "test", bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}}}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if _, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 3}}); err != nil {
			return nil, err
		}
		if _, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "t", Value: true}}}}); err != nil {
			return nil, err
		}
		_, err := coll.DeleteOne(sctx, bson.D{{Key: "_id", Value: 1}})
		return nil, err
	}); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, e := range oplogOf(t, ts.db) {
		s, i := e.Lookup("ts").Timestamp()
		at := optime.MakeTimestamp(s, i)
		switch {
		case e.Lookup("op").StringValue() == "u" && e.Lookup("ns").StringValue() == "test.c":
			pre, ok := preImageOf(t, ts.db, meta.UUID, at, 0)
			if !ok || pre.Lookup("n").Int32() != 1 {
				t.Errorf("findAndModify pre-image: %v %v", ok, pre)
			}
			found++
		case e.Lookup("o", "applyOps").Type != 0:
			if pre, ok := preImageOf(t, ts.db, meta.UUID, at, 0); ok {
				t.Errorf("pre-image for the transaction's insert: %v", pre)
			}
			pre, ok := preImageOf(t, ts.db, meta.UUID, at, 1)
			if !ok || pre.String() != `{"_id": {"$numberInt":"2"},"n": {"$numberInt":"2"}}` {
				t.Errorf("transaction update pre-image: %v %v", ok, pre)
			}
			pre, ok = preImageOf(t, ts.db, meta.UUID, at, 2)
			if !ok || pre.Lookup("n").Int32() != 11 {
				t.Errorf("transaction delete pre-image: %v %v", ok, pre)
			}
			found++
		}
	}
	if found != 2 {
		t.Fatalf("found %d of the 2 entries", found)
	}

	// Cluster parameters.
	get := func() bson.Raw {
		t.Helper()
		r, err := runOn(cl, "admin", bson.D{{Key: "getClusterParameter", Value: "changeStreamOptions"}})
		if err != nil {
			t.Fatal(err)
		}
		vals, _ := r.Lookup("clusterParameters").Array().Values()
		if len(vals) != 1 {
			t.Fatalf("getClusterParameter: %v", r)
		}
		return vals[0].Document()
	}
	if got := get().Lookup("preAndPostImages").String(); got != `{"expireAfterSeconds": "off"}` {
		t.Errorf("default changeStreamOptions %s", got)
	}
	set := func(v any) error {
		_, err := runOn(cl, "admin", bson.D{{Key: "setClusterParameter", Value: bson.D{{Key: "changeStreamOptions", Value: v}}}})
		return err
	}
	for _, bad := range []any{bson.D{}, bson.D{{Key: "preAndPostImages", Value: bson.D{}}},
		bson.D{{Key: "preAndPostImages", Value: bson.D{{Key: "expireAfterSeconds", Value: 0}}}}} {
		writeWantCode(t, set(bad), mongoerr.BadValue)
	}
	if err := set(bson.D{{Key: "preAndPostImages", Value: bson.D{{Key: "expireAfterSeconds", Value: int64(10)}}}}); err != nil {
		t.Fatal(err)
	}
	if got := get().Lookup("preAndPostImages").String(); got != `{"expireAfterSeconds": {"$numberLong":"10"}}` {
		t.Errorf("changeStreamOptions %s", got)
	}
	if err := set(bson.D{{Key: "preAndPostImages", Value: bson.D{{Key: "expireAfterSeconds", Value: "off"}}}}); err != nil {
		t.Fatal(err)
	}
	if got := get().Lookup("preAndPostImages").String(); got != `{"expireAfterSeconds": "off"}` {
		t.Errorf("changeStreamOptions %s", got)
	}
	_, err = runOn(cl, "test", bson.D{{Key: "getClusterParameter", Value: "changeStreamOptions"}})
	writeWantCode(t, err, mongoerr.Unauthorized)
	_, err = runOn(cl, "admin", bson.D{{Key: "getClusterParameter", Value: "nope"}})
	writeWantCode(t, err, mongoerr.NoSuchKey)

	standalone := startTestServer(t)
	_, err = runOn(standalone.cl, "admin", bson.D{{Key: "setClusterParameter", Value: bson.D{{Key: "changeStreamOptions",
		Value: bson.D{{Key: "preAndPostImages", Value: bson.D{{Key: "expireAfterSeconds", Value: int64(10)}}}}}}}})
	writeWantCode(t, err, mongoerr.IllegalOperation)
	// A standalone records no pre-images.
	if _, err := runOn(standalone.cl, "test", bson.D{{Key: "create", Value: "c"}, preAndPost(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := standalone.cl.Database("test").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := standalone.cl.Database("test").Collection("c").DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := standalone.db.Catalog.Latest().ByNS(images.NS); ok {
		t.Error("a standalone has a pre-images collection")
	}
}

// TestPreImagesOfPreparedTransactions: a prepared transaction's pre-images are written with
// its prepare entry (_id.ts the prepare timestamp, index in its applyOps) in the prepared
// unit: they become visible at the commit timestamp, and an abort leaves none.
func TestPreImagesOfPreparedTransactions(t *testing.T) {
	r := startRetryRS(t)
	r.must(t, "test", bson.D{{Key: "create", Value: "c"}, preAndPost(true)})
	r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}}, bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: 0}}}}})
	meta, _ := r.db.Catalog.Latest().ByNS("test.c")
	preAt := func(read, ts optime.Timestamp, index int) (bson.Raw, bool) {
		t.Helper()
		ru := r.db.Engine.NewRecoveryUnit()
		defer ru.Close()
		if err := ru.SetReadSource(storage.ReadProvided, read); err != nil {
			t.Fatal(err)
		}
		d, ok, err := images.PreImage(context.Background(), ru, r.db.Colls, meta.UUID, ts, index)
		if err != nil {
			t.Fatal(err)
		}
		return bson.Raw(d), ok
	}
	for n, commit := range []bool{true, false} {
		lsid := newLsid()
		txn := int64(n + 1)
		r.must(t, "test", prepStmt(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 10 + n}}}}}, lsid, txn, true))
		r.must(t, "test", prepStmt(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1 + n}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}}}}}}, lsid, txn, false))
		reply := r.must(t, "admin", prepStmt(bson.D{{Key: "prepareTransaction", Value: 1}}, lsid, txn, false))
		ps, pi, _ := reply.Lookup("prepareTimestamp").TimestampOK()
		prep := optime.MakeTimestamp(ps, pi)
		if !commit {
			r.must(t, "admin", prepStmt(bson.D{{Key: "abortTransaction", Value: 1}}, lsid, txn, false))
			if _, ok := preAt(prep+100, prep, 1); ok {
				t.Error("an aborted prepared transaction left a pre-image")
			}
			continue
		}
		commitTS := prep + 1
		r.must(t, "admin", prepStmt(bson.D{{Key: "commitTransaction", Value: 1}, {Key: "commitTimestamp", Value: bson.Timestamp{T: commitTS.Secs(), I: commitTS.Inc()}}}, lsid, txn, false))
		if _, ok := preAt(prep, prep, 1); ok {
			t.Error("pre-image visible below the commit timestamp")
		}
		pre, ok := preAt(commitTS, prep, 1)
		if !ok || pre.String() != `{"_id": {"$numberInt":"1"},"v": {"$numberInt":"0"}}` {
			t.Errorf("prepared transaction's pre-image at its commit: %v %v (prepare %v, all: %v)", ok, pre, prep, r.find(t, "config.system.preimages", bson.D{}))
		}
		if _, ok := preAt(commitTS, prep, 0); ok {
			t.Error("pre-image for the transaction's insert")
		}
	}
}
