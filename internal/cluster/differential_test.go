package cluster

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestDifferentialSharded is issue 12's differential acceptance: the same seeded workload
// (differential_gen_test.go) against a 2-shard cluster through humongos and against a
// standalone gives the same answer at every step, on a collection sharded on a hashed key
// and on one sharded on a ranged compound key split into several chunks on both shards. DIFF_OPS sets the
// operations per collection (default 2,500: 5,000 per run), HUMONGO_SEED the seed.
func TestDifferentialSharded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster and a standalone")
	}
	seed := envSeed(t)
	ops := envCount(t, "DIFF_OPS", 2500)
	// No orphan cleanup delay: the hashed collection's chunks move back and forth.
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{Args: []string{"--setParameter", "orphanCleanupDelaySecs=0"}})
	_, ref := StartStandalone(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) {
		t.Helper()
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	run(bson.D{{Key: "enableSharding", Value: "diff"}})
	run(bson.D{{Key: "shardCollection", Value: "diff.hashed"}, {Key: "key", Value: bson.D{{Key: "_id", Value: "hashed"}}}})
	// The ranged collection spreads over both shards through zones defined before sharding it
	// (g < 5 on shard0, the rest on shard1), then manual splits inside each zone.
	bound := func(g any) bson.D { return bson.D{{Key: "g", Value: g}, {Key: "_id", Value: bson.MinKey{}}} }
	run(bson.D{{Key: "addShardToZone", Value: d.Shards[0].Topology.Name}, {Key: "zone", Value: "lo"}})
	run(bson.D{{Key: "addShardToZone", Value: d.Shards[1].Topology.Name}, {Key: "zone", Value: "hi"}})
	run(bson.D{{Key: "updateZoneKeyRange", Value: "diff.ranged"}, {Key: "min", Value: bound(bson.MinKey{})}, {Key: "max", Value: bound(5)}, {Key: "zone", Value: "lo"}})
	run(bson.D{{Key: "updateZoneKeyRange", Value: "diff.ranged"}, {Key: "min", Value: bound(5)}, {Key: "max", Value: bson.D{{Key: "g", Value: bson.MaxKey{}}, {Key: "_id", Value: bson.MaxKey{}}}}, {Key: "zone", Value: "hi"}})
	run(bson.D{{Key: "shardCollection", Value: "diff.ranged"}, {Key: "key", Value: bson.D{{Key: "g", Value: 1}, {Key: "_id", Value: 1}}}})
	for _, g := range []int{3, 7} {
		run(bson.D{{Key: "split", Value: "diff.ranged"}, {Key: "middle", Value: bson.D{{Key: "g", Value: g}, {Key: "_id", Value: bson.MinKey{}}}}})
	}
	// Between operations of the hashed collection's run, every 150th, a chunk moves to the
	// other shard (the ranged collection's chunks stay in their zones): results must not
	// change.
	moves := 0
	migrate := func(i int) {
		if i == 0 || i%150 != 0 {
			return
		}
		var c struct {
			UUID bson.Binary `bson:"uuid"`
		}
		if err := d.Client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: "diff.hashed"}}).Decode(&c); err != nil {
			t.Fatal(err)
		}
		cur, err := d.Client.Database("config").Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: c.UUID}},
			options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var chunks []struct {
			Min, Max bson.Raw
			Shard    string
		}
		if err := cur.All(ctx, &chunks); err != nil {
			t.Fatal(err)
		}
		ch := chunks[(i/150)%len(chunks)]
		to := d.Shards[0].Topology.Name
		if ch.Shard == to {
			to = d.Shards[1].Topology.Name
		}
		run(bson.D{{Key: "moveChunk", Value: "diff.hashed"}, {Key: "bounds", Value: bson.A{ch.Min, ch.Max}}, {Key: "to", Value: to}})
		// The router and both shards refresh now rather than learn of the move from a
		// StaleConfig: a multi write stale on one shard is sent to every shard again, as in
		// MongoDB, and applies twice where it had succeeded (an $inc, an $add), which a
		// standalone never does. The stale path is TestShardedMigration's.
		run(bson.D{{Key: "flushRouterConfig", Value: "diff.hashed"}})
		for _, s := range d.Shards { // and the shards know the new placement too
			if err := s.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "_flushRoutingTableCacheUpdates", Value: "diff.hashed"}}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		moves++
	}
	for i, name := range []string{"hashed", "ranged"} {
		start := time.Now()
		between := migrate
		if name != "hashed" {
			between = nil
		}
		t.Run(name, func(t *testing.T) {
			runDifferential(t, ctx, seed+uint64(i), ops, ref.Database("diff").Collection(name), d.Client.Database("diff").Collection(name), between)
		})
		t.Logf("%s: %d operations in %v", name, ops, time.Since(start))
	}
	t.Logf("%d chunk migrations during the hashed run", moves)
	// Both collections' documents really are on both shards.
	for _, name := range []string{"hashed", "ranged"} {
		for i, s := range d.Shards {
			n, err := s.Client.Database("diff").Collection(name).CountDocuments(ctx, bson.D{})
			if err != nil || n == 0 {
				t.Errorf("shard %d holds %d documents of diff.%s (%v)", i, n, name, err)
			}
		}
	}
}
