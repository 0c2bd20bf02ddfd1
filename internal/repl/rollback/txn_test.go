package rollback_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/lock"
	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/oplog"
	"humongo/internal/repl/rollback"
)

// txnChain builds a 3-entry partialTxn chain right after top inserting ids into app.c, as a
// primary of term 1 logs a large transaction.
func txnChain(t *testing.T, top optime.Timestamp, txn int64, ids ...int) []bsoncore.Document {
	t.Helper()
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}
	var out []bsoncore.Document
	for i, id := range ids {
		ts := top + optime.Timestamp(i+1)
		prev := bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}}
		if i > 0 {
			p := ts - 1
			prev = bson.D{{Key: "ts", Value: bson.Timestamp{T: p.Secs(), I: p.Inc()}}, {Key: "t", Value: int64(1)}}
		}
		o := bson.D{{Key: "applyOps", Value: bson.A{bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "app.c"},
			{Key: "o", Value: bson.D{{Key: "_id", Value: id}}}}}}}
		if i < len(ids)-1 {
			o = append(o, bson.E{Key: "partialTxn", Value: true})
		} else {
			o = append(o, bson.E{Key: "count", Value: int64(len(ids))})
		}
		b, err := bson.Marshal(bson.D{{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: txn},
			{Key: "op", Value: "c"}, {Key: "ns", Value: "admin.$cmd"}, {Key: "o", Value: o},
			{Key: "ts", Value: bson.Timestamp{T: ts.Secs(), I: ts.Inc()}}, {Key: "t", Value: int64(1)},
			{Key: "v", Value: int64(2)}, {Key: "wall", Value: bson.DateTime(1)}, {Key: "prevOpTime", Value: prev}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func applyOpsInserts(ids ...int) bson.D {
	ops := bson.A{}
	for _, id := range ids {
		ops = append(ops, bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "app.c"}, {Key: "o", Value: bson.D{{Key: "_id", Value: id}}}})
	}
	ops = append(ops, bson.D{{Key: "op", Value: "u"}, {Key: "ns", Value: "app.c"},
		{Key: "o", Value: bson.D{{Key: "$v", Value: 2}, {Key: "diff", Value: bson.D{{Key: "i", Value: bson.D{{Key: "by", Value: ids[0]}}}}}}},
		{Key: "o2", Value: bson.D{{Key: "_id", Value: 0}}}})
	return bson.D{{Key: "applyOps", Value: ops}}
}

// TestRollbackAcrossTransactionEntries: rollback is recover-to-stable-timestamp plus replay,
// so transaction entries need nothing of their own: an applyOps entry and a partialTxn chain
// after the common point are undone as a whole, and the ones in (stable, common point] are
// replayed as a whole (each at its commit timestamp) through the applier.
func TestRollbackAcrossTransactionEntries(t *testing.T) {
	ctx := context.Background()
	us, src := startDataNode(t, 1), startDataNode(t, 2)
	c := us.client.Database("app").Collection("c")
	must[*mongo.InsertOneResult](t)(c.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}}))
	stable := us.w.LastWritten().TS
	us.db.Engine.SetStableTimestamp(stable)

	// Shared history after the stable timestamp: an applyOps command and a chain.
	if err := us.client.Database("admin").RunCommand(ctx, applyOpsInserts(1, 2, 3)).Err(); err != nil {
		t.Fatal(err)
	}
	top := us.w.LastWritten()
	us.apply(t, top, txnChain(t, top.TS, 1, 10, 11, 12))
	shared := us.oplogEntries(t)
	src.apply(t, optime.OpTime{}, shared)
	common := opTime(t, shared[len(shared)-1])
	atCommon := us.dump(t)
	if n := len(atCommon["c"]); n != 7 {
		t.Fatalf("%d documents at the common point, want 7: %v", n, atCommon)
	}

	// Our branch: another applyOps and another chain, never replicated.
	if err := us.client.Database("admin").RunCommand(ctx, applyOpsInserts(20, 21, 22, 23)).Err(); err != nil {
		t.Fatal(err)
	}
	top = us.w.LastWritten()
	us.apply(t, top, txnChain(t, top.TS, 2, 30, 31, 32))
	if n := len(us.dump(t)["c"]); n != 14 {
		t.Fatalf("%d documents before rollback, want 14", n)
	}
	// The source's branch.
	must[*mongo.InsertOneResult](t)(src.client.Database("app").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: "theirs"}}))

	rbid := int32(0)
	res, err := rollback.Run(ctx, rollback.Config{Local: us.local(), Remote: rollback.ClientRemote{Client: src.client},
		Dir: t.TempDir(), IncrementRBID: func(context.Context) (int32, error) { rbid++; return rbid, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if res.CommonPoint != common || res.RolledBack != 4 || res.Replayed != 4 {
		t.Fatalf("common point %v (want %v), rolled back %d entries (want 4), replayed %d (want 4)",
			res.CommonPoint, common, res.RolledBack, res.Replayed)
	}
	if got := us.dump(t); fmt.Sprint(got) != fmt.Sprint(atCommon) {
		t.Fatalf("data after rollback\n %v\nwant the data at the common point\n %v", got, atCommon)
	}
	// The node then applies the source's branch and ends with the source's data.
	srcEntries := src.oplogEntries(t)
	us.apply(t, common, srcEntries[len(shared):])
	if got, want := us.dump(t), src.dump(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after applying the source's branch\n %v\nwant\n %v", got, want)
	}
	if top := must[optime.OpTime](t)(applier.TopOfOplog(us.db.Engine, us.w.Ident())); top.TS != opTime(t, srcEntries[len(srcEntries)-1]).TS {
		t.Fatalf("top of oplog %v", top)
	}
}

// preparedEntries builds a prepare entry of transaction txn at ts inserting ids into prep.p
// and, if commitAt is not null, its commit entry at commitAt (commit timestamp commitAt-1).
func preparedEntries(t *testing.T, lsid bson.D, txn int64, ts, commitAt optime.Timestamp, ids ...int) []bsoncore.Document {
	t.Helper()
	bts := func(ts optime.Timestamp) bson.Timestamp { return bson.Timestamp{T: ts.Secs(), I: ts.Inc()} }
	ops := bson.A{}
	for _, id := range ids {
		ops = append(ops, bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "prep.p"}, {Key: "o", Value: bson.D{{Key: "_id", Value: id}}}})
	}
	entry := func(ts optime.Timestamp, o, prev bson.D) bsoncore.Document {
		b, err := bson.Marshal(bson.D{{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: txn},
			{Key: "op", Value: "c"}, {Key: "ns", Value: "admin.$cmd"}, {Key: "o", Value: o},
			{Key: "ts", Value: bts(ts)}, {Key: "t", Value: int64(1)},
			{Key: "v", Value: int64(2)}, {Key: "wall", Value: bson.DateTime(1)}, {Key: "prevOpTime", Value: prev}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	out := []bsoncore.Document{entry(ts, bson.D{{Key: "applyOps", Value: ops}, {Key: "prepare", Value: true}},
		bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}})}
	if !commitAt.IsNull() {
		out = append(out, entry(commitAt, bson.D{{Key: "commitTransaction", Value: 1}, {Key: "commitTimestamp", Value: bts(commitAt - 1)}},
			bson.D{{Key: "ts", Value: bts(ts)}, {Key: "t", Value: int64(1)}}))
	}
	return out
}

// TestRollbackKeepsPreparedTransactions: rollback drops the prepared units before it
// recovers to the stable timestamp and rebuilds the ones still prepared after its replay. A
// transaction prepared in the shared history and committed only on our branch is prepared
// again afterwards; one prepared only on our branch is gone.
func TestRollbackKeepsPreparedTransactions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	us, src := startDataNode(t, 1), startDataNode(t, 2)
	// Prepared transactions lock their collections, as on a member: the rebuilt ones must not
	// wait for the global lock the rollback holds in X.
	oplog.PreparedOf(us.db.Engine).SetLocks(us.db.Locks)
	if err := us.client.Database("config").CreateCollection(ctx, "transactions"); err != nil {
		t.Fatal(err)
	}
	if err := us.client.Database("prep").CreateCollection(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	stable := us.w.LastWritten().TS
	us.db.Engine.SetStableTimestamp(stable)
	lsidA := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}
	lsidB := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: append(make([]byte, 15), 1)}}}
	top := us.w.LastWritten()
	us.apply(t, top, preparedEntries(t, lsidA, 1, top.TS+1, 0, 1, 2))
	shared := us.oplogEntries(t)
	src.apply(t, optime.OpTime{}, shared)
	common := opTime(t, shared[len(shared)-1])
	held := oplog.PreparedOf(us.db.Engine)
	if held.Len() != 1 {
		t.Fatalf("%d prepared transactions held before our branch, want 1", held.Len())
	}
	// Our branch: A commits, B prepares.
	top = us.w.LastWritten()
	us.apply(t, top, preparedEntries(t, lsidA, 1, common.TS, top.TS+2)[1:])
	top = us.w.LastWritten()
	us.apply(t, top, preparedEntries(t, lsidB, 1, top.TS+1, 0, 3))
	if held.Len() != 1 || held.Get(bsonDoc(t, lsidB)) == nil {
		t.Fatalf("before rollback: want only B held, %d held", held.Len())
	}
	must[*mongo.InsertOneResult](t)(src.client.Database("app").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: "theirs"}}))

	rbid := int32(0)
	res, err := rollback.Run(ctx, rollback.Config{Local: us.local(), Remote: rollback.ClientRemote{Client: src.client},
		Dir: t.TempDir(), IncrementRBID: func(context.Context) (int32, error) { rbid++; return rbid, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if res.CommonPoint != common {
		t.Fatalf("common point %v, want %v", res.CommonPoint, common)
	}
	held = oplog.PreparedOf(us.db.Engine)
	a := held.Get(bsonDoc(t, lsidA))
	if held.Len() != 1 || a == nil || a.Prepare != common {
		t.Fatalf("after rollback: %d held, A %+v; want A prepared at %v", held.Len(), a, common)
	}
	var rec struct{ State string }
	if err := us.client.Database("config").Collection("transactions").FindOne(ctx, bson.D{{Key: "_id", Value: lsidA}}).Decode(&rec); err != nil || rec.State != "prepared" {
		t.Fatalf("A's record after rollback: %+v %v", rec, err)
	}
	if n, err := us.client.Database("config").Collection("transactions").CountDocuments(ctx, bson.D{{Key: "_id", Value: lsidB}}); err != nil || n != 0 {
		t.Fatalf("B's record after rollback: %d %v", n, err)
	}
	// A, prepared again, holds its collection's intent lock once the rollback let go of the
	// global lock: a drop of prep.p waits for its decision.
	l := us.db.Locks.NewLocker()
	defer l.UnlockAll()
	lctx, lcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer lcancel()
	if _, err := l.CollectionLock(lctx, "prep.p", lock.ModeX); err == nil {
		t.Fatal("prep.p locked in X while A is prepared")
	}
}

func bsonDoc(t *testing.T, d bson.D) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
