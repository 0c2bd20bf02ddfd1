package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// movePrimary through its resumable coordinator (issue 14): a database with two unsharded
// collections and a sharded one moves from shard0 to shard1; then the same with shard0's
// primary killed (kill -9) after the clone before the commit, and after the commit before
// the donor drops its copies. Each time the restarted donor resumes the coordinator: the
// database ends up on shard1 with every document exactly once, shard0 keeps only the
// sharded collection, and the coordinator's document is gone.
func TestShardedMovePrimaryCoordinator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{Args: []string{"--setParameter", "enableTestCommands=1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := clusterCmds{t: t, ctx: ctx, admin: d.Client.Database("admin")}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name
	sizes := map[string]int{"u1": 120, "u2": 30, "s": 10}

	setup := func(t *testing.T, db string) int32 {
		t.Helper()
		c.run(bson.D{{Key: "enableSharding", Value: db}, {Key: "primaryShard", Value: s0}})
		c.run(bson.D{{Key: "shardCollection", Value: db + ".s"}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}})
		for coll, n := range sizes {
			docs := make([]any, n)
			for i := range docs {
				docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "coll", Value: coll}}
			}
			if _, err := d.Client.Database(db).Collection(coll).InsertMany(ctx, docs); err != nil {
				t.Fatal(err)
			}
		}
		_, lastMod := databaseEntry(t, ctx, d, db)
		return lastMod
	}
	move := func(db string) func() error {
		return func() error {
			return d.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "movePrimary", Value: db}, {Key: "to", Value: s1}}).Err()
		}
	}
	check := func(t *testing.T, db string, lastMod int32) {
		t.Helper()
		if primary, lm := databaseEntry(t, ctx, d, db); primary != s1 || lm != lastMod+1 {
			t.Fatalf("config.databases %s: primary %s lastMod %d, want %s and %d", db, primary, lm, s1, lastMod+1)
		}
		for _, coll := range []string{"u1", "u2"} {
			// Every document once on the recipient: each _id 0..n-1, none twice.
			ids := d.Shards[1].Client.Database(db).Collection(coll).Distinct(ctx, "_id", bson.D{})
			n, err := d.Shards[1].Client.Database(db).Collection(coll).CountDocuments(ctx, bson.D{})
			if err != nil || int(n) != sizes[coll] || ids.Err() != nil {
				t.Fatalf("%s.%s on %s: %d documents (%v), want %d", db, coll, s1, n, err, sizes[coll])
			}
			var got []int32
			if err := ids.Decode(&got); err != nil || len(got) != sizes[coll] {
				t.Fatalf("%s.%s on %s: distinct _ids %v (%v)", db, coll, s1, got, err)
			}
			// And through the router, which now routes to the recipient.
			if n, err := d.Client.Database(db).Collection(coll).CountDocuments(ctx, bson.D{}); err != nil || int(n) != sizes[coll] {
				t.Fatalf("%s.%s through the router: %d (%v), want %d", db, coll, n, err, sizes[coll])
			}
		}
		if got := collectionNamesOn(t, ctx, d.Shards[0], db); !slices.Equal(got, []string{"s"}) {
			t.Fatalf("%s keeps %v of %s, want only the sharded collection", s0, got, db)
		}
		if got := collectionNamesOn(t, ctx, d.Shards[1], db); !slices.Equal(got, []string{"s", "u1", "u2"}) {
			t.Fatalf("%s holds %v of %s", s1, got, db)
		}
		if n, err := d.Client.Database(db).Collection("s").CountDocuments(ctx, bson.D{}); err != nil || int(n) != sizes["s"] {
			t.Fatalf("%s.s through the router: %d (%v)", db, n, err)
		}
		for _, sh := range d.Shards {
			n, err := sh.Client.Database("config").Collection("system.sharding_ddl_coordinators").CountDocuments(ctx, bson.D{})
			if err != nil || n != 0 {
				t.Fatalf("%s: %d coordinator documents left (%v)", sh.Topology.Name, n, err)
			}
		}
		// The database takes writes at its new primary.
		if _, err := d.Client.Database(db).Collection("u1").InsertOne(ctx, bson.D{{Key: "_id", Value: "after"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Client.Database(db).Collection("u1").DeleteOne(ctx, bson.D{{Key: "_id", Value: "after"}}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("move", func(t *testing.T) {
		lastMod := setup(t, "mpc")
		if err := move("mpc")(); err != nil {
			t.Fatal(err)
		}
		check(t, "mpc", lastMod)
		// Again: already there, nothing done.
		if err := move("mpc")(); err != nil {
			t.Fatal(err)
		}
		check(t, "mpc", lastMod)
	})
	for i, fp := range []string{"hangMovePrimaryCoordinatorBeforeCommit", "hangMovePrimaryCoordinatorBeforeDropStaleData"} {
		t.Run("kill/"+fp, func(t *testing.T) {
			db := fmt.Sprintf("mpk%d", i)
			lastMod := setup(t, db)
			if first := killAtFailPoint(ctx, t, d, fp, move(db), nil); first != nil {
				// The router gave up while the donor had no primary: the application retries
				// and finds the move done by the resumed coordinator.
				t.Logf("movePrimary through the router during the failover: %v", first)
				if err := move(db)(); err != nil {
					t.Fatalf("movePrimary retried after the failover: %v", err)
				}
			}
			check(t, db, lastMod)
		})
	}
}
