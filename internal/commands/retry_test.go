package commands_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/catalog"
	"humongo/internal/commands"
	"humongo/internal/failpoint"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/repl/coord"
	"humongo/internal/server"
	"humongo/internal/service"
	"humongo/internal/txn/retryable"
)

// retryRS is an in-process single-node replica set (primary) with a raw wire connection, so
// tests control lsid and txnNumber exactly (the driver would add its own).
type retryRS struct {
	db   *operation.DB
	st   *service.State
	addr string
	conn net.Conn
	reqs int32
	// initiated is the replSetInitiate reply.
	initiated bson.Raw
}

func startRetryRS(t *testing.T) *retryRS {
	t.Helper()
	return startRetryRSWith(t, bson.D{{Key: "replSetInitiate", Value: 1}})
}

// startRetryRSWith starts a single-member replica set initiated with initiate.
func startRetryRSWith(t *testing.T, initiate bson.D) *retryRS {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	params := service.NewParams(commands.DefaultParamSpecs())
	if err := params.SetString("enableTestCommands", "1"); err != nil {
		t.Fatal(err)
	}
	mongod := commands.NewMongod(db, service.Config{Params: params})
	s, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role, Closers: []server.Closer{db}})
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", s.Port())
	rc, err := commands.AttachReplication(context.Background(), s.State(), s.Registry(), "rs0", addr, 0,
		coord.Options{TickInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r := &retryRS{db: db, st: s.State(), addr: addr, conn: conn}
	r.initiated = r.must(t, "admin", initiate)
	deadline := time.Now().Add(10 * time.Second)
	for !rc.IsWritablePrimary() {
		if time.Now().After(deadline) {
			t.Fatal("single-node replica set did not become primary")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// run sends cmd (with $db) as OP_MSG and returns the reply.
func (r *retryRS) run(t *testing.T, db string, cmd bson.D) bson.Raw {
	t.Helper()
	body, err := bson.Marshal(append(cmd, bson.E{Key: "$db", Value: db}))
	if err != nil {
		t.Fatal(err)
	}
	r.reqs++
	msg := make([]byte, 16, 16+5+len(body))
	binary.LittleEndian.PutUint32(msg[4:], uint32(r.reqs))
	binary.LittleEndian.PutUint32(msg[12:], 2013) // OP_MSG
	msg = append(msg, 0, 0, 0, 0, 0)              // flags, section kind 0
	msg = append(msg, body...)
	binary.LittleEndian.PutUint32(msg[0:], uint32(len(msg)))
	_ = r.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.conn.Write(msg); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 16)
	if _, err := io.ReadFull(r.conn, hdr); err != nil {
		t.Fatal(err)
	}
	rest := make([]byte, binary.LittleEndian.Uint32(hdr)-16)
	if _, err := io.ReadFull(r.conn, rest); err != nil {
		t.Fatal(err)
	}
	return bson.Raw(rest[5:])
}

func (r *retryRS) must(t *testing.T, db string, cmd bson.D) bson.Raw {
	t.Helper()
	reply := r.run(t, db, cmd)
	if ok, _ := reply.Lookup("ok").AsFloat64OK(); ok != 1 {
		t.Fatalf("%v: %v", cmd, reply)
	}
	return reply
}

func wantErrCode(t *testing.T, reply bson.Raw, code mongoerr.Code) {
	t.Helper()
	if c, _ := reply.Lookup("code").AsInt64OK(); c != int64(code) {
		t.Fatalf("want error %d (%s), got %v", code, code.Name(), reply)
	}
}

// find returns the documents of test.c matching filter.
func (r *retryRS) find(t *testing.T, ns string, filter bson.D) []bson.Raw {
	t.Helper()
	db, coll, _ := cut(ns)
	reply := r.must(t, db, bson.D{{Key: "find", Value: coll}, {Key: "filter", Value: filter}, {Key: "batchSize", Value: 1000}})
	vals, _ := reply.Lookup("cursor", "firstBatch").Array().Values()
	out := make([]bson.Raw, len(vals))
	for i, v := range vals {
		out[i] = v.Document()
	}
	return out
}

func cut(ns string) (string, string, bool) {
	for i := range ns {
		if ns[i] == '.' {
			return ns[:i], ns[i+1:], true
		}
	}
	return ns, "", false
}

func newLsid() bson.D {
	id := catalog.NewUUID()
	return bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: id[:]}}}
}

// sameReply compares two replies without the fields that differ between any two replies
// ($clusterTime, operationTime).
func sameReply(t *testing.T, a, b bson.Raw) {
	t.Helper()
	strip := func(r bson.Raw) string {
		var m bson.D
		_ = bson.Unmarshal(r, &m)
		out := bson.D{}
		for _, e := range m {
			if e.Key != "$clusterTime" && e.Key != "operationTime" {
				out = append(out, e)
			}
		}
		return fmt.Sprint(out)
	}
	if strip(a) != strip(b) {
		t.Fatalf("retry reply differs:\nfirst: %v\nretry: %v", a, b)
	}
}

func xOf(t *testing.T, r *retryRS, id int) int32 {
	t.Helper()
	docs := r.find(t, "test.c", bson.D{{Key: "_id", Value: id}})
	if len(docs) != 1 {
		t.Fatalf("_id %d: %d documents", id, len(docs))
	}
	return docs[0].Lookup("x").Int32()
}

func TestRetryableWritesReplicaSet(t *testing.T) {
	r := startRetryRS(t)
	lsid := newLsid()
	withSession := func(cmd bson.D, txn int64) bson.D {
		return append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: txn})
	}

	// insert twice with the same txnNumber → inserted once, same reply.
	ins := withSession(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: int32(0)}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: int32(0)}}}}}, 1)
	first := r.must(t, "test", ins)
	retry := r.must(t, "test", ins)
	sameReply(t, first, retry)
	if n := retry.Lookup("n").Int32(); n != 2 {
		t.Fatalf("retried insert n=%d: %v", n, retry)
	}
	if _, ok := retry.Lookup("writeErrors").ArrayOK(); ok {
		t.Fatalf("retried insert re-executed: %v", retry)
	}
	if docs := r.find(t, "test.c", bson.D{}); len(docs) != 2 {
		t.Fatalf("want 2 documents, got %v", docs)
	}

	// The oplog entries carry the session and chain through prevOpTime; the session record
	// points at the last one.
	entries := r.find(t, "local.oplog.rs", bson.D{{Key: "ns", Value: "test.c"}, {Key: "op", Value: "i"}})
	if len(entries) != 2 {
		t.Fatalf("want 2 insert entries, got %d", len(entries))
	}
	for i, e := range entries {
		if e.Lookup("txnNumber").Int64() != 1 || e.Lookup("stmtId").Int32() != int32(i) {
			t.Fatalf("entry %d: %v", i, e)
		}
		if _, ok := e.Lookup("lsid").DocumentOK(); !ok {
			t.Fatalf("entry %d without lsid: %v", i, e)
		}
	}
	if !entries[1].Lookup("prevOpTime", "ts").Equal(entries[0].Lookup("ts")) {
		t.Fatalf("prevOpTime chain broken: %v -> %v", entries[0], entries[1])
	}
	recs := r.find(t, "config.transactions", bson.D{})
	if len(recs) != 1 || recs[0].Lookup("txnNum").Int64() != 1 ||
		!recs[0].Lookup("lastWriteOpTime", "ts").Equal(entries[1].Lookup("ts")) {
		t.Fatalf("config.transactions: %v (last entry %v)", recs, entries[1])
	}

	// update $inc retried → applied once; an upsert retried → same upserted _id.
	upd := withSession(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: int32(1)}}}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 3}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: int32(1)}}}}}, {Key: "upsert", Value: true}},
	}}}, 2)
	first = r.must(t, "test", upd)
	retry = r.must(t, "test", upd)
	sameReply(t, first, retry)
	if x := xOf(t, r, 1); x != 1 {
		t.Fatalf("$inc applied %d times", x)
	}
	if x := xOf(t, r, 3); x != 1 {
		t.Fatalf("upsert $inc: x=%d", x)
	}

	// findAndModify retried → same value, applied once.
	fam := withSession(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: int32(1)}}}}}, {Key: "new", Value: true}}, 3)
	first = r.must(t, "test", fam)
	retry = r.must(t, "test", fam)
	sameReply(t, first, retry)
	if v := retry.Lookup("value", "x").Int32(); v != 2 {
		t.Fatalf("findAndModify value: %v", retry)
	}
	if x := xOf(t, r, 1); x != 2 {
		t.Fatalf("findAndModify applied: x=%d", x)
	}
	imgs := r.find(t, "config.image_collection", bson.D{})
	if len(imgs) != 1 || imgs[0].Lookup("imageKind").StringValue() != "postImage" {
		t.Fatalf("config.image_collection: %v", imgs)
	}

	// A lost catalog (as on a new primary) is rebuilt from config.transactions and the oplog.
	retryable.Sessions(r.db).Invalidate()
	retry = r.must(t, "test", fam)
	sameReply(t, first, retry)
	if x := xOf(t, r, 1); x != 2 {
		t.Fatalf("findAndModify re-executed after reload: x=%d", x)
	}

	// findAndModify remove (pre-image) and delete, retried.
	famRm := withSession(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 3}}},
		{Key: "remove", Value: true}}, 4)
	first = r.must(t, "test", famRm)
	retryable.Sessions(r.db).Invalidate()
	retry = r.must(t, "test", famRm)
	sameReply(t, first, retry)
	del := withSession(bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "limit", Value: 1}}}}}, 5)
	first = r.must(t, "test", del)
	r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}}})
	retry = r.must(t, "test", del)
	sameReply(t, first, retry)
	if docs := r.find(t, "test.c", bson.D{{Key: "_id", Value: 2}}); len(docs) != 1 {
		t.Fatalf("retried delete re-executed: %v", docs)
	}

	// Older txnNumber → TransactionTooOld; an older statement of the old number too.
	wantErrCode(t, r.run(t, "test", ins), mongoerr.TransactionTooOld)
	wantErrCode(t, r.run(t, "test", withSession(bson.D{{Key: "insert", Value: "c"},
		{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 9}}}}}, 4)), mongoerr.TransactionTooOld)
	// txnNumber must be a long, and needs an lsid.
	wantErrCode(t, r.run(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int32(7)}}), mongoerr.TypeMismatch)
	wantErrCode(t, r.run(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}},
		{Key: "txnNumber", Value: int64(7)}}), mongoerr.InvalidOptions)
}

func TestRetryableWriteStandaloneRejected(t *testing.T) {
	_, cl := writeTestServer(t)
	conn := cl // keep the driver for the server; send the raw command through RunCommand
	_ = conn
	s, _ := writeTestServer(t)
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := &retryRS{conn: c}
	reply := r.run(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}},
		{Key: "lsid", Value: newLsid()}, {Key: "txnNumber", Value: int64(1)}})
	wantErrCode(t, reply, mongoerr.IllegalOperation)
	if msg := reply.Lookup("errmsg").StringValue(); msg != "Transaction numbers are only allowed on a replica set member or mongos" {
		t.Fatalf("errmsg: %q", msg)
	}
}

// TestRetryableWriteDriverRetryAfterApply: the server applies an $inc and closes the
// connection instead of replying; the driver (retryWrites=true) retries on a new connection
// with the same lsid and txnNumber, and the $inc is applied exactly once.
func TestRetryableWriteDriverRetryAfterApply(t *testing.T) {
	r := startRetryRS(t)
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + r.addr + "/?directConnection=true").
		SetRetryWrites(true).SetServerSelectionTimeout(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Disconnect(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	coll := cl.Database("test").Collection("inc")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: int32(0)}}); err != nil {
		t.Fatal(err)
	}
	fp := failpoint.Register("closeConnectionAfterCommand")
	entered := fp.TimesEntered()
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "closeConnectionAfterCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"update", "findAndModify"}}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	defer fp.Disable()

	res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}})
	if err != nil {
		t.Fatalf("retryable update: %v", err)
	}
	if fp.TimesEntered() != entered+1 {
		t.Fatalf("fail point did not fire (entered %d → %d)", entered, fp.TimesEntered())
	}
	if res.MatchedCount != 1 || res.ModifiedCount != 1 {
		t.Fatalf("retried update result: %+v", res)
	}
	var got struct{ N int32 }
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.N != 1 {
		t.Fatalf("$inc applied %d times, want exactly once", got.N)
	}

	// The same with findAndModify: the retry returns the document the first run produced.
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "closeConnectionAfterCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"findAndModify"}}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	var after struct{ N int32 }
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&after)
	if err != nil {
		t.Fatalf("retryable findAndModify: %v", err)
	}
	if after.N != 2 {
		t.Fatalf("findAndModify returned n=%d, want 2", after.N)
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got); err != nil || got.N != 2 {
		t.Fatalf("after findAndModify retry: n=%d err=%v", got.N, err)
	}
}
