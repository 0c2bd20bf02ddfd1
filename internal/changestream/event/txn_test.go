package event

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
)

// txnInsert is the expected event of an insert {_id: n} on test.a unwound from a
// transaction committed at commit, the idx-th operation of the transaction.
func txnInsert(commit uint32, idx int32, n int32) bson.D {
	key := bson.D{{Key: "_id", Value: n}}
	return bson.D{{Key: "txnNumber", Value: int64(5)}, {Key: "lsid", Value: lsid},
		{Key: "_id", Value: id(commit, idx, &uuidA, bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: key}}, false)},
		{Key: "operationType", Value: "insert"}, {Key: "clusterTime", Value: ts(commit)}, {Key: "wallTime", Value: wall},
		{Key: "fullDocument", Value: key}, {Key: "ns", Value: nsD("test", "a")}, {Key: "documentKey", Value: key}}
}

func ins(n int32) bson.D { return innerCRUD("i", "test.a", uuidA, bson.D{{Key: "_id", Value: n}}, nil) }

// insOther is an operation on a namespace the stream does not watch.
func insOther(n int32) bson.D {
	return innerCRUD("i", "test.other", uuidB, bson.D{{Key: "_id", Value: n}}, nil)
}

func TestSingleEntryTransaction(t *testing.T) {
	e := parse(t, txnEntry(60, 0, bson.A{ins(1), insOther(2), ins(3),
		innerCRUD("d", "test.a", uuidA, bson.D{{Key: "_id", Value: int32(1)}}, nil)}))
	if _, ok := NeedsTxnEntries(e); ok {
		t.Fatal("a single applyOps needs no earlier entries")
	}
	evs, err := Transform(nil, e, opts(collA, false))
	if err != nil {
		t.Fatal(err)
	}
	del := bson.D{{Key: "txnNumber", Value: int64(5)}, {Key: "lsid", Value: lsid},
		{Key: "_id", Value: id(60, 3, &uuidA, bson.D{{Key: "operationType", Value: "delete"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: int32(1)}}}}, false)},
		{Key: "operationType", Value: "delete"}, {Key: "clusterTime", Value: ts(60)}, {Key: "wallTime", Value: wall},
		{Key: "ns", Value: nsD("test", "a")}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: int32(1)}}}}
	// The operation on test.other is skipped but counted.
	checkDocs(t, evs, []bson.D{txnInsert(60, 0, 1), txnInsert(60, 2, 3), del})
	for i, want := range []struct{ txn, idx int }{{0, 0}, {2, 2}, {3, 3}} {
		ev := evs[i]
		if ev.TxnOpIndex != want.txn || ev.Token.TxnOpIndex != want.txn || ev.ApplyOpsIndex != want.idx || ev.ApplyOpsTS != tsOf(60) {
			t.Errorf("event %d: txnOpIndex %d applyOps %v/%d", i, ev.TxnOpIndex, ev.ApplyOpsTS, ev.ApplyOpsIndex)
		}
	}
	// A database stream sees test.other too.
	evs, err = Transform(nil, e, opts(dbTest, false))
	if err != nil || len(evs) != 4 || evs[1].NS != "test.other" || evs[1].TxnOpIndex != 1 {
		t.Errorf("db stream: %v %v", evs, err)
	}
}

// chainReader serves entries by OpTime as the stream's oplog reads would.
func chainReader(t *testing.T, es ...*oplog.Entry) func(optime.OpTime) (*oplog.Entry, error) {
	return func(ot optime.OpTime) (*oplog.Entry, error) {
		for _, e := range es {
			if e.OpTime.TS == ot.TS {
				return e, nil
			}
		}
		return nil, nil
	}
}

func TestMultiEntryTransaction(t *testing.T) {
	p1 := parse(t, txnEntry(70, 0, bson.A{ins(1), insOther(9)}, bson.E{Key: "partialTxn", Value: true}))
	p2 := parse(t, txnEntry(71, 70, bson.A{ins(2)}, bson.E{Key: "partialTxn", Value: true}))
	last := parse(t, txnEntry(72, 71, bson.A{ins(3)}, bson.E{Key: "count", Value: int64(4)}))
	o := opts(collA, false)
	for _, p := range []*oplog.Entry{p1, p2} {
		if evs, err := Transform(nil, p, o); err != nil || len(evs) != 0 {
			t.Errorf("partial entry at %v: %v %v", p.OpTime, evs, err)
		}
	}
	if _, err := Transform(nil, last, o); !errors.Is(err, ErrNeedsTxnEntries) {
		t.Fatalf("Transform of a chain's last entry: %v", err)
	}
	prev, ok := NeedsTxnEntries(last)
	if !ok || prev.TS != tsOf(71) {
		t.Fatalf("NeedsTxnEntries = %v %v", prev, ok)
	}
	chain, err := ReadTxnChain(last, chainReader(t, p1, p2))
	if err != nil || len(chain) != 2 || chain[0] != p1 || chain[1] != p2 {
		t.Fatalf("ReadTxnChain = %v %v", chain, err)
	}
	evs, err := TransformTxn(nil, last, chain, o)
	if err != nil {
		t.Fatal(err)
	}
	// Every event at the commit's time; indexes across the chain; the pre-image key names
	// the entry holding the operation.
	checkDocs(t, evs, []bson.D{txnInsert(72, 0, 1), txnInsert(72, 2, 2), txnInsert(72, 3, 3)})
	for i, want := range []struct {
		ts  uint32
		idx int
	}{{70, 0}, {71, 0}, {72, 0}} {
		if evs[i].ApplyOpsTS != tsOf(want.ts) || evs[i].ApplyOpsIndex != want.idx {
			t.Errorf("event %d applyOps %v/%d", i, evs[i].ApplyOpsTS, evs[i].ApplyOpsIndex)
		}
	}

	// A lost entry is ChangeStreamHistoryLost.
	if _, err := ReadTxnChain(last, chainReader(t, p2)); mongoerr.CodeOf(err) != mongoerr.ChangeStreamHistoryLost {
		t.Errorf("missing entry: %v", err)
	}
	// An entry of another transaction in the chain is refused.
	stranger := txnEntry(71, 70, bson.A{ins(2)}, bson.E{Key: "partialTxn", Value: true})
	stranger[1].Value = int64(6)
	if _, err := ReadTxnChain(last, chainReader(t, p1, parse(t, stranger))); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Errorf("foreign entry: %v", err)
	}
	// A prevOpTime that does not go back is refused rather than followed forever.
	loop := parse(t, txnEntry(72, 72, bson.A{ins(3)}, bson.E{Key: "count", Value: int64(1)}))
	if _, err := ReadTxnChain(loop, chainReader(t, loop)); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Errorf("looping chain: %v", err)
	}
}

func TestPreparedTransaction(t *testing.T) {
	prep := parse(t, txnEntry(80, 0, bson.A{ins(1), ins(2)}, bson.E{Key: "prepare", Value: true}))
	commit := parse(t, txnEnvelope(82, 80, bson.D{{Key: "commitTransaction", Value: int32(1)}, {Key: "commitTimestamp", Value: ts(81)}}))
	abort := parse(t, txnEnvelope(82, 80, bson.D{{Key: "abortTransaction", Value: int32(1)}}))
	o := opts(collA, false)
	for _, e := range []*oplog.Entry{prep, abort} {
		if _, ok := NeedsTxnEntries(e); ok {
			t.Errorf("NeedsTxnEntries(%v)", e.OpTime)
		}
		if evs, err := Transform(nil, e, o); err != nil || len(evs) != 0 {
			t.Errorf("entry at %v: %v %v", e.OpTime, evs, err)
		}
	}
	chain, err := ReadTxnChain(commit, chainReader(t, prep))
	if err != nil || len(chain) != 1 {
		t.Fatal(chain, err)
	}
	evs, err := TransformTxn(nil, commit, chain, o)
	if err != nil {
		t.Fatal(err)
	}
	// At the commitTransaction entry's timestamp (MongoDB's clusterTime for prepared
	// transactions), not the commitTimestamp.
	checkDocs(t, evs, []bson.D{txnInsert(82, 0, 1), txnInsert(82, 1, 2)})
	if evs[1].ApplyOpsTS != tsOf(80) || evs[1].ApplyOpsIndex != 1 {
		t.Errorf("pre-image key %v/%d", evs[1].ApplyOpsTS, evs[1].ApplyOpsIndex)
	}

	// A prepared chain: partial, then the prepare entry, then the commit.
	p0 := parse(t, txnEntry(90, 0, bson.A{ins(1)}, bson.E{Key: "partialTxn", Value: true}))
	pp := parse(t, txnEntry(91, 90, bson.A{ins(2)}, bson.E{Key: "prepare", Value: true}, bson.E{Key: "count", Value: int64(2)}))
	pc := parse(t, txnEnvelope(93, 91, bson.D{{Key: "commitTransaction", Value: int32(1)}, {Key: "commitTimestamp", Value: ts(92)}}))
	chain, err = ReadTxnChain(pc, chainReader(t, p0, pp))
	if err != nil || len(chain) != 2 {
		t.Fatal(chain, err)
	}
	evs, err = TransformTxn(nil, pc, chain, o)
	if err != nil {
		t.Fatal(err)
	}
	checkDocs(t, evs, []bson.D{txnInsert(93, 0, 1), txnInsert(93, 1, 2)})
}

// TestApplyOpsCommand: the applyOps command's entry (no lsid) unwinds without lsid and
// txnNumber (MongoDB's batched-write shape).
func TestApplyOpsCommand(t *testing.T) {
	d := bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "admin.$cmd"}, {Key: "o", Value: bson.D{{Key: "applyOps", Value: bson.A{ins(1)}}}},
		{Key: "ts", Value: ts(95)}, {Key: "t", Value: int64(1)}, {Key: "v", Value: int64(2)}, {Key: "wall", Value: wall}}
	evs, err := Transform(nil, parse(t, d), opts(collA, false))
	if err != nil {
		t.Fatal(err)
	}
	want := txnInsert(95, 0, 1)[2:]
	checkDocs(t, evs, []bson.D{want})
}

// TestTransactionDDL: a transaction's create and createIndexes (inner c operations on the
// $cmd namespace) are expanded events.
func TestTransactionDDL(t *testing.T) {
	create := bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "test.$cmd"}, {Key: "ui", Value: bin(uuidA)},
		{Key: "o", Value: bson.D{{Key: "create", Value: "a"}}}}
	e := parse(t, txnEntry(96, 0, bson.A{create, ins(1)}))
	evs, err := Transform(nil, e, opts(collA, true))
	if err != nil || len(evs) != 2 || evs[0].OperationType != OpCreate || evs[1].TxnOpIndex != 1 {
		t.Fatalf("%v %v", evs, err)
	}
	if v := evs[0].Doc.Lookup("txnNumber"); v.Type == 0 {
		t.Error("the create has no txnNumber")
	}
	if evs, _ := Transform(nil, e, opts(collA, false)); len(evs) != 1 {
		t.Errorf("without expanded events: %v", evs)
	}
}
