package rangedel_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/catalog"
	"humongo/internal/cluster"
	"humongo/internal/mongoerr"
)

// A two-shard cluster of two-member shards, app.c sharded on {k: 1} and split at 10, both
// chunks on the database's primary shard (the donor), k 0..19. A cursor is opened through the
// router (batchSize 2), then the chunk [10, MaxKey) moves to the other shard: the migration
// is played by hand (the migration protocol is another part of issue 13): the documents are
// copied to the recipient, config.chunks is changed on the config server as the commit does,
// and a ready range deletion task for [10, MaxKey) is written on the donor. Then:
//   - the range deleter leaves the orphans while the cursor, which got its filter from the
//     old metadata, is open; the cursor returns every document it would have returned;
//   - new routed reads, on the primaries and on the secondaries, never see the orphans;
//   - once the cursor is exhausted the range is deleted and the task removed, which
//     cleanupOrphaned waits for.
func TestCursorOutlivesMigrationAndOrphansAreDeleted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := cluster.Start(t, cluster.Topology{Kind: cluster.Sharded, Shards: 2, Members: 2}, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(db *mongo.Database, cmd bson.D) bson.Raw {
		t.Helper()
		raw, err := db.RunCommand(ctx, cmd).Raw()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return raw
	}
	run(admin, bson.D{{Key: "enableSharding", Value: "app"}})
	run(admin, bson.D{{Key: "shardCollection", Value: "app.c"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
	run(admin, bson.D{{Key: "split", Value: "app.c"}, {Key: "middle", Value: bson.D{{Key: "k", Value: 10}}}})
	majority := options.Collection().SetWriteConcern(writeconcern.Majority())
	coll := d.Client.Database("app").Collection("c", majority)
	var docs []any
	for k := range 20 {
		docs = append(docs, bson.D{{Key: "_id", Value: k}, {Key: "k", Value: k}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}

	config := d.Config.Client.Database("config", options.Database().SetWriteConcern(writeconcern.Majority()))
	var dbEntry struct {
		Primary string `bson:"primary"`
	}
	if err := config.Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: "app"}}).Decode(&dbEntry); err != nil {
		t.Fatal(err)
	}
	donor, recipient := d.Shards[0], d.Shards[1]
	if dbEntry.Primary == recipient.Topology.Name {
		donor, recipient = recipient, donor
	}
	var collEntry struct {
		UUID bson.Binary `bson:"uuid"`
	}
	if err := config.Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: "app.c"}}).Decode(&collEntry); err != nil {
		t.Fatal(err)
	}

	// The cursor opened before the migration.
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	var seen []int
	next := func() bool {
		if !cur.Next(ctx) {
			if err := cur.Err(); err != nil {
				t.Fatal(err)
			}
			return false
		}
		seen = append(seen, int(cur.Current.Lookup("k").Int32()))
		return true
	}
	for range 3 {
		if !next() {
			t.Fatal("the cursor ended early")
		}
	}

	// The migration of [10, MaxKey): clone, commit on the config server, ready task on the donor.
	var moved []any
	for k := 10; k < 20; k++ {
		moved = append(moved, bson.D{{Key: "_id", Value: k}, {Key: "k", Value: k}})
	}
	if _, err := recipient.Client.Database("app").Collection("c", majority).InsertMany(ctx, moved); err != nil {
		t.Fatal(err)
	}
	commitMove(ctx, t, config, collEntry.UUID, recipient.Topology.Name)
	task := bson.D{
		{Key: "_id", Value: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: func() []byte { u := catalog.NewUUID(); return u[:] }()}},
		{Key: "nss", Value: "app.c"},
		{Key: "collectionUuid", Value: collEntry.UUID},
		{Key: "donorShardId", Value: donor.Topology.Name},
		{Key: "range", Value: bson.D{{Key: "min", Value: bson.D{{Key: "k", Value: 10}}}, {Key: "max", Value: bson.D{{Key: "k", Value: bson.MaxKey{}}}}}},
		{Key: "whenToClean", Value: "now"},
		{Key: "keyPattern", Value: bson.D{{Key: "k", Value: 1}}},
	}
	tasks := donor.Client.Database("config").Collection("rangeDeletions", majority)
	if _, err := tasks.InsertOne(ctx, task); err != nil {
		t.Fatal(err)
	}
	run(admin, bson.D{{Key: "flushRouterConfig", Value: 1}})
	donorColl := donor.Client.Database("app").Collection("c")
	count := func(c *mongo.Collection) int64 {
		t.Helper()
		n, err := c.CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// New routed reads see each document once: the donor filters its orphans with the new
	// metadata, on its primary and on its secondary (which the secondary read reached).
	donorSecondary := secondaryOf(ctx, t, donor)
	queriesBefore := queryCount(ctx, t, donorSecondary)
	for _, rp := range []*readpref.ReadPref{readpref.Primary(), readpref.Secondary()} {
		c := d.Client.Database("app", options.Database().SetReadPreference(rp)).Collection("c")
		c2, err := c.Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var got []bson.Raw
		if err := c2.All(ctx, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 20 {
			t.Fatalf("a routed read (%v) after the move returned %d documents, want 20", rp.Mode(), len(got))
		}
	}
	if queryCount(ctx, t, donorSecondary) == queriesBefore {
		t.Fatal("the secondary read did not reach the donor's secondary")
	}

	// The deleter waits for the open cursor: after many passes the orphans are still there.
	time.Sleep(3 * time.Second)
	if n := count(donorColl); n != 20 {
		t.Fatalf("the donor holds %d documents while a cursor of the old metadata is open, want 20", n)
	}
	if n := count(tasks); n != 1 {
		t.Fatalf("%d range deletion tasks, want 1", n)
	}
	for next() {
	}
	slices.Sort(seen)
	want := make([]int, 20)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("the cursor opened before the move returned %v, want %v", seen, want)
	}

	// cleanupOrphaned waits for the task; then the orphans are gone.
	dadmin := donor.Client.Database("admin")
	run(dadmin, bson.D{{Key: "cleanupOrphaned", Value: "app.c"}})
	if n := count(donorColl); n != 10 {
		t.Fatalf("after cleanupOrphaned the donor holds %d documents, want 10", n)
	}
	if n := count(tasks); n != 0 {
		t.Fatalf("%d range deletion tasks after cleanupOrphaned", n)
	}
	if n := count(coll); n != 20 {
		t.Fatalf("the router counts %d documents, want 20", n)
	}

	// cleanupOrphaned's errors and no-ops.
	fails := func(db *mongo.Database, cmd bson.D, code mongoerr.Code) {
		t.Helper()
		var ce mongo.CommandError
		if err := db.RunCommand(ctx, cmd).Err(); !errors.As(err, &ce) || ce.Code != int32(code) {
			t.Fatalf("%v: %v, want %s", cmd, err, code)
		}
	}
	fails(donor.Client.Database("app"), bson.D{{Key: "cleanupOrphaned", Value: "app.c"}}, mongoerr.Unauthorized)
	fails(dadmin, bson.D{{Key: "cleanupOrphaned", Value: "app.c"}, {Key: "startingFromKey", Value: bson.D{{Key: "x", Value: 1}}}},
		mongoerr.OrphanedRangeCleanUpFailed)
	fails(dadmin, bson.D{{Key: "cleanupOrphaned", Value: "nodot"}}, mongoerr.InvalidNamespace)
	fails(dadmin, bson.D{{Key: "cleanupOrphaned", Value: 1}}, mongoerr.InvalidOptions)
	run(dadmin, bson.D{{Key: "cleanupOrphaned", Value: "app.c"}, {Key: "startingFromKey", Value: bson.D{{Key: "k", Value: 5}}}})
	run(dadmin, bson.D{{Key: "cleanupOrphaned", Value: "app.missing"}})
}

// commitMove does what _configsvrCommitChunkMigration does to config.chunks for the move of
// the chunk starting at {k: 10} to shard to: the moved chunk gets the next major version, the
// donor's remaining chunk that major's minor 1.
func commitMove(ctx context.Context, t *testing.T, config *mongo.Database, uuid bson.Binary, to string) {
	t.Helper()
	chunks := config.Collection("chunks")
	var top struct {
		Lastmod bson.Timestamp `bson:"lastmod"`
	}
	if err := chunks.FindOne(ctx, bson.D{{Key: "uuid", Value: uuid}},
		options.FindOne().SetSort(bson.D{{Key: "lastmod", Value: -1}})).Decode(&top); err != nil {
		t.Fatal(err)
	}
	major := top.Lastmod.T + 1
	now := bson.Timestamp{T: uint32(time.Now().Unix()), I: 1}
	if _, err := chunks.UpdateOne(ctx, bson.D{{Key: "uuid", Value: uuid}, {Key: "min", Value: bson.D{{Key: "k", Value: 10}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "shard", Value: to}, {Key: "lastmod", Value: bson.Timestamp{T: major, I: 0}},
			{Key: "onCurrentShardSince", Value: now},
			{Key: "history", Value: bson.A{bson.D{{Key: "validAfter", Value: now}, {Key: "shard", Value: to}}}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := chunks.UpdateOne(ctx, bson.D{{Key: "uuid", Value: uuid}, {Key: "max", Value: bson.D{{Key: "k", Value: 10}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "lastmod", Value: bson.Timestamp{T: major, I: 1}}}}}); err != nil {
		t.Fatal(err)
	}
}

// secondaryOf returns a direct client to a secondary of the replica set.
func secondaryOf(ctx context.Context, t *testing.T, set *cluster.Deployment) *mongo.Client {
	t.Helper()
	for _, n := range set.Nodes {
		cl := cluster.Connect(t, n.URI())
		var h struct {
			Secondary bool `bson:"secondary"`
		}
		if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&h); err != nil {
			t.Fatal(err)
		}
		if h.Secondary {
			return cl
		}
	}
	t.Fatalf("%s has no secondary", set.Topology.Name)
	return nil
}

// queryCount is a member's serverStatus opcounters.query.
func queryCount(ctx context.Context, t *testing.T, cl *mongo.Client) int64 {
	t.Helper()
	raw, err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	n, ok := raw.Lookup("opcounters", "query").AsInt64OK()
	if !ok {
		t.Fatalf("serverStatus without opcounters.query: %s", raw)
	}
	return n
}

// The range deleter follows the shard's primary: a task waiting out orphanCleanupDelaySecs on
// the primary does not run there after it steps down, and the new primary resubmits it from
// config.rangeDeletions and deletes the orphans once its own delay (a per-node parameter) is
// over. The orphans are those of a hand-played migration of [10, MaxKey) away from the donor.
func TestRangeDeleterFollowsThePrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := cluster.Start(t, cluster.Topology{Kind: cluster.Sharded, Shards: 2, Members: 2}, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	for _, cmd := range []bson.D{
		{{Key: "enableSharding", Value: "app"}},
		{{Key: "shardCollection", Value: "app.c"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}},
		{{Key: "split", Value: "app.c"}, {Key: "middle", Value: bson.D{{Key: "k", Value: 10}}}},
	} {
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	majority := options.Collection().SetWriteConcern(writeconcern.Majority())
	var docs []any
	for k := range 20 {
		docs = append(docs, bson.D{{Key: "_id", Value: k}, {Key: "k", Value: k}})
	}
	if _, err := d.Client.Database("app").Collection("c", majority).InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	config := d.Config.Client.Database("config", options.Database().SetWriteConcern(writeconcern.Majority()))
	var dbEntry struct {
		Primary string `bson:"primary"`
	}
	if err := config.Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: "app"}}).Decode(&dbEntry); err != nil {
		t.Fatal(err)
	}
	var collEntry struct {
		UUID bson.Binary `bson:"uuid"`
	}
	if err := config.Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: "app.c"}}).Decode(&collEntry); err != nil {
		t.Fatal(err)
	}
	donor, recipient := d.Shards[0], d.Shards[1]
	if dbEntry.Primary == recipient.Topology.Name {
		donor, recipient = recipient, donor
	}
	setDelay := func(p *cluster.Process, secs int) {
		t.Helper()
		cl := cluster.Connect(t, p.URI())
		if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1},
			{Key: "orphanCleanupDelaySecs", Value: secs}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range donor.Nodes {
		setDelay(n, 3600)
	}
	commitMove(ctx, t, config, collEntry.UUID, recipient.Topology.Name)
	task := bson.D{
		{Key: "_id", Value: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: func() []byte { u := catalog.NewUUID(); return u[:] }()}},
		{Key: "nss", Value: "app.c"},
		{Key: "collectionUuid", Value: collEntry.UUID},
		{Key: "donorShardId", Value: donor.Topology.Name},
		{Key: "range", Value: bson.D{{Key: "min", Value: bson.D{{Key: "k", Value: 10}}}, {Key: "max", Value: bson.D{{Key: "k", Value: bson.MaxKey{}}}}}},
		{Key: "whenToClean", Value: "delayed"},
		{Key: "keyPattern", Value: bson.D{{Key: "k", Value: 1}}},
	}
	tasks := donor.Client.Database("config").Collection("rangeDeletions", majority)
	if _, err := tasks.InsertOne(ctx, task); err != nil {
		t.Fatal(err)
	}
	donorColl := donor.Client.Database("app").Collection("c")
	count := func() int64 {
		t.Helper()
		n, err := donorColl.CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	time.Sleep(2 * time.Second) // the primary's executor picked the task up and waits out the hour
	old, err := donor.StepDown(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	primary, err := donor.WaitForPrimary(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 20 {
		t.Fatalf("%d documents on the donor before the delay is over, want 20", n)
	}
	setDelay(old, 0) // the old primary must not run the task: it is a secondary now
	time.Sleep(2 * time.Second)
	if n := count(); n != 20 {
		t.Fatalf("%d documents on the donor: the stepped-down primary deleted", n)
	}
	setDelay(primary, 0)
	deadline := time.Now().Add(60 * time.Second)
	for count() != 10 {
		if time.Now().After(deadline) {
			t.Fatalf("the new primary never deleted the orphans (%d documents left)", count())
		}
		time.Sleep(100 * time.Millisecond)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		n, err := tasks.CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task document was never removed")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
