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

// TestRecoverRebuildsPreparedTransactions: prepared transactions are held by the member that
// applies their prepare entries, committed at their commitTimestamp by the commit entry, and
// rebuilt by startup recovery: from the oplog when the prepare entry is at or below the
// stable timestamp, including when the commit's timestamp is at or below stable but its
// commit entry above it (the commit is undone by recovery and replayed).
func TestRecoverRebuildsPreparedTransactions(t *testing.T) {
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
	bts := func(ts optime.Timestamp) bson.Timestamp { return bson.Timestamp{T: ts.Secs(), I: ts.Inc()} }
	mk := func(ts optime.Timestamp, d bson.D) bsoncore.Document {
		d = append(d, bson.E{Key: "ts", Value: bts(ts)}, bson.E{Key: "t", Value: int64(1)},
			bson.E{Key: "v", Value: int64(2)}, bson.E{Key: "wall", Value: bson.DateTime(0)})
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	lsidA := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}
	lsidB := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: append(make([]byte, 15), 1)}}}
	prepare := func(ts optime.Timestamp, lsid bson.D, ns string, ids ...int) bsoncore.Document {
		ops := bson.A{}
		for _, id := range ids {
			ops = append(ops, bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: ns}, {Key: "o", Value: bson.D{{Key: "_id", Value: id}}}})
		}
		return mk(ts, bson.D{{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "op", Value: "c"},
			{Key: "ns", Value: "admin.$cmd"}, {Key: "o", Value: bson.D{{Key: "applyOps", Value: ops}, {Key: "prepare", Value: true}}},
			{Key: "prevOpTime", Value: bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}}}})
	}
	commit := func(ts, commitTs, prep optime.Timestamp, lsid bson.D) bsoncore.Document {
		return mk(ts, bson.D{{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "op", Value: "c"},
			{Key: "ns", Value: "admin.$cmd"}, {Key: "o", Value: bson.D{{Key: "commitTransaction", Value: 1}, {Key: "commitTimestamp", Value: bts(commitTs)}}},
			{Key: "prevOpTime", Value: bson.D{{Key: "ts", Value: bts(prep)}, {Key: "t", Value: int64(1)}}}})
	}
	entries := []bsoncore.Document{
		mk(at(1), bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "app.$cmd"}, {Key: "o", Value: bson.D{{Key: "create", Value: "a"}}}}),
		mk(at(2), bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "app.$cmd"}, {Key: "o", Value: bson.D{{Key: "create", Value: "b"}}}}),
		mk(at(3), bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "config.$cmd"}, {Key: "o", Value: bson.D{{Key: "create", Value: "transactions"}}}}),
		prepare(at(4), lsidA, "app.a", 1, 2),
		prepare(at(5), lsidB, "app.b", 3),
		commit(at(7), at(6), at(4), lsidA),
	}
	a := applier.New(applier.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls, Writer: w,
		Fatal: func(err error) { t.Errorf("fatal: %v", err) }}).WithApplier(w.Applier())
	for _, e := range entries {
		if _, err := a.ApplyBatch(ctx, []bsoncore.Document{e}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		if n := oplog.PreparedOf(db.Engine).Len(); n != 1 {
			t.Fatalf("%s: %d prepared transactions held, want 1 (B)", when, n)
		}
		if got, _ := dump(t, db, "app.a", at(5)); len(got) != 0 {
			t.Fatalf("%s: A visible below its commit timestamp: %v", when, got)
		}
		if got, _ := dump(t, db, "app.a", at(6)); len(got) != 2 {
			t.Fatalf("%s: A at its commit timestamp: %v", when, got)
		}
		if got, _ := dump(t, db, "app.b", at(4)); len(got) != 0 {
			t.Fatalf("%s: B visible while prepared: %v", when, got)
		}
	}
	check("applied")
	reopen := func(stable optime.Timestamp) {
		t.Helper()
		oplog.PreparedOf(db.Engine).Close()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if db, err = operation.OpenDB(ctx, dir, nil); err != nil {
			t.Fatal(err)
		}
		db.Engine.ForceStableTimestamp(stable)
		recoverDB(t, db)
	}
	// A's commit timestamp is at stable, its commit entry above: recovery undoes the commit,
	// rebuilds A from its prepare entry when it replays the commit entry, and rebuilds B.
	reopen(at(6))
	check("recovered from the commit timestamp")
	reopen(at(7))
	check("recovered from the top")
	t.Cleanup(func() { oplog.PreparedOf(db.Engine).Close(); _ = db.Close() })
	w, err = oplog.Open(ctx, oplog.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls, MaxSizeBytes: 64 << 20, TempDir: db.TempDir})
	if err != nil {
		t.Fatal(err)
	}
	a = applier.New(applier.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls, Writer: w,
		Fatal: func(err error) { t.Errorf("fatal: %v", err) }}).WithApplier(w.Applier())
	if _, err := a.ApplyBatch(ctx, []bsoncore.Document{commit(at(9), at(8), at(5), lsidB)}); err != nil {
		t.Fatal(err)
	}
	if n := oplog.PreparedOf(db.Engine).Len(); n != 0 {
		t.Fatalf("%d prepared transactions held after B's commit", n)
	}
	if got, _ := dump(t, db, "app.b", at(7)); len(got) != 0 {
		t.Fatalf("B visible below its commit timestamp: %v", got)
	}
	if got, _ := dump(t, db, "app.b", at(8)); len(got) != 1 {
		t.Fatalf("B at its commit timestamp: %v", got)
	}
}
