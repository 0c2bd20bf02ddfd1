package rollback_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/commands"
	"humongo/internal/lock"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/oplog"
	"humongo/internal/repl/recovery"
	"humongo/internal/repl/rollback"
	"humongo/internal/server"
	"humongo/internal/service"
)

// dataNode is an in-process server whose writes are logged to its oplog in a fixed term, as on
// a primary of that term (the rollback test needs two diverging histories, not elections).
type dataNode struct {
	db     *operation.DB
	w      *oplog.Writer
	client *mongo.Client
}

func startDataNode(t *testing.T, term int64) *dataNode {
	t.Helper()
	ctx := context.Background()
	db, err := operation.OpenDB(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := oplog.Open(ctx, oplog.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls,
		MaxSizeBytes: 64 << 20, Term: func() (int64, bool) { return term, true }, TempDir: db.TempDir})
	if err != nil {
		t.Fatal(err)
	}
	db.SetObserver(w)
	mongod := commands.NewMongod(db, service.Config{})
	s, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role,
		Closers: []server.Closer{db}})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	cl, err := mongo.Connect(options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())).
		SetServerSelectionTimeout(30 * time.Second).SetServerMonitoringMode(options.ServerMonitoringModePoll).
		SetWriteConcern(writeconcern.W1()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Disconnect(context.Background())
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
	})
	return &dataNode{db: db, w: w, client: cl}
}

func (n *dataNode) local() *rollback.Node {
	return &rollback.Node{Engine: n.db.Engine, Catalog: n.db.Catalog, Colls: n.db.Colls, Writer: n.w, Locks: n.db.Locks}
}

// oplogEntries returns the node's oplog, oldest first.
func (n *dataNode) oplogEntries(t *testing.T) []bsoncore.Document {
	t.Helper()
	it, err := n.local().OplogNewestFirst(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []bsoncore.Document
	for {
		d, ok, err := it.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		out = append(out, d)
	}
	slices.Reverse(out)
	return out
}

func (n *dataNode) apply(t *testing.T, after optime.OpTime, entries []bsoncore.Document) {
	t.Helper()
	a := applier.New(applier.Config{Engine: n.db.Engine, Catalog: n.db.Catalog, Colls: n.db.Colls, Writer: n.w,
		Mode: oplog.ModeSecondary, LastApplied: after, Fatal: func(err error) { t.Errorf("apply: %v", err) }}).
		WithApplier(n.w.Applier())
	if _, err := a.ApplyBatch(context.Background(), entries); err != nil {
		t.Fatal(err)
	}
}

// dump is the user data of database app: per collection, its documents in _id order.
func (n *dataNode) dump(t *testing.T) map[string][]string {
	t.Helper()
	ctx := context.Background()
	db := n.client.Database("app")
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, name := range names {
		cur, err := db.Collection(name).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		docs := []string{}
		for cur.Next(ctx) {
			docs = append(docs, cur.Current.String())
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		out[name] = docs
	}
	return out
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func opTime(t *testing.T, d bsoncore.Document) optime.OpTime {
	t.Helper()
	ot, err := oplog.EntryOpTime(d)
	if err != nil {
		t.Fatal(err)
	}
	return ot
}

// TestRollbackOnStorage rolls a node back for real: recover to stable, catalog reload, oplog
// truncation, replay of (stable, common point], rollback files; then the node applies the
// source's branch and ends up with the source's data.
func TestRollbackOnStorage(t *testing.T) {
	ctx := context.Background()
	us, src := startDataNode(t, 1), startDataNode(t, 2)
	c, keep := us.client.Database("app").Collection("c"), us.client.Database("app").Collection("keep")
	for i := 1; i <= 6; i++ {
		must[*mongo.InsertOneResult](t)(c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i}}))
	}
	must[*mongo.InsertOneResult](t)(keep.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}))

	// The source has our history so far (as a secondary that applied it).
	shared := us.oplogEntries(t)
	src.apply(t, optime.OpTime{}, shared)
	common := opTime(t, shared[len(shared)-1])
	atCommon := us.dump(t)
	// Stable is behind the common point: the inserts of 4..6 and all of app.keep (its
	// creation included) are after it and must be replayed.
	var stable optime.Timestamp
	for _, e := range shared {
		if o, _ := e.Lookup("o").DocumentOK(); e.Lookup("op").StringValue() == "i" && o.Lookup("_id").Int32() == 3 {
			stable = opTime(t, e).TS
		}
	}
	if stable == 0 {
		t.Fatal("no insert of _id 3 in the oplog")
	}
	us.db.Engine.SetStableTimestamp(stable)

	// Our branch (term 1): never replicated.
	must[*mongo.InsertManyResult](t)(c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 7}, {Key: "v", Value: 7}},
		bson.D{{Key: "_id", Value: 8}, {Key: "v", Value: 8}}}))
	must[*mongo.UpdateResult](t)(c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 20}}}}))
	must[*mongo.DeleteResult](t)(c.DeleteOne(ctx, bson.D{{Key: "_id", Value: 4}}))
	must[*mongo.InsertOneResult](t)(us.client.Database("app").Collection("late").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}))
	if err := keep.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	must[*mongo.UpdateResult](t)(c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 7}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 70}}}}))
	ours := len(us.oplogEntries(t)) - len(shared)

	// The source's branch (term 2).
	sc := src.client.Database("app").Collection("c")
	must[*mongo.InsertOneResult](t)(sc.InsertOne(ctx, bson.D{{Key: "_id", Value: 7}, {Key: "v", Value: "theirs"}}))
	must[*mongo.UpdateResult](t)(sc.UpdateOne(ctx, bson.D{{Key: "_id", Value: 5}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 50}}}}))

	cMeta, ok := us.db.Catalog.Latest().ByNS("app.c")
	if !ok {
		t.Fatal("no app.c")
	}
	lateMeta, ok := us.db.Catalog.Latest().ByNS("app.late")
	if !ok {
		t.Fatal("no app.late")
	}
	dir := t.TempDir()
	rbid := int32(0)
	res, err := rollback.Run(ctx, rollback.Config{Local: us.local(), Remote: rollback.ClientRemote{Client: src.client},
		Dir: dir, IncrementRBID: func(context.Context) (int32, error) { rbid++; return rbid, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("result: %+v", res)
	if res.CommonPoint != common || res.RolledBack != ours || res.Stable != stable || res.RBID != 1 {
		t.Fatalf("common point %v (want %v), rolled back %d (want %d), stable %v (want %v), rbid %d",
			res.CommonPoint, common, res.RolledBack, ours, res.Stable, stable, res.RBID)
	}
	if top := must[optime.OpTime](t)(applier.TopOfOplog(us.db.Engine, us.w.Ident())); top != common {
		t.Fatalf("top of oplog %v, want the common point %v", top, common)
	}
	// The writer no longer reports our branch's top (operationTime, write-concern optimes).
	if lw := us.w.LastWritten(); lw != common {
		t.Fatalf("oplog writer's LastWritten %v after rollback, want the common point %v", lw, common)
	}
	// minValid is the source's top when rollback read it, durably.
	srcEntries := src.oplogEntries(t)
	srcTop := opTime(t, srcEntries[len(srcEntries)-1])
	if res.MinValid != srcTop {
		t.Fatalf("result minValid %v, want the source's top %v", res.MinValid, srcTop)
	}
	if mv := must[optime.OpTime](t)(recovery.MinValid(us.db.Engine, us.db.Catalog, us.db.Colls)); mv != srcTop {
		t.Fatalf("persisted minValid %v, want %v", mv, srcTop)
	}
	replayed := 0
	for _, e := range shared {
		if opTime(t, e).TS > stable {
			replayed++
		}
	}
	if res.Replayed != replayed {
		t.Fatalf("replayed %d entries, want %d", res.Replayed, replayed)
	}
	if got := us.dump(t); fmt.Sprint(got) != fmt.Sprint(atCommon) {
		t.Fatalf("data after rollback\n %v\nwant the data at the common point\n %v", got, atCommon)
	}
	// Fast counts and indexes follow the recovered data.
	if n := must[int64](t)(c.EstimatedDocumentCount(ctx)); n != 6 {
		t.Fatalf("estimated count %d, want 6", n)
	}
	for _, coll := range []string{"c", "keep"} {
		var v bson.M
		if err := us.client.Database("app").RunCommand(ctx, bson.D{{Key: "validate", Value: coll}}).Decode(&v); err != nil {
			t.Fatal(err)
		}
		if v["valid"] != true {
			t.Fatalf("validate %s after rollback: %v", coll, v)
		}
	}

	// Rollback files: the current versions of what our branch inserted or updated (not the
	// deleted document 4, whose old version recovery restored).
	want := map[catalog.UUID][]string{
		cMeta.UUID:    {`{"_id": {"$numberInt":"7"},"v": {"$numberInt":"70"}}`, `{"_id": {"$numberInt":"8"},"v": {"$numberInt":"8"}}`, `{"_id": {"$numberInt":"2"},"v": {"$numberInt":"20"}}`},
		lateMeta.UUID: {`{"_id": {"$numberInt":"1"}}`},
	}
	if len(res.Files) != len(want) {
		t.Fatalf("files %+v, want one per collection of %v", res.Files, want)
	}
	for _, f := range res.Files {
		docs := must[[]bsoncore.Document](t)(rollback.ReadFile(f.Path))
		var got []string
		for _, d := range docs {
			got = append(got, bson.Raw(d).String())
		}
		if fmt.Sprint(got) != fmt.Sprint(want[f.Collection]) {
			t.Errorf("%s: %v, want %v", f.Path, got, want[f.Collection])
		}
	}

	// Steady state resumes from the common point with the source's branch.
	var theirs []bsoncore.Document
	for _, e := range src.oplogEntries(t) {
		if opTime(t, e).TS > common.TS {
			theirs = append(theirs, e)
		}
	}
	us.apply(t, common, theirs)
	if got, want := us.dump(t), src.dump(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("data after applying the source's branch\n %v\nwant the source's\n %v", got, want)
	}
}

// TestLockForRecoveryInterruptsLockHolders: an operation holding an intent lock that did not
// notice the interruption at the transition to ROLLBACK (or started since) is named and
// interrupted again while LockForRecovery waits; the wait does not last as long as it does.
func TestLockForRecoveryInterruptsLockHolders(t *testing.T) {
	n := startDataNode(t, 1)
	reader := n.db.Locks.NewLocker()
	if _, err := reader.GlobalLock(context.Background(), lock.ModeIS); err != nil {
		t.Fatal(err)
	}
	var described, killed int
	local := n.local()
	local.Patience = 20 * time.Millisecond
	local.LockHolders = func() []string { described++; return []string{"1 find test.c Global:IS"} }
	local.KillLockHolders = func(error) {
		if killed++; killed == 1 {
			reader.UnlockAll() // the interrupted reader lets go
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	unlock, err := local.LockForRecovery(ctx)
	if err != nil {
		t.Fatalf("LockForRecovery: %v", err)
	}
	unlock()
	if killed == 0 || described == 0 {
		t.Fatalf("the lock holder was interrupted %d times and described %d times", killed, described)
	}
}
