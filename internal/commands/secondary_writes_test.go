package commands_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/commands"
	"humongo/internal/repl/applier/repltest"
)

// Secondaries must never write replicated data of their own (issue 10): the tests below run
// an in-process three-member replica set and check that, after $out/$merge sent to a
// secondary and after TTL expiry, every member holds what the primary holds.

// wAll is a write concern every member acknowledges: once a write with it returns, every
// secondary has the primary's writes up to it.
var wAll = &writeconcern.WriteConcern{W: 3}

// syncAll writes a marker on the primary with wAll, so the secondaries have caught up.
func syncAll(t *testing.T, ctx context.Context, p *repltest.Node) {
	t.Helper()
	c := p.Client.Database("sync").Collection("marker", options.Collection().SetWriteConcern(wAll))
	if _, err := c.InsertOne(ctx, bson.D{{Key: "at", Value: time.Now().UnixNano()}}); err != nil {
		t.Fatalf("w:3 marker write: %v", err)
	}
}

func dbHash(t *testing.T, ctx context.Context, n *repltest.Node, db string) string {
	t.Helper()
	var r struct {
		MD5 string `bson:"md5"`
	}
	if err := n.Client.Database(db).RunCommand(ctx, bson.D{{Key: "dbHash", Value: 1}}).Decode(&r); err != nil {
		t.Fatalf("%s dbHash %s: %v", n.Host, db, err)
	}
	return r.MD5
}

// checkSameAndHealthy fails t unless every member has the primary's data (dbHash of dbs and
// a full dump) and replSetGetStatus shows every member healthy, PRIMARY or SECONDARY.
func checkSameAndHealthy(t *testing.T, ctx context.Context, ns []*repltest.Node, dbs ...string) {
	t.Helper()
	syncAll(t, ctx, ns[0])
	for _, db := range dbs {
		want := dbHash(t, ctx, ns[0], db)
		for _, n := range ns[1:] {
			// The secondary acknowledged the marker; its applied batch becomes readable
			// right after.
			deadline := time.Now().Add(10 * time.Second)
			for got := dbHash(t, ctx, n, db); got != want; got = dbHash(t, ctx, n, db) {
				if time.Now().After(deadline) {
					t.Errorf("dbHash of %s: %s on the primary, %s on %s", db, want, got, n.Host)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	for _, n := range ns[1:] {
		repltest.Compare(t, ns[0], n)
	}
	// A secondary's oplog holds only the primary's entries: an entry of its own (even one
	// whose write it undid since) is a divergence the next failover would expose.
	primaryOps := oplogKeys(t, ctx, ns[0])
	for _, n := range ns[1:] {
		for k := range oplogKeys(t, ctx, n) {
			if !primaryOps[k] {
				t.Errorf("%s logged an entry of its own: %s", n.Host, k)
			}
		}
	}
	for _, n := range ns {
		var st struct {
			Members []struct {
				Name     string `bson:"name"`
				Health   float64
				StateStr string `bson:"stateStr"`
			} `bson:"members"`
		}
		if err := n.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&st); err != nil {
			t.Fatalf("%s replSetGetStatus: %v", n.Host, err)
		}
		for _, m := range st.Members {
			if m.Health != 1 || (m.StateStr != "PRIMARY" && m.StateStr != "SECONDARY") {
				t.Errorf("%s sees member %s health %v state %s", n.Host, m.Name, m.Health, m.StateStr)
			}
		}
	}
}

// oplogKeys lists n's oplog entries as "ts op ns" strings.
func oplogKeys(t *testing.T, ctx context.Context, n *repltest.Node) map[string]bool {
	t.Helper()
	cur, err := n.Client.Database("local").Collection("oplog.rs").Find(ctx, bson.D{})
	if err != nil {
		t.Fatalf("%s: reading the oplog: %v", n.Host, err)
	}
	defer cur.Close(ctx)
	out := map[string]bool{}
	for cur.Next(ctx) {
		e := cur.Current
		s, i := e.Lookup("ts").Timestamp()
		op, _ := e.Lookup("op").StringValueOK()
		ns, _ := e.Lookup("ns").StringValueOK()
		out[fmt.Sprintf("%d|%d %s %s", s, i, op, ns)] = true
	}
	if err := cur.Err(); err != nil {
		t.Fatalf("%s: reading the oplog: %v", n.Host, err)
	}
	return out
}

// connectSecondaryPreferred connects straight to n with readPreference secondaryPreferred,
// as the driver's aggregate-write-readPreference spec tests do.
func connectSecondaryPreferred(t *testing.T, n *repltest.Node) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(options.Client().
		ApplyURI("mongodb://" + n.Host + "/?directConnection=true&readPreference=secondaryPreferred").
		SetServerSelectionTimeout(30 * time.Second).SetServerMonitoringMode(options.ServerMonitoringModePoll))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	return cl
}

func TestSecondaryOutAndMergeWriteOnPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member replica set")
	}
	ns := repltest.StartReplSet(t, repltest.ReplSetOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := ns[0]
	db := p.Client.Database("db0", options.Database().SetWriteConcern(wAll))
	var src []any
	for i := range 10 {
		src = append(src, bson.D{{Key: "_id", Value: i}, {Key: "x", Value: i}})
	}
	if _, err := db.Collection("coll0").InsertMany(ctx, src); err != nil {
		t.Fatal(err)
	}
	// $out's target exists with an index and a document the $out replaces.
	if _, err := db.Collection("out").InsertOne(ctx, bson.D{{Key: "_id", Value: "old"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("out").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	// $merge's target has _id 1 (merged) and _id 100 (kept).
	if _, err := db.Collection("merged").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "kept", Value: true}}, bson.D{{Key: "_id", Value: 100}}}); err != nil {
		t.Fatal(err)
	}

	sec := connectSecondaryPreferred(t, ns[1]).Database("db0")
	// w:3 returned once the secondary applied coll0; wait until its reads see it too.
	for deadline := time.Now().Add(10 * time.Second); ; {
		k, err := sec.Collection("coll0").CountDocuments(ctx, bson.D{})
		if err == nil && k == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the secondary reads %d documents of db0.coll0 (%v), want 10", k, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	run := func(pipe bson.A) {
		t.Helper()
		cur, err := sec.Collection("coll0").Aggregate(ctx, pipe)
		if err != nil {
			// Go on: what the secondary wrote before failing shows below.
			t.Errorf("aggregate %v on a secondary: %v", pipe, err)
			return
		}
		_ = cur.Close(ctx)
	}
	run(bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$lt", Value: 3}}}}}},
		bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: "merged"}, {Key: "whenMatched", Value: "merge"}, {Key: "whenNotMatched", Value: "insert"}}}}})
	run(bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$gt", Value: 5}}}}}}, bson.D{{Key: "$out", Value: "out"}}})
	// As the driver's spec test does: $out into a collection that does not exist yet.
	run(bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$gt", Value: 7}}}}}}, bson.D{{Key: "$out", Value: "fresh"}}})

	// The primary holds the results.
	count := func(coll string, filter bson.D) int64 {
		t.Helper()
		n, err := p.Client.Database("db0").Collection(coll).CountDocuments(ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count("out", bson.D{}); n != 4 {
		t.Errorf("primary's db0.out holds %d documents, want the 4 of the $out", n)
	}
	if n := count("out", bson.D{{Key: "_id", Value: "old"}}); n != 0 {
		t.Error("$out kept the target's old document")
	}
	idx, err := p.Client.Database("db0").Collection("out").Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) != 2 {
		t.Errorf("$out lost the target's indexes: %v", idx)
	}
	if n := count("fresh", bson.D{}); n != 2 {
		t.Errorf("primary's db0.fresh holds %d documents, want the 2 of the $out", n)
	}
	if n := count("merged", bson.D{}); n != 4 {
		t.Errorf("primary's db0.merged holds %d documents, want 4 (0, 1, 2 and 100)", n)
	}
	if n := count("merged", bson.D{{Key: "_id", Value: 1}, {Key: "kept", Value: true}, {Key: "x", Value: 1}}); n != 1 {
		t.Error("$merge whenMatched merge did not merge _id 1")
	}

	// The primary's next writes to those namespaces apply on the secondaries.
	if _, err := db.Collection("out").InsertOne(ctx, bson.D{{Key: "_id", Value: "later"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("merged").UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	checkSameAndHealthy(t, ctx, ns, "db0")
}

func TestReplSetTTLDeletesOnPrimaryOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member replica set")
	}
	ns := repltest.StartReplSet(t, repltest.ReplSetOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := ns[0]
	setParam := func(n *repltest.Node, name string, v any) {
		t.Helper()
		if err := n.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: name, Value: v}}).Err(); err != nil {
			t.Fatalf("%s setParameter %s: %v", n.Host, name, err)
		}
	}
	// Every member runs a TTL monitor with one-second passes; the primary's is off at first,
	// so a secondary that deleted on its own would show.
	setParam(p, "ttlMonitorEnabled", false)
	for _, n := range ns {
		setParam(n, "ttlMonitorSleepSecs", 1)
		stop := commands.StartTTLMonitor(context.Background(), n.Srv.State())
		t.Cleanup(stop)
	}
	c := p.Client.Database("app").Collection("events", options.Collection().SetWriteConcern(wAll))
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(0)}); err != nil {
		t.Fatal(err)
	}
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	var docs []any
	for i := range 20 {
		at := past
		if i%4 == 0 {
			at = future
		}
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "at", Value: at}})
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	count := func(n *repltest.Node) int64 {
		t.Helper()
		k, err := n.Client.Database("app").Collection("events").CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatalf("%s count: %v", n.Host, err)
		}
		return k
	}
	time.Sleep(3 * time.Second) // two passes or more of every secondary's monitor
	for _, n := range ns[1:] {
		if k := count(n); k != 20 {
			t.Errorf("secondary %s holds %d documents with the primary's TTL monitor off, want 20: it deleted on its own", n.Host, k)
		}
	}
	checkSameAndHealthy(t, ctx, ns, "app")

	// The primary deletes; the secondaries apply its deletes.
	setParam(p, "ttlMonitorEnabled", true)
	deadline := time.Now().Add(20 * time.Second)
	for count(p) != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the primary's TTL monitor left %d documents, want 5", count(p))
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkSameAndHealthy(t, ctx, ns, "app")
	for _, n := range ns[1:] {
		if k := count(n); k != 5 {
			t.Errorf("secondary %s holds %d documents after the primary's deletes, want 5", n.Host, k)
		}
	}
}
