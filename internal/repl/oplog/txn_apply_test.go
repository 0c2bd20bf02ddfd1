package oplog_test

import (
	"context"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// txnEntry builds a transaction's applyOps entry as a primary logs it; prev 0 is the null
// prevOpTime of a chain's first entry.
func txnEntry(t *testing.T, lsid bson.D, txn int64, ts, prev optime.Timestamp, o bson.D) bsoncore.Document {
	t.Helper()
	prevOT := bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}}
	if prev != 0 {
		prevOT = bson.D{{Key: "ts", Value: bson.Timestamp{T: prev.Secs(), I: prev.Inc()}}, {Key: "t", Value: int64(1)}}
	}
	return mustDoc(t, bson.D{
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: txn},
		{Key: "op", Value: "c"}, {Key: "ns", Value: "admin.$cmd"}, {Key: "o", Value: o},
		{Key: "ts", Value: bson.Timestamp{T: ts.Secs(), I: ts.Inc()}}, {Key: "t", Value: int64(1)},
		{Key: "v", Value: int64(2)}, {Key: "wall", Value: bson.DateTime(int64(ts.Inc()))},
		{Key: "prevOpTime", Value: prevOT},
	})
}

func ins(ns string, id int, extra ...bson.E) bson.D {
	return bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: ns}, {Key: "o", Value: append(bson.D{{Key: "_id", Value: id}}, extra...)}}
}

func upd(ns string, id int, field string, v any) bson.D {
	return bson.D{{Key: "op", Value: "u"}, {Key: "ns", Value: ns},
		{Key: "o", Value: bson.D{{Key: "$v", Value: 2}, {Key: "diff", Value: bson.D{{Key: "u", Value: bson.D{{Key: field, Value: v}}}}}}},
		{Key: "o2", Value: bson.D{{Key: "_id", Value: id}}}}
}

func del(ns string, id int) bson.D {
	return bson.D{{Key: "op", Value: "d"}, {Key: "ns", Value: ns}, {Key: "o", Value: bson.D{{Key: "_id", Value: id}}}}
}

func applyOpsO(ops []bson.D, extra ...bson.E) bson.D {
	arr := bson.A{}
	for _, op := range ops {
		arr = append(arr, op)
	}
	return append(bson.D{{Key: "applyOps", Value: arr}}, extra...)
}

// txnState reads lsid's record as "txnNum/ts.I/state" ("" when none).
func (n *node) txnState(lsid bson.D) string {
	n.t.Helper()
	m, ok := n.db.Catalog.Latest().ByNS(oplog.TransactionsNS)
	if !ok {
		return ""
	}
	c, err := n.db.Colls.ByUUID(m.UUID)
	if err != nil {
		n.t.Fatal(err)
	}
	ru := n.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	_, d, found, err := c.FindByID(ru, bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: mustDoc(n.t, lsid)})
	if err != nil || !found {
		return ""
	}
	r := bson.Raw(d)
	_, inc, _ := r.Lookup("lastWriteOpTime", "ts").TimestampOK()
	st, _ := r.Lookup("state").StringValueOK()
	return bson.Raw(mustDoc(n.t, bson.D{{Key: "txn", Value: r.Lookup("txnNum").Int64()}, {Key: "inc", Value: int64(inc)}, {Key: "state", Value: st}})).String()
}

func txnStateString(t *testing.T, txn int64, inc uint32) string {
	return bson.Raw(mustDoc(t, bson.D{{Key: "txn", Value: txn}, {Key: "inc", Value: int64(inc)}, {Key: "state", Value: "committed"}})).String()
}

// appendOplog writes received entries into the node's oplog, as a secondary does before it
// applies them.
func (n *node) appendOplog(raws ...bsoncore.Document) {
	n.t.Helper()
	ru := n.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	defer w.End()
	for _, raw := range raws {
		if _, err := n.w.AppendEntry(ru, raw); err != nil {
			n.t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		n.t.Fatal(err)
	}
}

// txnFixture is a replica-set node with test.c {_id 1, a 1}, {_id 2} and an empty test.d and
// config.transactions, and the timestamp (all earlier) the fixture was written at.
func txnFixture(t *testing.T) *node {
	n := openNode(t, true)
	n.insert("test.c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 2}})
	for _, ns := range []string{"test.d", oplog.TransactionsNS} {
		n.write(ns, func(*storage.RecoveryUnit, *index.Collection) error { return nil })
	}
	return n
}

// txnWantC is test.c after the fixture's transaction: {_id 1, a 2}, {_id 10}.
func txnWantC(t *testing.T) []string {
	out := []string{
		bson.Raw(mustDoc(t, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 2}})).String(),
		bson.Raw(mustDoc(t, bson.D{{Key: "_id", Value: 10}})).String(),
	}
	slices.Sort(out)
	return out
}

// TestApplyOpsEntryIsAtomicAtItsTimestamp: a single-entry transaction's inserts, updates and
// deletes (over two collections) all appear at the entry's timestamp and none before it;
// re-applying it changes nothing; its session record says committed at the entry's optime;
// nothing is logged.
func TestApplyOpsEntryIsAtomicAtItsTimestamp(t *testing.T) {
	ctx := context.Background()
	n := txnFixture(t)
	logged := len(n.oplogEntries())
	before := n.docsAt("test.c", 0)
	ts := n.w.LastWritten().TS + 100
	ls := sessionLsid(7)
	raw := txnEntry(t, ls, 3, ts, 0, applyOpsO([]bson.D{
		ins("test.c", 10), upd("test.c", 1, "a", 2), del("test.c", 2), ins("test.d", 1, bson.E{Key: "x", Value: "y"}),
	}))
	a := n.w.Applier()
	for range 2 { // the second application is a replay
		n.appendOplog(raw)
		ru := n.db.Engine.NewRecoveryUnit()
		if err := a.Apply(ctx, ru, raw, oplog.ModeSecondary); err != nil {
			t.Fatal(err)
		}
		ru.Close()
		if got := n.docsAt("test.c", ts); !slices.Equal(got, txnWantC(t)) {
			t.Fatalf("test.c at the commit: %v, want %v", got, txnWantC(t))
		}
		if got := n.docsAt("test.c", ts-1); !slices.Equal(got, before) {
			t.Fatalf("test.c just before the commit: %v, want %v", got, before)
		}
		if got := n.docsAt("test.d", ts-1); len(got) != 0 {
			t.Fatalf("test.d just before the commit: %v", got)
		}
		if got := n.docsAt("test.d", ts); len(got) != 1 {
			t.Fatalf("test.d at the commit: %v", got)
		}
		if got, want := n.txnState(ls), txnStateString(t, 3, ts.Inc()); got != want {
			t.Fatalf("session record %s, want %s", got, want)
		}
	}
	if es := n.oplogEntries(); len(es) != logged+1 {
		t.Fatalf("applying logged entries: %d, want only the received one", len(es)-logged)
	}
}

// chain returns a 3-entry partialTxn chain committed at ts+2 with the fixture's operations
// spread over it.
func chain(t *testing.T, ls bson.D, ts optime.Timestamp) []bsoncore.Document {
	partial := bson.E{Key: "partialTxn", Value: true}
	return []bsoncore.Document{
		txnEntry(t, ls, 4, ts, 0, applyOpsO([]bson.D{ins("test.c", 10)}, partial)),
		txnEntry(t, ls, 4, ts+1, ts, applyOpsO([]bson.D{upd("test.c", 1, "a", 2), ins("test.d", 1)}, partial)),
		txnEntry(t, ls, 4, ts+2, ts+1, applyOpsO([]bson.D{del("test.c", 2)}, bson.E{Key: "count", Value: int64(4)})),
	}
}

// TestApplyPartialTxnChain: partialTxn entries change nothing; the chain's last entry applies
// the operations of all three at its own timestamp, reading the earlier entries from the
// oplog (Apply) or from the caller's batch (ApplyWith), and records the commit.
func TestApplyPartialTxnChain(t *testing.T) {
	ctx := context.Background()
	for _, fromBatch := range []bool{false, true} {
		n := txnFixture(t)
		before := n.docsAt("test.c", 0)
		ts := n.w.LastWritten().TS + 100
		ls := sessionLsid(8)
		es := chain(t, ls, ts)
		var prevs oplog.PrevEntries
		if fromBatch {
			prevs = func(x optime.Timestamp) (bsoncore.Document, bool) {
				if x < ts || x > ts+2 {
					return nil, false
				}
				return es[x-ts], true
			}
		} else {
			n.appendOplog(es...)
		}
		a := n.w.Applier()
		for i, raw := range es {
			ru := n.db.Engine.NewRecoveryUnit()
			if err := a.ApplyWith(ctx, ru, raw, oplog.ModeSecondary, prevs); err != nil {
				t.Fatal(err)
			}
			ru.Close()
			if i < 2 {
				if got := n.docsAt("test.c", 0); !slices.Equal(got, before) {
					t.Fatalf("after partial entry %d: %v, want %v", i, got, before)
				}
				if got := n.txnState(ls); got != "" {
					t.Fatalf("session record after partial entry %d: %s", i, got)
				}
			}
		}
		if got := n.docsAt("test.c", ts+2); !slices.Equal(got, txnWantC(t)) {
			t.Fatalf("test.c at the commit: %v, want %v", got, txnWantC(t))
		}
		if got := n.docsAt("test.c", ts+1); !slices.Equal(got, before) {
			t.Fatalf("test.c below the commit: %v, want %v", got, before)
		}
		if got := n.docsAt("test.d", ts+2); len(got) != 1 {
			t.Fatalf("test.d at the commit: %v", got)
		}
		if got, want := n.txnState(ls), txnStateString(t, 4, (ts+2).Inc()); got != want {
			t.Fatalf("session record %s, want %s", got, want)
		}
	}
}

// TestApplyOpsBadEntries: a chain whose earlier entry is missing, a wrong count, a prepared
// transaction and an unsupported inner command fail with a clear error and change nothing.
func TestApplyOpsBadEntries(t *testing.T) {
	ctx := context.Background()
	n := txnFixture(t)
	before := n.docsAt("test.c", 0)
	ts := n.w.LastWritten().TS + 100
	ls := sessionLsid(9)
	es := chain(t, ls, ts)
	wrongCount := txnEntry(t, ls, 4, ts+2, ts+1, applyOpsO([]bson.D{del("test.c", 2)}, bson.E{Key: "count", Value: int64(5)}))
	cases := []struct {
		name  string
		oplog []bsoncore.Document
		raw   bsoncore.Document
		code  mongoerr.Code
	}{
		{"missing earlier entry", es[1:2], es[2], mongoerr.NoSuchKey},
		{"wrong count", es[:2], wrongCount, mongoerr.BadValue},
		{"prepared with a command", nil, txnEntry(t, ls, 5, ts+10, 0, applyOpsO([]bson.D{ins("test.c", 11),
			{{Key: "op", Value: "c"}, {Key: "ns", Value: "test.$cmd"}, {Key: "o", Value: bson.D{{Key: "create", Value: "x"}}}}}, bson.E{Key: "prepare", Value: true})),
			mongoerr.BadValue},
		{"commitTransaction without commitTimestamp", nil, txnEntry(t, ls, 5, ts+11, ts+10, bson.D{{Key: "commitTransaction", Value: 1}}),
			mongoerr.BadValue},
		{"nested dropDatabase", nil, txnEntry(t, ls, 6, ts+12, 0, applyOpsO([]bson.D{ins("test.c", 12),
			{{Key: "op", Value: "c"}, {Key: "ns", Value: "test.$cmd"}, {Key: "o", Value: bson.D{{Key: "dropDatabase", Value: 1}}}}})),
			mongoerr.BadValue},
	}
	a := n.w.Applier()
	for _, c := range cases {
		if len(c.oplog) > 0 {
			n.appendOplog(c.oplog...)
		}
		ru := n.db.Engine.NewRecoveryUnit()
		err := a.Apply(ctx, ru, c.raw, oplog.ModeSecondary)
		ru.Close()
		if !mongoerr.Is(err, c.code) {
			t.Fatalf("%s: %v, want code %v", c.name, err, c.code)
		}
		if got := n.docsAt("test.c", 0); !slices.Equal(got, before) {
			t.Fatalf("%s changed data: %v", c.name, got)
		}
	}
}

// TestApplyTransactionWithDDL: a transaction that creates a collection, an index on it and
// writes to it applies on a member (the DDL first, then the writes, all at the commit
// timestamp), and replaying it is a no-op.
func TestApplyTransactionWithDDL(t *testing.T) {
	ctx := context.Background()
	n := txnFixture(t)
	ts := n.w.LastWritten().TS + 100
	uuid := bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}
	raw := txnEntry(t, sessionLsid(10), 1, ts, 0, applyOpsO([]bson.D{
		ins("test.c", 10),
		bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "test.$cmd"}, {Key: "ui", Value: uuid}, {Key: "o", Value: bson.D{{Key: "create", Value: "n"}}}},
		bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "test.$cmd"}, {Key: "ui", Value: uuid}, {Key: "o", Value: bson.D{
			{Key: "createIndexes", Value: "n"}, {Key: "v", Value: 2}, {Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}},
		bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "test.n"}, {Key: "ui", Value: uuid}, {Key: "o", Value: bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 5}}}},
	}))
	n.appendOplog(raw)
	a := n.w.Applier()
	for range 2 {
		ru := n.db.Engine.NewRecoveryUnit()
		if err := a.Apply(ctx, ru, raw, oplog.ModeSecondary); err != nil {
			t.Fatal(err)
		}
		ru.Close()
	}
	m, ok := n.db.Catalog.Latest().ByNS("test.n")
	if !ok {
		t.Fatal("test.n not created")
	}
	if _, ok := m.Index("a_1"); !ok {
		t.Fatal("index a_1 not created")
	}
	if got := n.docsAt("test.n", ts); len(got) != 1 {
		t.Fatalf("test.n at the commit: %v", got)
	}
	if got := n.docsAt("test.c", ts); len(got) != 3 {
		t.Fatalf("test.c at the commit: %v", got)
	}
}

// TestSharesBatch: only CRUD-only, unprepared applyOps entries may share a batch.
func TestSharesBatch(t *testing.T) {
	ls := sessionLsid(1)
	create := bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "test.$cmd"}, {Key: "o", Value: bson.D{{Key: "create", Value: "x"}}}}
	for _, c := range []struct {
		raw  bsoncore.Document
		want bool
	}{
		{txnEntry(t, ls, 1, 10, 0, applyOpsO([]bson.D{ins("test.c", 1), upd("test.c", 1, "a", 1), del("test.c", 1)})), true},
		{txnEntry(t, ls, 1, 10, 0, applyOpsO([]bson.D{ins("test.c", 1)}, bson.E{Key: "partialTxn", Value: true})), true},
		{txnEntry(t, ls, 1, 10, 0, applyOpsO([]bson.D{ins("test.c", 1)}, bson.E{Key: "prepare", Value: true})), false},
		{txnEntry(t, ls, 1, 10, 0, applyOpsO([]bson.D{create, ins("test.x", 1)})), false},
		{txnEntry(t, ls, 1, 10, 0, bson.D{{Key: "commitTransaction", Value: 1}}), false},
		{mustDoc(t, append(create, bson.E{Key: "ts", Value: bson.Timestamp{T: 1, I: 1}})), false},
	} {
		if got := oplog.SharesBatch(c.raw); got != c.want {
			t.Errorf("SharesBatch(%v) = %v, want %v", bson.Raw(c.raw), got, c.want)
		}
	}
}

// TestLogApplyOps: the applyOps command's entry is {op: "c", ns: "admin.$cmd", o: {applyOps}}
// without session fields, at the slot it leaves as the unit's timestamp; operations too
// large for one entry fail with BSONObjectTooLarge and log nothing.
func TestLogApplyOps(t *testing.T) {
	n := openNode(t, true)
	before := len(n.oplogEntries())
	log := func(ops []bsoncore.Document) error {
		ru := n.db.Engine.NewRecoveryUnit()
		defer ru.Close()
		w := ru.BeginUnitOfWork()
		defer w.End()
		if _, err := n.w.LogApplyOps(ru, ops); err != nil {
			return err
		}
		return w.Commit()
	}
	if err := log([]bsoncore.Document{mustDoc(t, ins("test.c", 1))}); err != nil {
		t.Fatal(err)
	}
	es := n.oplogEntries()
	if len(es) != before+1 {
		t.Fatalf("%d entries logged, want 1", len(es)-before)
	}
	if got, want := strip(t, es[len(es)-1]), `{"op":"c","ns":"admin.$cmd","o":{"applyOps":[{"op":"i","ns":"test.c","o":{"_id":1}}]},"t":3,"v":2}`; got != want {
		t.Fatalf("entry %s, want %s", got, want)
	}
	big := make([]bsoncore.Document, 20)
	for i := range big {
		big[i] = mustDoc(t, ins("test.c", i, bson.E{Key: "pad", Value: string(make([]byte, 1<<20))}))
	}
	if err := log(big); !mongoerr.Is(err, mongoerr.BSONObjectTooLarge) {
		t.Fatalf("20 MB of operations: %v, want BSONObjectTooLarge", err)
	}
	if es := n.oplogEntries(); len(es) != before+1 {
		t.Fatalf("a refused entry was logged")
	}
}
