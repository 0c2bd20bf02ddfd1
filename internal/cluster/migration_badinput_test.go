package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// checkMalformedMigrationCommands sends the internal commands of migration, range deletion
// and balancing malformed arguments, straight to a shard primary and the config primary: each
// answers a MongoDB error (never InternalError, never a dropped connection), and afterwards
// every node still answers, and ns's chunks and documents are as before.
func checkMalformedMigrationCommands(t *testing.T, ctx context.Context, d *Deployment, ns string) {
	t.Helper()
	db, coll, _ := strings.Cut(ns, ".")
	chunksOf := func() []bson.Raw {
		t.Helper()
		var c struct {
			UUID bson.Binary `bson:"uuid"`
		}
		if err := d.Config.Client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Decode(&c); err != nil {
			t.Fatal(err)
		}
		cur, err := d.Config.Client.Database("config").Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: c.UUID}})
		if err != nil {
			t.Fatal(err)
		}
		var all []bson.Raw
		if err := cur.All(ctx, &all); err != nil {
			t.Fatal(err)
		}
		return all
	}
	chunksBefore := fmt.Sprint(chunksOf())
	countBefore, err := d.Client.Database(db).Collection(coll).CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}

	oid := bson.NewObjectID()
	uuid := bson.Binary{Subtype: 4, Data: make([]byte, 16)}
	k := func(v any) bson.D { return bson.D{{Key: "k", Value: v}} }
	bad := []bson.D{
		{{Key: "_shardsvrMoveRange", Value: 1}},
		{{Key: "_shardsvrMoveRange", Value: ns}},
		{{Key: "_shardsvrMoveRange", Value: ns}, {Key: "toShard", Value: 5}, {Key: "min", Value: "x"}},
		{{Key: "_shardsvrMoveRange", Value: ns}, {Key: "toShard", Value: "nope"}, {Key: "min", Value: k(0)}, {Key: "max", Value: k(1)},
			{Key: "fromShard", Value: "nope2"}, {Key: "epoch", Value: oid}, {Key: "collectionTimestamp", Value: bson.Timestamp{T: 1}},
			{Key: "maxChunkSizeBytes", Value: int64(1 << 20)}, {Key: "forceJumbo", Value: 0}, {Key: "secondaryThrottle", Value: false}},
		{{Key: "_shardsvrMoveRange", Value: ns}, {Key: "toShard", Value: "shard1"}, {Key: "min", Value: k(1)}, {Key: "max", Value: k(0)},
			{Key: "fromShard", Value: "shard0"}, {Key: "epoch", Value: oid}, {Key: "maxChunkSizeBytes", Value: int64(-1)}},
		{{Key: "_recvChunkStart", Value: 1}},
		{{Key: "_recvChunkStart", Value: ns}},
		{{Key: "_recvChunkStart", Value: ns}, {Key: "sessionId", Value: 7}, {Key: "from", Value: bson.A{}}, {Key: "min", Value: 3}},
		{{Key: "_recvChunkStart", Value: ns}, {Key: "sessionId", Value: "s"}, {Key: "migrationId", Value: uuid}, {Key: "lsid", Value: bson.D{}},
			{Key: "txnNumber", Value: int64(1)}, {Key: "from", Value: "garbage-connection-string"}, {Key: "fromShardName", Value: "x"},
			{Key: "toShardName", Value: "y"}, {Key: "min", Value: k(0)}, {Key: "max", Value: k(1)}, {Key: "shardKeyPattern", Value: k(1)}},
		{{Key: "_recvChunkCommit", Value: 1}},
		{{Key: "_recvChunkCommit", Value: ns}, {Key: "sessionId", Value: "nobody"}},
		{{Key: "_recvChunkAbort", Value: ns}},
		{{Key: "_recvChunkAbort", Value: ns}, {Key: "sessionId", Value: bson.A{1}}},
		{{Key: "_migrateClone", Value: 1}},
		{{Key: "_migrateClone", Value: 1}, {Key: "sessionId", Value: "nobody"}},
		{{Key: "_transferMods", Value: 1}},
		{{Key: "_transferMods", Value: 1}, {Key: "sessionId", Value: 1.5}},
		{{Key: "_getNextSessionMods", Value: 1}},
		{{Key: "_getNextSessionMods", Value: 1}, {Key: "sessionId", Value: "nobody"}},
		{{Key: "cleanupOrphaned", Value: 1}},
		{{Key: "cleanupOrphaned", Value: "nodot"}},
		{{Key: "cleanupOrphaned", Value: ns}, {Key: "startingFromKey", Value: "x"}},
		{{Key: "splitVector", Value: ns}},
		{{Key: "splitVector", Value: ns}, {Key: "keyPattern", Value: "k"}},
		{{Key: "splitVector", Value: ns}, {Key: "keyPattern", Value: k(1)}, {Key: "min", Value: k(5)}, {Key: "max", Value: k(1)}, {Key: "maxChunkSizeBytes", Value: int64(-5)}},
		{{Key: "splitChunk", Value: ns}},
		{{Key: "splitChunk", Value: ns}, {Key: "from", Value: "shard0"}, {Key: "keyPattern", Value: k(1)}, {Key: "epoch", Value: oid},
			{Key: "min", Value: k(0)}, {Key: "max", Value: k(1)}, {Key: "splitKeys", Value: bson.A{"x"}}},
		{{Key: "mergeChunks", Value: ns}, {Key: "bounds", Value: bson.A{k(1)}}},
		{{Key: "_shardsvrGetStatsForBalancing", Value: 1}, {Key: "collections", Value: "x"}},
		{{Key: "_shardsvrMovePrimary", Value: 1}},
		{{Key: "_shardsvrMovePrimary", Value: db}, {Key: "to", Value: 5}},
	}
	configBad := []bson.D{
		{{Key: "_configsvrCommitChunkMigration", Value: 1}},
		{{Key: "_configsvrCommitChunkMigration", Value: ns}},
		{{Key: "_configsvrCommitChunkMigration", Value: ns}, {Key: "fromShard", Value: "shard0"}, {Key: "toShard", Value: "shard1"},
			{Key: "migratedChunk", Value: bson.D{{Key: "min", Value: k(0)}}}, {Key: "fromShardCollectionVersion", Value: "v"}, {Key: "validAfter", Value: 3}},
		{{Key: "_configsvrCommitChunkMigration", Value: ns}, {Key: "fromShard", Value: "shard0"}, {Key: "toShard", Value: "shard0"},
			{Key: "migratedChunk", Value: bson.D{{Key: "min", Value: k(0)}, {Key: "max", Value: k(1)},
				{Key: "lastmod", Value: bson.Timestamp{T: 9, I: 9}}, {Key: "lastmodEpoch", Value: oid}}},
			{Key: "fromShardCollectionVersion", Value: bson.D{{Key: "e", Value: oid}, {Key: "t", Value: bson.Timestamp{T: 1}}, {Key: "v", Value: bson.Timestamp{T: 1}}}},
			{Key: "validAfter", Value: bson.Timestamp{T: 1}}},
		{{Key: "_configsvrEnsureChunkVersionIsGreaterThan", Value: 1}},
		{{Key: "_configsvrEnsureChunkVersionIsGreaterThan", Value: 1}, {Key: "minKey", Value: k(0)}, {Key: "maxKey", Value: k(1)},
			{Key: "version", Value: "v"}, {Key: "collectionUUID", Value: uuid}, {Key: "nss", Value: ns}},
		{{Key: "_configsvrEnsureChunkVersionIsGreaterThan", Value: 1}, {Key: "minKey", Value: k(0)}, {Key: "maxKey", Value: k(1)},
			{Key: "version", Value: bson.D{{Key: "e", Value: oid}, {Key: "t", Value: bson.Timestamp{T: 1}}, {Key: "v", Value: bson.Timestamp{T: 1}}}},
			{Key: "collectionUUID", Value: bson.Binary{Subtype: 0, Data: []byte{1}}}, {Key: "nss", Value: ns}},
		{{Key: "_configsvrMoveRange", Value: 1}},
		{{Key: "_configsvrMoveRange", Value: ns}, {Key: "toShard", Value: "nope"}},
		{{Key: "_configsvrMoveRange", Value: ns}, {Key: "toShard", Value: "shard1"}, {Key: "min", Value: "x"}},
		{{Key: "_configsvrClearJumboFlag", Value: ns}},
		{{Key: "_configsvrClearJumboFlag", Value: ns}, {Key: "epoch", Value: oid}, {Key: "minKey", Value: k(0)}, {Key: "maxKey", Value: 1}},
		{{Key: "_configsvrRemoveShard", Value: 5}},
		{{Key: "_configsvrRemoveShard", Value: "nope"}},
		{{Key: "_configsvrBalancerCollectionStatus", Value: 1}},
		{{Key: "_configsvrBalancerCollectionStatus", Value: "a.none"}},
		{{Key: "_configsvrRemoveShardFromZone", Value: "shard0"}},
	}
	send := func(who string, cl *mongo.Client, cmds []bson.D) {
		t.Helper()
		for _, cmd := range cmds {
			err := cl.Database("admin").RunCommand(ctx, cmd).Err()
			var ce mongo.CommandError
			if !errors.As(err, &ce) {
				t.Errorf("%s %v: want a command error, got %v", who, cmd, err)
				continue
			}
			if ce.Code == 0 || ce.Code == 1 || ce.Name == "InternalError" {
				t.Errorf("%s %v: want a MongoDB error code, got %v", who, cmd, err)
			}
		}
	}
	send("shard0", d.Shards[0].Client, bad)
	// _recvChunkStatus takes what it is given, as MongoDB's: with no migration running it
	// reports an inactive one.
	var status struct {
		Active *bool `bson:"active"`
	}
	if err := d.Shards[0].Client.Database("admin").RunCommand(ctx, bson.D{{Key: "_recvChunkStatus", Value: ns}, {Key: "sessionId", Value: 3},
		{Key: "waitForSteadyOrDone", Value: "yes"}}).Decode(&status); err != nil || status.Active == nil || *status.Active {
		t.Errorf("_recvChunkStatus with no migration: %+v %v", status, err)
	}
	send("config", d.Config.Client, configBad)

	for _, n := range []struct {
		who string
		cl  *mongo.Client
	}{{"shard0", d.Shards[0].Client}, {"shard1", d.Shards[1].Client}, {"config", d.Config.Client}, {"router", d.Client}} {
		if err := n.cl.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
			t.Fatalf("%s after the malformed commands: %v", n.who, err)
		}
	}
	if after := fmt.Sprint(chunksOf()); after != chunksBefore {
		t.Fatalf("the malformed commands changed %s's chunks:\n%s\n%s", ns, chunksBefore, after)
	}
	if n, err := d.Client.Database(db).Collection(coll).CountDocuments(ctx, bson.D{}); err != nil || n != countBefore {
		t.Fatalf("the malformed commands changed %s's documents: %d (%v), want %d", ns, n, err, countBefore)
	}
}
