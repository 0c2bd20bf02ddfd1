package commands_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/mongoerr"
)

// txnStmt adds a transaction statement's session fields to cmd.
func prepStmt(cmd bson.D, lsid bson.D, n int64, start bool) bson.D {
	cmd = append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: n}, bson.E{Key: "autocommit", Value: false})
	if start {
		cmd = append(cmd, bson.E{Key: "startTransaction", Value: true})
	}
	return cmd
}

func wantTxnCode(t *testing.T, what string, reply bson.Raw, code mongoerr.Code) {
	t.Helper()
	if c, _ := reply.Lookup("code").AsInt64OK(); c != int64(code) {
		t.Fatalf("%s: want code %d, got %v", what, code, reply)
	}
}

func currentPrepared(t *testing.T, r *retryRS) int64 {
	t.Helper()
	reply := r.must(t, "admin", bson.D{{Key: "serverStatus", Value: 1}})
	n, _ := reply.Lookup("transactions", "currentPrepared").AsInt64OK()
	return n
}

// prepareTransaction logs a prepare entry whose timestamp it answers; the prepared
// transaction takes no more statements, blocks writers of its documents, is logged as
// prepared in config.transactions, and commits at exactly the commitTimestamp given.
func TestPreparedTransactionCommitsAtCommitTimestamp(t *testing.T) {
	r := startRetryRS(t)
	r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}}}}})
	lsid := newLsid()
	r.must(t, "test", prepStmt(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}}}}}}, lsid, 1, true))
	r.must(t, "test", prepStmt(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}}}, lsid, 1, false))
	reply := r.must(t, "admin", prepStmt(bson.D{{Key: "prepareTransaction", Value: 1}}, lsid, 1, false))
	ps, pi, ok := reply.Lookup("prepareTimestamp").TimestampOK()
	if !ok {
		t.Fatalf("prepareTransaction reply without prepareTimestamp: %v", reply)
	}
	// The prepare entry is at the prepare timestamp and holds the operations.
	entries := r.find(t, "local.oplog.rs", bson.D{{Key: "o.prepare", Value: true}})
	if len(entries) != 1 {
		t.Fatalf("prepare entries: %v", entries)
	}
	if es, ei, _ := entries[0].Lookup("ts").TimestampOK(); es != ps || ei != pi {
		t.Fatalf("prepare entry at %d,%d, prepareTimestamp %d,%d", es, ei, ps, pi)
	}
	if ops, _ := entries[0].Lookup("o", "applyOps").ArrayOK(); len(mustValues(t, ops)) != 2 {
		t.Fatalf("prepare entry operations: %v", entries[0])
	}
	recs := r.find(t, "config.transactions", bson.D{{Key: "state", Value: "prepared"}})
	if len(recs) != 1 {
		t.Fatalf("config.transactions records with state prepared: %v", recs)
	}
	if n := currentPrepared(t, r); n != 1 {
		t.Fatalf("serverStatus transactions.currentPrepared = %d, want 1", n)
	}
	// Preparing again answers the same timestamp.
	again := r.must(t, "admin", prepStmt(bson.D{{Key: "prepareTransaction", Value: 1}}, lsid, 1, false))
	if s, i, _ := again.Lookup("prepareTimestamp").TimestampOK(); s != ps || i != pi {
		t.Fatalf("second prepare answered %d,%d", s, i)
	}
	// No more operations; not a new transaction number either.
	wantTxnCode(t, "statement on a prepared transaction",
		r.run(t, "test", prepStmt(bson.D{{Key: "find", Value: "c"}}, lsid, 1, false)), mongoerr.PreparedTransactionInProgress)
	wantTxnCode(t, "new transaction on a session with a prepared one",
		r.run(t, "test", prepStmt(bson.D{{Key: "find", Value: "c"}}, lsid, 2, true)), mongoerr.PreparedTransactionInProgress)
	wantTxnCode(t, "commit without commitTimestamp",
		r.run(t, "admin", prepStmt(bson.D{{Key: "commitTransaction", Value: 1}}, lsid, 1, false)), mongoerr.InvalidOptions)
	wantTxnCode(t, "commit below the prepare timestamp",
		r.run(t, "admin", prepStmt(bson.D{{Key: "commitTransaction", Value: 1}, {Key: "commitTimestamp", Value: bson.Timestamp{T: ps, I: pi - 1}}}, lsid, 1, false)), mongoerr.InvalidOptions)
	// A writer of a prepared document waits (here until its maxTimeMS).
	wantTxnCode(t, "write to a prepared document",
		r.run(t, "test", bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}}}}}, {Key: "maxTimeMS", Value: 300}}),
		mongoerr.MaxTimeMSExpired)
	// The reaper does not touch it.
	r.must(t, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "transactionLifetimeLimitSeconds", Value: 1}})
	time.Sleep(2500 * time.Millisecond)
	if n := currentPrepared(t, r); n != 1 {
		t.Fatalf("the reaper aborted a prepared transaction (currentPrepared %d)", n)
	}
	commit := bson.Timestamp{T: ps, I: pi + 1}
	r.must(t, "admin", prepStmt(bson.D{{Key: "commitTransaction", Value: 1}, {Key: "commitTimestamp", Value: commit}}, lsid, 1, false))
	// A retried commit succeeds.
	r.must(t, "admin", prepStmt(bson.D{{Key: "commitTransaction", Value: 1}, {Key: "commitTimestamp", Value: commit}}, lsid, 1, false))
	if n := currentPrepared(t, r); n != 0 {
		t.Fatalf("currentPrepared after commit = %d", n)
	}
	at := func(ts bson.Timestamp) []bson.Raw {
		reply := r.must(t, "test", bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}},
			{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: ts}}}})
		batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
		var docs []bson.Raw
		for _, v := range mustValues(t, batch) {
			docs = append(docs, v.Document())
		}
		return docs
	}
	if docs := at(bson.Timestamp{T: ps, I: pi}); len(docs) != 1 || docs[0].Lookup("v").Int32() != 0 {
		t.Fatalf("just below the commit timestamp: %v", docs)
	}
	if docs := at(commit); len(docs) != 2 || docs[0].Lookup("v").Int32() != 1 {
		t.Fatalf("at the commit timestamp: %v", docs)
	}
	if recs := r.find(t, "config.transactions", bson.D{{Key: "state", Value: "committed"}}); len(recs) != 1 {
		t.Fatalf("config.transactions after commit: %v", recs)
	}
	commits := r.find(t, "local.oplog.rs", bson.D{{Key: "o.commitTransaction", Value: 1}})
	if len(commits) != 1 {
		t.Fatalf("commitTransaction entries: %v", commits)
	}
	if cs, ci, _ := commits[0].Lookup("o", "commitTimestamp").TimestampOK(); cs != commit.T || ci != commit.I {
		t.Fatalf("commit entry: %v", commits[0])
	}
	if s, i, _ := commits[0].Lookup("prevOpTime", "ts").TimestampOK(); s != ps || i != pi {
		t.Fatalf("commit entry's prevOpTime is not the prepare entry: %v", commits[0])
	}
	// The writer that timed out can now write.
	r.must(t, "test", bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}}}}}})
}

// Aborting a prepared transaction logs an abortTransaction entry and leaves nothing.
func TestPreparedTransactionAbort(t *testing.T) {
	r := startRetryRS(t)
	lsid := newLsid()
	wantTxnCode(t, "prepare outside a transaction",
		r.run(t, "admin", bson.D{{Key: "prepareTransaction", Value: 1}}), mongoerr.CommandFailed)
	// A transaction that created a collection cannot be prepared (MongoDB refuses DDL in
	// distributed transactions); the failed prepare aborts it.
	r.must(t, "test", prepStmt(bson.D{{Key: "insert", Value: "new"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, lsid, 1, true))
	wantTxnCode(t, "prepare after a collection creation",
		r.run(t, "admin", prepStmt(bson.D{{Key: "prepareTransaction", Value: 1}}, lsid, 1, false)), mongoerr.OperationNotSupportedInTransaction)
	if n := currentPrepared(t, r); n != 0 {
		t.Fatalf("currentPrepared after a refused prepare = %d", n)
	}
	r.must(t, "test", bson.D{{Key: "create", Value: "c"}})
	lsid = newLsid()
	r.must(t, "test", prepStmt(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, lsid, 1, true))
	wantTxnCode(t, "commitTimestamp on an unprepared transaction",
		r.run(t, "admin", prepStmt(bson.D{{Key: "commitTransaction", Value: 1}, {Key: "commitTimestamp", Value: bson.Timestamp{T: 1, I: 1}}}, lsid, 1, false)), mongoerr.InvalidOptions)
	lsid = newLsid()
	r.must(t, "test", prepStmt(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, lsid, 1, true))
	r.must(t, "admin", prepStmt(bson.D{{Key: "prepareTransaction", Value: 1}}, lsid, 1, false))
	// Killing the session does not abort a prepared transaction.
	r.must(t, "admin", bson.D{{Key: "killSessions", Value: bson.A{lsid}}})
	if n := currentPrepared(t, r); n != 1 {
		t.Fatalf("killSessions aborted a prepared transaction (currentPrepared %d)", n)
	}
	r.must(t, "admin", prepStmt(bson.D{{Key: "abortTransaction", Value: 1}}, lsid, 1, false))
	if n := currentPrepared(t, r); n != 0 {
		t.Fatalf("currentPrepared after abort = %d", n)
	}
	if docs := r.find(t, "test.c", bson.D{}); len(docs) != 0 {
		t.Fatalf("aborted prepared transaction left %v", docs)
	}
	if e := r.find(t, "local.oplog.rs", bson.D{{Key: "o.abortTransaction", Value: 1}}); len(e) != 1 {
		t.Fatalf("abortTransaction entries: %v", e)
	}
	if recs := r.find(t, "config.transactions", bson.D{{Key: "state", Value: "aborted"}}); len(recs) != 1 {
		t.Fatalf("config.transactions after abort: %v", recs)
	}
	// The key is free again.
	r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
}

func mustValues(t *testing.T, a bson.RawArray) []bson.RawValue {
	t.Helper()
	vals, err := a.Values()
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// A prepared transaction keeps the collections it wrote locked until its decision: a drop
// waits (here until its maxTimeMS) instead of pulling the collection from under it, and
// succeeds once the transaction has committed.
func TestPreparedTransactionBlocksDDL(t *testing.T) {
	r := startRetryRS(t)
	r.must(t, "test", bson.D{{Key: "create", Value: "c"}})
	r.must(t, "test", bson.D{{Key: "create", Value: "other"}})
	lsid := newLsid()
	r.must(t, "test", prepStmt(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, lsid, 1, true))
	reply := r.must(t, "admin", prepStmt(bson.D{{Key: "prepareTransaction", Value: 1}}, lsid, 1, false))
	ps, pi, _ := reply.Lookup("prepareTimestamp").TimestampOK()
	wantTxnCode(t, "drop of a collection a prepared transaction wrote",
		r.run(t, "test", bson.D{{Key: "drop", Value: "c"}, {Key: "maxTimeMS", Value: 300}}), mongoerr.MaxTimeMSExpired)
	r.must(t, "test", bson.D{{Key: "drop", Value: "other"}}) // other collections are not held
	r.must(t, "admin", prepStmt(bson.D{{Key: "commitTransaction", Value: 1}, {Key: "commitTimestamp", Value: bson.Timestamp{T: ps, I: pi}}}, lsid, 1, false))
	if docs := r.find(t, "test.c", bson.D{}); len(docs) != 1 {
		t.Fatalf("after commit: %v", docs)
	}
	r.must(t, "test", bson.D{{Key: "drop", Value: "c"}})
}

// A collection dropped between a transaction's last statement and its prepare fails the
// prepare with WriteConflict (the transaction's locks are held only while statements run).
func TestPrepareAfterDropFails(t *testing.T) {
	r := startRetryRS(t)
	r.must(t, "test", bson.D{{Key: "create", Value: "c"}})
	lsid := newLsid()
	r.must(t, "test", prepStmt(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, lsid, 1, true))
	r.must(t, "test", bson.D{{Key: "drop", Value: "c"}})
	wantTxnCode(t, "prepare after a drop", r.run(t, "admin", prepStmt(bson.D{{Key: "prepareTransaction", Value: 1}}, lsid, 1, false)), mongoerr.WriteConflict)
	if n := currentPrepared(t, r); n != 0 {
		t.Fatalf("currentPrepared = %d", n)
	}
}

// The config.transactions record of a prepared transaction cannot be changed by hand.
func TestPreparedTransactionRecordIsProtected(t *testing.T) {
	r := startRetryRS(t)
	r.must(t, "test", bson.D{{Key: "create", Value: "c"}})
	lsid := newLsid()
	r.must(t, "test", prepStmt(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, lsid, 1, true))
	r.must(t, "admin", prepStmt(bson.D{{Key: "prepareTransaction", Value: 1}}, lsid, 1, false))
	recs := r.find(t, "config.transactions", bson.D{})
	if len(recs) != 1 {
		t.Fatalf("records: %v", recs)
	}
	reply := r.run(t, "config", bson.D{{Key: "delete", Value: "transactions"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: recs[0].Lookup("_id")}}}, {Key: "limit", Value: 1}}}}})
	if c, _ := reply.Lookup("writeErrors", "0", "code").AsInt64OK(); c != int64(mongoerr.PreparedTransactionInProgress) {
		t.Fatalf("delete of a prepared transaction's record: %v", reply)
	}
	if recs := r.find(t, "config.transactions", bson.D{{Key: "state", Value: "prepared"}}); len(recs) != 1 {
		t.Fatalf("records after the refused delete: %v", recs)
	}
}

// replSetInitiate with an empty object (what mongosh's rs.initiate() sends) makes the
// default single-member configuration, as mongod does, and says so.
func TestReplSetInitiateEmptyConfig(t *testing.T) {
	r := startRetryRSWith(t, bson.D{{Key: "replSetInitiate", Value: bson.D{}}})
	if info, _ := r.initiated.Lookup("info2").StringValueOK(); info != "no configuration specified. Using a default configuration for the set" {
		t.Fatalf("replSetInitiate {} reply: %v", r.initiated)
	}
	if me, _ := r.initiated.Lookup("me").StringValueOK(); me != r.addr {
		t.Fatalf("me = %q, want %q", me, r.addr)
	}
}
