package commands_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestAwaitDataStandaloneCapped: on a standalone, a tailable awaitData cursor on a capped
// collection returns the documents that exist at once, documents inserted between getMores
// at the next getMore, and a document inserted while a getMore waits as soon as it is
// committed (the capped-insert notifier), not when maxAwaitTimeMS (10 s) runs out.
func TestAwaitDataStandaloneCapped(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := ts.cl.Database("app")
	if err := db.RunCommand(ctx, bson.D{{Key: "create", Value: "capped"}, {Key: "capped", Value: true},
		{Key: "size", Value: 1 << 20}}).Err(); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("capped")
	for i := range 3 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	stats := ts.srv.State().Cursors().AwaitStats()
	const await = 10 * time.Second
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetCursorType(options.TailableAwait).
		SetMaxAwaitTime(await).SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	next := func(want int32) time.Duration {
		t.Helper()
		t0 := time.Now()
		if !cur.Next(ctx) {
			t.Fatalf("Next: %v", cur.Err())
		}
		took := time.Since(t0)
		if got := cur.Current.Lookup("_id").Int32(); got != want {
			t.Fatalf("got _id %d, want %d", got, want)
		}
		return took
	}
	// The first batch has 0 and 1; the getMore for 2 must not wait (the document exists).
	for i := range int32(3) {
		if took := next(i); took >= await/2 {
			t.Fatalf("existing document %d took %v: the getMore waited instead of reading", i, took)
		}
	}
	// Inserted before the getMore is sent: found by its first read.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatal(err)
	}
	if took := next(3); took >= await/2 {
		t.Fatalf("document inserted before getMore took %v", took)
	}
	// Inserted while the getMore waits: it must be woken.
	notified0, expired0 := stats.Notified.Load(), stats.Expired.Load()
	inserted := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: 4}})
		inserted <- err
	}()
	took := next(4)
	// The getMore can see the document before the insert's reply reaches the inserter: wait
	// for it before the test (and its client) ends.
	if err := <-inserted; err != nil {
		t.Fatal(err)
	}
	t.Logf("woken after %v (notified %d, expired %d)", took, stats.Notified.Load()-notified0, stats.Expired.Load()-expired0)
	if took >= await/2 {
		t.Fatalf("document inserted during the wait took %v (maxAwaitTimeMS %v): not woken", took, await)
	}
	if stats.Notified.Load() == notified0 {
		t.Errorf("the waiting getMore was not woken by a notification")
	}
}
