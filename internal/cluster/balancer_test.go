package cluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

type balancerStatusReply struct {
	Mode              string `bson:"mode"`
	InBalancerRound   bool   `bson:"inBalancerRound"`
	NumBalancerRounds int64  `bson:"numBalancerRounds"`
}

func waitUntil(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s (last error %v)", what, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// The balancer through the router: balancerStatus reports real rounds on the config primary
// (and again after a config primary step-down), balancerStop/balancerStart write
// config.settings, balancerCollectionStatus answers for a sharded collection and refuses an
// unsharded one, a zone boundary inside a chunk is split by the balancer and the chunk left
// outside its zone is moved into it, sh.disableBalancing's write of
// config.collections noBalance goes through the router, and rounds are logged in
// config.actionlog.
func TestShardedBalancer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2, ConfigMembers: 3},
		Options{ReplSetSettings: ShortElections, Args: []string{"--setParameter", "balancerRoundIntervalMs=100", "--setParameter", "balancerMigrationsThrottlingMs=100"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) bson.Raw {
		t.Helper()
		raw, err := admin.RunCommand(ctx, cmd).Raw()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return raw
	}
	fails := func(cmd bson.D, code int32, msg string) {
		t.Helper()
		err := admin.RunCommand(ctx, cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Message, msg) {
			t.Fatalf("%v: want code %d with %q, got %v", cmd, code, msg, err)
		}
	}
	status := func() balancerStatusReply {
		t.Helper()
		var bs balancerStatusReply
		if err := bson.Unmarshal(run(bson.D{{Key: "balancerStatus", Value: 1}}), &bs); err != nil {
			t.Fatal(err)
		}
		return bs
	}
	// On by default (no config.settings document), and rounds run.
	if bs := status(); bs.Mode != "full" {
		t.Fatalf("balancerStatus: %+v", bs)
	}
	waitUntil(t, ctx, "two balancer rounds", func() (bool, error) { return status().NumBalancerRounds >= 2, nil })

	// balancerStop / balancerStart write config.settings and report through balancerStatus.
	run(bson.D{{Key: "balancerStop", Value: 1}})
	var settings bson.M
	if err := d.Client.Database("config").Collection("settings").FindOne(ctx, bson.D{{Key: "_id", Value: "balancer"}}).Decode(&settings); err != nil {
		t.Fatal(err)
	}
	if settings["mode"] != "off" || settings["stopped"] != true {
		t.Fatalf("config.settings after balancerStop: %v", settings)
	}
	if bs := status(); bs.Mode != "off" || bs.InBalancerRound {
		t.Fatalf("balancerStatus after balancerStop: %+v", bs)
	}
	run(bson.D{{Key: "balancerStart", Value: 1}})
	if bs := status(); bs.Mode != "full" {
		t.Fatalf("balancerStatus after balancerStart: %+v", bs)
	}

	// balancerCollectionStatus.
	run(bson.D{{Key: "enableSharding", Value: "app"}, {Key: "primaryShard", Value: "shard0"}})
	run(bson.D{{Key: "shardCollection", Value: "app.c"}, {Key: "key", Value: bson.D{{Key: "x", Value: 1}}}})
	var cs struct {
		ChunkSize                int64  `bson:"chunkSize"`
		BalancerCompliant        bool   `bson:"balancerCompliant"`
		FirstComplianceViolation string `bson:"firstComplianceViolation"`
	}
	if err := bson.Unmarshal(run(bson.D{{Key: "balancerCollectionStatus", Value: "app.c"}}), &cs); err != nil ||
		!cs.BalancerCompliant || cs.ChunkSize != 128 || cs.FirstComplianceViolation != "" {
		t.Fatalf("balancerCollectionStatus: %+v %v", cs, err)
	}
	fails(bson.D{{Key: "balancerCollectionStatus", Value: "app.none"}}, 118, "Collection unsharded or undefined")
	fails(bson.D{{Key: "balancerCollectionStatus", Value: "app"}}, 73, "Invalid namespace specified 'app'")
	fails(bson.D{{Key: "balancerCollectionStatus", Value: 1}}, 14, "")

	// A zone on shard1 over [0, 100): the balancer splits the one chunk at 0 and 100, then the
	// zone's chunk on shard0 violates it until a migration moves it.
	run(bson.D{{Key: "addShardToZone", Value: "shard1"}, {Key: "zone", Value: "Z"}})
	run(bson.D{{Key: "updateZoneKeyRange", Value: "app.c"}, {Key: "min", Value: bson.D{{Key: "x", Value: 0}}},
		{Key: "max", Value: bson.D{{Key: "x", Value: 100}}}, {Key: "zone", Value: "Z"}})
	var coll bson.M
	if err := d.Client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: "app.c"}}).Decode(&coll); err != nil {
		t.Fatal(err)
	}
	chunks := d.Client.Database("config").Collection("chunks")
	zoneChunkOn := func() (string, int64, error) {
		n, err := chunks.CountDocuments(ctx, bson.D{{Key: "uuid", Value: coll["uuid"]}})
		if err != nil {
			return "", 0, err
		}
		var c bson.M
		err = chunks.FindOne(ctx, bson.D{{Key: "uuid", Value: coll["uuid"]}, {Key: "min", Value: bson.D{{Key: "x", Value: 0}}}}).Decode(&c)
		if err != nil {
			return "", n, err
		}
		s, _ := c["shard"].(string)
		return s, n, nil
	}
	waitUntil(t, ctx, "the balancer's split at the zone's bounds", func() (bool, error) {
		_, n, err := zoneChunkOn()
		return n == 3, err
	})
	collStatus := func() (bool, string) {
		if err := bson.Unmarshal(run(bson.D{{Key: "balancerCollectionStatus", Value: "app.c"}}), &cs); err != nil {
			t.Fatal(err)
		}
		return cs.BalancerCompliant, cs.FirstComplianceViolation
	}
	waitUntil(t, ctx, "the zone's chunk on shard1", func() (bool, error) {
		s, _, err := zoneChunkOn()
		return s == "shard1", err
	})
	waitUntil(t, ctx, "a compliant collection", func() (bool, error) {
		ok, _ := collStatus()
		return ok, nil
	})
	// The rounds that scheduled a migration are in config.actionlog.
	waitUntil(t, ctx, "a balancer.round in config.actionlog", func() (bool, error) {
		n, err := d.Client.Database("config").Collection("actionlog").CountDocuments(ctx, bson.D{{Key: "what", Value: "balancer.round"},
			{Key: "details.errorOccurred", Value: false}, {Key: "details.candidateChunks", Value: bson.D{{Key: "$gte", Value: 1}}}})
		return n > 0, err
	})

	// The data sizes the balancer asks shards for: the collection's bytes on the shard.
	if _, err := d.Client.Database("app").Collection("c").InsertMany(ctx, []any{bson.D{{Key: "x", Value: -5}}, bson.D{{Key: "x", Value: -6}}}); err != nil {
		t.Fatal(err)
	}
	var stats struct {
		Stats []struct {
			NS   string `bson:"namespace"`
			Size int64  `bson:"collSize"`
		} `bson:"stats"`
	}
	if err := d.Shards[0].Client.Database("admin").RunCommand(ctx, bson.D{{Key: "_shardsvrGetStatsForBalancing", Value: 1},
		{Key: "collections", Value: bson.A{bson.D{{Key: "ns", Value: "app.c"}}, bson.D{{Key: "ns", Value: "app.none"}}}},
		{Key: "scaleFactor", Value: int64(1)}}).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	if len(stats.Stats) != 2 || stats.Stats[0].NS != "app.c" || stats.Stats[0].Size <= 0 || stats.Stats[1].Size != 0 {
		t.Fatalf("_shardsvrGetStatsForBalancing: %+v", stats)
	}
	// Orphans (numOrphanDocs of the collection's range deletion tasks) are not the shard's
	// data. The task is pending (no range deleter acts on it) over an empty range, and removed.
	n, err := d.Shards[0].Client.Database("app").Collection("c").CountDocuments(ctx, bson.D{})
	if err != nil || n < 2 {
		t.Fatalf("documents on shard0: %d %v", n, err)
	}
	tasks := d.Shards[0].Client.Database("config").Collection("rangeDeletions")
	if _, err := tasks.InsertOne(ctx, bson.D{{Key: "_id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}, {Key: "nss", Value: "app.c"},
		{Key: "collectionUuid", Value: coll["uuid"]}, {Key: "donorShardId", Value: "shard1"},
		{Key: "range", Value: bson.D{{Key: "min", Value: bson.D{{Key: "x", Value: 1000}}}, {Key: "max", Value: bson.D{{Key: "x", Value: 2000}}}}},
		{Key: "pending", Value: true}, {Key: "whenToClean", Value: "delayed"}, {Key: "numOrphanDocs", Value: int64(1)},
		{Key: "keyPattern", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	full := stats.Stats[0].Size
	if err := d.Shards[0].Client.Database("admin").RunCommand(ctx, bson.D{{Key: "_shardsvrGetStatsForBalancing", Value: 1},
		{Key: "collections", Value: bson.A{bson.D{{Key: "ns", Value: "app.c"}}}}, {Key: "scaleFactor", Value: int64(1)}}).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	if want := full / n * (n - 1); stats.Stats[0].Size != want {
		t.Fatalf("collSize with one orphan: %d, want %d (%d without, %d documents)", stats.Stats[0].Size, want, full, n)
	}
	if _, err := tasks.DeleteMany(ctx, bson.D{{Key: "nss", Value: "app.c"}}); err != nil {
		t.Fatal(err)
	}
	direct := func(cl *mongo.Client, cmd bson.D, code int32, msg string) {
		t.Helper()
		err := cl.Database("admin").RunCommand(ctx, cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Message, msg) {
			t.Fatalf("%v: want code %d with %q, got %v", cmd, code, msg, err)
		}
	}
	direct(d.Shards[0].Client, bson.D{{Key: "_shardsvrGetStatsForBalancing", Value: 1}}, 40414, "collections' is missing")
	direct(d.Shards[0].Client, bson.D{{Key: "_shardsvrGetStatsForBalancing", Value: 1}, {Key: "collections", Value: bson.A{}}}, 72,
		"At least one collection must be specified")
	direct(d.Shards[0].Client, bson.D{{Key: "_shardsvrGetStatsForBalancing", Value: 1}, {Key: "collections", Value: bson.A{bson.D{{Key: "ns", Value: "nodot"}}}}}, 73,
		"Invalid namespace specified 'nodot'")
	direct(d.Config.Client, bson.D{{Key: "_shardsvrGetStatsForBalancing", Value: 1}, {Key: "collections", Value: bson.A{bson.D{{Key: "ns", Value: "a.b"}}}}}, 20, "")
	direct(d.Shards[0].Client, bson.D{{Key: "_configsvrBalancerCollectionStatus", Value: "app.c"}}, 20, "can only be run on config servers")
	direct(d.Shards[0].Client, bson.D{{Key: "_configsvrBalancerStop", Value: 1}}, 20, "can only be run on config servers")

	// sh.disableBalancing(coll): mongosh's write of config.collections through the router.
	res, err := d.Client.Database("config").Collection("collections").UpdateOne(ctx, bson.D{{Key: "_id", Value: "app.c"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "noBalance", Value: true}}}})
	if err != nil || res.MatchedCount != 1 {
		t.Fatalf("disableBalancing: %+v %v", res, err)
	}
	if err := d.Client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: "app.c"}}).Decode(&coll); err != nil || coll["noBalance"] != true {
		t.Fatalf("config.collections after disableBalancing: %v %v", coll, err)
	}

	// A config primary step-down: the new primary's balancer runs rounds.
	var before struct {
		Term int64 `bson:"term"`
	}
	if err := d.Config.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "_configsvrBalancerStatus", Value: 1}}).Decode(&before); err != nil {
		t.Fatal(err)
	}
	old, err := d.Config.StepDown(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Config.WaitForPrimary(ctx, old); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "rounds on the new config primary", func() (bool, error) {
		var st struct {
			Term   int64 `bson:"term"`
			Rounds int64 `bson:"numBalancerRounds"`
		}
		err := d.Config.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "_configsvrBalancerStatus", Value: 1}}).Decode(&st)
		return err == nil && st.Term > before.Term && st.Rounds >= 2, err
	})
}

// addShard of a third shard: the balancer moves chunks to it until no shard has three chunk
// sizes more data of the collection than another.
func TestShardedBalancerAddShardEvensOut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2},
		Options{Args: []string{"--setParameter", "balancerRoundIntervalMs=200", "--setParameter", "balancerMigrationsThrottlingMs=100"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) {
		t.Helper()
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	// 1 MB chunks: a 3 MB difference moves a chunk.
	if _, err := d.Client.Database("config").Collection("settings").UpdateOne(ctx, bson.D{{Key: "_id", Value: "chunksize"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "value", Value: 1}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
		t.Fatal(err)
	}
	run(bson.D{{Key: "enableSharding", Value: "app"}, {Key: "primaryShard", Value: "shard0"}})
	run(bson.D{{Key: "shardCollection", Value: "app.c"}, {Key: "key", Value: bson.D{{Key: "x", Value: 1}}}})
	// The balancer waits for the third shard: a chunk it moved meanwhile would make the
	// splits below fail (a split waits for a migration of its collection, then finds its
	// chunk gone).
	run(bson.D{{Key: "balancerStop", Value: 1}})
	// 12 MB in 24 chunks of 0.5 MB, all on shard0 at first.
	pad := strings.Repeat("p", 1000)
	coll := d.Client.Database("app").Collection("c")
	const docs = 12 * 1024
	for start := 0; start < docs; start += 1024 {
		batch := make([]any, 0, 1024)
		for i := start; i < start+1024; i++ {
			batch = append(batch, bson.D{{Key: "x", Value: i}, {Key: "pad", Value: pad}})
		}
		if _, err := coll.InsertMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	for i := 512; i < docs; i += 512 {
		// The auto-splitter may have cut the chunk since the router last looked: refresh and
		// try again; a key it already split at is a boundary now, which is as good.
		for attempt := 0; ; attempt++ {
			err := admin.RunCommand(ctx, bson.D{{Key: "split", Value: "app.c"}, {Key: "middle", Value: bson.D{{Key: "x", Value: i}}}}).Err()
			var ce mongo.CommandError
			if err == nil || errors.As(err, &ce) && strings.Contains(ce.Message, "is a boundary key") {
				break
			}
			if attempt == 5 || !errors.As(err, &ce) || ce.Code != 117 {
				t.Fatalf("split at %d: %v", i, err)
			}
			run(bson.D{{Key: "flushRouterConfig", Value: "app.c"}})
		}
	}
	third := d.StartSet(t, "shard2", 1, "--shardsvr")
	if err := d.AddShard(ctx, third.ConnectionString()); err != nil {
		t.Fatal(err)
	}
	run(bson.D{{Key: "balancerStart", Value: 1}})
	// The documents each shard owns, chunk by chunk of config.chunks, counted through the
	// router (which filters orphans). Chunk counts say little: the auto-splitter cuts
	// chunks of any size, and 7.0's balancer balances data size.
	perShard := func() (map[string]int, error) {
		var c bson.M
		if err := d.Client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: "app.c"}}).Decode(&c); err != nil {
			return nil, err
		}
		cur, err := d.Client.Database("config").Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: c["uuid"]}})
		if err != nil {
			return nil, err
		}
		var all []struct {
			Min, Max bson.Raw
			Shard    string
		}
		if err := cur.All(ctx, &all); err != nil {
			return nil, err
		}
		m := map[string]int{}
		for _, ch := range all {
			n, err := coll.CountDocuments(ctx, bson.D{{Key: "x", Value: bson.D{{Key: "$gte", Value: ch.Min.Lookup("x")}, {Key: "$lt", Value: ch.Max.Lookup("x")}}}})
			if err != nil {
				return nil, err
			}
			m[ch.Shard] += int(n)
		}
		return m, nil
	}
	// Even: every shard owns some, and no two shards are three chunk sizes (3 MB, about
	// 3,000 of these 1 KB documents) apart, plus a chunk's worth of slack.
	waitUntil(t, ctx, "data evened out over three shards", func() (bool, error) {
		m, err := perShard()
		if err != nil {
			return false, err
		}
		counts := []int{m["shard0"], m["shard1"], m["shard2"]}
		return slices.Min(counts) > 0 && slices.Max(counts)-slices.Min(counts) < 4*1024, nil
	})
	m, _ := perShard()
	t.Logf("documents owned per shard: %v", m)
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != docs {
		t.Fatalf("count after balancing: %d %v", n, err)
	}
}
