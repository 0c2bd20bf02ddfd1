package commands_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/lock"
	"humongo/internal/mongoerr"
)

func txnClient(t *testing.T, r *retryRS) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + r.addr + "/?directConnection=true").
		SetServerSelectionTimeout(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	return cl
}

// A committed transaction's writes appear together, as one applyOps oplog entry carrying
// the session; before the commit nobody outside sees them, and the transaction sees its own.
func TestTransactionCommitIsAtomicAndLogged(t *testing.T) {
	r := startRetryRS(t)
	cl := txnClient(t, r)
	ctx := context.Background()
	coll := cl.Database("test").Collection("acct")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "bal", Value: 100}}, bson.D{{Key: "_id", Value: 2}, {Key: "bal", Value: 0}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	if err := sess.StartTransaction(options.Transaction().SetWriteConcern(writeconcern.Majority())); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "bal", Value: -30}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "bal", Value: 30}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 3}, {Key: "bal", Value: 7}}); err != nil {
		t.Fatal(err)
	}
	// Own writes are visible inside; nothing is visible outside.
	var in bson.M
	if err := coll.FindOne(sctx, bson.D{{Key: "_id", Value: 2}}).Decode(&in); err != nil || in["bal"] != int32(30) {
		t.Fatalf("transaction does not read its own write: %v %v", in, err)
	}
	var out bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 2}}).Decode(&out); err != nil || out["bal"] != int32(0) {
		t.Fatalf("uncommitted write visible outside: %v %v", out, err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: 3}}); n != 0 {
		t.Fatal("uncommitted insert visible outside")
	}
	if err := sess.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int]int32{1: 70, 2: 30, 3: 7} {
		var d bson.M
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil || d["bal"] != want {
			t.Fatalf("after commit _id %d: %v %v", id, d, err)
		}
	}
	entries := r.find(t, "local.oplog.rs", bson.D{{Key: "o.applyOps", Value: bson.D{{Key: "$exists", Value: true}}}})
	if len(entries) != 1 {
		t.Fatalf("want one applyOps entry, got %d", len(entries))
	}
	ops, _ := entries[0].Lookup("o", "applyOps").Array().Values()
	if len(ops) != 3 || entries[0].Lookup("lsid").Type == 0 || entries[0].Lookup("txnNumber").Type == 0 {
		t.Fatalf("applyOps entry: %v", entries[0])
	}
	recs := r.find(t, "config.transactions", bson.D{{Key: "state", Value: "committed"}})
	if len(recs) != 1 {
		t.Fatalf("config.transactions: %v", recs)
	}
	// A retried commit succeeds again.
	if err := sess.CommitTransaction(ctx); err != nil {
		t.Fatalf("retried commit: %v", err)
	}
}

// An aborted transaction leaves nothing behind, and a statement after the abort fails with
// NoSuchTransaction.
func TestTransactionAbortLeavesNothing(t *testing.T) {
	r := startRetryRS(t)
	cl := txnClient(t, r)
	ctx := context.Background()
	coll := cl.Database("test").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	sess, _ := cl.StartSession()
	defer sess.EndSession(ctx)
	_, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			return nil, err
		}
		if _, err := coll.DeleteOne(sctx, bson.D{{Key: "_id", Value: 0}}); err != nil {
			return nil, err
		}
		return nil, errors.New("give up")
	})
	if err == nil || err.Error() != "give up" {
		t.Fatalf("WithTransaction: %v", err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 1 {
		t.Fatalf("aborted transaction left %d documents, want 1", n)
	}
	if e := r.find(t, "local.oplog.rs", bson.D{{Key: "o.applyOps", Value: bson.D{{Key: "$exists", Value: true}}}}); len(e) != 0 {
		t.Fatalf("aborted transaction logged: %v", e)
	}
}

// Two transactions updating one document: the second writer fails at once with
// WriteConflict labelled TransientTransactionError; withTransaction retries it after the
// first commits, so both increments land.
func TestTransactionWriteConflict(t *testing.T) {
	r := startRetryRS(t)
	cl := txnClient(t, r)
	ctx := context.Background()
	coll := cl.Database("test").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
	s1, _ := cl.StartSession()
	s2, _ := cl.StartSession()
	defer s1.EndSession(ctx)
	defer s2.EndSession(ctx)
	c1, c2 := mongo.NewSessionContext(ctx, s1), mongo.NewSessionContext(ctx, s2)
	_ = s1.StartTransaction()
	_ = s2.StartTransaction()
	if _, err := coll.UpdateOne(c1, bson.D{{Key: "_id", Value: 1}}, inc); err != nil {
		t.Fatal(err)
	}
	_, err := coll.UpdateOne(c2, bson.D{{Key: "_id", Value: 1}}, inc)
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(int(mongoerr.WriteConflict)) || !se.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("second writer: want WriteConflict with TransientTransactionError, got %v", err)
	}
	if err := s1.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	// The conflicting transaction was aborted by its failed statement.
	if err := s2.CommitTransaction(ctx); err == nil {
		t.Fatal("commit of a transaction aborted by a write conflict succeeded")
	}
	_ = s2.AbortTransaction(ctx)
	if _, err := s2.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		return coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}}, inc)
	}); err != nil {
		t.Fatal(err)
	}
	var d bson.M
	_ = coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&d)
	if d["n"] != int32(2) {
		t.Fatalf("n = %v, want 2", d["n"])
	}
}

// A snapshot transaction keeps reading its snapshot while others commit, and may not
// overwrite what it did not see.
func TestTransactionSnapshotIsolation(t *testing.T) {
	r := startRetryRS(t)
	cl := txnClient(t, r)
	ctx := context.Background()
	coll := cl.Database("test").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "old"}}); err != nil {
		t.Fatal(err)
	}
	sess, _ := cl.StartSession()
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	_ = sess.StartTransaction(options.Transaction().SetReadConcern(readconcern.Snapshot()))
	var d bson.M
	if err := coll.FindOne(sctx, bson.D{{Key: "_id", Value: 1}}).Decode(&d); err != nil || d["v"] != "old" {
		t.Fatalf("first read: %v %v", d, err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "new"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := coll.FindOne(sctx, bson.D{{Key: "_id", Value: 1}}).Decode(&d); err != nil || d["v"] != "old" {
		t.Fatalf("snapshot moved: %v %v", d, err)
	}
	_, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "txn"}}}})
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(int(mongoerr.WriteConflict)) {
		t.Fatalf("update of a document changed after the snapshot: want WriteConflict, got %v", err)
	}
	_ = sess.AbortTransaction(ctx)
}

// What may not run in a transaction fails with MongoDB's codes and messages.
func TestTransactionRefusals(t *testing.T) {
	r := startRetryRS(t)
	lsid := newLsid()
	stmt := func(cmd bson.D, txn int64, start bool) bson.D {
		cmd = append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: txn}, bson.E{Key: "autocommit", Value: false})
		if start {
			cmd = append(cmd, bson.E{Key: "startTransaction", Value: true})
		}
		return cmd
	}
	code := func(reply bson.Raw) int32 { v, _ := reply.Lookup("code").Int32OK(); return v }
	if c := code(r.run(t, "test", stmt(bson.D{{Key: "count", Value: "c"}}, 1, true))); c != int32(mongoerr.OperationNotSupportedInTransaction) {
		t.Fatalf("count: code %d", c)
	}
	if c := code(r.run(t, "test", stmt(bson.D{{Key: "listCollections", Value: 1}}, 2, true))); c != int32(mongoerr.OperationNotSupportedInTransaction) {
		t.Fatalf("listCollections: code %d", c)
	}
	if c := code(r.run(t, "local", stmt(bson.D{{Key: "find", Value: "c"}}, 3, true))); c != int32(mongoerr.OperationNotSupportedInTransaction) {
		t.Fatalf("find on local: code %d", c)
	}
	reply := r.run(t, "test", append(bson.D{{Key: "find", Value: "c"}, {Key: "lsid", Value: lsid}}, bson.E{Key: "txnNumber", Value: int64(4)}, bson.E{Key: "autocommit", Value: true}))
	if code(reply) != int32(mongoerr.InvalidOptions) {
		t.Fatalf("autocommit true: %v", reply)
	}
	// Continuing a transaction that never started.
	reply = r.run(t, "test", stmt(bson.D{{Key: "find", Value: "c"}}, 9, false))
	if code(reply) != int32(mongoerr.NoSuchTransaction) {
		t.Fatalf("continue unknown: %v", reply)
	}
	if labels, _ := reply.Lookup("errorLabels").Array().Values(); len(labels) != 1 || labels[0].StringValue() != "TransientTransactionError" {
		t.Fatalf("labels: %v", reply)
	}
	// A started transaction; an older number is too old; writeConcern on a statement is refused.
	r.must(t, "test", stmt(bson.D{{Key: "find", Value: "c"}}, 10, true))
	if c := code(r.run(t, "test", stmt(bson.D{{Key: "find", Value: "c"}}, 5, true))); c != int32(mongoerr.TransactionTooOld) {
		t.Fatalf("older txnNumber: code %d", c)
	}
	if c := code(r.run(t, "test", stmt(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 1}}}}, 10, false))); c != int32(mongoerr.InvalidOptions) {
		t.Fatalf("writeConcern in statement: code %d", c)
	}
	// A failed statement aborts the transaction.
	r.must(t, "test", stmt(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, 10, false))
	if c := code(r.run(t, "test", stmt(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, 10, false))); c != int32(mongoerr.DuplicateKey) {
		t.Fatalf("duplicate key in transaction: code %d", c)
	}
	if c := code(r.run(t, "admin", stmt(bson.D{{Key: "commitTransaction", Value: 1}}, 10, false))); c != int32(mongoerr.NoSuchTransaction) {
		t.Fatalf("commit after abort: code %d", c)
	}
}

// A transaction larger than one oplog entry commits as a chain: partialTxn entries linked by
// prevOpTime and a last entry with the operation count, all its data visible at once.
func TestTransactionLargerThan16MBCommitsAsChain(t *testing.T) {
	r := startRetryRS(t)
	cl := txnClient(t, r)
	ctx := context.Background()
	coll := cl.Database("test").Collection("big")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: -1}}); err != nil {
		t.Fatal(err)
	}
	pad := make([]byte, 1<<20)
	sess, _ := cl.StartSession()
	defer sess.EndSession(ctx)
	if _, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		for i := range 20 {
			if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: bson.Binary{Data: pad}}}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 21 {
		t.Fatalf("count %d, want 21", n)
	}
	cur, err := cl.Database("local").Collection("oplog.rs").Find(ctx, bson.D{{Key: "o.applyOps", Value: bson.D{{Key: "$exists", Value: true}}}},
		options.Find().SetProjection(bson.D{{Key: "o.applyOps", Value: 0}}))
	if err != nil {
		t.Fatal(err)
	}
	var entries []bson.Raw
	for cur.Next(ctx) {
		entries = append(entries, append(bson.Raw(nil), cur.Current...))
	}
	if len(entries) != 2 {
		t.Fatalf("want a chain of 2 entries, got %d", len(entries))
	}
	first, last := entries[0], entries[1]
	if !first.Lookup("o", "partialTxn").Boolean() || last.Lookup("o", "partialTxn").Type != 0 {
		t.Fatalf("partialTxn flags: %v / %v", first.Lookup("o", "partialTxn"), last.Lookup("o", "partialTxn"))
	}
	if c, _ := last.Lookup("o", "count").AsInt64OK(); c != 20 {
		t.Fatalf("count on the commit entry: %v", last.Lookup("o", "count"))
	}
	fts, fi := first.Lookup("ts").Timestamp()
	pts, pi := last.Lookup("prevOpTime", "ts").Timestamp()
	if fts != pts || fi != pi {
		t.Fatal("the commit entry's prevOpTime is not the partial entry")
	}
}

// transactionLifetimeLimitSeconds: the reaper aborts a transaction left open too long.
func TestTransactionLifetimeReaper(t *testing.T) {
	r := startRetryRS(t)
	r.must(t, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "transactionLifetimeLimitSeconds", Value: 1}})
	lsid := newLsid()
	stmt := func(cmd bson.D, start bool) bson.D {
		cmd = append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: int64(1)}, bson.E{Key: "autocommit", Value: false})
		if start {
			cmd = append(cmd, bson.E{Key: "startTransaction", Value: true})
		}
		return cmd
	}
	r.must(t, "test", stmt(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, true))
	deadline := time.Now().Add(20 * time.Second)
	for {
		reply := r.run(t, "test", stmt(bson.D{{Key: "find", Value: "c"}}, false))
		if c, _ := reply.Lookup("code").Int32OK(); c == int32(mongoerr.NoSuchTransaction) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("transaction not reaped after its lifetime")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The document the reaped transaction inserted is not there, and its key is free.
	if docs := r.find(t, "test.c", bson.D{}); len(docs) != 0 {
		t.Fatalf("reaped transaction's write visible: %v", docs)
	}
	r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
}

// killSessions aborts the session's transaction.
func TestTransactionKilledWithSession(t *testing.T) {
	r := startRetryRS(t)
	lsid := newLsid()
	r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}, {Key: "startTransaction", Value: true}})
	r.must(t, "admin", bson.D{{Key: "killSessions", Value: bson.A{lsid}}})
	reply := r.run(t, "admin", bson.D{{Key: "commitTransaction", Value: 1}, {Key: "lsid", Value: lsid},
		{Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}})
	if c, _ := reply.Lookup("code").Int32OK(); c != int32(mongoerr.NoSuchTransaction) {
		t.Fatalf("commit after killSessions: %v", reply)
	}
	if docs := r.find(t, "test.c", bson.D{}); len(docs) != 0 {
		t.Fatalf("killed transaction's write visible: %v", docs)
	}
}

// A step-down aborts the transactions in progress; the next statement fails with a label
// that makes drivers retry the whole transaction.
func TestTransactionAbortedByStepDown(t *testing.T) {
	r := startRetryRS(t)
	lsid := newLsid()
	r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}, {Key: "startTransaction", Value: true}})
	r.run(t, "admin", bson.D{{Key: "replSetStepDown", Value: 1}, {Key: "force", Value: true}})
	reply := r.run(t, "test", bson.D{{Key: "find", Value: "c"}, {Key: "lsid", Value: lsid},
		{Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}})
	labels, _ := reply.Lookup("errorLabels").ArrayOK()
	vals, _ := labels.Values()
	if ok, _ := reply.Lookup("ok").AsFloat64OK(); ok != 0 || len(vals) == 0 || vals[0].StringValue() != "TransientTransactionError" {
		t.Fatalf("statement after step-down: %v", reply)
	}
	// Once primary again, the transaction is gone and its write with it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		reply = r.run(t, "admin", bson.D{{Key: "commitTransaction", Value: 1}, {Key: "lsid", Value: lsid},
			{Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}})
		if c, _ := reply.Lookup("code").Int32OK(); c == int32(mongoerr.NoSuchTransaction) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("commit after step-down: %v", reply)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if docs := r.find(t, "test.c", bson.D{}); len(docs) != 0 {
		t.Fatalf("aborted transaction's write visible: %v", docs)
	}
}

// maxTransactionLockRequestTimeoutMillis: a statement that cannot get its lock at once (DDL
// holds the collection) fails with LockTimeout, labelled for a retry of the transaction,
// instead of queueing behind the DDL.
func TestTransactionLockTimeout(t *testing.T) {
	r := startRetryRS(t)
	r.must(t, "test", bson.D{{Key: "create", Value: "c"}})
	ddl := r.db.Locks.NewLocker()
	scope, err := ddl.CollectionLock(context.Background(), "test.c", lock.ModeX)
	if err != nil {
		t.Fatal(err)
	}
	lsid := newLsid()
	start := time.Now()
	reply := r.run(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}, {Key: "startTransaction", Value: true}})
	waited := time.Since(start)
	_ = scope.Release()
	ddl.UnlockAll()
	if c, _ := reply.Lookup("code").Int32OK(); c != int32(mongoerr.LockTimeout) {
		t.Fatalf("statement behind an X lock: %v", reply)
	}
	vals, _ := reply.Lookup("errorLabels").Array().Values()
	if len(vals) != 1 || vals[0].StringValue() != "TransientTransactionError" {
		t.Fatalf("labels: %v", reply)
	}
	t.Logf("LockTimeout after %v", waited)
}

// A retryable write at a newer transaction number aborts the session's transaction in
// progress (its claims on documents go with it); at the same number it is refused.
func TestTransactionEndedByNewerRetryableWrite(t *testing.T) {
	r := startRetryRS(t)
	lsid := newLsid()
	r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}, {Key: "startTransaction", Value: true}})
	reply := r.run(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}})
	if c, _ := reply.Lookup("code").Int32OK(); c != int32(mongoerr.InvalidOptions) {
		t.Fatalf("retryable write at the transaction's number: %v", reply)
	}
	// Same _id as the transaction's insert: it would be a WriteConflict while the
	// transaction still held the key.
	reply = r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(2)}})
	if n, _ := reply.Lookup("n").Int32OK(); n != 1 {
		t.Fatalf("retryable write at a newer number: %v", reply)
	}
	reply = r.run(t, "admin", bson.D{{Key: "commitTransaction", Value: 1}, {Key: "lsid", Value: lsid},
		{Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}})
	if c, _ := reply.Lookup("code").Int32OK(); c != int32(mongoerr.TransactionTooOld) {
		t.Fatalf("commit of the superseded transaction: %v", reply)
	}
}

// Statements of a transaction do not wait for a write concern (not even the server's
// default): nothing they write is durable before the commit.
func TestTransactionStatementsSkipWriteConcern(t *testing.T) {
	r := startRetryRS(t)
	r.must(t, "admin", bson.D{{Key: "setDefaultRWConcern", Value: 1},
		{Key: "defaultWriteConcern", Value: bson.D{{Key: "w", Value: 5}, {Key: "wtimeout", Value: 100}}}})
	lsid := newLsid()
	reply := r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}, {Key: "startTransaction", Value: true}})
	if reply.Lookup("writeConcernError").Type != 0 {
		t.Fatalf("statement waited for the default write concern: %v", reply)
	}
	reply = r.must(t, "admin", bson.D{{Key: "commitTransaction", Value: 1}, {Key: "lsid", Value: lsid},
		{Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}})
	if reply.Lookup("writeConcernError").Type == 0 {
		t.Fatalf("commit did not wait for the default write concern (w: 5 on one member): %v", reply)
	}
}

// A cursor opened in a transaction reads through the transaction's unit: when the
// transaction ends, whatever ends it (commit, a newer retryable write on its session), the
// cursor is killed and a getMore finds nothing.
func TestTransactionCursorsDieWithTheTransaction(t *testing.T) {
	r := startRetryRS(t)
	r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}}})
	lsid := newLsid()
	for _, end := range []string{"commit", "retryable write"} {
		txn := int64(10)
		if end != "commit" {
			txn = 20
		}
		reply := r.must(t, "test", bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1},
			{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: txn}, {Key: "autocommit", Value: false}, {Key: "startTransaction", Value: true}})
		id := reply.Lookup("cursor", "id").Int64()
		if id == 0 {
			t.Fatalf("%s: no cursor left open: %v", end, reply)
		}
		if end == "commit" {
			r.must(t, "admin", bson.D{{Key: "commitTransaction", Value: 1}, {Key: "lsid", Value: lsid},
				{Key: "txnNumber", Value: txn}, {Key: "autocommit", Value: false}})
		} else {
			r.must(t, "test", bson.D{{Key: "insert", Value: "d"}, {Key: "documents", Value: bson.A{bson.D{}}},
				{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: txn + 1}})
		}
		reply = r.run(t, "test", bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "lsid", Value: lsid}})
		if c, _ := reply.Lookup("code").Int32OK(); c != int32(mongoerr.CursorNotFound) {
			t.Fatalf("getMore after the transaction ended by a %s: %v", end, reply)
		}
	}
}
