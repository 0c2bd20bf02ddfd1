package commands_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/mongoerr"
)

// onPrimaryTransactionalWrite, as the retryable-writes spec tests use it: with
// failBeforeCommitExceptionCode the statement fails with that code and does not commit; with
// closeConnection (the default) the write commits and the connection closes without a reply,
// and a retry of the same txnNumber on a new connection does not write twice.
func TestOnPrimaryTransactionalWrite(t *testing.T) {
	r := startRetryRS(t)
	defer r.must(t, "admin", bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"}, {Key: "mode", Value: "off"}})
	lsid := newLsid()
	insert := func(id int, txn int64) bson.D {
		return bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}},
			{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: txn}}
	}

	r.must(t, "admin", bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "closeConnection", Value: false}, {Key: "failBeforeCommitExceptionCode", Value: 1}}}})
	reply := r.must(t, "test", insert(1, 1))
	werrs, _ := reply.Lookup("writeErrors").Array().Values()
	if len(werrs) != 1 || werrs[0].Document().Lookup("code").AsInt64() != int64(mongoerr.InternalError) {
		t.Fatalf("failBeforeCommitExceptionCode: %v", reply)
	}
	if docs := r.find(t, "test.c", bson.D{{Key: "_id", Value: 1}}); len(docs) != 0 {
		t.Fatalf("failed write committed: %v", docs)
	}
	if reply := r.must(t, "test", insert(1, 1)); reply.Lookup("n").Int32() != 1 {
		t.Fatalf("retry: %v", reply)
	}

	// closeConnection by default: the write commits, the client gets no reply.
	r.must(t, "admin", bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}}})
	if !closedWithoutReply(t, r, "test", insert(2, 2)) {
		t.Fatal("connection not closed by onPrimaryTransactionalWrite")
	}
	conn, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r.conn = conn
	if docs := r.find(t, "test.c", bson.D{{Key: "_id", Value: 2}}); len(docs) != 1 {
		t.Fatalf("write before the closed connection did not commit: %v", docs)
	}
	reply = r.must(t, "test", insert(2, 2))
	if _, ok := reply.Lookup("writeErrors").ArrayOK(); ok || reply.Lookup("n").Int32() != 1 {
		t.Fatalf("retry after the closed connection: %v", reply)
	}
}

// closedWithoutReply sends cmd and reports whether the server closed the connection
// instead of answering.
func closedWithoutReply(t *testing.T, r *retryRS, db string, cmd bson.D) (closed bool) {
	t.Helper()
	body, err := bson.Marshal(append(cmd, bson.E{Key: "$db", Value: db}))
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 21, 21+len(body))
	msg[12], msg[13] = 0xdd, 0x07 // OP_MSG (2013), flags 0, section kind 0
	msg = append(msg, body...)
	msg[0], msg[1], msg[2], msg[3] = byte(len(msg)), byte(len(msg)>>8), byte(len(msg)>>16), byte(len(msg)>>24)
	_ = r.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.conn.Write(msg); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	_, err = r.conn.Read(b[:])
	return err != nil
}

// failGetMoreAfterCursorCheckout fails a getMore with the configured code once the cursor is
// checked out, and the failed getMore kills the cursor as in MongoDB.
func TestFailGetMoreAfterCursorCheckout(t *testing.T) {
	r := startRetryRS(t)
	r.must(t, "test", bson.D{{Key: "insert", Value: "g"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}}})
	reply := r.must(t, "test", bson.D{{Key: "find", Value: "g"}, {Key: "batchSize", Value: 1}})
	id := reply.Lookup("cursor", "id").Int64()
	r.must(t, "admin", bson.D{{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}}, {Key: "data", Value: bson.D{{Key: "errorCode", Value: 91}}}})
	getMore := bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "g"}, {Key: "batchSize", Value: 1}}
	reply = r.run(t, "test", getMore)
	wantErrCode(t, reply, mongoerr.ShutdownInProgress)
	if msg := reply.Lookup("errmsg").StringValue(); msg != "Hit the 'failGetMoreAfterCursorCheckout' failpoint" {
		t.Errorf("errmsg %q", msg)
	}
	wantErrCode(t, r.run(t, "test", getMore), mongoerr.CursorNotFound)
}

// Search index commands and $listSearchIndexes refuse as MongoDB 7.0 does without Atlas's
// mongot: a named error mentioning Atlas, not "no such command".
func TestSearchIndexesNeedAtlas(t *testing.T) {
	ts := startTestServer(t)
	run := func(cmd bson.D) mongo.CommandError {
		t.Helper()
		err := ts.cl.Database("test").RunCommand(context.Background(), cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("%v: want a command error, got %v", cmd, err)
		}
		return ce
	}
	for _, cmd := range []bson.D{
		{{Key: "createSearchIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "definition", Value: bson.D{}}}}}},
		{{Key: "dropSearchIndex", Value: "c"}, {Key: "name", Value: "x"}},
		{{Key: "updateSearchIndex", Value: "c"}, {Key: "name", Value: "x"}, {Key: "definition", Value: bson.D{}}},
	} {
		ce := run(cmd)
		if ce.Code != int32(mongoerr.CommandNotSupported) || ce.Message != "Search index commands are only supported with Atlas." {
			t.Errorf("%s: %d %s", cmd[0].Key, ce.Code, ce.Message)
		}
	}
	ce := run(bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$listSearchIndexes", Value: bson.D{}}}}},
		{Key: "cursor", Value: bson.D{}}})
	if ce.Code != int32(mongoerr.Location6047401) || ce.Message != "$listSearchIndexes stage is only allowed on MongoDB Atlas" {
		t.Errorf("$listSearchIndexes: %d %s", ce.Code, ce.Message)
	}
}
