package operation_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
)

func openDB(t *testing.T) *operation.DB {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestDecorationPerDB: each DB gets its own value, built once, and releases it at Close after
// running the owner's OnClose hooks (newest first).
func TestDecorationPerDB(t *testing.T) {
	builds := 0
	var order []string
	deco := operation.NewDecoration(func(db *operation.DB) *int {
		builds++
		n := builds
		db.OnClose(func() { order = append(order, "deco") })
		return &n
	})
	a, b := openDB(t), openDB(t)
	a.OnClose(func() { order = append(order, "first") })
	if deco.Get(a) != deco.Get(a) {
		t.Fatal("a decoration was built twice on one DB")
	}
	if deco.Get(a) == deco.Get(b) {
		t.Fatal("two DBs share a decoration value")
	}
	if builds != 2 {
		t.Fatalf("built %d values, want 2", builds)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "deco" || order[1] != "first" {
		t.Fatalf("close hooks ran %v, want [deco first]", order)
	}
	if _, ok := deco.Lookup(a); ok {
		t.Fatal("a closed DB still holds its decoration")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestContextFromRequest: an operation takes its read source, session and shard versions
// from the request its context carries, and reports the cause of its interruption.
func TestContextFromRequest(t *testing.T) {
	db := openDB(t)
	defer func() { _ = db.Close() }()
	lsid := bsoncore.NewDocumentBuilder().AppendInt32("id", 1).Build()
	req := &operation.Request{
		ReadSource:   operation.ReadSource{Kind: operation.ReadProvided, TS: optime.Timestamp(7)},
		Session:      operation.Session{LSID: lsid, TxnNumber: 3, HasTxnNumber: true},
		ShardVersion: bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 5)},
	}
	cause := mongoerr.New(mongoerr.MaxTimeMSExpired, "operation exceeded time limit")
	ctx, cancel := context.WithTimeoutCause(operation.WithRequest(context.Background(), req), time.Hour, cause)
	op := db.NewOp(ctx)
	defer op.Close()
	if op.ReadSource != req.ReadSource || op.Session.TxnNumber != 3 || !op.Session.HasTxnNumber ||
		op.ShardVersion.Type != bsoncore.TypeInt32 {
		t.Fatalf("operation did not take the request's fields: %+v", op)
	}
	if err := op.CheckForInterrupt(); err != nil {
		t.Fatalf("CheckForInterrupt before cancel: %v", err)
	}
	cancel()
	if err := op.CheckForInterrupt(); !errors.Is(err, context.Canceled) {
		t.Fatalf("CheckForInterrupt after cancel = %v, want context.Canceled", err)
	}
	expired, cancel2 := context.WithTimeoutCause(context.Background(), time.Nanosecond, cause)
	defer cancel2()
	<-expired.Done()
	op3 := db.NewOp(expired)
	defer op3.Close()
	if err := op3.CheckForInterrupt(); !mongoerr.Is(err, mongoerr.MaxTimeMSExpired) {
		t.Fatalf("CheckForInterrupt past the deadline = %v, want MaxTimeMSExpired", err)
	}
	op2 := db.NewOp(context.Background())
	defer op2.Close()
	if op2.ReadSource != (operation.ReadSource{}) || op2.Session.LSID != nil {
		t.Fatal("an operation without a request has request fields")
	}
}

// TestWriteAndReadCollection: WriteCollection creates the collection implicitly and commits
// f's writes; ReadCollection sees them and returns nil for a missing collection.
func TestWriteAndReadCollection(t *testing.T) {
	db := openDB(t)
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	op := db.NewOp(ctx)
	defer op.Close()
	d := bsoncore.NewDocumentBuilder().AppendInt32("_id", 1).Build()
	if err := op.WriteCollection(ctx, "test.c", true, func(c *index.Collection) error {
		_, err := c.InsertDocument(op.RU, d)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	meta, coll, release, err := op.ReadCollection(ctx, "test.c")
	if err != nil || meta == nil || coll == nil {
		t.Fatalf("ReadCollection(test.c) = %v, %v, %v", meta, coll, err)
	}
	_, _, found, err := coll.FindByID(op.RU, d.Lookup("_id"))
	release()
	if err != nil || !found {
		t.Fatalf("inserted document not found: %v", err)
	}
	meta, coll, release, err = op.ReadCollection(ctx, "test.missing")
	if err != nil || meta != nil || coll != nil {
		t.Fatalf("ReadCollection(missing) = %v, %v, %v", meta, coll, err)
	}
	release()
}
