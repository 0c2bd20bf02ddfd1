package applier_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/applier/repltest"
	"humongo/internal/storage"
)

func rawDoc(t *testing.T, d bson.D) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func at(i uint32) optime.Timestamp { return optime.MakeTimestamp(100, i) }

func bts(ts optime.Timestamp) bson.Timestamp { return bson.Timestamp{T: ts.Secs(), I: ts.Inc()} }

// entry builds a single-op entry at ts.
func entry(t *testing.T, ts optime.Timestamp, op, ns string, o bson.D, more ...bson.E) bsoncore.Document {
	d := bson.D{{Key: "op", Value: op}, {Key: "ns", Value: ns}, {Key: "o", Value: o}}
	d = append(d, more...)
	d = append(d, bson.E{Key: "ts", Value: bts(ts)}, bson.E{Key: "t", Value: int64(1)},
		bson.E{Key: "v", Value: int64(2)}, bson.E{Key: "wall", Value: bson.DateTime(1000 + int64(ts.Inc()))})
	return rawDoc(t, d)
}

var txnLsid = bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}

// txnPart builds a transaction entry with inserts of ids into test.c; prev 0: first of its
// chain; count < 0: a partialTxn entry.
func txnPart(t *testing.T, txn int64, ts, prev optime.Timestamp, count int64, ids ...int) bsoncore.Document {
	ops := bson.A{}
	for _, id := range ids {
		ops = append(ops, bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "test.c"}, {Key: "o", Value: bson.D{{Key: "_id", Value: id}}}})
	}
	o := bson.D{{Key: "applyOps", Value: ops}}
	if count < 0 {
		o = append(o, bson.E{Key: "partialTxn", Value: true})
	} else if prev != 0 {
		o = append(o, bson.E{Key: "count", Value: count})
	}
	prevOT := bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}}
	if prev != 0 {
		prevOT = bson.D{{Key: "ts", Value: bts(prev)}, {Key: "t", Value: int64(1)}}
	}
	return rawDoc(t, bson.D{{Key: "lsid", Value: txnLsid}, {Key: "txnNumber", Value: txn},
		{Key: "op", Value: "c"}, {Key: "ns", Value: "admin.$cmd"}, {Key: "o", Value: o},
		{Key: "ts", Value: bts(ts)}, {Key: "t", Value: int64(1)}, {Key: "v", Value: int64(2)},
		{Key: "wall", Value: bson.DateTime(1000 + int64(ts.Inc()))}, {Key: "prevOpTime", Value: prevOT}})
}

// countAt counts ns's documents read at ts.
func countAt(t *testing.T, m *repltest.Node, ns string, ts optime.Timestamp) int {
	t.Helper()
	meta, ok := m.DB.Catalog.Latest().ByNS(ns)
	if !ok {
		return 0
	}
	ru := m.DB.Engine.NewRecoveryUnit()
	defer ru.Close()
	if err := ru.SetReadSource(storage.ReadProvided, ts); err != nil {
		t.Fatal(err)
	}
	rs, err := storage.OpenRecordStore(m.DB.Engine, meta.Ident)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := rs.NewCursor(ru, false)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	n := 0
	for {
		if _, _, ok := cur.Next(); !ok {
			return n
		}
		n++
	}
}

// TestTransactionEntriesInBatches: a secondary's batches apply a single-entry transaction and
// a 3-entry partialTxn chain split across two batches (and mixed with CRUD entries); a read
// at lastApplied after each batch sees all of a transaction or none of it, and the commit's
// session record says committed at the commit entry's optime.
func TestTransactionEntriesInBatches(t *testing.T) {
	ctx := context.Background()
	m := repltest.StartMember(t)
	a := applier.New(applier.Config{Engine: m.DB.Engine, Catalog: m.DB.Catalog, Colls: m.DB.Colls, Writer: m.Writer,
		Fatal: func(err error) { t.Errorf("fatal: %v", err) }}).WithApplier(m.Writer.Applier())
	batches := [][]bsoncore.Document{
		{entry(t, at(1), "c", "test.$cmd", bson.D{{Key: "create", Value: "c"}})},
		{entry(t, at(2), "c", "config.$cmd", bson.D{{Key: "create", Value: "transactions"}})},
		{entry(t, at(3), "i", "test.c", bson.D{{Key: "_id", Value: 1}})},
		// A single-entry transaction amid CRUD entries.
		{entry(t, at(4), "i", "test.c", bson.D{{Key: "_id", Value: 2}}), txnPart(t, 1, at(5), 0, 0, 10, 11, 12),
			entry(t, at(6), "i", "test.c", bson.D{{Key: "_id", Value: 3}})},
		// A chain: its first entry alone, the rest with a CRUD entry after it.
		{txnPart(t, 2, at(10), 0, -1, 20, 21)},
		{txnPart(t, 2, at(11), at(10), -1, 22), txnPart(t, 2, at(12), at(11), 4, 23),
			entry(t, at(13), "i", "test.c", bson.D{{Key: "_id", Value: 4}})},
		// A chain in one batch.
		{txnPart(t, 3, at(20), 0, -1, 30), txnPart(t, 3, at(21), at(20), -1, 31), txnPart(t, 3, at(22), at(21), 3, 32)},
	}
	wantAfter := []int{0, 0, 1, 6, 6, 11, 14}
	for i, b := range batches {
		last, err := a.ApplyBatch(ctx, b)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if got := countAt(t, m, "test.c", last.TS); got != wantAfter[i] {
			t.Fatalf("after batch %d: %d documents at lastApplied %v, want %d", i, got, last, wantAfter[i])
		}
	}
	// The chains' data is at their commit timestamps, nothing of them below.
	for _, c := range []struct {
		ts   optime.Timestamp
		want int
	}{{at(4), 2}, {at(5), 5}, {at(11), 6}, {at(12), 10}, {at(21), 11}, {at(22), 14}} {
		if got := countAt(t, m, "test.c", c.ts); got != c.want {
			t.Fatalf("%d documents at %v, want %d", got, c.ts, c.want)
		}
	}
	var rec bson.Raw
	if err := m.Client.Database("config").Collection("transactions").FindOne(ctx, bson.D{}).Decode(&rec); err != nil {
		t.Fatal(err)
	}
	if rec.Lookup("txnNum").Int64() != 3 || rec.Lookup("state").StringValue() != "committed" ||
		!rec.Lookup("lastWriteOpTime", "ts").Equal(bson.RawValue{Type: bson.TypeTimestamp, Value: bsoncore.AppendTimestamp(nil, 100, 22)}) {
		t.Fatalf("session record %v, want txnNum 3 committed at Timestamp(100, 22)", rec)
	}
	if n, err := m.Client.Database("local").Collection("oplog.rs").CountDocuments(ctx, bson.D{}); err != nil || n != 13 {
		t.Fatalf("our oplog has %d entries (err %v), want every received one (13)", n, err)
	}
}
