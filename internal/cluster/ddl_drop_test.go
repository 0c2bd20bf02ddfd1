package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Issue 14's resumable drop: the database primary shard's drop coordinator is killed (kill
// -9) at each of its steps; the restarted primary resumes it from its state document, the
// router's retried drop joins or finds it done, and afterwards no shard has the collection,
// the config server has no entry or chunk of it, the coordinator's document is gone, and the
// namespace works again as a new collection.
func TestShardedDropCoordinatorKilled(t *testing.T) {
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
	run(bson.D{{Key: "enableSharding", Value: "ddl"}, {Key: "primaryShard", Value: s0}})
	for _, failPoint := range []string{"hangDropCollectionBeforeDrop", "hangDropCollectionAfterConfigRemoval"} {
		t.Run(failPoint, func(t *testing.T) {
			ns := "ddl." + failPoint
			coll := d.Client.Database("ddl").Collection(failPoint)
			run(bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
			docs := make([]any, 200)
			for i := range docs {
				docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}}
			}
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				t.Fatal(err)
			}
			run(bson.D{{Key: "split", Value: ns}, {Key: "middle", Value: bson.D{{Key: "k", Value: 100}}}})
			run(bson.D{{Key: "moveChunk", Value: ns}, {Key: "find", Value: bson.D{{Key: "k", Value: 150}}}, {Key: "to", Value: s1}})
			var entry struct {
				UUID bson.Binary `bson:"uuid"`
			}
			if err := d.Config.Client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Decode(&entry); err != nil {
				t.Fatal(err)
			}

			primary := d.Shards[0].Nodes[0]
			direct := d.Shards[0].Client.Database("admin")
			if err := direct.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: failPoint}, {Key: "mode", Value: "alwaysOn"}}).Err(); err != nil {
				t.Fatal(err)
			}
			dropped := make(chan error, 1)
			go func() { dropped <- coll.Drop(ctx) }()
			for deadline := time.Now().Add(time.Minute); ; {
				res, err := direct.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: failPoint}, {Key: "mode", Value: "alwaysOn"}}).Raw()
				if err != nil {
					t.Fatal(err)
				}
				if cnt, _ := res.Lookup("count").AsInt64OK(); cnt > 0 {
					break
				}
				select {
				case err := <-dropped:
					t.Fatalf("the drop ended before its fail point: %v", err)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("the drop never reached the fail point")
				}
				time.Sleep(50 * time.Millisecond)
			}
			var state bson.M
			if err := d.Shards[0].Client.Database("config").Collection("system.sharding_ddl_coordinators").FindOne(ctx, bson.D{}).Decode(&state); err != nil {
				t.Fatalf("the coordinator's state document: %v", err)
			}
			if state["phase"] != "dropCollection" {
				t.Fatalf("state document %v, want phase dropCollection", state)
			}
			if err := primary.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := primary.Start(ctx); err != nil {
				t.Fatal(err)
			}
			// The fail point is off in the new process: the step-up resumes the drop, which
			// ends without any client asking (the router's own attempt may have given up
			// while the shard had no primary: an application retries the drop then).
			first := <-dropped
			for deadline := time.Now().Add(time.Minute); ; {
				n, err := d.Shards[0].Client.Database("config").Collection("system.sharding_ddl_coordinators").CountDocuments(ctx, bson.D{})
				if err == nil && n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the coordinator's document stays: %d (%v)", n, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if first != nil {
				t.Logf("the drop through the router during the failover: %v", first)
				if err := coll.Drop(ctx); err != nil {
					t.Fatalf("the drop retried after the failover: %v", err)
				}
			}
			if err := dropCheck(ctx, d, ns, failPoint, entry.UUID); err != nil {
				t.Fatal(err)
			}
			// The namespace is free: a new, unsharded collection.
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "new"}}); err != nil {
				t.Fatal(err)
			}
			if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
				t.Fatalf("the re-created collection counts %d (%v), want 1", n, err)
			}
		})
	}
}

// dropCheck: no shard primary lists the collection, the config server has no entry or chunk
// of the dropped incarnation, no shard keeps a range deletion task of it.
func dropCheck(ctx context.Context, d *Deployment, ns, coll string, uuid bson.Binary) error {
	cfg := d.Config.Client.Database("config")
	if n, err := cfg.Collection("collections").CountDocuments(ctx, bson.D{{Key: "_id", Value: ns}}); err != nil || n != 0 {
		return fmt.Errorf("config.collections still has %s: %d (%v)", ns, n, err)
	}
	if n, err := cfg.Collection("chunks").CountDocuments(ctx, bson.D{{Key: "uuid", Value: uuid}}); err != nil || n != 0 {
		return fmt.Errorf("config.chunks still has %d chunks of the dropped %s (%v)", n, ns, err)
	}
	for _, sh := range d.Shards {
		names, err := sh.Client.Database("ddl").ListCollectionNames(ctx, bson.D{{Key: "name", Value: coll}})
		if err != nil || len(names) != 0 {
			return fmt.Errorf("%s still lists %s: %v (%v)", sh.Topology.Name, ns, names, err)
		}
		if n, err := sh.Client.Database("config").Collection("rangeDeletions").CountDocuments(ctx, bson.D{{Key: "collectionUuid", Value: uuid}}); err != nil || n != 0 {
			return fmt.Errorf("%s keeps %d range deletion tasks of the dropped %s (%v)", sh.Topology.Name, n, ns, err)
		}
	}
	return nil
}
