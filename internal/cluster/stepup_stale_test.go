package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// A shard primary that steps down, misses a migration its successor commits, and steps up
// again must not take a write for the range it gave away from a router as stale as itself:
// its filtering metadata from the earlier stint is dropped before it takes writes
// (filtering.Runtime.OnStepUp), so the write meets StaleConfig, the router refreshes and
// the write lands on the range's new owner.
func TestShardedSteppedUpPrimaryForgetsMetadata(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster of replica sets")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2, Members: 2, Routers: 2}, Options{ReplSetSettings: ShortElections,
		Args: []string{"--setParameter", "orphanCleanupDelaySecs=0"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fresh, stale := d.RouterClient(t, 0), d.RouterClient(t, 1)
	runAdmin(t, ctx, fresh, bson.D{{Key: "enableSharding", Value: "stale"}, {Key: "primaryShard", Value: "shard0"}})
	runAdmin(t, ctx, fresh, bson.D{{Key: "shardCollection", Value: "stale.c"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
	if _, err := fresh.Database("stale").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	inc := func(cl *mongo.Client) {
		t.Helper()
		res, err := cl.Database("stale").Collection("c").UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
		if err != nil || res.ModifiedCount != 1 {
			t.Fatalf("$inc through a router: %+v %v", res, err)
		}
	}
	inc(stale) // the stale router and shard0's primary learn the collection's versions

	shard0 := d.Shards[0]
	p1, err := shard0.WaitForPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var p2 *Process
	for _, n := range shard0.Nodes {
		if n != p1 {
			p2 = n
		}
	}
	stepUp := func(n *Process) {
		t.Helper()
		for {
			err := shard0.DirectClient(n).Database("admin").RunCommand(ctx, bson.D{{Key: "replSetStepUp", Value: 1}}).Err()
			if p, perr := shard0.Primary(ctx); perr == nil && p == n {
				return
			} else if ctx.Err() != nil {
				t.Fatalf("%s never became primary: %v / %v", n.Name(), err, perr)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	stepUp(p2)
	// The successor moves the chunk away; only the fresh router hears of it.
	runAdmin(t, ctx, fresh, bson.D{{Key: "moveChunk", Value: "stale.c"}, {Key: "find", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "to", Value: "shard1"}})
	// The donor's orphans go at once (orphanCleanupDelaySecs 0): no range deletion task is
	// left for p1's range deleter to refresh the collection for when it steps up.
	waitUntil(t, ctx, "shard0's range deletion to finish", func() (bool, error) {
		n, err := shard0.Client.Database("config").Collection("rangeDeletions").CountDocuments(ctx, bson.D{})
		return n == 0, err
	})
	stepUp(p1)

	inc(stale)
	var doc struct {
		N int `bson:"n"`
	}
	if err := fresh.Database("stale").Collection("c").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil || doc.N != 2 {
		where := ""
		for _, s := range d.Shards {
			var m bson.M
			err := s.Client.Database("stale").Collection("c").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&m)
			where += fmt.Sprintf(" %s: %v (%v);", s.Topology.Name, m, err)
		}
		t.Fatalf("after the stale router's $inc: n %d (%v), want 2 (acknowledged twice); directly:%s", doc.N, err, where)
	}
}
