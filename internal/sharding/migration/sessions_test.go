package migration

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/sharding/shardkey"
	"humongo/internal/txn/lsc"
	"humongo/internal/txn/retryable"
)

func sessKey(b byte) lsc.Key {
	k := lsc.Key{UID: lsc.NoUserUID}
	k.ID[0] = b
	return k
}

func kdoc(id, k int32) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendInt32("_id", id).AppendInt32("k", k).Build()
}

// entry is a statement entry as a donor sends it.
func entry(k lsc.Key, txn int64, op string, o, o2 bsoncore.Document) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder().AppendDocument("lsid", retryable.LsidDoc(k)).AppendInt64("txnNumber", txn).
		AppendString("op", op).AppendString("ns", "t.c").AppendDocument("o", o)
	if o2 != nil {
		b.AppendDocument("o2", o2)
	}
	return b.AppendInt32("stmtId", 0).AppendTimestamp("ts", 1, 1).AppendInt64("t", 1).AppendDateTime("wall", 1).Build()
}

// TestSessionSourceCollectsTheRangesHistory: the donor's session history holds, per session,
// the statements whose document is in the range (an update's document looked up by _id, one
// that is gone included), a findAndModify's image before its entry, and a dead-end sentinel
// for a committed transaction that wrote the collection (or whose entries are gone) and for
// a chain the oplog no longer holds; a session walked again adds nothing it sent before.
func TestSessionSourceCollectsTheRangesHistory(t *testing.T) {
	ctx := context.Background()
	db, err := operation.OpenDB(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	w, err := oplog.Open(ctx, oplog.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls, MaxSizeBytes: 16 << 20, TempDir: db.TempDir})
	if err != nil {
		t.Fatal(err)
	}
	db.SetObserver(w)
	local := &Local{DB: db, Tracker: &Tracker{}}
	op := db.NewOp(ctx)
	if err := op.WriteCollection(ctx, "t.c", true, func(c *index.Collection) error {
		for _, d := range []bsoncore.Document{kdoc(1, 1), kdoc(2, 2), kdoc(50, 50)} {
			if _, err := c.InsertDocument(op.RU, d); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	op.Close()

	// The node's history, written as a recipient writes it (so it is re-donated here).
	term := func() int64 { return 1 }
	apply := func(raw bsoncore.Document, last retryable.MigratedResult) retryable.MigratedResult {
		t.Helper()
		r, err := retryable.ApplyMigrated(ctx, db, term, raw, last)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b, c, d, e, f := sessKey(1), sessKey(2), sessKey(3), sessKey(4), sessKey(5), sessKey(6)
	id := func(v int32) bsoncore.Document { return bsoncore.NewDocumentBuilder().AppendInt32("_id", v).Build() }
	apply(entry(a, 1, "i", kdoc(1, 1), nil), retryable.MigratedResult{})   // in the range
	apply(entry(b, 1, "i", kdoc(50, 50), nil), retryable.MigratedResult{}) // outside
	img := apply(bsoncore.NewDocumentBuilder().AppendDocument("lsid", retryable.LsidDoc(c)).AppendInt64("txnNumber", 2).
		AppendString("op", "n").AppendString("ns", "t.c").AppendDocument("o", kdoc(2, 2)).AppendInt32("stmtId", 0).Build(),
		retryable.MigratedResult{})
	marked := bsoncore.NewDocumentBuilder()
	els, _ := entry(c, 2, "u", bsoncore.NewDocumentBuilder().AppendInt32("$v", 2).Build(), id(2)).Elements()
	for _, el := range els {
		marked.AppendValue(el.Key(), el.Value())
	}
	apply(marked.AppendString("needsRetryImage", "preImage").Build(), img) // in the range, with its image
	apply(entry(d, 1, "d", id(999), nil), retryable.MigratedResult{})      // document gone: sent
	withRecord := func(rec bsoncore.Document) {
		op := db.NewOp(ctx)
		defer op.Close()
		if err := op.WriteCollection(ctx, retryable.TxnsNS, false, func(*index.Collection) error {
			return retryable.UpsertRecord(op, rec)
		}); err != nil {
			t.Fatal(err)
		}
	}
	withRecord(oplog.TxnSessionRecord(retryable.LsidDoc(e), 7, optime.OpTime{TS: optime.MakeTimestamp(9, 9), Term: 1}, 1, oplog.TxnCommitted))
	withRecord(oplog.SessionRecord(retryable.LsidDoc(f), 3, optime.OpTime{TS: optime.MakeTimestamp(9, 8), Term: 1}, 1)) // truncated
	// Committed transactions whose applyOps the oplog holds: one wrote t.c (a sentinel),
	// one only another collection (left out).
	applyOps := func(ns string) optime.OpTime {
		op := db.NewOp(ctx)
		defer op.Close()
		var ot optime.OpTime
		if err := op.WriteCollection(ctx, retryable.TxnsNS, false, func(*index.Collection) error {
			inner := bsoncore.NewDocumentBuilder().AppendString("op", "i").AppendString("ns", ns).AppendDocument("o", kdoc(3, 3)).Build()
			var err error
			ot, err = w.LogApplyOps(op.RU, []bsoncore.Document{inner})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ot
	}
	g, h := sessKey(7), sessKey(8)
	withRecord(oplog.TxnSessionRecord(retryable.LsidDoc(g), 2, applyOps("t.c"), 1, oplog.TxnCommitted))
	withRecord(oplog.TxnSessionRecord(retryable.LsidDoc(h), 2, applyOps("t.other"), 1, oplog.TxnCommitted))

	p, err := shardkey.Parse(bsoncore.NewDocumentBuilder().AppendInt32("k", 1).Build())
	if err != nil {
		t.Fatal(err)
	}
	rng := Range{Pattern: p, Min: bsoncore.NewDocumentBuilder().AppendInt32("k", 0).Build(), Max: bsoncore.NewDocumentBuilder().AppendInt32("k", 10).Build()}
	src := NewSessionSource("t.c", rng, local, catalog.UUID{})
	if err := src.Init(ctx); err != nil {
		t.Fatal(err)
	}
	var got []bsoncore.Document
	for {
		batch, err := src.NextBatch(ctx, 1<<20, time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(batch) == 0 {
			break
		}
		got = append(got, batch...)
	}
	// What each session contributed, in order: i (insert), u (update), n (image),
	// s (sentinel).
	kinds := map[byte]string{}
	for _, g := range got {
		sub, lid, _ := g.Lookup("lsid", "id").BinaryOK()
		if sub != 4 {
			t.Fatalf("entry without lsid: %v", g)
		}
		kind := "?"
		orig := retryable.Original(g)
		switch op, _ := orig.Lookup("op").StringValueOK(); {
		case retryable.IsSentinel(g):
			kind = "s"
		case op == "n":
			kind = "n"
		default:
			kind = op
		}
		kinds[lid[0]] += kind
	}
	want := map[byte]string{1: "i", 3: "nu", 4: "d", 5: "s", 6: "s", 7: "s"}
	if len(kinds) != len(want) {
		t.Fatalf("sessions sent %v, want %v", kinds, want)
	}
	for k, v := range want {
		if kinds[k] != v {
			t.Fatalf("sessions sent %v, want %v", kinds, want)
		}
	}
	if src.Sent() != int64(len(got)) {
		t.Fatalf("Sent() = %d, handed out %d", src.Sent(), len(got))
	}
	// Walked again (a write of the session committed), nothing new: nothing sent.
	src.NoteSession(retryable.LsidDoc(a))
	src.NoteSession(retryable.LsidDoc(f))
	if batch, err := src.NextBatch(ctx, 1<<20, time.Millisecond); err != nil || len(batch) != 0 {
		t.Fatalf("a session walked again sent %d entries (%v)", len(batch), err)
	}
	// After the commit began, an empty batch comes back at once.
	src.CommitStarted()
	start := time.Now()
	if batch, err := src.NextBatch(ctx, 1<<20, time.Hour); err != nil || len(batch) != 0 {
		t.Fatalf("after CommitStarted: %d %v", len(batch), err)
	}
	if time.Since(start) > time.Minute {
		t.Fatal("NextBatch waited after CommitStarted")
	}
}
