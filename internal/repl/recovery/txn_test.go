package recovery_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/oplog"
)

// TestRecoverReplaysTransactionChain: startup recovery from a stable timestamp that falls
// inside a partialTxn chain (after its first entry, before its last) replays the chain: the
// last entry finds the earlier ones in the oplog and applies all the transaction's writes
// at its own timestamp, none below it.
func TestRecoverReplaysTransactionChain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := operation.OpenDB(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := oplog.Open(ctx, oplog.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls, MaxSizeBytes: 64 << 20, TempDir: db.TempDir})
	if err != nil {
		t.Fatal(err)
	}
	at := func(i uint32) optime.Timestamp { return optime.MakeTimestamp(2000, i) }
	mk := func(ts optime.Timestamp, d bson.D) bsoncore.Document {
		d = append(d, bson.E{Key: "ts", Value: bson.Timestamp{T: ts.Secs(), I: ts.Inc()}}, bson.E{Key: "t", Value: int64(1)},
			bson.E{Key: "v", Value: int64(2)}, bson.E{Key: "wall", Value: bson.DateTime(0)})
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	insOp := func(id int) bson.D {
		return bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "app.a"}, {Key: "o", Value: bson.D{{Key: "_id", Value: id}}}}
	}
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}
	part := func(ts, prev optime.Timestamp, extra bson.E, ids ...int) bsoncore.Document {
		ops := bson.A{}
		for _, id := range ids {
			ops = append(ops, insOp(id))
		}
		p := bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}}
		if prev != 0 {
			p = bson.D{{Key: "ts", Value: bson.Timestamp{T: prev.Secs(), I: prev.Inc()}}, {Key: "t", Value: int64(1)}}
		}
		return mk(ts, bson.D{{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "op", Value: "c"},
			{Key: "ns", Value: "admin.$cmd"}, {Key: "o", Value: bson.D{{Key: "applyOps", Value: ops}, extra}}, {Key: "prevOpTime", Value: p}})
	}
	entries := []bsoncore.Document{
		mk(at(1), bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "app.$cmd"}, {Key: "o", Value: bson.D{{Key: "create", Value: "a"}}}}),
		mk(at(2), insOp(0)),
		part(at(3), 0, bson.E{Key: "partialTxn", Value: true}, 1, 2),
		part(at(4), at(3), bson.E{Key: "partialTxn", Value: true}, 3),
		part(at(5), at(4), bson.E{Key: "count", Value: int64(4)}, 4),
	}
	a := applier.New(applier.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls, Writer: w,
		Fatal: func(err error) { t.Errorf("fatal: %v", err) }}).WithApplier(w.Applier())
	for _, e := range entries { // one batch each, as the batcher may cut a chain
		if _, err := a.ApplyBatch(ctx, []bsoncore.Document{e}); err != nil {
			t.Fatal(err)
		}
	}
	final, _ := dump(t, db, "app.a", 0)
	if len(final) != 5 {
		t.Fatalf("%d documents applied, want 5: %v", len(final), final)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart with the stable timestamp inside the chain.
	db, err = operation.OpenDB(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.Engine.ForceStableTimestamp(at(3))
	res := recoverDB(t, db)
	if res.Stable != at(3) || res.Replayed != 2 {
		t.Fatalf("recovery %+v; want stable %v and 2 entries replayed", res, at(3))
	}
	got, _ := dump(t, db, "app.a", 0)
	same(t, "data after recovery", got, final)
	if below, _ := dump(t, db, "app.a", at(4)); len(below) != 1 {
		t.Fatalf("%d documents below the commit, want 1: %v", len(below), below)
	}
}
