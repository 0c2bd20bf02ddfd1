package cluster

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestShardedMigrationCursor (issue 13 acceptance; spec: sharding.md "Orphaned range
// deletion", the RangePreserver): a cursor opened through the router before a chunk moves
// returns every document it would have returned without the move, because the donor's range
// deleter waits for the queries that still use the old ownership before it deletes the
// range, even with no orphan cleanup delay. Once the cursor is done, the orphans go.
func TestShardedMigrationCursor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{Args: []string{"--setParameter", "orphanCleanupDelaySecs=0"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := clusterCmds{t: t, ctx: ctx, admin: d.Client.Database("admin")}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name
	c.run(bson.D{{Key: "enableSharding", Value: "cur"}, {Key: "primaryShard", Value: s0}})
	c.run(bson.D{{Key: "shardCollection", Value: "cur.c"}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}})
	coll := d.Client.Database("cur").Collection("c")
	const n = 40
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2).SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	seen := 0
	for range 2 { // the first batch only: the shard's cursor stays open
		if !cur.Next(ctx) {
			t.Fatalf("cursor ended early: %v", cur.Err())
		}
		seen++
	}
	c.run(bson.D{{Key: "moveChunk", Value: "cur.c"}, {Key: "find", Value: bson.D{{Key: "_id", Value: 0}}}, {Key: "to", Value: s1}})
	// The donor's range deletion task stays while the cursor is open.
	tasks := d.Shards[0].Client.Database("config").Collection("rangeDeletions")
	time.Sleep(2 * time.Second)
	if k, err := tasks.CountDocuments(ctx, bson.D{{Key: "nss", Value: "cur.c"}}); err != nil || k != 1 {
		t.Fatalf("the donor's range deletion task with a cursor open: %d (%v)", k, err)
	}
	for cur.Next(ctx) {
		seen++
	}
	if err := cur.Err(); err != nil || seen != n {
		t.Fatalf("the cursor opened before the move returned %d documents of %d (%v)", seen, n, err)
	}
	_ = cur.Close(ctx)
	// Then the deleter runs: no task and no orphans left on the donor.
	for {
		k, err := tasks.CountDocuments(ctx, bson.D{{Key: "nss", Value: "cur.c"}})
		if err != nil {
			t.Fatal(err)
		}
		left, err := d.Shards[0].Client.Database("cur").Collection("c").CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 && left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after the cursor closed: %d tasks and %d orphans remain on %s", k, left, s0)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if k, err := coll.CountDocuments(ctx, bson.D{}); err != nil || k != n {
		t.Fatalf("count after the move: %d (%v)", k, err)
	}
}
