package recovery_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/commands"
	"humongo/internal/operation"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/coord"
	"humongo/internal/repl/oplog"
	"humongo/internal/repl/recovery"
	"humongo/internal/server"
	"humongo/internal/service"
	"humongo/internal/storage"
)

var namespaces = []string{"app.a", "app.b"}

// dump returns ns's documents (as extended JSON, keyed by _id) read at ts (latest when ts is
// null), and its ready index names.
func dump(t *testing.T, db *operation.DB, ns string, ts optime.Timestamp) (map[string]string, []string) {
	t.Helper()
	docs := map[string]string{}
	m, ok := db.Catalog.Latest().ByNS(ns)
	if !ok {
		return docs, nil
	}
	var ixs []string
	for _, ix := range m.ReadyIndexes() {
		ixs = append(ixs, ix.Name)
	}
	sort.Strings(ixs)
	coll, err := db.Colls.ByUUID(m.UUID)
	if err != nil {
		t.Fatal(err)
	}
	ru := db.Engine.NewRecoveryUnit()
	defer ru.Close()
	if !ts.IsNull() {
		if err := ru.SetReadSource(storage.ReadProvided, ts); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := coll.RecordStore().NewCursor(ru, false)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	for _, d, ok := cur.Next(); ok; _, d, ok = cur.Next() {
		doc := bsoncore.Document(d)
		docs[doc.Lookup("_id").String()] = bson.Raw(doc).String()
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return docs, ixs
}

type snapshot map[string]map[string]string

func dumpAll(t *testing.T, db *operation.DB, ts optime.Timestamp) (snapshot, []string) {
	t.Helper()
	s := snapshot{}
	var ixs []string
	for _, ns := range namespaces {
		docs, ix := dump(t, db, ns, ts)
		s[ns] = docs
		for _, name := range ix {
			ixs = append(ixs, ns+"/"+name)
		}
	}
	return s, ixs
}

// history is a data directory written by a one-member replica set, with marks in its oplog.
type history struct {
	dir string
	// mid is the top of the oplog after the first half of the workload (the stable
	// timestamp recovery is forced back to); late is a point in the second half.
	mid, late, top optime.Timestamp
	// atLate and final are the data at late and at the top; indexes likewise.
	atLate, final         snapshot
	ixAtLate, ixFinal     []string
	entriesAfterMid, last int
}

// writeHistory runs a workload on a one-member replica set in a fresh directory through the
// driver (inserts, $inc updates, deletes, an index build, a new collection) and shuts it
// down cleanly.
func writeHistory(t *testing.T) *history {
	t.Helper()
	h := &history{dir: t.TempDir()}
	ctx := context.Background()
	db, err := operation.OpenDB(ctx, h.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, rc := startMember(t, db)
	cl, err := mongo.Connect(options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", srv.Port())).
		SetServerSelectionTimeout(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	a, b := cl.Database("app").Collection("a"), cl.Database("app").Collection("b")
	for i := range 20 {
		if _, err := a.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "x", Value: i}, {Key: "n", Value: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	h.mid = topTS(t, db)
	for i := range 10 {
		if _, err := a.UpdateOne(ctx, bson.D{{Key: "_id", Value: i}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: i + 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 10}, {Key: "$lt", Value: 15}}}}); err != nil {
		t.Fatal(err)
	}
	h.late = topTS(t, db)
	h.atLate, h.ixAtLate = dumpAll(t, db, h.late)
	if _, err := a.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := b.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprint("b", i)}, {Key: "v", Value: i}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.UpdateOne(ctx, bson.D{{Key: "_id", Value: 15 + i%5}}, bson.D{{Key: "$set", Value: bson.D{{Key: "last", Value: i}}}}); err != nil {
			t.Fatal(err)
		}
	}
	h.top = topTS(t, db)
	h.final, h.ixFinal = dumpAll(t, db, 0)
	h.entriesAfterMid = countEntries(t, db, h.mid)
	_ = cl.Disconnect(ctx)
	rc.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

func topTS(t *testing.T, db *operation.DB) optime.Timestamp {
	t.Helper()
	m, _ := db.Catalog.Latest().ByNS(oplog.NS)
	top, err := applier.TopOfOplog(db.Engine, m.Ident)
	if err != nil {
		t.Fatal(err)
	}
	return top.TS
}

// countEntries counts the oplog entries after ts.
func countEntries(t *testing.T, db *operation.DB, after optime.Timestamp) int {
	t.Helper()
	m, _ := db.Catalog.Latest().ByNS(oplog.NS)
	ru := db.Engine.NewRecoveryUnit()
	defer ru.Close()
	c, err := ru.NewCursor(m.Ident, storage.CursorOptions{Reverse: true, Lower: recordid.Long(int64(after) + 1).Key()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 0
	for ok := c.First(); ok; ok = c.Next() {
		n++
	}
	return n
}

// reopen opens h's directory as after a crash whose last stable checkpoint was at stable:
// the stable timestamp is forced back, and a timestamped write with no oplog entry (a write
// the crash lost from the oplog) is added after it, which recovery must roll back.
func reopen(t *testing.T, h *history, stable optime.Timestamp) *operation.DB {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), h.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.Engine.ForceStableTimestamp(stable)
	m, _ := db.Catalog.Latest().ByNS("app.a")
	coll, err := db.Colls.ByUUID(m.UUID)
	if err != nil {
		t.Fatal(err)
	}
	ru := db.Engine.NewRecoveryUnit()
	defer ru.Close()
	release := opobserver.UnreplicatedWrites(ru)
	defer release()
	w := ru.BeginUnitOfWork()
	defer w.End()
	if err := ru.SetCommitTimestamp(h.top + 1); err != nil {
		t.Fatal(err)
	}
	ghost, _ := bson.Marshal(bson.D{{Key: "_id", Value: "ghost"}})
	if _, err := coll.InsertDocument(ru, ghost); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return db
}

func recoverDB(t *testing.T, db *operation.DB) recovery.Result {
	t.Helper()
	res, err := recovery.Recover(context.Background(), recovery.Config{Engine: db.Engine, Catalog: db.Catalog,
		Colls: db.Colls, TempDir: db.TempDir})
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return res
}

func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// TestRecoverReplaysFromStable: data rolled back to a stable timestamp older than the top of
// the oplog is brought back to the top by replaying the oplog (updates logged as $set,
// deletes, an index build, a collection creation), and a write after stable without an
// oplog entry is gone.
func TestRecoverReplaysFromStable(t *testing.T) {
	h := writeHistory(t)
	db := reopen(t, h, h.mid)
	if docs, _ := dump(t, db, "app.a", 0); docs[`"ghost"`] == "" {
		t.Fatal("the unlogged write is not there before recovery")
	}
	res := recoverDB(t, db)
	t.Logf("recovery: %+v", res)
	if res.Skipped || res.Stable != h.mid || res.Top.TS != h.top || res.Replayed != h.entriesAfterMid || !res.Consistent {
		t.Fatalf("result %+v; want stable %v, top %v, %d entries replayed", res, h.mid, h.top, h.entriesAfterMid)
	}
	got, ix := dumpAll(t, db, 0)
	same(t, "data after recovery", got, h.final)
	same(t, "indexes after recovery", ix, h.ixFinal)
	// The history is rebuilt too: a read at `late` sees what the primary had then.
	atLate, _ := dumpAll(t, db, h.late)
	same(t, "data at an intermediate timestamp", atLate, h.atLate)
}

// TestRecoverTruncatesAfterPoint: an interrupted batch (oplogTruncateAfterPoint set) loses
// its oplog entries, and the data is that of the last complete batch.
func TestRecoverTruncatesAfterPoint(t *testing.T) {
	h := writeHistory(t)
	db := reopen(t, h, h.mid)
	if err := applier.SetOplogTruncateAfterPoint(context.Background(), db.Engine, db.Catalog, db.Colls, h.late); err != nil {
		t.Fatal(err)
	}
	res := recoverDB(t, db)
	if res.TruncatedAfter != h.late || res.Top.TS != h.late {
		t.Fatalf("result %+v; want truncation after %v", res, h.late)
	}
	if tp, err := applier.OplogTruncateAfterPoint(db.Engine, db.Catalog, db.Colls); err != nil || !tp.IsNull() {
		t.Fatalf("truncate point not cleared: %v %v", tp, err)
	}
	got, ix := dumpAll(t, db, 0)
	same(t, "data after recovery", got, h.atLate)
	same(t, "indexes after recovery", ix, h.ixAtLate)
}

// TestMinValid: a member whose oplog top is behind minValid is reported inconsistent.
func TestMinValid(t *testing.T) {
	h := writeHistory(t)
	db := reopen(t, h, h.top)
	ctx := context.Background()
	beyond := optime.OpTime{TS: h.top + 10, Term: 1}
	if err := recovery.SetMinValid(ctx, db.Engine, db.Catalog, db.Colls, beyond); err != nil {
		t.Fatal(err)
	}
	res := recoverDB(t, db)
	if res.Consistent || res.MinValid != beyond || res.Replayed != 0 {
		t.Fatalf("minValid beyond the top: %+v", res)
	}
	if docs, _ := dump(t, db, "app.a", 0); docs[`"ghost"`] != "" {
		t.Fatal("the unlogged write after stable survived recovery")
	}
	if err := recovery.SetMinValid(ctx, db.Engine, db.Catalog, db.Colls, optime.OpTime{TS: h.mid, Term: 1}); err != nil {
		t.Fatal(err)
	}
	if res := recoverDB(t, db); !res.Consistent {
		t.Fatalf("minValid below the top: %+v", res)
	}
}

// TestRecoverSkipsWithoutOplog: a data directory that never was a replica-set member.
func TestRecoverSkipsWithoutOplog(t *testing.T) {
	db, err := operation.OpenDB(context.Background(), filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if res := recoverDB(t, db); !res.Skipped {
		t.Fatalf("recovery without an oplog: %+v", res)
	}
}

// startMember serves db as a one-member replica set (the coordinator attached before the
// server accepts connections, as humongod does) and waits until it is writable.
func startMember(t *testing.T, db *operation.DB) (*server.Server, *coord.Coordinator) {
	t.Helper()
	mongod := commands.NewMongod(db, service.Config{})
	srv, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role,
		Closers: []server.Closer{db}})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := commands.AttachReplication(context.Background(), srv.State(), srv.Registry(), "rs0",
		fmt.Sprintf("127.0.0.1:%d", srv.Port()), 0, coord.Options{TickInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if err := rc.Initiate(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); !rc.IsWritablePrimary(); {
		if time.Now().After(deadline) {
			t.Fatal("the one-member set never became writable")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return srv, rc
}
