package commands_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/mongoerr"
)

// A write's stmtIds (a router's statement ids) are the ids its statements are recorded and
// recognised by: a later command of the same transaction number that reuses an id is
// answered from history for that statement, a new id runs; the count must match.
func TestRetryStmtIDs(t *testing.T) {
	r := startRetryRS(t)
	lsid := newLsid()
	ins := func(stmtIDs bson.A, ids ...int) bson.Raw {
		docs := bson.A{}
		for _, id := range ids {
			docs = append(docs, bson.D{{Key: "_id", Value: id}})
		}
		return r.run(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs},
			{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "stmtIds", Value: stmtIDs}})
	}
	// Statements 5 and 9, non-consecutive: two units, both recorded.
	if reply := ins(bson.A{int32(5), int32(9)}, 1, 2); reply.Lookup("n").Int32() != 2 {
		t.Fatalf("first insert: %v", reply)
	}
	// Statement 0 (position 0 of this command, but a new id) runs; statement 9 is a retry.
	if reply := ins(bson.A{int32(0), int32(9)}, 3, 99); reply.Lookup("n").Int32() != 2 || reply.Lookup("writeErrors").Type != 0 {
		t.Fatalf("second insert: %v", reply)
	}
	if got := len(r.find(t, "test.c", bson.D{})); got != 3 {
		t.Fatalf("%d documents, want 3 (ids 1, 2, 3; 99 answered from history)", got)
	}
	wantErrCode(t, ins(bson.A{int32(1)}, 4, 5), mongoerr.InvalidLength)
	wantErrCode(t, r.run(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "stmtIds", Value: bson.A{int32(7)}}, {Key: "stmtId", Value: int32(7)}}),
		mongoerr.InvalidOptions)
}
