package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// A donor killed (kill -9) in the middle of a migration: before the config server's commit
// (in the critical section) the migration resolves to the donor, after it to the recipient;
// either way the restarted donor's step-up recovery finishes the coordinator (its document
// goes, the range deletion task of the shard left with orphans is ready, the other one's
// gone), and every document is readable once through the router.
func TestShardedMigrationDonorKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{Args: []string{"--setParameter", "enableTestCommands=1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) {
		t.Helper()
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name
	run(bson.D{{Key: "enableSharding", Value: "kill"}, {Key: "primaryShard", Value: s0}})
	for _, c := range []struct {
		coll, failPoint string
		committed       bool
	}{
		{"before", "moveChunkHangAtStep5", false},
		{"after", "hangBeforePostMigrationCommitRefresh", true},
	} {
		t.Run(c.coll, func(t *testing.T) {
			ns := "kill." + c.coll
			run(bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
			coll := d.Client.Database("kill").Collection(c.coll)
			const n = 500
			docs := make([]any, n)
			for i := range docs {
				docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}}
			}
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				t.Fatal(err)
			}
			// The chunk as the migration finds it, for the late commit below.
			var pre struct {
				UUID  bson.Binary    `bson:"uuid"`
				Epoch bson.ObjectID  `bson:"lastmodEpoch"`
				Stamp bson.Timestamp `bson:"timestamp"`
			}
			var preChunk struct {
				Lastmod bson.Timestamp `bson:"lastmod"`
			}
			if err := d.Config.Client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Decode(&pre); err != nil {
				t.Fatal(err)
			}
			if err := d.Config.Client.Database("config").Collection("chunks").FindOne(ctx, bson.D{{Key: "uuid", Value: pre.UUID}}).Decode(&preChunk); err != nil {
				t.Fatal(err)
			}
			donor := d.Shards[0].Nodes[0]
			direct := d.Shards[0].Client.Database("admin")
			if err := direct.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: c.failPoint}, {Key: "mode", Value: "alwaysOn"}}).Err(); err != nil {
				t.Fatal(err)
			}
			moved := make(chan error, 1)
			go func() {
				moved <- admin.RunCommand(ctx, bson.D{{Key: "moveChunk", Value: ns}, {Key: "find", Value: bson.D{{Key: "k", Value: 1}}},
					{Key: "to", Value: s1}}).Err()
			}()
			// Wait for the fail point, then kill the donor there.
			deadline := time.Now().Add(time.Minute)
			for {
				var res bson.Raw
				res, err := direct.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: c.failPoint}, {Key: "mode", Value: "alwaysOn"}}).Raw()
				if err != nil {
					t.Fatal(err)
				}
				if cnt, _ := res.Lookup("count").AsInt64OK(); cnt > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the migration never reached the fail point")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !c.committed {
				// While the donor is busy, another migration from it is refused (117).
				err := admin.RunCommand(ctx, bson.D{{Key: "moveRange", Value: ns}, {Key: "toShard", Value: s1},
					{Key: "min", Value: bson.D{{Key: "k", Value: 200}}}}).Err()
				var ce mongo.CommandError
				if !errors.As(err, &ce) || ce.Code != 117 ||
					!strings.Contains(ce.Message, "Unable to start new balancer operation because this shard is currently donating range 'min: { k: MinKey } - max: { k: MaxKey }' for namespace "+ns+" to shard "+s1) {
					t.Fatalf("a second migration while one runs: %v", err)
				}
			}
			if err := donor.Kill(); err != nil {
				t.Fatal(err)
			}
			<-moved // the router's moveChunk fails with the donor gone
			if err := donor.Start(ctx); err != nil {
				t.Fatal(err)
			}
			// The step-up recovery finishes the coordinator.
			for deadline := time.Now().Add(time.Minute); ; {
				n, err := d.Shards[0].Client.Database("config").Collection("migrationCoordinators").CountDocuments(ctx, bson.D{})
				if err == nil && n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("migrationCoordinators not drained: %d (%v)", n, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			var chunk struct {
				Shard string `bson:"shard"`
			}
			var collDoc struct {
				UUID bson.Binary `bson:"uuid"`
			}
			if err := d.Config.Client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Decode(&collDoc); err != nil {
				t.Fatal(err)
			}
			if err := d.Config.Client.Database("config").Collection("chunks").FindOne(ctx, bson.D{{Key: "uuid", Value: collDoc.UUID}}).Decode(&chunk); err != nil {
				t.Fatal(err)
			}
			owner, orphans, clean := s0, s1, s0
			if c.committed {
				owner, orphans, clean = s1, s0, s1
			}
			if chunk.Shard != owner {
				t.Fatalf("the chunk is on %s, want %s", chunk.Shard, owner)
			}
			if !c.committed {
				// The recovery fenced the migration's commit off before deciding: the chunk
				// has a new major version, and the commit the dead donor might still have
				// had on its way fails now instead of moving the chunk after the decision.
				var now struct {
					Lastmod bson.Timestamp `bson:"lastmod"`
				}
				if err := d.Config.Client.Database("config").Collection("chunks").FindOne(ctx, bson.D{{Key: "uuid", Value: collDoc.UUID}}).Decode(&now); err != nil {
					t.Fatal(err)
				}
				if now.Lastmod.T <= preChunk.Lastmod.T {
					t.Fatalf("the chunk's version after the recovery: %v, want a major version above %v", now.Lastmod, preChunk.Lastmod)
				}
				err := d.Config.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "_configsvrCommitChunkMigration", Value: ns},
					{Key: "fromShard", Value: s0}, {Key: "toShard", Value: s1},
					{Key: "migratedChunk", Value: bson.D{{Key: "min", Value: bson.D{{Key: "k", Value: bson.MinKey{}}}},
						{Key: "max", Value: bson.D{{Key: "k", Value: bson.MaxKey{}}}}, {Key: "lastmod", Value: preChunk.Lastmod}}},
					{Key: "fromShardCollectionVersion", Value: bson.D{{Key: "e", Value: pre.Epoch}, {Key: "t", Value: pre.Stamp}, {Key: "v", Value: preChunk.Lastmod}}},
					{Key: "validAfter", Value: bson.Timestamp{T: uint32(time.Now().Unix())}},
					{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}}).Err()
				var ce mongo.CommandError
				if !errors.As(err, &ce) || ce.Code != 117 {
					t.Fatalf("a late commit of the aborted migration: %v", err)
				}
				if err := d.Config.Client.Database("config").Collection("chunks").FindOne(ctx, bson.D{{Key: "uuid", Value: collDoc.UUID}}).Decode(&chunk); err != nil || chunk.Shard != owner {
					t.Fatalf("after the late commit the chunk is on %s (%v), want %s", chunk.Shard, err, owner)
				}
			}
			shard := map[string]*mongo.Client{s0: d.Shards[0].Client, s1: d.Shards[1].Client}
			tasks := func(s string) []bson.Raw {
				cur, err := shard[s].Database("config").Collection("rangeDeletions").Find(ctx, bson.D{{Key: "nss", Value: ns}})
				if err != nil {
					t.Fatal(err)
				}
				var all []bson.Raw
				if err := cur.All(ctx, &all); err != nil {
					t.Fatal(err)
				}
				return all
			}
			if got := tasks(clean); len(got) != 0 {
				t.Errorf("%s (the owner) keeps range deletion tasks: %v", clean, got)
			}
			got := tasks(orphans)
			if c.committed {
				// The donor's task waits orphanCleanupDelaySecs (900 s here): it stays, ready.
				if len(got) != 1 || got[0].Lookup("pending").Type != 0 {
					t.Errorf("%s (left with orphans) must have one ready task: %v", orphans, got)
				}
			} else {
				// The recipient's task is whenToClean "now": once recovery marks it ready its
				// range deleter may already have run, so it is ready or gone, and soon gone
				// with the orphans it stood for.
				if len(got) > 1 || len(got) == 1 && got[0].Lookup("pending").Type != 0 {
					t.Errorf("%s (left with orphans) must have at most one ready task: %v", orphans, got)
				}
				direct := shard[orphans].Database("kill").Collection(c.coll)
				for deadline := time.Now().Add(time.Minute); ; {
					left, err := direct.CountDocuments(ctx, bson.D{})
					if err == nil && left == 0 && len(tasks(orphans)) == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s keeps %d orphans (%v), tasks %v", orphans, left, err, tasks(orphans))
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			// Every document once through the router.
			for deadline := time.Now().Add(30 * time.Second); ; {
				cnt, err := coll.CountDocuments(ctx, bson.D{})
				if err == nil && cnt == n {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("count %d (%v), want %d", cnt, err, n)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
