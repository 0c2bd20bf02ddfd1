package cluster

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
)

// Zones through humongos (MongoDB 7.0's addShardToZone, updateZoneKeyRange,
// removeShardFromZone and the zone-aware initial split policy): zones and ranges defined
// before an empty collection is sharded on a compound ranged key put its chunks on both
// shards, bounded by the zone ranges; inserts through the router land on the zones' shards;
// the zone commands' errors have MongoDB's codes and messages.
func TestShardedZonesShardCollection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	start := time.Now()
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{})
	t.Logf("cluster up in %v", time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) {
		t.Helper()
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	fails := func(cmd bson.D, code int32, msg string) {
		t.Helper()
		err := admin.RunCommand(ctx, cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Message, msg) {
			t.Fatalf("%v: want code %d with %q, got %v", cmd, code, msg, err)
		}
	}
	key := func(g any) bson.D { return bson.D{{Key: "g", Value: g}, {Key: "_id", Value: bson.MinKey{}}} }
	rangeCmd := func(ns string, min, max bson.D, zone any) bson.D {
		return bson.D{{Key: "updateZoneKeyRange", Value: ns}, {Key: "min", Value: min}, {Key: "max", Value: max}, {Key: "zone", Value: zone}}
	}
	config := d.Config.Client.Database("config", options.Database().SetReadConcern(readconcern.Majority()))

	run(bson.D{{Key: "enableSharding", Value: "zdb"}, {Key: "primaryShard", Value: "shard0"}})

	// Zones of shards that do not exist, ranges of zones that do not exist.
	fails(bson.D{{Key: "addShardToZone", Value: "nope"}, {Key: "zone", Value: "A"}}, 70, "shard nope does not exist")
	fails(rangeCmd("zdb.c", key(0), key(10), "A"), 177, "zone A does not exist")
	fails(bson.D{{Key: "addShardToZone", Value: "shard0"}}, 40414, "BSON field 'addShardToZone.zone' is missing but a required field")

	run(bson.D{{Key: "addShardToZone", Value: "shard0"}, {Key: "zone", Value: "A"}})
	run(bson.D{{Key: "addShardToZone", Value: "shard0"}, {Key: "zone", Value: "A"}}) // $addToSet: once
	run(bson.D{{Key: "addshardtozone", Value: "shard1"}, {Key: "zone", Value: "B"}})
	var shard0 struct {
		Tags []string `bson:"tags"`
	}
	if err := config.Collection("shards").FindOne(ctx, bson.D{{Key: "_id", Value: "shard0"}}).Decode(&shard0); err != nil {
		t.Fatal(err)
	}
	if len(shard0.Tags) != 1 || shard0.Tags[0] != "A" {
		t.Errorf("shard0's tags: %v", shard0.Tags)
	}

	run(rangeCmd("zdb.c", key(0), key(10), "A"))
	run(rangeCmd("zdb.c", key(10), key(20), "B"))
	run(rangeCmd("zdb.c", key(10), key(20), "B")) // the same range again: a no-op
	fails(rangeCmd("zdb.c", key(5), key(15), "B"), 178,
		"Zone range: { g: 5, _id: MinKey } -->> { g: 15, _id: MinKey }  on  B is overlapping with existing: { g: 0, _id: MinKey } -->> { g: 10, _id: MinKey }  on  A")
	fails(rangeCmd("zdb.c", key(10), key(20), "A"), 178, "is overlapping with existing")
	fails(rangeCmd("zdb.c", key(20), key(10), "A"), 9, "should be less than max")
	fails(rangeCmd("nodot", key(20), key(30), "A"), 73, "nodot is not a valid namespace")
	fails(bson.D{{Key: "removeShardFromZone", Value: "shard1"}, {Key: "zone", Value: "B"}}, 163,
		"cannot remove a shard from zone if a chunk range is associated with it")
	if n, err := config.Collection("tags").CountDocuments(ctx, bson.D{{Key: "ns", Value: "zdb.c"}}); err != nil || n != 2 {
		t.Fatalf("config.tags for zdb.c: %d %v", n, err)
	}

	// A zone range that is not a range of the proposed key refuses shardCollection.
	run(rangeCmd("zdb.d", bson.D{{Key: "g", Value: 0}}, bson.D{{Key: "g", Value: 10}}, "A"))
	fails(bson.D{{Key: "shardCollection", Value: "zdb.d"}, {Key: "key", Value: bson.D{{Key: "g", Value: 1}, {Key: "_id", Value: 1}}}}, 72,
		"the proposed shard key { g: 1, _id: 1 } does not match with the shard key of the existing zone { g: 0 } -->> { g: 10 }")

	// shardCollection on the empty collection: a chunk per zone range on its zone's shard,
	// the gaps round robin over the shards.
	run(bson.D{{Key: "shardCollection", Value: "zdb.c"}, {Key: "key", Value: bson.D{{Key: "g", Value: 1}, {Key: "_id", Value: 1}}}})
	cur, err := config.Collection("chunks").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var chunks []struct {
		Min   bson.Raw `bson:"min"`
		Shard string   `bson:"shard"`
	}
	if err := cur.All(ctx, &chunks); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range chunks {
		g := c.Min.Lookup("g")
		s := "MinKey"
		if n, ok := g.AsInt64OK(); ok {
			s = strconv.FormatInt(n, 10)
		}
		got = append(got, s+"@"+c.Shard)
	}
	want := "MinKey@shard0 0@shard0 10@shard1 20@shard1"
	if strings.Join(got, " ") != want {
		t.Errorf("chunks\n got %s\nwant %s", strings.Join(got, " "), want)
	}

	// Inserts through the router land on the zones' shards.
	coll := d.Client.Database("zdb").Collection("c")
	docs := make([]any, 30)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "g", Value: i}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	onShard := func(i int) []int32 {
		t.Helper()
		cur, err := d.Shards[i].Client.Database("zdb").Collection("c").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "g", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var docs []struct {
			G int32 `bson:"g"`
		}
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		out := make([]int32, len(docs))
		for j, d := range docs {
			out[j] = d.G
		}
		return out
	}
	if s0, s1 := onShard(0), onShard(1); len(s0) != 10 || s0[0] != 0 || s0[9] != 9 || len(s1) != 20 || s1[0] != 10 || s1[19] != 29 {
		t.Errorf("shard0 holds %v, shard1 %v", s0, s1)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 30 {
		t.Errorf("count through the router: %d %v", n, err)
	}

	// On the sharded collection, bounds are shard key prefixes extended with MinKey.
	run(rangeCmd("zdb.c", bson.D{{Key: "g", Value: 30}}, bson.D{{Key: "g", Value: 40}}, "A"))
	var tag struct {
		Max bson.Raw `bson:"max"`
		Tag string   `bson:"tag"`
	}
	if err := config.Collection("tags").FindOne(ctx, bson.D{{Key: "ns", Value: "zdb.c"}, {Key: "min", Value: key(30)}}).Decode(&tag); err != nil {
		t.Fatalf("extended range: %v", err)
	}
	if tag.Tag != "A" || tag.Max.Lookup("_id").Type != bson.TypeMinKey {
		t.Errorf("extended range: %+v", tag)
	}
	fails(rangeCmd("zdb.c", bson.D{{Key: "x", Value: 1}}, bson.D{{Key: "x", Value: 2}}, "A"), 61,
		"min: { x: 1 } is not a prefix of the shard key { g: 1, _id: 1 } of ns: zdb.c")

	// zone: null removes ranges; then the zone's last shard may leave it.
	run(rangeCmd("zdb.c", key(10), key(20), nil))
	run(rangeCmd("zdb.c", bson.D{{Key: "g", Value: 30}}, bson.D{{Key: "g", Value: 40}}, nil))
	if n, err := config.Collection("tags").CountDocuments(ctx, bson.D{{Key: "ns", Value: "zdb.c"}}); err != nil || n != 1 {
		t.Errorf("config.tags after removals: %d %v", n, err)
	}
	run(bson.D{{Key: "removeShardFromZone", Value: "shard1"}, {Key: "zone", Value: "B"}})
	fails(bson.D{{Key: "removeShardFromZone", Value: "nope"}, {Key: "zone", Value: "B"}}, 70, "shard nope does not exist")
	if err := config.Collection("shards").FindOne(ctx, bson.D{{Key: "_id", Value: "shard1"}, {Key: "tags", Value: "B"}}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Errorf("shard1 still in zone B: %v", err)
	}

	// presplitHashedZones: {g: 1, h: "hashed"} with a zone per g value presplits each zone
	// range at hashed values over its shard (2 chunks per shard by default).
	gh := func(g string) bson.D { return bson.D{{Key: "g", Value: g}, {Key: "h", Value: bson.MinKey{}}} }
	run(bson.D{{Key: "addShardToZone", Value: "shard1"}, {Key: "zone", Value: "H"}})
	run(rangeCmd("zdb.h", gh("a"), gh("b"), "A"))
	run(rangeCmd("zdb.h", gh("b"), gh("c"), "H"))
	run(bson.D{{Key: "shardCollection", Value: "zdb.h"}, {Key: "key", Value: bson.D{{Key: "g", Value: 1}, {Key: "h", Value: "hashed"}}},
		{Key: "presplitHashedZones", Value: true}})
	var entry struct {
		UUID bson.Binary `bson:"uuid"`
	}
	if err := config.Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: "zdb.h"}}).Decode(&entry); err != nil {
		t.Fatal(err)
	}
	cur, err = config.Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: entry.UUID}}, options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	chunks = nil
	if err := cur.All(ctx, &chunks); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, c := range chunks {
		got = append(got, c.Shard)
	}
	if strings.Join(got, " ") != "shard0 shard0 shard0 shard1 shard1 shard1" {
		t.Errorf("presplit chunks: %v", got)
	}
	hcoll := d.Client.Database("zdb").Collection("h")
	for i := range 20 {
		g := "a"
		if i >= 10 {
			g = "b"
		}
		if _, err := hcoll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "g", Value: g}, {Key: "h", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, g := range []string{"a", "b"} {
		n, err := d.Shards[i].Client.Database("zdb").Collection("h").CountDocuments(ctx, bson.D{{Key: "g", Value: g}})
		if err != nil || n != 10 {
			t.Errorf("shard%d holds %d documents of g %q: %v", i, n, g, err)
		}
	}
}
