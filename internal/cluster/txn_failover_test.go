package cluster

// A committed transaction stays committed across a failover, and the driver's retry of its
// commit on the new primary succeeds (issue 11: commitTransaction is retryable; the new
// primary learns the outcome from its replicated config.transactions record). A transaction
// in progress when its primary dies is gone on the new primary: its next statement fails
// with a label that makes withTransaction start it again.

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

func TestTxnCommitSurvivesFailover(t *testing.T) {
	d := Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 3}, Options{ReplSetSettings: ShortElections})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	coll := d.Client.Database("fo").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}, bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: 0}}}); err != nil {
		t.Fatal(err)
	}
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
	topts := options.Transaction().SetWriteConcern(writeconcern.Majority())

	committed, err := d.Client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer committed.EndSession(context.Background())
	sc := mongo.NewSessionContext(ctx, committed)
	if err := committed.StartTransaction(topts); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(sc, bson.D{{Key: "_id", Value: 1}}, inc); err != nil {
		t.Fatal(err)
	}
	if err := committed.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}

	open, err := d.Client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer open.EndSession(context.Background())
	oc := mongo.NewSessionContext(ctx, open)
	if err := open.StartTransaction(topts); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(oc, bson.D{{Key: "_id", Value: 2}}, inc); err != nil {
		t.Fatal(err)
	}

	f, err := d.FailPrimary(ctx, FaultKill, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The retried commit reaches the new primary, which knows the transaction committed.
	if err := committed.CommitTransaction(ctx); err != nil {
		t.Fatalf("commit retried after failover: %v", err)
	}
	// The open transaction died with its primary.
	_, err = coll.UpdateOne(oc, bson.D{{Key: "_id", Value: 2}}, inc)
	var le mongo.LabeledError
	if err == nil || !errors.As(err, &le) || !le.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("statement of a transaction whose primary died: want TransientTransactionError, got %v", err)
	}
	_ = open.AbortTransaction(ctx)
	if err := d.Heal(ctx, f, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	var doc struct{ N int }
	for id, want := range map[int]int{1: 1, 2: 0} {
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc); err != nil || doc.N != want {
			t.Fatalf("_id %d after failover: n=%d (%v), want %d", id, doc.N, err, want)
		}
	}
}
