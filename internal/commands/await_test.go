package commands_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// tailOnce opens a tailable awaitData cursor with find (ns's existing documents are consumed
// by the first batch), then runs one getMore with a 20 s maxTimeMS while write runs; it
// returns the getMore's batch and how long it took.
func tailOnce(t *testing.T, cl *mongo.Client, db, coll string, filter bson.D, write func()) (bson.RawArray, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var fr bson.Raw
	if err := cl.Database(db).RunCommand(ctx, bson.D{{Key: "find", Value: coll}, {Key: "filter", Value: filter},
		{Key: "tailable", Value: true}, {Key: "awaitData", Value: true}}).Decode(&fr); err != nil {
		t.Fatalf("find: %v", err)
	}
	id := fr.Lookup("cursor", "id").Int64()
	if id == 0 {
		t.Fatalf("tailable find returned no cursor: %v", fr)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Give the getMore a moment to start waiting (not needed for correctness: a write
		// landing first is simply found by the getMore's first read).
		time.Sleep(100 * time.Millisecond)
		write()
	}()
	t0 := time.Now()
	var gr bson.Raw
	err := cl.Database(db).RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: coll},
		{Key: "maxTimeMS", Value: 20000}}).Decode(&gr)
	took := time.Since(t0)
	<-done
	if err != nil {
		t.Fatalf("getMore: %v", err)
	}
	return gr.Lookup("cursor", "nextBatch").Array(), took
}

// TestAwaitDataWakesOnWrite: on a replica-set member an awaitData getMore on the oplog, and
// on a capped collection, returns the new entry or document when it is written, not when its
// maxTimeMS runs out (the fetcher's long poll; w:"majority" latency depends on it). The
// structural check is the server's awaitData counters: no wait expired.
func TestAwaitDataWakesOnWrite(t *testing.T) {
	s, cl := rsTestServer(t)
	ctx := context.Background()
	stats := s.State().Cursors().AwaitStats()
	if err := cl.Database("app").RunCommand(ctx, bson.D{{Key: "create", Value: "capped"}, {Key: "capped", Value: true},
		{Key: "size", Value: 1 << 20}}).Err(); err != nil {
		t.Fatal(err)
	}
	var top bson.Raw
	if err := cl.Database("local").RunCommand(ctx, bson.D{{Key: "find", Value: "oplog.rs"}, {Key: "sort", Value: bson.D{{Key: "$natural", Value: -1}}},
		{Key: "limit", Value: 1}, {Key: "singleBatch", Value: true}}).Decode(&top); err != nil {
		t.Fatal(err)
	}
	tt, ti := top.Lookup("cursor", "firstBatch", "0", "ts").Timestamp()
	expired0 := stats.Expired.Load()

	batch, took := tailOnce(t, cl, "local", "oplog.rs", bson.D{{Key: "ts", Value: bson.D{{Key: "$gt", Value: bson.Timestamp{T: tt, I: ti}}}}}, func() {
		if _, err := cl.Database("app").Collection("plain").InsertOne(ctx, bson.D{{Key: "_id", Value: "o1"}}); err != nil {
			t.Error(err)
		}
	})
	vals, _ := batch.Values()
	t.Logf("oplog getMore returned %d entries after %v (awaitData waits notified so far: %d)", len(vals), took, stats.Notified.Load())
	if len(vals) == 0 {
		t.Fatalf("oplog getMore returned an empty batch after %v", took)
	}

	batch, took = tailOnce(t, cl, "app", "capped", bson.D{}, func() {
		if _, err := cl.Database("app").Collection("capped").InsertOne(ctx, bson.D{{Key: "_id", Value: "c1"}}); err != nil {
			t.Error(err)
		}
	})
	vals, _ = batch.Values()
	t.Logf("capped getMore returned %d documents after %v", len(vals), took)
	if len(vals) != 1 {
		t.Fatalf("capped getMore returned %v after %v, want the new document", batch, took)
	}
	if n := stats.Expired.Load() - expired0; n != 0 {
		t.Errorf("%d awaitData getMores waited out their maxTimeMS", n)
	}
}
