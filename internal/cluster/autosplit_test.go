package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
)

type splitChunkRow struct {
	Min     bson.Raw       `bson:"min"`
	Max     bson.Raw       `bson:"max"`
	Shard   string         `bson:"shard"`
	Lastmod bson.Timestamp `bson:"lastmod"`
	Jumbo   bool           `bson:"jumbo"`
}

// Auto-splitting, jumbo chunks and merging through humongos (spec: sharding.md
// "Auto-splitting"; MongoDB 7.0's mergeAllChunksOnShard, clearJumboFlag and AutoMerger): with
// a 1 MB chunk size, inserts through the router split the collection into chunks that tile
// MinKey–MaxKey with every document still counted; a chunk of one hot key value never
// splits and is flagged jumbo; clearJumboFlag clears it; mergeAllChunksOnShard merges the
// shard's chunks back into one; the AutoMerger does the same on its own when enabled.
func TestShardedAutoSplitJumboMerge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) {
		t.Helper()
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	fails := func(db *mongo.Database, cmd bson.D, code int32, msg string) {
		t.Helper()
		err := db.RunCommand(ctx, cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Message, msg) {
			t.Fatalf("%v: want code %d with %q, got %v", cmd, code, msg, err)
		}
	}
	config := d.Config.Client.Database("config", options.Database().SetReadConcern(readconcern.Majority()))
	setting := func(id string, set bson.D) {
		t.Helper()
		_, err := config.Collection("settings").UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
			bson.D{{Key: "$set", Value: set}}, options.UpdateOne().SetUpsert(true))
		if err != nil {
			t.Fatal(err)
		}
	}
	chunks := func(ns string) []splitChunkRow {
		t.Helper()
		var coll struct {
			UUID bson.Binary `bson:"uuid"`
		}
		if err := config.Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Decode(&coll); err != nil {
			t.Fatalf("config.collections %s: %v", ns, err)
		}
		cur, err := config.Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: coll.UUID}},
			options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var out []splitChunkRow
		if err := cur.All(ctx, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	tiles := func(cs []splitChunkRow, field string) bool {
		if len(cs) == 0 || cs[0].Min.Lookup(field).Type != bson.TypeMinKey || cs[len(cs)-1].Max.Lookup(field).Type != bson.TypeMaxKey {
			return false
		}
		for i := 1; i < len(cs); i++ {
			if !bytesEqual(cs[i-1].Max, cs[i].Min) {
				return false
			}
		}
		return true
	}
	waitFor := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, limit)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	pad := strings.Repeat("x", 1000)

	setting("chunksize", bson.D{{Key: "value", Value: 1}})
	run(bson.D{{Key: "enableSharding", Value: "as"}, {Key: "primaryShard", Value: "shard0"}})
	run(bson.D{{Key: "shardCollection", Value: "as.c"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
	run(bson.D{{Key: "shardCollection", Value: "as.hot"}, {Key: "key", Value: bson.D{{Key: "h", Value: 1}}}})
	// The balancer leaves these collections alone (sh.disableBalancing): it would move the
	// auto-split chunks of 4 MB on one shard, and the merges below want them on shard0.
	noBalance := func(ns string) {
		t.Helper()
		if _, err := d.Client.Database("config").Collection("collections").UpdateOne(ctx, bson.D{{Key: "_id", Value: ns}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "noBalance", Value: true}}}}); err != nil {
			t.Fatal(err)
		}
	}
	noBalance("as.c")
	noBalance("as.hot")

	// 4,000 documents of about 1 KB with keys spread over [0, 10007): 4 MB into a
	// collection whose chunks split at 1 MB.
	const n = 4000
	coll := d.Client.Database("as").Collection("c")
	t0 := time.Now()
	for b := 0; b < n; b += 100 {
		docs := make([]any, 0, 100)
		for i := b; i < b+100; i++ {
			docs = append(docs, bson.D{{Key: "k", Value: (i * 7919) % 10007}, {Key: "i", Value: i}, {Key: "pad", Value: pad}})
		}
		if _, err := coll.InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
	}
	var split []splitChunkRow
	waitFor("auto-split into at least 3 chunks", time.Minute, func() bool {
		split = chunks("as.c")
		return len(split) >= 3
	})
	t.Logf("%d documents inserted in %v; %d chunks after auto-split", n, time.Since(t0), len(split))
	if !tiles(split, "k") {
		t.Fatalf("chunks do not tile MinKey-MaxKey: %v", split)
	}
	for _, c := range split {
		if c.Shard != "shard0" || c.Jumbo {
			t.Errorf("chunk %v", c)
		}
	}
	if got, err := coll.CountDocuments(ctx, bson.D{}); err != nil || got != n {
		t.Fatalf("count through the router: %d %v", got, err)
	}

	// One hot shard key value: 2,000 documents of h: 1 never split; the chunk is jumbo.
	hot := d.Client.Database("as").Collection("hot")
	for b := 0; b < 2000; b += 100 {
		docs := make([]any, 0, 100)
		for i := b; i < b+100; i++ {
			docs = append(docs, bson.D{{Key: "h", Value: 1}, {Key: "i", Value: i}, {Key: "pad", Value: pad}})
		}
		if _, err := hot.InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("the hot chunk flagged jumbo", time.Minute, func() bool {
		cs := chunks("as.hot")
		return len(cs) == 1 && cs[0].Jumbo
	})
	jumbo := chunks("as.hot")[0]

	// clearJumboFlag: bad requests change nothing; a good one clears the flag with a new
	// major version.
	fails(admin, bson.D{{Key: "clearJumboFlag", Value: "as.hot"}}, 72, "need to specify find or bounds")
	fails(admin, bson.D{{Key: "clearJumboFlag", Value: "as.hot"}, {Key: "find", Value: bson.D{{Key: "h", Value: 1}}},
		{Key: "bounds", Value: bson.A{jumbo.Min, jumbo.Max}}}, 72, "cannot specify bounds and find at the same time")
	fails(admin, bson.D{{Key: "clearJumboFlag", Value: "as.hot"}, {Key: "find", Value: bson.D{{Key: "x", Value: 1}}}}, 51260, "no shard key found in chunk query")
	fails(admin, bson.D{{Key: "clearJumboFlag", Value: "as.hot"}, {Key: "bounds", Value: bson.A{jumbo.Min, bson.D{{Key: "h", Value: 5}}}}},
		51261, "no chunk found with the shard key bounds")
	if cs := chunks("as.hot"); len(cs) != 1 || !cs[0].Jumbo || cs[0].Lastmod != jumbo.Lastmod {
		t.Fatalf("a failed clearJumboFlag changed the chunk: %v", cs)
	}
	run(bson.D{{Key: "clearJumboFlag", Value: "as.hot"}, {Key: "find", Value: bson.D{{Key: "h", Value: 1}}}})
	if cs := chunks("as.hot"); len(cs) != 1 || cs[0].Jumbo || cs[0].Lastmod.T != jumbo.Lastmod.T+1 || cs[0].Lastmod.I != 0 {
		t.Fatalf("after clearJumboFlag: %v (was %v)", cs, jumbo)
	}
	if got, err := hot.CountDocuments(ctx, bson.D{}); err != nil || got != 2000 {
		t.Fatalf("hot count through the router: %d %v", got, err)
	}

	// splitVector's bad input on the shard, splits at a boundary or outside the chunk.
	shardAdmin := d.Shards[0].Client.Database("admin")
	fails(shardAdmin, bson.D{{Key: "splitVector", Value: "as.c"}}, 72, "no key pattern found in splitVector")
	fails(shardAdmin, bson.D{{Key: "splitVector", Value: "as.c"}, {Key: "keyPattern", Value: bson.D{{Key: "k", Value: 1}}},
		{Key: "maxChunkSizeBytes", Value: 10}}, 72, "The specified max chunk size must lie within the range [1MB, 1024MB]")
	fails(shardAdmin, bson.D{{Key: "splitVector", Value: "as.c"}, {Key: "keyPattern", Value: bson.D{{Key: "nope", Value: 1}}},
		{Key: "maxChunkSize", Value: 1}}, 27, "couldn't find index over splitting key { nope: 1 }")
	fails(admin, bson.D{{Key: "split", Value: "as.c"}, {Key: "middle", Value: split[1].Min}}, 72, "is a boundary key of existing chunk")
	var entry struct {
		Epoch     bson.ObjectID  `bson:"lastmodEpoch"`
		Timestamp bson.Timestamp `bson:"timestamp"`
	}
	if err := config.Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: "as.c"}}).Decode(&entry); err != nil {
		t.Fatal(err)
	}
	splitChunk := func(key bson.Raw) bson.D {
		return bson.D{{Key: "splitChunk", Value: "as.c"}, {Key: "from", Value: "shard0"}, {Key: "keyPattern", Value: bson.D{{Key: "k", Value: 1}}},
			{Key: "epoch", Value: entry.Epoch}, {Key: "timestamp", Value: entry.Timestamp},
			{Key: "min", Value: split[0].Min}, {Key: "max", Value: split[0].Max}, {Key: "splitKeys", Value: bson.A{key}}}
	}
	fails(shardAdmin, splitChunk(split[1].Max), 72, "not contained within chunk")
	fails(shardAdmin, splitChunk(split[0].Min), 72, "Split on lower bound of chunk")
	if cs := chunks("as.c"); len(cs) != len(split) {
		t.Fatalf("a failed split changed the chunks: %v", cs)
	}
	var sv struct {
		SplitKeys []bson.Raw `bson:"splitKeys"`
	}
	if err := shardAdmin.RunCommand(ctx, bson.D{{Key: "splitVector", Value: "as.c"}, {Key: "keyPattern", Value: bson.D{{Key: "k", Value: 1}}},
		{Key: "maxChunkSize", Value: 1}}).Decode(&sv); err != nil || len(sv.SplitKeys) < 4 {
		t.Fatalf("splitVector over the whole collection: %v %v", sv.SplitKeys, err)
	}

	// mergeAllChunksOnShard: once the chunks are older than the snapshot history window
	// (minSnapshotHistoryWindowInSeconds, 5 s), shard0's contiguous chunks become one.
	fails(admin, bson.D{{Key: "mergeAllChunksOnShard", Value: "as.c"}}, 40414, "BSON field 'mergeAllChunksOnShard.shard' is missing")
	waitFor("mergeAllChunksOnShard merges", time.Minute, func() bool {
		run(bson.D{{Key: "mergeAllChunksOnShard", Value: "as.c"}, {Key: "shard", Value: "shard0"}})
		return len(chunks("as.c")) == 1
	})
	if cs := chunks("as.c"); !tiles(cs, "k") || cs[0].Shard != "shard0" {
		t.Fatalf("after mergeAllChunksOnShard: %v", cs)
	}
	if got, err := coll.CountDocuments(ctx, bson.D{}); err != nil || got != n {
		t.Fatalf("count through the router after the merge: %d %v", got, err)
	}

	// The AutoMerger: off while automerge is disabled, then merges on its own.
	setting("automerge", bson.D{{Key: "enabled", Value: false}})
	setting("chunksize", bson.D{{Key: "value", Value: 128}})
	run(bson.D{{Key: "shardCollection", Value: "as.m"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
	noBalance("as.m")
	for _, k := range []int{10, 20, 30} {
		run(bson.D{{Key: "split", Value: "as.m"}, {Key: "middle", Value: bson.D{{Key: "k", Value: k}}}})
	}
	if err := d.Config.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1},
		{Key: "autoMergerIntervalSecs", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(7 * time.Second)
	if cs := chunks("as.m"); len(cs) != 4 {
		t.Fatalf("merged while automerge is disabled: %v", cs)
	}
	setting("automerge", bson.D{{Key: "enabled", Value: true}})
	waitFor("the AutoMerger merges", 30*time.Second, func() bool { return len(chunks("as.m")) == 1 })
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }
