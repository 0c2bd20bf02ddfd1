package coord_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/optime"
)

// TestPrimaryLastAppliedIsAnEntry: commits that log no oplog entry (a write to an
// unreplicated local collection, a read-only transaction's commit) move the primary's
// all-durable timestamp past its newest entry; the primary's lastApplied must stay at that
// entry, or it names an optime no secondary can ever fetch and the members never "catch up"
// to the primary until its next write (the list-append test's one-entry stall).
func TestPrimaryLastAppliedIsAnEntry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := startSet(t, ctx, bson.D{{Key: "electionTimeoutMillis", Value: 2000}, {Key: "heartbeatIntervalMillis", Value: 200}})

	check := func(what string) {
		t.Helper()
		top := oplogTail(t, ctx, a, 1)[0]["ts"].(bson.Timestamp)
		applied := a.rc.LastApplied()
		if want := optime.MakeTimestamp(top.T, top.I); applied.TS != want {
			t.Fatalf("after %s the primary's lastApplied is %v, its newest oplog entry %v", what, applied, want)
		}
		// The secondary gets there (it was never stuck: there is nothing more to fetch).
		waitFor(t, 10*time.Second, "the secondary to reach the primary's lastApplied after "+what, func() bool {
			return !b.rc.LastApplied().Less(applied)
		})
	}

	if _, err := a.client.Database("local").Collection("scratch").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert into local: %v", err)
	}
	check("a write to local")

	sess, err := a.client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if _, err := sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		return nil, a.client.Database("test").Collection("c").FindOne(sc, bson.D{{Key: "_id", Value: 0}}).Err()
	}); err != nil && err != mongo.ErrNoDocuments {
		t.Fatalf("read-only transaction: %v", err)
	}
	check("a read-only transaction")
}
