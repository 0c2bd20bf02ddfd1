package commands_test

// Prepare conflicts above storage (spec: replication.md "Prepare Conflicts"): reads at local,
// available or majority without a cluster time return the data as it was before a prepared
// transaction wrote it; snapshot and afterClusterTime reads, and every write, wait until it
// commits or aborts and then act on the decided state. There is no prepareTransaction command
// here: each test prepares a storage unit directly, written through the collection layer as a
// transaction's statements write, and resolves it itself.

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/storage"
)

// preparedUnit is a prepared storage unit standing for a prepared transaction.
type preparedUnit struct {
	t       *testing.T
	r       *retryRS
	ru      *storage.RecoveryUnit
	w       *storage.WriteUnitOfWork
	release func()
	ts      optime.Timestamp
	done    bool
}

type noopLogger interface {
	LogNoop(ctx context.Context, msg bsoncore.Document) (optime.OpTime, error)
}

// oplogSlot commits a no-op oplog entry and returns its timestamp: a slot above every read
// timestamp in use, as the prepare (and commit) oplog entries take.
func oplogSlot(t *testing.T, r *retryRS) optime.Timestamp {
	t.Helper()
	w, ok := r.db.Observer().(noopLogger)
	if !ok {
		t.Fatal("the observer writes no no-ops")
	}
	ot, err := w.LogNoop(context.Background(), bsoncore.NewDocumentBuilder().AppendString("msg", "test prepare").Build())
	if err != nil {
		t.Fatal(err)
	}
	return ot.TS
}

// prepareWrites runs f's writes to ns in a new unit of work, as a transaction's statements
// (collected, not logged), and prepares the unit at a fresh oplog slot.
func prepareWrites(t *testing.T, r *retryRS, ns string, f func(ru *storage.RecoveryUnit, coll *index.Collection) error) *preparedUnit {
	t.Helper()
	meta, ok := r.db.Catalog.Latest().ByNS(ns)
	if !ok {
		t.Fatalf("no collection %s", ns)
	}
	coll, err := r.db.Colls.ByUUID(meta.UUID)
	if err != nil {
		t.Fatal(err)
	}
	ru := r.db.Engine.NewRecoveryUnit()
	p := &preparedUnit{t: t, r: r, ru: ru, release: opobserver.WithTransaction(ru, &opobserver.TxnCollector{})}
	p.w = ru.BeginUnitOfWork()
	t.Cleanup(p.abort)
	if err := f(ru, coll); err != nil {
		t.Fatal(err)
	}
	p.ts = oplogSlot(t, r)
	if err := ru.Prepare(p.ts); err != nil {
		t.Fatal(err)
	}
	return p
}

// setField prepares {$set: {field: v}} on the document with _id id.
func setField(id int32, field string, v int32) func(*storage.RecoveryUnit, *index.Collection) error {
	return func(ru *storage.RecoveryUnit, coll *index.Collection) error {
		rid, old, found, err := coll.FindByID(ru, bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, id)})
		if err != nil || !found {
			return errors.Join(err, errors.New("document to update not found"))
		}
		old = append(bsoncore.Document(nil), old...)
		var m bson.D
		if err := bson.Unmarshal(old, &m); err != nil {
			return err
		}
		set := false
		for i := range m {
			if m[i].Key == field {
				m[i].Value, set = v, true
			}
		}
		if !set {
			m = append(m, bson.E{Key: field, Value: v})
		}
		nd, err := bson.Marshal(m)
		if err != nil {
			return err
		}
		return coll.UpdateDocument(ru, rid, old, nd)
	}
}

func insertDoc(d bson.D) func(*storage.RecoveryUnit, *index.Collection) error {
	return func(ru *storage.RecoveryUnit, coll *index.Collection) error {
		raw, err := bson.Marshal(d)
		if err != nil {
			return err
		}
		_, err = coll.InsertDocuments(ru, []bsoncore.Document{raw})
		return err
	}
}

// commitAt commits the prepared unit at ts (null: at a fresh oplog slot).
func (p *preparedUnit) commitAt(ts optime.Timestamp) {
	p.t.Helper()
	if ts.IsNull() {
		ts = oplogSlot(p.t, p.r)
	}
	if err := p.w.CommitPrepared(ts, 0); err != nil {
		p.t.Fatal(err)
	}
	p.finish()
}

// abort rolls the prepared unit back (a no-op once resolved).
func (p *preparedUnit) abort() {
	if p.done {
		return
	}
	p.w.End()
	p.finish()
}

func (p *preparedUnit) finish() {
	p.done = true
	p.release()
	p.ru.Close()
}

// async runs f in a goroutine; the returned channel yields its error.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// stillBlocked fails the test if ch delivers within a short while: the operation must be
// waiting for the prepared transaction. (A correct server never delivers, so the bound
// cannot make a correct run fail.)
func stillBlocked(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s did not wait for the prepared transaction (err %v)", what, err)
	case <-time.After(300 * time.Millisecond):
	}
}

func waitDone(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s still blocked after the prepared transaction resolved", what)
		return nil
	}
}

func prepColl(t *testing.T, r *retryRS) (*mongo.Client, *mongo.Collection) {
	t.Helper()
	cl := txnClient(t, r)
	coll := cl.Database("test").Collection("prep")
	docs := []any{}
	for i := int32(1); i <= 10; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "v", Value: int32(0)}})
	}
	if _, err := coll.InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	return cl, coll
}

func vOf(t *testing.T, coll *mongo.Collection, ctx context.Context, id int32) int32 {
	t.Helper()
	var d bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
		t.Fatal(err)
	}
	v, _ := d["v"].(int32)
	return v
}

// Reads at local (the default), available and majority read the pre-prepare state at once;
// so do count, distinct and aggregate.
func TestPrepareConflictLocalReadsIgnore(t *testing.T) {
	r := startRetryRS(t)
	cl, coll := prepColl(t, r)
	p := prepareWrites(t, r, "test.prep", setField(3, "v", 7))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if v := vOf(t, coll, ctx, 3); v != 0 {
		t.Fatalf("local read saw the prepared write: v=%d", v)
	}
	for _, lvl := range []*readconcern.ReadConcern{readconcern.Available(), readconcern.Majority()} {
		c := cl.Database("test").Collection("prep", options.Collection().SetReadConcern(lvl))
		if v := vOf(t, c, ctx, 3); v != 0 {
			t.Fatalf("%s read saw the prepared write: v=%d", lvl.Level, v)
		}
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "v", Value: 0}}); err != nil || n != 10 {
		t.Fatalf("count: %d %v", n, err)
	}
	if res := coll.Distinct(ctx, "v", bson.D{}); res.Err() != nil {
		t.Fatal(res.Err())
	} else {
		var vals []int32
		if err := res.Decode(&vals); err != nil || len(vals) != 1 || vals[0] != 0 {
			t.Fatalf("distinct: %v %v", vals, err)
		}
	}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "v", Value: 7}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := cur.All(ctx, &got); err != nil || len(got) != 0 {
		t.Fatalf("aggregate saw the prepared write: %v %v", got, err)
	}
	p.commitAt(0)
	if v := vOf(t, coll, ctx, 3); v != 7 {
		t.Fatalf("after commit: v=%d", v)
	}
}

// Reads with afterClusterTime or at a snapshot wait for the prepared transaction, then see
// its commit; a plan through an index whose keys it did not change (IXSCAN + FETCH) refetches
// the record it waited for instead of skipping it.
func TestPrepareConflictCausalAndSnapshotReadsWait(t *testing.T) {
	r := startRetryRS(t)
	cl, coll := prepColl(t, r)
	ctx := context.Background()
	if _, err := coll.Indexes().CreateMany(ctx, []mongo.IndexModel{{Keys: bson.D{{Key: "k", Value: 1}}}, {Keys: bson.D{{Key: "v", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	db := cl.Database("test")
	opTime := func() bson.Timestamp {
		raw, err := db.RunCommand(ctx, bson.D{{Key: "insert", Value: "other"}, {Key: "documents", Value: bson.A{bson.D{}}}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		tt, ti := raw.Lookup("operationTime").Timestamp()
		return bson.Timestamp{T: tt, I: ti}
	}
	after := opTime()
	p := prepareWrites(t, r, "test.prep", setField(4, "v", 9))
	read := func(rc bson.D, filter bson.D) <-chan error {
		return async(func() error {
			raw, err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "prep"}, {Key: "filter", Value: filter}, {Key: "readConcern", Value: rc}}).Raw()
			if err != nil {
				return err
			}
			docs, _ := raw.Lookup("cursor", "firstBatch").Array().Values()
			if len(docs) != 1 {
				return errors.New("want one document, got " + raw.String())
			}
			if v, _ := docs[0].Document().Lookup("v").Int32OK(); v != 9 {
				return errors.New("read did not see the commit: " + raw.String())
			}
			return nil
		})
	}
	causal := read(bson.D{{Key: "level", Value: "local"}, {Key: "afterClusterTime", Value: after}}, bson.D{{Key: "_id", Value: int32(4)}})
	// A majority read waits for the majority snapshot to reach its afterClusterTime, then
	// reads there: at or above the prepare timestamp it meets the prepared document.
	atPrepare := bson.Timestamp{T: uint32(p.ts >> 32), I: uint32(p.ts)}
	causalIx := read(bson.D{{Key: "level", Value: "majority"}, {Key: "afterClusterTime", Value: atPrepare}}, bson.D{{Key: "k", Value: int32(4)}})
	snap := read(bson.D{{Key: "level", Value: "snapshot"}}, bson.D{{Key: "k", Value: int32(4)}})
	// Two candidate plans (k_1, v_1): the trial runs meet the prepared keys and wait too.
	snapTrial := read(bson.D{{Key: "level", Value: "snapshot"}}, bson.D{{Key: "k", Value: int32(4)}, {Key: "v", Value: bson.D{{Key: "$gte", Value: int32(0)}}}})
	stillBlocked(t, causal, "afterClusterTime read")
	stillBlocked(t, causalIx, "majority afterClusterTime read through an index")
	stillBlocked(t, snap, "snapshot read")
	stillBlocked(t, snapTrial, "snapshot read planned by trial runs")
	// Commit at the prepare timestamp: the snapshot read (at or above it) must see it too.
	p.commitAt(p.ts)
	for what, ch := range map[string]<-chan error{"afterClusterTime": causal, "majority afterClusterTime": causalIx, "snapshot": snap, "snapshot, trial runs": snapTrial} {
		if err := waitDone(t, ch, what); err != nil {
			t.Fatalf("%s read: %v", what, err)
		}
	}
}

// An abort lets the waiting readers go on with the old data.
func TestPrepareConflictAbortedReadersSeeOldData(t *testing.T) {
	r := startRetryRS(t)
	cl, _ := prepColl(t, r)
	db := cl.Database("test")
	ctx := context.Background()
	p := prepareWrites(t, r, "test.prep", setField(5, "v", 3))
	ch := async(func() error {
		var d bson.M
		c := db.Collection("prep", options.Collection().SetReadConcern(readconcern.Snapshot()))
		if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: int32(5)}}).Decode(&d); err != nil {
			return err
		}
		if d["v"] != int32(0) {
			return errors.New("aborted write visible")
		}
		return nil
	})
	stillBlocked(t, ch, "snapshot read")
	p.abort()
	if err := waitDone(t, ch, "snapshot read"); err != nil {
		t.Fatal(err)
	}
}

// Writes wait for the prepared transaction and then act on the decided state: an update
// and a delete whose filter matches only the committed (or only the aborted) version, and an
// insert whose _id the prepared transaction inserted.
func TestPrepareConflictWritesWait(t *testing.T) {
	r := startRetryRS(t)
	_, coll := prepColl(t, r)
	ctx := context.Background()

	p := prepareWrites(t, r, "test.prep", setField(6, "v", 1))
	upd := async(func() error {
		res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(6)}, {Key: "v", Value: int32(1)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: true}}}})
		if err == nil && res.ModifiedCount != 1 {
			err = errors.New("update did not act on the committed version")
		}
		return err
	})
	stillBlocked(t, upd, "update")
	p.commitAt(0)
	if err := waitDone(t, upd, "update"); err != nil {
		t.Fatal(err)
	}

	p = prepareWrites(t, r, "test.prep", setField(7, "v", 1))
	del := async(func() error {
		res, err := coll.DeleteMany(ctx, bson.D{{Key: "v", Value: int32(1)}, {Key: "_id", Value: bson.D{{Key: "$gte", Value: int32(7)}}}})
		if err == nil && res.DeletedCount != 0 {
			err = errors.New("delete acted on the aborted version")
		}
		return err
	})
	stillBlocked(t, del, "delete")
	p.abort()
	if err := waitDone(t, del, "delete"); err != nil {
		t.Fatal(err)
	}

	p = prepareWrites(t, r, "test.prep", insertDoc(bson.D{{Key: "_id", Value: int32(100)}}))
	ins := async(func() error {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(100)}, {Key: "second", Value: true}})
		return err
	})
	stillBlocked(t, ins, "insert of a prepared _id")
	p.commitAt(0)
	err := waitDone(t, ins, "insert")
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("insert after the prepared insert committed: want DuplicateKey, got %v", err)
	}

	p = prepareWrites(t, r, "test.prep", insertDoc(bson.D{{Key: "_id", Value: int32(101)}}))
	ins = async(func() error {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(101)}, {Key: "second", Value: true}})
		return err
	})
	stillBlocked(t, ins, "insert of a prepared _id")
	p.abort()
	if err := waitDone(t, ins, "insert"); err != nil {
		t.Fatalf("insert after the prepared insert aborted: %v", err)
	}

	// findAndModify too.
	p = prepareWrites(t, r, "test.prep", setField(8, "v", 4))
	fam := async(func() error {
		var d bson.M
		err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "v", Value: int32(4)}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: int32(1)}}}}).Decode(&d)
		if err == nil && d["_id"] != int32(8) {
			err = errors.New("findAndModify acted on the wrong document")
		}
		return err
	})
	stillBlocked(t, fam, "findAndModify")
	p.commitAt(0)
	if err := waitDone(t, fam, "findAndModify"); err != nil {
		t.Fatal(err)
	}
	if v := vOf(t, coll, ctx, 8); v != 5 {
		t.Fatalf("after findAndModify: v=%d", v)
	}
}

// A waiting read ends with its maxTimeMS (MaxTimeMSExpired) and a waiting write with its
// context, while the transaction stays prepared.
func TestPrepareConflictWaitsAreInterruptible(t *testing.T) {
	r := startRetryRS(t)
	cl, coll := prepColl(t, r)
	db := cl.Database("test")
	p := prepareWrites(t, r, "test.prep", setField(2, "v", 1))
	defer p.abort()
	ctx := context.Background()
	err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "prep"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: int32(2)}}},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}, {Key: "maxTimeMS", Value: int32(200)}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.MaxTimeMSExpired) {
		t.Fatalf("want MaxTimeMSExpired, got %v", err)
	}
	err = db.RunCommand(ctx, bson.D{{Key: "update", Value: "prep"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: int32(2)}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}}}},
		{Key: "maxTimeMS", Value: int32(200)}}).Err()
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.MaxTimeMSExpired) {
		t.Fatalf("update: want MaxTimeMSExpired, got %v", err)
	}
	// The server is still healthy and the transaction still prepared.
	if v := vOf(t, coll, ctx, 2); v != 0 {
		t.Fatalf("v=%d", v)
	}
	if r.db.Engine.PreparedUnits() != 1 {
		t.Fatal("the prepared unit went away")
	}
}

// A statement of a snapshot transaction waits and continues in a refreshed view at its
// timestamp; a transaction reading without a timestamp (local) cannot, and fails the
// statement with a WriteConflict the driver may retry the transaction on.
func TestPrepareConflictTransactionStatements(t *testing.T) {
	r := startRetryRS(t)
	cl, coll := prepColl(t, r)
	ctx := context.Background()
	p := prepareWrites(t, r, "test.prep", setField(9, "v", 2))

	snapSess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer snapSess.EndSession(ctx)
	if err := snapSess.StartTransaction(options.Transaction().SetReadConcern(readconcern.Snapshot())); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, snapSess)
	// The first statement fixes the snapshot (above the prepare timestamp) without touching
	// the prepared document.
	if v := vOf(t, coll, sctx, 1); v != 0 {
		t.Fatal(v)
	}
	snap := async(func() error {
		var d bson.M
		if err := coll.FindOne(sctx, bson.D{{Key: "_id", Value: int32(9)}}).Decode(&d); err != nil {
			return err
		}
		if d["v"] != int32(2) {
			return errors.New("snapshot transaction did not see the commit at its snapshot")
		}
		// It may still write: its writes were isolated, the view changed only by the commit.
		_, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: int32(10)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "t", Value: 1}}}})
		return err
	})
	localSess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer localSess.EndSession(ctx)
	if err := localSess.StartTransaction(options.Transaction().SetReadConcern(readconcern.Local())); err != nil {
		t.Fatal(err)
	}
	lctx := mongo.NewSessionContext(ctx, localSess)
	local := async(func() error {
		var d bson.M
		return coll.FindOne(lctx, bson.D{{Key: "_id", Value: int32(9)}}).Decode(&d)
	})
	stillBlocked(t, snap, "snapshot transaction statement")
	stillBlocked(t, local, "local transaction statement")
	p.commitAt(p.ts)
	if err := waitDone(t, snap, "snapshot transaction statement"); err != nil {
		t.Fatal(err)
	}
	if err := snapSess.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	err = waitDone(t, local, "local transaction statement")
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(int(mongoerr.WriteConflict)) || !se.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("local transaction: want WriteConflict with TransientTransactionError, got %v", err)
	}
	_ = localSess.AbortTransaction(ctx)
}

// A cursor's getMore meets keys prepared after its first batch (the one it stands on and a
// later one): with afterClusterTime it waits and returns the committed version (and every
// later document, none twice); a local cursor's getMore reads on past them.
func TestPrepareConflictGetMore(t *testing.T) {
	r := startRetryRS(t)
	cl, _ := prepColl(t, r)
	db := cl.Database("test")
	ctx := context.Background()
	raw, err := db.RunCommand(ctx, bson.D{{Key: "insert", Value: "other"}, {Key: "documents", Value: bson.A{bson.D{}}}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	tt, ti := raw.Lookup("operationTime").Timestamp()
	open := func(rc bson.D) int64 {
		raw, err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "prep"}, {Key: "batchSize", Value: 2}, {Key: "readConcern", Value: rc}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := raw.Lookup("cursor", "id").Int64OK()
		if id == 0 {
			t.Fatal("no cursor")
		}
		return id
	}
	causalID := open(bson.D{{Key: "level", Value: "local"}, {Key: "afterClusterTime", Value: bson.Timestamp{T: tt, I: ti}}})
	localID := open(bson.D{{Key: "level", Value: "local"}})
	// Document 2 is where both cursors stand (the last one returned): restoring the cursor
	// meets it too.
	p := prepareWrites(t, r, "test.prep", func(ru *storage.RecoveryUnit, coll *index.Collection) error {
		return errors.Join(setField(2, "v", 5)(ru, coll), setField(6, "v", 5)(ru, coll))
	})
	getMore := func(id int64, want int32) <-chan error {
		return async(func() error {
			raw, err := db.RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "prep"}, {Key: "batchSize", Value: 100}}).Raw()
			if err != nil {
				return err
			}
			docs, _ := raw.Lookup("cursor", "nextBatch").Array().Values()
			if len(docs) != 8 {
				return errors.New("getMore lost documents: " + raw.String())
			}
			for _, d := range docs {
				if id, _ := d.Document().Lookup("_id").Int32OK(); id == 6 {
					if v, _ := d.Document().Lookup("v").Int32OK(); v != want {
						return errors.New("getMore read the wrong version: " + raw.String())
					}
				}
			}
			return nil
		})
	}
	if err := waitDone(t, getMore(localID, 0), "local getMore"); err != nil {
		t.Fatal(err)
	}
	causal := getMore(causalID, 5)
	stillBlocked(t, causal, "afterClusterTime getMore")
	p.commitAt(0)
	if err := waitDone(t, causal, "afterClusterTime getMore"); err != nil {
		t.Fatal(err)
	}
}
