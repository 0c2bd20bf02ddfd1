package migration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

func key(v int32) bsoncore.Document { return bsoncore.NewDocumentBuilder().AppendInt32("k", v).Build() }

func req(to string, min int32) MoveRangeRequest {
	return MoveRangeRequest{NS: "db.c", ToShard: to, FromShard: "s0", Min: key(min), Max: key(min + 10),
		Epoch: bson.NewObjectID(), ForceJumbo: DoNotForce}
}

func TestRegistryDonateJoinConflict(t *testing.T) {
	var r Registry
	a := req("s1", 0)
	first, err := r.RegisterDonate(bg, a)
	if err != nil || !first.ShouldExecute() {
		t.Fatalf("first donation: %v %v", first, err)
	}
	// The identical request joins and gets the first one's outcome.
	joined, err := r.RegisterDonate(bg, a)
	if err != nil || joined.ShouldExecute() {
		t.Fatalf("identical donation must join: %v %v", joined, err)
	}
	// A different one fails with MongoDB's message.
	_, err = r.RegisterDonate(bg, req("s2", 0))
	if !mongoerr.Is(err, mongoerr.ConflictingOperationInProgress) ||
		!strings.Contains(err.Error(), "Unable to start new balancer operation because this shard is currently donating range 'min: { k: 0 } - max: { k: 10 }' for namespace db.c to shard s1") {
		t.Fatalf("different donation: %v", err)
	}
	// No receive while donating.
	if _, err := r.RegisterReceive("db.d", "[{ k: 1 }, { k: 2 })", "s3"); !mongoerr.Is(err, mongoerr.ConflictingOperationInProgress) {
		t.Fatalf("receive while donating: %v", err)
	}
	outcome := errors.New("boom")
	first.Complete(outcome)
	if err := joined.Wait(context.Background()); err != outcome {
		t.Fatalf("joined caller got %v, want the first one's outcome", err)
	}
	// Free again.
	next, err := r.RegisterDonate(bg, req("s2", 0))
	if err != nil || !next.ShouldExecute() {
		t.Fatalf("after completion: %v", err)
	}
	next.Complete(nil)
}

func TestRegistryReceiveBlocksDonate(t *testing.T) {
	var r Registry
	release, err := r.RegisterReceive("db.c", "[{ k: 1 }, { k: 2 })", "s3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RegisterReceive("db.c", "[{ k: 5 }, { k: 6 })", "s3"); err == nil ||
		!strings.Contains(err.Error(), "currently receiving chunk [{ k: 1 }, { k: 2 }) for namespace db.c from s3") {
		t.Fatalf("second receive: %v", err)
	}
	if _, err := r.RegisterDonate(bg, req("s1", 0)); !mongoerr.Is(err, mongoerr.ConflictingOperationInProgress) {
		t.Fatalf("donate while receiving: %v", err)
	}
	release()
	d, err := r.RegisterDonate(bg, req("s1", 0))
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	d.Complete(nil)
}

func TestWaitInterrupted(t *testing.T) {
	var r Registry
	a := req("s1", 0)
	first, _ := r.RegisterDonate(bg, a)
	joined, err := r.RegisterDonate(bg, a)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := joined.Wait(ctx); !mongoerr.Is(err, mongoerr.Interrupted) {
		t.Fatalf("Wait with a done context: %v", err)
	}
	first.Complete(nil)
}

func TestRegistryLockForRecovery(t *testing.T) {
	var r Registry
	unlock, ok := r.Lock()
	if !ok {
		t.Fatal("Lock of an idle registry failed")
	}
	if _, err := r.RegisterDonate(bg, req("s1", 0)); err == nil || !strings.Contains(err.Error(), "temporarily locked") {
		t.Fatalf("donate while locked: %v", err)
	}
	if _, err := r.RegisterReceive("db.c", "[..)", "s1"); err == nil || !strings.Contains(err.Error(), "temporarily locked") {
		t.Fatalf("receive while locked: %v", err)
	}
	unlock()
	d, err := r.RegisterDonate(bg, req("s1", 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lock(); ok {
		t.Fatal("Lock while a donation runs must fail (the donation recovers first itself)")
	}
	d.Complete(nil)
}

var bg = context.Background()

// A split or merge waits for an outgoing migration of its collection and for another split
// or merge of it; a migration waits for a split or merge of its collection; other
// collections are not held up; a waiter's context ends its wait.
func TestRegistrySplitOrMergeSerializes(t *testing.T) {
	var r Registry
	d, err := r.RegisterDonate(bg, req("s1", 0)) // db.c migrating out
	if err != nil {
		t.Fatal(err)
	}
	other, err := r.RegisterSplitOrMerge(bg, "db.other")
	if err != nil {
		t.Fatalf("a split of another collection: %v", err)
	}
	other()
	short, cancel := context.WithCancel(bg)
	cancel()
	if _, err := r.RegisterSplitOrMerge(short, "db.c"); !mongoerr.Is(err, mongoerr.Interrupted) {
		t.Fatalf("a split while db.c migrates, with a done context: %v", err)
	}
	got := make(chan func(), 1)
	go func() {
		release, err := r.RegisterSplitOrMerge(bg, "db.c")
		if err != nil {
			t.Error(err)
		}
		got <- release
	}()
	select {
	case <-got:
		t.Fatal("a split of db.c ran beside its migration")
	case <-time.After(20 * time.Millisecond):
	}
	d.Complete(nil)
	release := <-got // the migration's end lets the split go

	// Now the split holds db.c: a migration of db.c and a second split wait for it.
	donated := make(chan error, 1)
	go func() {
		d, err := r.RegisterDonate(bg, req("s1", 0))
		if err == nil {
			d.Complete(nil)
		}
		donated <- err
	}()
	if _, err := r.RegisterSplitOrMerge(short, "db.c"); !mongoerr.Is(err, mongoerr.Interrupted) {
		t.Fatalf("a second split of db.c, with a done context: %v", err)
	}
	select {
	case err := <-donated:
		t.Fatalf("a migration of db.c ran beside its split: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-donated; err != nil {
		t.Fatalf("the migration after the split: %v", err)
	}
}
