package oplog_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// sessionEntry builds a retryable write's insert entry as a primary logs it.
func sessionEntry(t *testing.T, lsid bson.D, txn int64, stmt int32, ts optime.Timestamp, id int, wall int64) bsoncore.Document {
	t.Helper()
	return mustDoc(t, bson.D{
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: txn},
		{Key: "op", Value: "i"}, {Key: "ns", Value: "test.c"}, {Key: "o", Value: bson.D{{Key: "_id", Value: id}}},
		{Key: "stmtId", Value: stmt}, {Key: "ts", Value: bson.Timestamp{T: ts.Secs(), I: ts.Inc()}},
		{Key: "t", Value: int64(1)}, {Key: "v", Value: int64(2)}, {Key: "wall", Value: bson.DateTime(wall)},
	})
}

func sessionLsid(b byte) bson.D {
	return bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte{b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}}}
}

// record reads lsid's config.transactions document at ts (0: latest) as
// "txnNum/lastWriteOpTime.ts.I/lastWriteDate", or "" when there is none.
func (n *node) record(lsid bson.D, ts optime.Timestamp) string {
	n.t.Helper()
	ru := n.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	if ts != 0 {
		if err := ru.SetReadSource(storage.ReadProvided, ts); err != nil {
			n.t.Fatal(err)
		}
	}
	m, ok := n.db.Catalog.Latest().ByNS(oplog.TransactionsNS)
	if !ok {
		n.t.Fatal("no config.transactions")
	}
	c, err := n.db.Colls.ByUUID(m.UUID)
	if err != nil {
		n.t.Fatal(err)
	}
	_, d, found, err := c.FindByID(ru, bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: mustDoc(n.t, lsid)})
	if err != nil {
		n.t.Fatal(err)
	}
	if !found {
		return ""
	}
	r := bson.Raw(d)
	_, inc, _ := r.Lookup("lastWriteOpTime", "ts").TimestampOK()
	return bson.Raw(mustDoc(n.t, bson.D{{Key: "txn", Value: r.Lookup("txnNum").Int64()}, {Key: "inc", Value: int64(inc)},
		{Key: "date", Value: int64(r.Lookup("lastWriteDate").DateTime())}})).String()
}

func recordString(t *testing.T, txn int64, inc uint32, wall int64) string {
	return bson.Raw(mustDoc(t, bson.D{{Key: "txn", Value: txn}, {Key: "inc", Value: int64(inc)}, {Key: "date", Value: wall}})).String()
}

// TestApplyDerivesSessionRecords: single-entry application (startup recovery, rollback
// replay) writes a retryable write's session record in the entry's unit at its timestamp,
// never moves a record backwards, and ignores entries without a session; batch application
// collects the newest entry per session and writes each record once at its timestamp.
func TestApplyDerivesSessionRecords(t *testing.T) {
	ctx := context.Background()
	// A replica-set node: its oplog writer observes writes, so a session record written
	// without marking the unit unreplicated would log an entry (and take its timestamp).
	n := openNode(t, true)
	for _, ns := range []string{"test.c", oplog.TransactionsNS} {
		n.write(ns, func(*storage.RecoveryUnit, *index.Collection) error { return nil })
	}
	logged := len(n.oplogEntries())
	a := oplog.NewApplier(oplog.Config{Catalog: n.db.Catalog, Colls: n.db.Colls})
	apply := func(a *oplog.Applier, raw bsoncore.Document) {
		t.Helper()
		ru := n.db.Engine.NewRecoveryUnit()
		defer ru.Close()
		if err := a.Apply(ctx, ru, raw, oplog.ModeRecovering); err != nil {
			t.Fatal(err)
		}
	}
	at := func(i uint32) optime.Timestamp { return optime.MakeTimestamp(5000, i) }
	lsA, lsB := sessionLsid(1), sessionLsid(2)

	e1 := sessionEntry(t, lsA, 1, 0, at(10), 1, 111)
	apply(a, e1)
	apply(a, sessionEntry(t, lsA, 1, 1, at(11), 2, 112))
	apply(a, sessionEntry(t, lsB, 7, 0, at(12), 3, 113))
	apply(a, mustDoc(t, bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "test.c"}, {Key: "o", Value: bson.D{{Key: "_id", Value: 4}}},
		{Key: "ts", Value: bson.Timestamp{T: 5000, I: 13}}, {Key: "t", Value: int64(1)}, {Key: "wall", Value: bson.DateTime(114)}}))
	if got, want := n.record(lsA, 0), recordString(t, 1, 11, 112); got != want {
		t.Fatalf("A: %s, want %s", got, want)
	}
	if got, want := n.record(lsA, at(10)), recordString(t, 1, 10, 111); got != want {
		t.Fatalf("A at its first entry: %s, want %s", got, want)
	}
	if got := n.record(lsA, at(9)); got != "" {
		t.Fatalf("A before its first entry: %s", got)
	}
	if got, want := n.record(lsB, 0), recordString(t, 7, 12, 113); got != want {
		t.Fatalf("B: %s, want %s", got, want)
	}
	// Replaying an older entry leaves the record alone.
	apply(a, e1)
	if got, want := n.record(lsA, 0), recordString(t, 1, 11, 112); got != want {
		t.Fatalf("A after replaying its first entry: %s, want %s", got, want)
	}

	// Batch application: Apply writes no record; the tracker keeps the newest per session.
	b := a.WithBatchSessionUpdates()
	batch := []bsoncore.Document{
		sessionEntry(t, lsA, 2, 0, at(20), 5, 120),
		sessionEntry(t, lsB, 6, 0, at(21), 6, 121), // older txnNumber than B's record: ignored
		sessionEntry(t, lsA, 2, 1, at(22), 7, 122),
	}
	var tr oplog.SessionTracker
	for _, raw := range batch {
		apply(b, raw)
		e, err := oplog.ParseEntry(raw)
		if err != nil {
			t.Fatal(err)
		}
		tr.Note(e)
	}
	if got, want := n.record(lsA, 0), recordString(t, 1, 11, 112); got != want {
		t.Fatalf("A after batch Apply: %s, want %s (unchanged)", got, want)
	}
	if ups := tr.Updates(); len(ups) != 2 || ups[0].OpTime.TS != at(22) || ups[1].TxnNumber != 6 {
		t.Fatalf("tracked updates: %+v", ups)
	}
	ru := n.db.Engine.NewRecoveryUnit()
	if err := a.ApplySessionUpdates(ctx, ru, tr.Updates()); err != nil {
		t.Fatal(err)
	}
	ru.Close()
	if got, want := n.record(lsA, 0), recordString(t, 2, 22, 122); got != want {
		t.Fatalf("A after the batch: %s, want %s", got, want)
	}
	if got, want := n.record(lsA, at(21)), recordString(t, 1, 11, 112); got != want {
		t.Fatalf("A below its batch entry's timestamp: %s, want %s", got, want)
	}
	if got, want := n.record(lsB, 0), recordString(t, 7, 12, 113); got != want {
		t.Fatalf("B after an older txnNumber: %s, want %s", got, want)
	}
	if es := n.oplogEntries(); len(es) != logged {
		t.Fatalf("applying logged %d entries: %v", len(es)-logged, es[logged:])
	}
}

// TestApplySessionWithoutTransactionsCollection: a member that never had a retryable write
// has no config.transactions; applying a session's entry still succeeds.
func TestApplySessionWithoutTransactionsCollection(t *testing.T) {
	n := openNode(t, false)
	n.write("test.c", func(*storage.RecoveryUnit, *index.Collection) error { return nil })
	a := oplog.NewApplier(oplog.Config{Catalog: n.db.Catalog, Colls: n.db.Colls})
	ru := n.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	if err := a.Apply(context.Background(), ru, sessionEntry(t, sessionLsid(1), 1, 0, optime.MakeTimestamp(5000, 1), 1, 1), oplog.ModeSecondary); err != nil {
		t.Fatal(err)
	}
	if got := n.docsAt("test.c", 0); len(got) != 1 {
		t.Fatalf("documents: %v", got)
	}
}

// TestApplyDerivesSessionRecordsFromMigratedEntries: a session migration's `n` entry
// ({$sessionMigrateInfo: 1}) records its session on a member applying it, like the write
// it copies; another no-op with a session (a findAndModify image) records nothing.
func TestApplyDerivesSessionRecordsFromMigratedEntries(t *testing.T) {
	ctx := context.Background()
	n := openNode(t, true)
	n.write(oplog.TransactionsNS, func(*storage.RecoveryUnit, *index.Collection) error { return nil })
	a := oplog.NewApplier(oplog.Config{Catalog: n.db.Catalog, Colls: n.db.Colls})
	ls := sessionLsid(3)
	noop := func(o bson.D, i uint32, wall int64) bsoncore.Document {
		return mustDoc(t, bson.D{
			{Key: "lsid", Value: ls}, {Key: "txnNumber", Value: int64(4)},
			{Key: "op", Value: "n"}, {Key: "ns", Value: "test.c"}, {Key: "o", Value: o},
			{Key: "o2", Value: bson.D{{Key: "op", Value: "u"}}}, {Key: "fromMigrate", Value: true},
			{Key: "stmtId", Value: int32(0)}, {Key: "ts", Value: bson.Timestamp{T: 6000, I: i}},
			{Key: "t", Value: int64(1)}, {Key: "v", Value: int64(2)}, {Key: "wall", Value: bson.DateTime(wall)},
		})
	}
	for _, raw := range []bsoncore.Document{
		noop(bson.D{{Key: oplog.SessionMigrateInfo, Value: int32(1)}}, 1, 201),
		noop(bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 2}}, 2, 202), // an image: no record
	} {
		ru := n.db.Engine.NewRecoveryUnit()
		err := a.Apply(ctx, ru, raw, oplog.ModeRecovering)
		ru.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, want := n.record(ls, 0), recordString(t, 4, 1, 201); got != want {
		t.Fatalf("migrated entry's session: %s, want %s", got, want)
	}
	var tr oplog.SessionTracker
	e, err := oplog.ParseEntry(noop(bson.D{{Key: oplog.SessionMigrateInfo, Value: int32(1)}}, 3, 203))
	if err != nil {
		t.Fatal(err)
	}
	tr.Note(e)
	if ups := tr.Updates(); len(ups) != 1 || ups[0].OpTime.TS != optime.MakeTimestamp(6000, 3) {
		t.Fatalf("tracked updates: %+v", ups)
	}
}
