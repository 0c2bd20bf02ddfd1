package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
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

// Zones move data: a zone over part of a collection that lives on shard0 makes the balancer
// split the chunk at the zone's bounds and move the zone's documents to the zone's shard, while
// a reader counting through the router always sees every document once; afterwards each
// shard holds exactly its zones' documents (the donor's orphans deleted), new documents of the
// zone go straight to its shard, and moving a zone range moves the data again.
func TestShardedZonesMoveData(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{Args: []string{"--setParameter", "balancerRoundIntervalMs=200",
		"--setParameter", "balancerMigrationsThrottlingMs=100", "--setParameter", "orphanCleanupDelaySecs=0"}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) {
		t.Helper()
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	x := func(v any) bson.D { return bson.D{{Key: "x", Value: v}} }
	zoneRange := func(min, max bson.D, zone any) {
		t.Helper()
		run(bson.D{{Key: "updateZoneKeyRange", Value: "zmove.c"}, {Key: "min", Value: min}, {Key: "max", Value: max}, {Key: "zone", Value: zone}})
	}
	run(bson.D{{Key: "enableSharding", Value: "zmove"}, {Key: "primaryShard", Value: "shard0"}})
	run(bson.D{{Key: "shardCollection", Value: "zmove.c"}, {Key: "key", Value: x(1)}})
	coll := d.Client.Database("zmove").Collection("c")
	const n = 300
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "x", Value: i}, {Key: "pad", Value: strings.Repeat("z", 200)}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	total := int64(n)

	// The counting reader: every count through the router is exact while chunks move.
	readCtx, stopReader := context.WithCancel(ctx)
	readerDone := make(chan error, 1)
	var lo, hi atomic.Int64 // the counts the reader may see: more while an insert runs
	lo.Store(total)
	hi.Store(total)
	go func() {
		counts := 0
		for readCtx.Err() == nil {
			l := lo.Load()
			c, err := coll.CountDocuments(readCtx, bson.D{})
			if readCtx.Err() != nil {
				break
			}
			if err != nil {
				readerDone <- fmt.Errorf("count through the router: %w", err)
				return
			}
			if h := hi.Load(); c < l || c > h {
				readerDone <- fmt.Errorf("count through the router: %d, want %d..%d", c, l, h)
				return
			}
			counts++
		}
		if counts == 0 {
			readerDone <- errors.New("the reader never counted")
			return
		}
		readerDone <- nil
	}()
	defer stopReader()

	direct := func(i int, filter bson.D) int64 {
		t.Helper()
		c, err := d.Shards[i].Client.Database("zmove").Collection("c").CountDocuments(ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	in := func(min, max int) bson.D {
		return bson.D{{Key: "x", Value: bson.D{{Key: "$gte", Value: min}, {Key: "$lt", Value: max}}}}
	}
	// settled: shard1 holds exactly hot's documents, shard0 the rest (no orphans left on either).
	settled := func(hot bson.D, hotDocs int64) func() (bool, error) {
		return func() (bool, error) {
			return direct(1, hot) == hotDocs && direct(1, bson.D{}) == hotDocs && direct(0, bson.D{}) == total-hotDocs, nil
		}
	}

	// hot = [100, 200) on shard1; cold = the rest, on shard0.
	run(bson.D{{Key: "addShardToZone", Value: "shard1"}, {Key: "zone", Value: "hot"}})
	run(bson.D{{Key: "addShardToZone", Value: "shard0"}, {Key: "zone", Value: "cold"}})
	zoneRange(x(bson.MinKey{}), x(100), "cold")
	zoneRange(x(100), x(200), "hot")
	zoneRange(x(200), x(bson.MaxKey{}), "cold")
	zoned := time.Now()
	waitUntil(t, ctx, "the hot range's documents on shard1 only", settled(in(100, 200), 100))
	t.Logf("the balancer moved the zone's documents in %v", time.Since(zoned))

	// New documents of the zone go to its shard; of the other zone, to theirs.
	more := []any{bson.D{{Key: "_id", Value: "h1"}, {Key: "x", Value: 150.5}}, bson.D{{Key: "_id", Value: "h2"}, {Key: "x", Value: 199.5}},
		bson.D{{Key: "_id", Value: "c1"}, {Key: "x", Value: -1}}}
	hi.Store(total + int64(len(more)))
	if _, err := coll.InsertMany(ctx, more); err != nil {
		t.Fatal(err)
	}
	total += int64(len(more))
	lo.Store(total)
	if got := direct(1, in(100, 200)); got != 102 {
		t.Fatalf("shard1 holds %d documents of the hot range, want 102", got)
	}
	if got := direct(0, bson.D{{Key: "x", Value: -1}}); got != 1 {
		t.Fatalf("shard0 holds %d documents at x: -1, want 1", got)
	}

	// Moving the hot range to [0, 50) moves those documents to shard1; [100, 200) has no zone
	// any more and stays where it is (the shards' data sizes are far below the imbalance
	// threshold of three chunk sizes).
	zoneRange(x(100), x(200), nil)
	zoneRange(x(bson.MinKey{}), x(100), nil)
	zoneRange(x(bson.MinKey{}), x(0), "cold")
	zoneRange(x(0), x(50), "hot")
	waitUntil(t, ctx, "the new hot range's documents on shard1", func() (bool, error) {
		return direct(1, in(0, 50)) == 50 && direct(0, in(0, 50)) == 0, nil
	})
	if got := direct(1, in(100, 200)); got != 102 {
		t.Fatalf("shard1 holds %d documents of the unzoned [100, 200), want 102", got)
	}

	stopReader()
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	if c, err := coll.CountDocuments(ctx, bson.D{}); err != nil || c != total {
		t.Fatalf("final count %d (%v), want %d", c, err, total)
	}
}
