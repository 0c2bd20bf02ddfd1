package commands_test

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/commands"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/repl/indexbuild"
	"humongo/internal/service"
	"humongo/internal/txn/retryable"
)

// TestTwoServersShareNothing starts two replica-set members in one process and checks that
// what one server holds per server — cursors, retryable-write sessions, default read/write
// concern, index builds, the TTL monitor — is not visible on the other (issue 9: these lived
// in package globals).
func TestTwoServersShareNothing(t *testing.T) {
	a, b := startRetryRS(t), startRetryRS(t)
	docs := bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}
	for _, r := range []*retryRS{a, b} {
		r.must(t, "test", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}})
	}

	// Cursors: a cursor id of A is unknown on B, and B's killCursors leaves it alive on A.
	reply := a.must(t, "test", bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}})
	id, ok := reply.Lookup("cursor", "id").Int64OK()
	if !ok || id == 0 {
		t.Fatalf("no cursor on A: %v", reply)
	}
	wantErrCode(t, b.run(t, "test", bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}), mongoerr.CursorNotFound)
	reply = b.must(t, "test", bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{id}}})
	if nf, _ := reply.Lookup("cursorsNotFound").Array().Values(); len(nf) != 1 {
		t.Fatalf("B killed A's cursor: %v", reply)
	}
	a.must(t, "test", bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}})

	// Sessions: the same lsid and txnNumber are two different sessions on A and B. A's
	// session checked out does not block B's, and a statement executed on A is executed,
	// not replayed, on B.
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}}}
	retryInsert := func(r *retryRS, id int) bson.Raw {
		return r.must(t, "test", bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}},
			{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}})
	}
	retryInsert(a, 1)
	retryInsert(b, 2)
	if got := b.find(t, "test.s", bson.D{}); len(got) != 1 || got[0].Lookup("_id").Int32() != 2 {
		t.Fatalf("B's retryable insert was not executed on B: %v", got)
	}
	key, err := service.ParseLsid(mustValue(t, bson.D{{Key: "lsid", Value: lsid}}, "lsid"))
	if err != nil {
		t.Fatal(err)
	}
	sa, err := retryable.Sessions(a.db).CheckOut(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	sb, err := retryable.Sessions(b.db).CheckOut(ctx, key)
	cancel()
	if err != nil {
		t.Fatalf("B's session waited for A's check-out: %v", err)
	}
	retryable.Sessions(b.db).CheckIn(sb)
	retryable.Sessions(a.db).CheckIn(sa)

	// Default read/write concern: setDefaultRWConcern on A is not B's default.
	a.must(t, "admin", bson.D{{Key: "setDefaultRWConcern", Value: 1}, {Key: "defaultReadConcern", Value: bson.D{{Key: "level", Value: "majority"}}}})
	reply = a.must(t, "admin", bson.D{{Key: "getDefaultRWConcern", Value: 1}})
	if lvl, _ := reply.Lookup("defaultReadConcern", "level").StringValueOK(); lvl != "majority" {
		t.Fatalf("A's default read concern not set: %v", reply)
	}
	reply = b.must(t, "admin", bson.D{{Key: "getDefaultRWConcern", Value: 1}})
	if lvl, _ := reply.Lookup("defaultReadConcern", "level").StringValueOK(); lvl == "majority" {
		t.Fatalf("A's default read concern is B's: %v", reply)
	}

	// Index builds: each node has its own coordinator; B has not heard of A's builds.
	a.must(t, "test", bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}})
	if indexbuild.Of(a.db) == indexbuild.Of(b.db) {
		t.Fatal("A and B share the index-build coordinator")
	}
	if n := len(b.db.Colls.IndexBuilds().List()); n != 0 {
		t.Fatalf("B lists %d index builds, want none", n)
	}

	// TTL monitors: each server runs its own over its own collections. A's monitor deletes
	// A's expired document and counts it; B's monitor, started after A's (the old process-wide
	// monitor pointer then named B's for both), counts nothing.
	for _, r := range []*retryRS{a, b} {
		r.must(t, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorSleepSecs", Value: 1}})
	}
	stopA := commands.StartTTLMonitor(context.Background(), a.st)
	defer stopA()
	stopB := commands.StartTTLMonitor(context.Background(), b.st)
	defer stopB()
	ma, mb := a.db.Colls.TTLMonitor(), b.db.Colls.TTLMonitor()
	if ma == nil || mb == nil || ma == mb {
		t.Fatalf("TTL monitors: A %p, B %p; want two running monitors", ma, mb)
	}
	a.must(t, "test", bson.D{{Key: "insert", Value: "ttl"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "at", Value: time.Now().Add(-time.Hour)}}}}})
	a.must(t, "test", bson.D{{Key: "createIndexes", Value: "ttl"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "at", Value: 1}}}, {Key: "name", Value: "at_1"}, {Key: "expireAfterSeconds", Value: 1}}}}})
	deadline := time.Now().Add(10 * time.Second)
	for ma.Deleted() != 1 || len(a.find(t, "test.ttl", bson.D{})) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("A's TTL monitor deleted %d documents, want 1 (left: %v)", ma.Deleted(), a.find(t, "test.ttl", bson.D{}))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a.db.Colls.TTLMonitor() != ma || mb.Deleted() != 0 {
		t.Fatalf("A's TTL work is not A's: A's monitor %p (started %p), B deleted %d", a.db.Colls.TTLMonitor(), ma, mb.Deleted())
	}
	stopB()
	if b.db.Colls.TTLMonitor() != nil || a.db.Colls.TTLMonitor() != ma {
		t.Fatal("stopping B's TTL monitor changed which monitors run")
	}
}

func mustValue(t *testing.T, d bson.D, key string) bsoncore.Value {
	t.Helper()
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return bsoncore.Document(raw).Lookup(key)
}

// TestServerStateReleasedAtClose checks that a closed server leaves nothing reachable behind:
// its State and DB can be collected (package globals keyed by them kept both alive).
func TestServerStateReleasedAtClose(t *testing.T) {
	st, db := runAndClose(t)
	for i := 0; i < 10 && (st.Value() != nil || db.Value() != nil); i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if st.Value() != nil {
		t.Error("the closed server's State is still reachable")
	}
	if db.Value() != nil {
		t.Error("the closed server's DB is still reachable")
	}
}

// runAndClose runs a server through per-server state (cursors, default RW concern, an
// awaitData wait, validators, an index build) and closes it.
func runAndClose(t *testing.T) (weak.Pointer[service.State], weak.Pointer[operation.DB]) {
	ts, rc := startMember(t, t.TempDir(), 0)
	ctx := context.Background()
	c := ts.cl.Database("test")
	if err := c.CreateCollection(ctx, "v", options.CreateCollection().SetValidator(bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 0}}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Collection("v").InsertMany(ctx, []any{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 2}}, bson.D{{Key: "a", Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.RunCommand(ctx, bson.D{{Key: "find", Value: "v"}, {Key: "batchSize", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := ts.cl.Database("admin").RunCommand(ctx, bson.D{{Key: "getDefaultRWConcern", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "v"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	st, db := weak.Make(ts.srv.State()), weak.Make(ts.db)
	rc.Close()
	ts.close(t)
	return st, db
}
