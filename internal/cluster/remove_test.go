package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// clusterCmds are a test's helpers to run admin commands through a router.
type clusterCmds struct {
	t     *testing.T
	ctx   context.Context
	admin *mongo.Database
}

func (c clusterCmds) run(cmd bson.D) bson.Raw {
	c.t.Helper()
	raw, err := c.admin.RunCommand(c.ctx, cmd).Raw()
	if err != nil {
		c.t.Fatalf("%v: %v", cmd, err)
	}
	return raw
}

func (c clusterCmds) fails(cmd bson.D, code int32, msg string) {
	c.t.Helper()
	err := c.admin.RunCommand(c.ctx, cmd).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Message, msg) {
		c.t.Fatalf("%v: want code %d with %q, got %v", cmd, code, msg, err)
	}
}

// databaseEntry reads db's config.databases entry on the config server.
func databaseEntry(t *testing.T, ctx context.Context, d *Deployment, db string) (primary string, lastMod int32) {
	t.Helper()
	var e struct {
		Primary string `bson:"primary"`
		Version struct {
			LastMod int32 `bson:"lastMod"`
		} `bson:"version"`
	}
	if err := d.Config.Client.Database("config").Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: db}}).Decode(&e); err != nil {
		t.Fatalf("config.databases %s: %v", db, err)
	}
	return e.Primary, e.Version.LastMod
}

// collectionNamesOn lists db's collections and views on shard s's primary, directly (not
// the system ones).
func collectionNamesOn(t *testing.T, ctx context.Context, s *Deployment, db string) []string {
	t.Helper()
	names, err := s.Client.Database(db).ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return strings.HasPrefix(n, "system.") })
	slices.Sort(names)
	return names
}

// movePrimary moves a database with an unsharded collection (documents, a secondary index, a
// capped collection) from shard0 to shard1 while a writer inserts through the router: the
// writes all succeed (the router retries the StaleDbVersion of the critical section), the
// data, indexes and options are on shard1 and gone from shard0, config.databases names the
// new primary with lastMod + 1, a second router that cached the old primary reads and
// writes the moved collection, and a sharded collection stays where its chunks are. Then
// the refusals: unknown shard, admin/config, a database that does not exist, no "to"; a
// move to the current primary is a no-op.
func TestShardedMovePrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2, Routers: 2}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := clusterCmds{t: t, ctx: ctx, admin: d.Client.Database("admin")}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name

	c.run(bson.D{{Key: "enableSharding", Value: "mp"}, {Key: "primaryShard", Value: s0}})
	db := d.Client.Database("mp")
	coll := db.Collection("c")
	docs := make([]any, 200)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 7}, {Key: "pad", Value: strings.Repeat("x", 100)}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateCollection(ctx, "capped", options.CreateCollection().SetCapped(true).SetSizeInBytes(1<<20)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("capped").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateView(ctx, "v", "c", mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "a", Value: 3}}}}}); err != nil {
		t.Fatal(err)
	}
	c.run(bson.D{{Key: "shardCollection", Value: "mp.sharded"}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}})
	if _, err := db.Collection("sharded").InsertOne(ctx, bson.D{{Key: "_id", Value: "s"}}); err != nil {
		t.Fatal(err)
	}
	// The second router caches mp's primary (shard0) before the move.
	other := d.RouterClient(t, 1).Database("mp").Collection("c")
	if n, err := other.CountDocuments(ctx, bson.D{}); err != nil || n != 200 {
		t.Fatalf("count through router 1 before: %d, %v", n, err)
	}
	_, lastMod := databaseEntry(t, ctx, d, "mp")

	// A writer inserts through router 0 while the primary moves.
	var written atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1000; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := coll.InsertOne(wctx, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: -1}}); err != nil {
				werr = fmt.Errorf("insert %d: %w", i, err)
				return
			}
			written.Add(1)
		}
	}()
	for written.Load() < 5 && werr == nil {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	c.run(bson.D{{Key: "movePrimary", Value: "mp"}, {Key: "to", Value: s1}})
	t.Logf("movePrimary took %v", time.Since(start))
	before := written.Load()
	for written.Load() < before+5 && werr == nil {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatalf("a write through the router failed during movePrimary: %v", werr)
	}

	if primary, lm := databaseEntry(t, ctx, d, "mp"); primary != s1 || lm != lastMod+1 {
		t.Fatalf("config.databases mp: primary %s lastMod %d, want %s and %d", primary, lm, s1, lastMod+1)
	}
	want := 200 + written.Load()
	if n, err := d.Shards[1].Client.Database("mp").Collection("c").CountDocuments(ctx, bson.D{}); err != nil || n != want {
		t.Fatalf("shard1 holds %d documents of mp.c (%v), want %d", n, err, want)
	}
	if got := collectionNamesOn(t, ctx, d.Shards[0], "mp"); !slices.Equal(got, []string{"sharded"}) {
		t.Fatalf("shard0 still holds %v of mp, want only the sharded collection", got)
	}
	// The new primary lists every collection: the moved ones and, empty, the sharded one.
	if got := collectionNamesOn(t, ctx, d.Shards[1], "mp"); !slices.Equal(got, []string{"c", "capped", "sharded", "v"}) {
		t.Fatalf("shard1 holds %v of mp", got)
	}
	if n, err := d.Shards[1].Client.Database("mp").Collection("sharded").CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("mp.sharded on shard1: %d documents, %v", n, err)
	}
	if got, err := db.ListCollectionNames(ctx, bson.D{}); err != nil || !slices.Contains(got, "sharded") || !slices.Contains(got, "c") {
		t.Fatalf("listCollections through the router after the move: %v, %v", got, err)
	}
	specs, err := d.Shards[1].Client.Database("mp").Collection("c").Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[1].Name != "a_1" {
		t.Fatalf("mp.c's indexes on shard1: %+v", specs)
	}
	var capped struct {
		Options struct {
			Capped bool `bson:"capped"`
		} `bson:"options"`
	}
	cur, err := d.Shards[1].Client.Database("mp").ListCollections(ctx, bson.D{{Key: "name", Value: "capped"}})
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Next(ctx) {
		t.Fatal("no capped collection on shard1")
	}
	if err := cur.Decode(&capped); err != nil || !capped.Options.Capped {
		t.Fatalf("mp.capped on shard1 is not capped: %v", err)
	}
	_ = cur.Close(ctx)

	// Both routers read and write it at its new primary.
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != want {
		t.Fatalf("count through router 0 after: %d, %v; want %d", n, err, want)
	}
	if _, err := other.InsertOne(ctx, bson.D{{Key: "_id", Value: "after"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := other.CountDocuments(ctx, bson.D{}); err != nil || n != want+1 {
		t.Fatalf("count through router 1 after: %d, %v; want %d", n, err, want+1)
	}
	n3, err := coll.CountDocuments(ctx, bson.D{{Key: "a", Value: 3}})
	if err != nil || n3 == 0 {
		t.Fatalf("indexed count: %d, %v", n3, err)
	}
	// The view moved with its database.
	if n, err := db.Collection("v").CountDocuments(ctx, bson.D{}); err != nil || n != n3 {
		t.Fatalf("the view through the router after the move: %d, %v; want %d", n, err, n3)
	}
	// The sharded collection stayed on shard0 (its chunk is there) and is read as before.
	if n, err := d.Shards[0].Client.Database("mp").Collection("sharded").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("mp.sharded on shard0: %d, %v", n, err)
	}
	if n, err := db.Collection("sharded").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("mp.sharded through the router: %d, %v", n, err)
	}

	// A move to the current primary changes nothing.
	c.run(bson.D{{Key: "movePrimary", Value: "mp"}, {Key: "to", Value: s1}})
	if primary, lm := databaseEntry(t, ctx, d, "mp"); primary != s1 || lm != lastMod+1 {
		t.Fatalf("after a no-op move: primary %s lastMod %d", primary, lm)
	}
	// A collection of the same name already on the recipient: NamespaceExists, nothing moves,
	// and the database takes writes again at once (the critical section is released).
	c.run(bson.D{{Key: "enableSharding", Value: "mp2"}, {Key: "primaryShard", Value: s0}})
	if _, err := d.Client.Database("mp2").Collection("x").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Shards[1].Client.Database("mp2").CreateCollection(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	_, lm2 := databaseEntry(t, ctx, d, "mp2")
	c.fails(bson.D{{Key: "movePrimary", Value: "mp2"}, {Key: "to", Value: s1}}, 48, "Found orphaned collection mp2.x on recipient "+s1)
	if primary, lm := databaseEntry(t, ctx, d, "mp2"); primary != s0 || lm != lm2 {
		t.Fatalf("after a failed move: primary %s lastMod %d", primary, lm)
	}
	if _, err := d.Client.Database("mp2").Collection("x").InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatalf("a write after the failed move: %v", err)
	}
	if n, err := d.Shards[0].Client.Database("mp2").Collection("x").CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("mp2.x on shard0 after the failed move: %d, %v", n, err)
	}

	c.fails(bson.D{{Key: "movePrimary", Value: "mp"}, {Key: "to", Value: "nope"}}, 70, "Requested primary shard nope does not exist")
	c.fails(bson.D{{Key: "movePrimary", Value: "admin"}, {Key: "to", Value: s0}}, 72, "Can't move primary for admin database")
	c.fails(bson.D{{Key: "movePrimary", Value: "config"}, {Key: "to", Value: s0}}, 72, "Can't move primary for config database")
	c.fails(bson.D{{Key: "movePrimary", Value: "nosuchdb"}, {Key: "to", Value: s0}}, 26, "database nosuchdb not found")
	c.fails(bson.D{{Key: "movePrimary", Value: "mp"}}, 40414, "BSON field 'movePrimary.to' is missing")
	c.fails(bson.D{{Key: "movePrimary", Value: "a.b"}, {Key: "to", Value: s0}}, 73, "invalid db name specified: a.b")
	c.fails(bson.D{{Key: "movePrimary", Value: 1}, {Key: "to", Value: s0}}, 73, "'movePrimary' must be of type String")
}

// removeShard of a shard that is the primary of a database: started (draining, the database
// to move listed), ongoing with the remaining counts, the refusals while it drains (the last
// other shard, a move onto it), movePrimary off it, the balancer draining its chunk once the
// chunk is no longer jumbo, completed; listShards no longer shows it,
// the other shard's entry carries a newer topologyTime, and the moved data is still read.
func TestShardedRemoveShard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{Args: []string{"--setParameter", "balancerRoundIntervalMs=200",
		"--setParameter", "balancerMigrationsThrottlingMs=100"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := clusterCmds{t: t, ctx: ctx, admin: d.Client.Database("admin")}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name

	c.run(bson.D{{Key: "enableSharding", Value: "rm"}, {Key: "primaryShard", Value: s1}})
	c.run(bson.D{{Key: "enableSharding", Value: "stay"}, {Key: "primaryShard", Value: s0}})
	if _, err := d.Client.Database("rm").Collection("c").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	// A sharded collection whose one chunk is on shard1 (its database's primary), flagged
	// jumbo in the catalog: removeShard counts it until it is gone.
	c.run(bson.D{{Key: "shardCollection", Value: "rm.sh"}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}})
	if _, err := d.Client.Database("rm").Collection("sh").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Config.Client.Database("config").Collection("chunks").UpdateMany(ctx, bson.D{{Key: "shard", Value: s1}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "jumbo", Value: true}}}}); err != nil {
		t.Fatal(err)
	}

	c.fails(bson.D{{Key: "removeShard", Value: "nope"}}, 70, "Shard nope not found")
	c.fails(bson.D{{Key: "removeShard", Value: "config"}}, 20, "Cannot remove the config server as a shard")
	c.fails(bson.D{{Key: "removeShard", Value: 1}}, 14, "must be of type string")

	type progress struct {
		Msg       string   `bson:"msg"`
		State     string   `bson:"state"`
		Shard     string   `bson:"shard"`
		Note      string   `bson:"note"`
		DBsToMove []string `bson:"dbsToMove"`
		Remaining *struct {
			Chunks      int64 `bson:"chunks"`
			DBs         int64 `bson:"dbs"`
			JumboChunks int64 `bson:"jumboChunks"`
		} `bson:"remaining"`
	}
	step := func() progress {
		t.Helper()
		var p progress
		if err := bson.Unmarshal(c.run(bson.D{{Key: "removeShard", Value: s1}}), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := step()
	if p.State != "started" || p.Msg != "draining started successfully" || p.Shard != s1 ||
		p.Note != "you need to drop or movePrimary these databases" || !slices.Equal(p.DBsToMove, []string{"rm"}) {
		t.Fatalf("first removeShard: %+v", p)
	}
	var sh struct {
		Draining bool `bson:"draining"`
	}
	if err := d.Config.Client.Database("config").Collection("shards").FindOne(ctx, bson.D{{Key: "_id", Value: s1}}).Decode(&sh); err != nil || !sh.Draining {
		t.Fatalf("config.shards %s: draining %v, %v", s1, sh.Draining, err)
	}
	p = step()
	if p.State != "ongoing" || p.Msg != "draining ongoing" || p.Remaining == nil || p.Remaining.Chunks != 1 ||
		p.Remaining.DBs != 1 || p.Remaining.JumboChunks != 1 || !slices.Equal(p.DBsToMove, []string{"rm"}) {
		t.Fatalf("second removeShard: %+v (remaining %+v)", p, p.Remaining)
	}
	// While shard1 drains, shard0 is the last shard not draining, and no database moves
	// onto a draining shard.
	c.fails(bson.D{{Key: "removeShard", Value: s0}}, 20, "Operation not allowed because it would remove the last shard")
	c.fails(bson.D{{Key: "movePrimary", Value: "stay"}, {Key: "to", Value: s1}}, 70, "Requested primary shard "+s1+" is draining")

	var before struct {
		TopologyTime bson.Timestamp `bson:"topologyTime"`
	}
	if err := d.Config.Client.Database("config").Collection("shards").FindOne(ctx, bson.D{},
		options.FindOne().SetSort(bson.D{{Key: "topologyTime", Value: -1}})).Decode(&before); err != nil {
		t.Fatal(err)
	}
	c.run(bson.D{{Key: "movePrimary", Value: "rm"}, {Key: "to", Value: s0}})
	p = step()
	if p.State != "ongoing" || p.Remaining == nil || p.Remaining.Chunks != 1 || p.Remaining.DBs != 0 || len(p.DBsToMove) != 0 {
		t.Fatalf("removeShard with a chunk left: %+v (remaining %+v)", p, p.Remaining)
	}
	// Once the chunk is no longer jumbo, the balancer moves it off the draining shard
	// (draining shards come first in its rounds), and the removal completes.
	c.run(bson.D{{Key: "clearJumboFlag", Value: "rm.sh"}, {Key: "find", Value: bson.D{{Key: "_id", Value: 1}}}})
	for p = step(); p.State != "completed"; p = step() {
		if p.State != "ongoing" {
			t.Fatalf("removeShard while the balancer drains: %+v", p)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("removeShard never completed: %+v (remaining %+v)", p, p.Remaining)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if p.Msg != "removeshard completed successfully" || p.Shard != s1 {
		t.Fatalf("removeShard after movePrimary and draining: %+v", p)
	}
	if n, err := d.Client.Database("rm").Collection("sh").CountDocuments(ctx, bson.D{}); err != nil || n != 3 {
		t.Fatalf("rm.sh after its chunk was drained off %s: %d documents (%v)", s1, n, err)
	}
	if n, err := d.Config.Client.Database("config").Collection("shards").CountDocuments(ctx, bson.D{{Key: "_id", Value: s1}}); err != nil || n != 0 {
		t.Fatalf("config.shards still holds %s after the removal (%d, %v)", s1, n, err)
	}
	var ls struct {
		Shards []struct {
			ID string `bson:"_id"`
		} `bson:"shards"`
	}
	if err := bson.Unmarshal(c.run(bson.D{{Key: "listShards", Value: 1}}), &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls.Shards) != 1 || ls.Shards[0].ID != s0 {
		t.Fatalf("listShards after the removal: %+v", ls)
	}
	var ctrl struct {
		TopologyTime bson.Timestamp `bson:"topologyTime"`
	}
	if err := d.Config.Client.Database("config").Collection("shards").FindOne(ctx, bson.D{{Key: "_id", Value: s0}}).Decode(&ctrl); err != nil {
		t.Fatal(err)
	}
	if !before.TopologyTime.Before(ctrl.TopologyTime) {
		t.Fatalf("topologyTime not ticked by the removal: %v, then %v", before.TopologyTime, ctrl.TopologyTime)
	}
	c.fails(bson.D{{Key: "removeShard", Value: s1}}, 70, "Shard "+s1+" not found")
	c.fails(bson.D{{Key: "removeShard", Value: s0}}, 20, "would remove the last shard")
	if n, err := d.Client.Database("rm").Collection("c").CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("rm.c after the removal: %d, %v", n, err)
	}
}
