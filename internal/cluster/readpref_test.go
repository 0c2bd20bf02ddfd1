package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// Read preference through humongos picks shard members: with every shard primary failing
// find/getMore/count/distinct/aggregate (failCommand), reads with secondary and
// secondaryPreferred preference succeed on the secondaries, a cursor's getMores follow it
// there, orphans on a secondary are filtered, and primary reads still reach the primaries.
func TestShardedReadPreference(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	start := time.Now()
	d := Start(t, Topology{Kind: Sharded, Shards: 2, Members: 2}, Options{Args: []string{"--setParameter", "enableTestCommands=1"}})
	t.Logf("cluster up in %v", time.Since(start))
	start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(db *mongo.Database, cmd bson.D) {
		t.Helper()
		if err := db.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	run(admin, bson.D{{Key: "enableSharding", Value: "rp"}})
	run(admin, bson.D{{Key: "shardCollection", Value: "rp.c"}, {Key: "key", Value: bson.D{{Key: "_id", Value: "hashed"}}}})
	const n = 200
	majority := options.Collection().SetWriteConcern(writeconcern.Majority())
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "g", Value: i % 7}}
	}
	if _, err := d.Client.Database("rp").Collection("c", majority).InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}

	// An orphan: a copy of a document on the shard that does not own it, written directly
	// to that shard (unversioned) and replicated to its secondary.
	var owner = -1
	for i, s := range d.Shards {
		if err := s.Client.Database("rp").Collection("c").FindOne(ctx, bson.D{{Key: "_id", Value: 0}}).Err(); err == nil {
			owner = i
		}
	}
	if owner < 0 {
		t.Fatal("no shard holds _id 0")
	}
	other := d.Shards[1-owner]
	if _, err := other.Client.Database("rp").Collection("c", majority).InsertOne(ctx, bson.D{{Key: "_id", Value: 0}, {Key: "orphan", Value: true}}); err != nil {
		t.Fatal(err)
	}

	// Every shard primary now fails the router's reads (not the writes, not hello; not the
	// secondaries' oplog fetchers either: only requests from humongos).
	reads := bson.A{"find", "getMore", "count", "distinct", "aggregate"}
	var primaries, secondaries []*mongo.Client
	for _, s := range d.Shards {
		p, err := s.Primary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range s.Nodes {
			if m != p {
				secondaries = append(secondaries, s.DirectClient(m))
			}
		}
		pc := s.DirectClient(p)
		if err := pc.Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{{Key: "failCommands", Value: reads},
				// The router's connections are internal (a member's handshake), which
				// failCommand spares unless told otherwise, as in MongoDB.
				{Key: "errorCode", Value: 2}, {Key: "appName", Value: "humongos"}, {Key: "failInternalCommands", Value: true}}}}).Err(); err != nil {
			t.Fatalf("configureFailPoint on %s: %v", p.Name(), err)
		}
		primaries = append(primaries, pc)
	}
	defer func() {
		for _, pc := range primaries {
			_ = pc.Database("admin").RunCommand(context.Background(), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Err()
		}
	}()

	secondaryReads := func(t *testing.T, rp *readpref.ReadPref) {
		coll := d.Client.Database("rp").Collection("c", options.Collection().SetReadPreference(rp))
		// A cursor in batches of 10: the router's getMores continue the shards' cursors on
		// the secondaries that opened them (the primaries would fail them).
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(10).SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var got []bson.M
		if err := cur.All(ctx, &got); err != nil {
			t.Fatalf("find: %v", err)
		}
		if len(got) != n {
			t.Fatalf("find: %d documents, want %d", len(got), n)
		}
		for i, doc := range got {
			if fmt.Sprint(doc["_id"]) != fmt.Sprint(i) || doc["orphan"] != nil {
				t.Fatalf("find: document %d is %v", i, doc)
			}
		}
		// Unsorted, so that the shards' cursors really need getMores of their own.
		cur, err = coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(3))
		if err != nil {
			t.Fatal(err)
		}
		if err := cur.All(ctx, &got); err != nil || len(got) != n {
			t.Fatalf("unsorted find: %d documents, %v", len(got), err)
		}
		if c, err := coll.CountDocuments(ctx, bson.D{}); err != nil || c != n {
			t.Fatalf("countDocuments (aggregate): %d, %v", c, err)
		}
		var cnt struct {
			N int64 `bson:"n"`
		}
		if err := d.Client.Database("rp").RunCommand(ctx, bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{}}},
			options.RunCmd().SetReadPreference(rp)).Decode(&cnt); err != nil || cnt.N != n {
			t.Fatalf("count: %d, %v", cnt.N, err)
		}
		var vals []int32
		if err := coll.Distinct(ctx, "g", bson.D{}).Decode(&vals); err != nil || len(vals) != 7 {
			t.Fatalf("distinct: %v, %v", vals, err)
		}
	}
	for _, rp := range []*readpref.ReadPref{readpref.Secondary(), readpref.SecondaryPreferred(readpref.WithMaxStaleness(90 * time.Second))} {
		t.Run(rp.Mode().String(), func(t *testing.T) { secondaryReads(t, rp) })
	}
	// killCursors on a router cursor reaches the secondaries' cursors (their open cursor
	// count goes back down).
	openOnSecondaries := func() int64 {
		t.Helper()
		var total int64
		for _, sc := range secondaries {
			raw, err := sc.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Raw()
			if err != nil {
				t.Fatal(err)
			}
			v, _ := raw.Lookup("metrics", "cursor", "open", "total").AsInt64OK()
			total += v
		}
		return total
	}
	before := openOnSecondaries()
	coll := d.Client.Database("rp").Collection("c", options.Collection().SetReadPreference(readpref.Secondary()))
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil || !cur.Next(ctx) {
		t.Fatalf("find: %v %v", err, cur.Err())
	}
	if open := openOnSecondaries(); open <= before {
		t.Fatalf("secondaries hold %d open cursors with a router cursor open, %d before", open, before)
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); openOnSecondaries() > before; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("secondaries still hold %d open cursors after killCursors, %d before", openOnSecondaries(), before)
		}
	}

	// A split bumps the owning shard's version: the router sends the new shardVersion to
	// the secondary, which refreshes its own filtering metadata (StaleConfig and retry, or a
	// refresh before answering) and still filters the orphan.
	run(admin, bson.D{{Key: "split", Value: "rp.c"}, {Key: "middle", Value: bson.D{{Key: "_id", Value: int64(123456789012345)}}}})
	t.Run("after split", func(t *testing.T) { secondaryReads(t, readpref.Secondary()) })

	// Primary reads (the default) still go to the primaries: the failpoint answers them.
	err = d.Client.Database("rp").Collection("c").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 2 {
		t.Fatalf("primary read: want the primaries' failCommand error (code 2), got %v", err)
	}
	err = d.Client.Database("rp").RunCommand(ctx, bson.D{{Key: "count", Value: "c"},
		{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "primaryPreferred"}}}}).Err()
	if !errors.As(err, &ce) || ce.Code != 2 {
		t.Fatalf("primaryPreferred read: want the primaries' failCommand error (code 2), got %v", err)
	}

	// $out (from an unsharded collection) with a secondary read preference runs on the
	// secondary, as mongos's since MongoDB 5.0, which writes through its primary (whose
	// aggregate still fails).
	if _, err := d.Client.Database("rp").Collection("u", majority).InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	sec := d.Client.Database("rp").Collection("u", options.Collection().SetReadPreference(readpref.Secondary()))
	cur, err = sec.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}, {{Key: "$out", Value: "out"}}})
	if err != nil {
		t.Fatalf("$out with secondary read preference: %v", err)
	}
	_ = cur.Close(ctx)
	for _, pc := range primaries {
		run(pc.Database("admin"), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
	}
	if c, err := d.Client.Database("rp").Collection("out").CountDocuments(ctx, bson.D{}); err != nil || c != n {
		t.Fatalf("$out wrote %d documents (%v), want %d", c, err, n)
	}
	// Primary reads work again once the primaries stop failing them.
	if c, err := d.Client.Database("rp").Collection("c").CountDocuments(ctx, bson.D{}); err != nil || c != n {
		t.Fatalf("primary countDocuments: %d, %v", c, err)
	}
	// What a secondary read costs over a primary one (a targeted findOne; the secondary one
	// also asks the selected member's hello): reported, not checked.
	for _, rp := range []*readpref.ReadPref{readpref.Primary(), readpref.Secondary()} {
		c := d.Client.Database("rp").Collection("c", options.Collection().SetReadPreference(rp))
		lat := make([]time.Duration, 0, 100)
		for i := range 100 {
			t0 := time.Now()
			if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: i}}).Err(); err != nil {
				t.Fatalf("%v findOne: %v", rp.Mode(), err)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		t.Logf("findOne by shard key through humongos, %v: p50 %v", rp.Mode(), lat[len(lat)/2])
	}

	// Bad read preferences: MongoDB's codes.
	for _, bad := range []struct {
		rp   bson.D
		code int32
	}{
		{bson.D{{Key: "mode", Value: "bogus"}}, 9},
		{bson.D{{Key: "tags", Value: bson.A{}}}, 4},
		{bson.D{{Key: "mode", Value: "primary"}, {Key: "tags", Value: bson.A{bson.D{{Key: "dc", Value: "x"}}}}}, 2},
		{bson.D{{Key: "mode", Value: "secondary"}, {Key: "maxStalenessSeconds", Value: 10}}, 2},
		{bson.D{{Key: "mode", Value: "primary"}, {Key: "maxStalenessSeconds", Value: 100}}, 2},
	} {
		err := d.Client.Database("rp").RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "$readPreference", Value: bad.rp}}).Err()
		if !errors.As(err, &ce) || ce.Code != bad.code {
			t.Errorf("$readPreference %v: want code %d, got %v", bad.rp, bad.code, err)
		}
	}
	t.Logf("read preference checks in %v", time.Since(start))
}
