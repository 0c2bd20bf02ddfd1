package oplog_test

import (
	"context"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// TestNotWritablePrimaryRefusesReplicatedWrites: the write path's one check. A member that
// is not a writable primary fails every replicated write of its own with NotWritablePrimary
// and logs nothing, whatever made it (a document write, a DDL, a delete as the TTL monitor
// makes it); local writes, no-ops and replication's own application still succeed.
func TestNotWritablePrimaryRefusesReplicatedWrites(t *testing.T) {
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	var writable atomic.Bool
	writable.Store(true)
	w, err := oplog.Open(context.Background(), oplog.Config{
		Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls, MaxSizeBytes: 64 << 20,
		Term: func() (int64, bool) { return 1, writable.Load() }, TempDir: db.TempDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	db.SetObserver(w)
	n := &node{t: t, db: db, w: w}
	write := func(ns string, create bool, f func(ru *storage.RecoveryUnit, c *index.Collection) error) error {
		op := db.NewOp(context.Background())
		defer op.Close()
		return op.WriteCollection(context.Background(), ns, create, func(c *index.Collection) error { return f(op.RU, c) })
	}
	insert := func(ns string, id int) error {
		return write(ns, true, func(ru *storage.RecoveryUnit, c *index.Collection) error {
			_, err := c.InsertDocuments(ru, []bsoncore.Document{mustDoc(t, bson.D{{Key: "_id", Value: id}})})
			return err
		})
	}
	idVal := func(id int32) bsoncore.Value {
		return bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, id)}
	}

	// As primary: test.c exists with _id 1 and 2.
	if err := insert("test.c", 1); err != nil {
		t.Fatal(err)
	}
	if err := insert("test.c", 2); err != nil {
		t.Fatal(err)
	}
	before := len(n.oplogEntries())

	writable.Store(false) // stepped down
	wantRefused := func(what string, err error) {
		t.Helper()
		if !mongoerr.Is(err, mongoerr.NotWritablePrimary) {
			t.Errorf("%s on a node that is not primary: got %v, want NotWritablePrimary", what, err)
		}
	}
	wantRefused("insert", insert("test.c", 3))
	wantRefused("implicit create", insert("test.new", 1))
	wantRefused("delete", write("test.c", false, func(ru *storage.RecoveryUnit, c *index.Collection) error {
		rid, old, ok, err := c.FindByID(ru, idVal(1))
		if err != nil || !ok {
			t.Fatalf("find _id 1: %v %v", ok, err)
		}
		return c.DeleteDocument(ru, rid, old)
	}))
	wantRefused("update", write("test.c", false, func(ru *storage.RecoveryUnit, c *index.Collection) error {
		rid, old, _, err := c.FindByID(ru, idVal(2))
		if err != nil {
			return err
		}
		return c.UpdateDocument(ru, rid, old, mustDoc(t, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 1}}))
	}))
	if got := n.docsAt("test.c", 0); len(got) != 2 {
		t.Errorf("test.c after refused writes: %v, want the 2 documents written as primary", got)
	}
	if _, ok := db.Catalog.Latest().ByNS("test.new"); ok {
		t.Error("test.new was created on a node that is not primary")
	}
	if got := len(n.oplogEntries()); got != before {
		t.Errorf("the refused writes logged %d entries", got-before)
	}

	// A no-op of a read (linearizable, afterClusterTime) is a primary's write too: logged by
	// a node that is no longer primary, it would carry a term whose primary never wrote it.
	if _, err := w.LogNoop(context.Background(), mustDoc(t, bson.D{{Key: "msg", Value: "x"}})); mongoerr.CodeOf(err) != mongoerr.NotWritablePrimary {
		t.Errorf("read no-op on a secondary: %v, want NotWritablePrimary", err)
	}

	// Exempt: the local database (unreplicated), the coordinator's no-ops, and replication's
	// own writes.
	if err := insert("local.mine", 1); err != nil {
		t.Errorf("local write on a secondary: %v", err)
	}
	if _, err := w.LogReplSetNoop(context.Background(), mustDoc(t, bson.D{{Key: "msg", Value: "x"}})); err != nil {
		t.Errorf("the coordinator's no-op on a secondary: %v", err)
	}
	ts := optime.MakeTimestamp(uint32(w.LastWritten().TS.Secs())+10, 1)
	entry := mustDoc(t, bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "test.c"},
		{Key: "o", Value: bson.D{{Key: "_id", Value: 9}}},
		{Key: "ts", Value: bson.Timestamp{T: ts.Secs(), I: ts.Inc()}}, {Key: "t", Value: int64(1)},
		{Key: "v", Value: int64(2)}, {Key: "wall", Value: bson.DateTime(0)}})
	ru := db.Engine.NewRecoveryUnit()
	if err := w.Applier().Apply(context.Background(), ru, entry, oplog.ModeSecondary); err != nil {
		t.Errorf("oplog application on a secondary: %v", err)
	}
	ru.Close()
	if got := n.docsAt("test.c", 0); len(got) != 3 {
		t.Errorf("test.c after applying an entry: %v, want 3 documents", got)
	}
	if err := write("test.c", false, func(ru *storage.RecoveryUnit, c *index.Collection) error {
		defer opobserver.UnreplicatedWrites(ru)()
		_, err := c.InsertDocuments(ru, []bsoncore.Document{mustDoc(t, bson.D{{Key: "_id", Value: 10}})})
		return err
	}); err != nil {
		t.Errorf("unreplicated write (initial sync, rollback) on a secondary: %v", err)
	}

	writable.Store(true) // primary again
	if err := insert("test.c", 4); err != nil {
		t.Errorf("insert as primary: %v", err)
	}
}
