package cluster

// Issue 5's replicated index builds (spec execution.md "Replica Set Index Builds", "Commit
// Quorum"): createIndexes on a replica set with data replicates startIndexBuild, the
// secondaries build in the background and vote with voteCommitIndexBuild, and the primary
// commits once every voting member voted (commitQuorum "votingMembers"). Every member ends
// with the index and validates clean; a unique build over duplicates is aborted everywhere.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// ibStart starts a replica set of 3 and fills ib.<coll> with n documents doc(0..n-1) on every
// member; it returns the set, a context bounding the test (cancelled at cleanup) and the
// collection, whose writes wait for all 3 members.
func ibStart(t *testing.T, coll string, n int, doc func(i int) bson.D) (*Deployment, context.Context, *mongo.Collection) {
	t.Helper()
	d := startSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	all := options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 3})
	c := d.Client.Database("ib").Collection(coll, all)
	docs := make([]any, n)
	for i := range n {
		docs[i] = doc(i)
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	return d, ctx, c
}

// memberIndexes lists the index names of db.coll on node through its direct client.
func memberIndexes(ctx context.Context, d *Deployment, n *Process, db, coll string) ([]string, error) {
	specs, err := memberIndexSpecs(ctx, d, n, db, coll)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		names = append(names, fmt.Sprint(s["name"]))
	}
	return names, nil
}

func contains(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// waitIndexes waits (liveness bound only) until every member's listIndexes of db.coll does
// (want) or does not (!want) show index name.
func waitIndexes(t *testing.T, ctx context.Context, d *Deployment, db, coll, name string, want bool) {
	t.Helper()
	for _, n := range d.Nodes {
		start := time.Now()
		for {
			names, err := memberIndexes(ctx, d, n, db, coll)
			if err == nil && contains(names, name) == want {
				t.Logf("%s: indexes %v after %v", n.Name(), names, time.Since(start).Round(time.Millisecond))
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: index %s present=%v never reached (last: %v, %v)", n.Name(), name, want, names, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// validateMembers runs validate {full: true} on every member.
func validateMembers(t *testing.T, ctx context.Context, d *Deployment, db, coll string) {
	t.Helper()
	for _, n := range d.Nodes {
		var res bson.M
		err := d.DirectClient(n).Database(db).RunCommand(ctx, bson.D{{Key: "validate", Value: coll}, {Key: "full", Value: true}}).Decode(&res)
		if err != nil {
			t.Fatalf("validate on %s: %v", n.Name(), err)
		}
		if res["valid"] != true {
			t.Fatalf("validate on %s: %v", n.Name(), res)
		}
		t.Logf("validate on %s: valid, nrecords %v, keysPerIndex %v", n.Name(), res["nrecords"], res["keysPerIndex"])
	}
}

func TestReplicatedIndexBuild(t *testing.T) {
	d, ctx, coll := ibStart(t, "docs", 5000, func(i int) bson.D {
		return bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 101}, {Key: "u", Value: i},
			{Key: "tags", Value: bson.A{i % 3, i % 5}}}
	})

	// Writers run during the build: their changes reach the builds' side tables on every
	// member.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w := d.Client.Database("ib").Collection("docs")
		for i := 5000; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 101}, {Key: "u", Value: i}}); err != nil {
				t.Errorf("insert during build: %v", err)
				return
			}
			if _, err := w.UpdateOne(ctx, bson.D{{Key: "_id", Value: i - 4000}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: -i}, {Key: "tags", Value: bson.A{i}}}}}); err != nil {
				t.Errorf("update during build: %v", err)
				return
			}
		}
	}()
	start := time.Now()
	var reply bson.M
	err := d.Client.Database("ib").RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "docs"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "tags", Value: 1}}}, {Key: "name", Value: "tags_1"}},
	}}}).Decode(&reply)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("createIndexes (commitQuorum votingMembers) took %v: %v", time.Since(start).Round(time.Millisecond), reply)
	if reply["commitQuorum"] != "votingMembers" {
		t.Errorf("reply commitQuorum %v", reply["commitQuorum"])
	}
	// A w:3 write after the commit: every member has applied the commit when it returns.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "marker"}}); err != nil {
		t.Fatal(err)
	}
	waitIndexes(t, ctx, d, "ib", "docs", "a_1", true)
	waitIndexes(t, ctx, d, "ib", "docs", "tags_1", true)
	validateMembers(t, ctx, d, "ib", "docs")

	// A unique build over duplicates aborts on every member.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "dup"}, {Key: "u", Value: 42}}); err != nil {
		t.Fatal(err)
	}
	_, err = d.Client.Database("ib").Collection("docs").Indexes().CreateOne(ctx,
		mongo.IndexModel{Keys: bson.D{{Key: "u", Value: 1}}, Options: options.Index().SetUnique(true)})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 11000 {
		t.Fatalf("unique build over duplicates: %v, want DuplicateKey", err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "marker2"}}); err != nil {
		t.Fatal(err)
	}
	waitIndexes(t, ctx, d, "ib", "docs", "u_1", false)
	validateMembers(t, ctx, d, "ib", "docs")
}

// TestIndexBuildCommitQuorum: with one secondary paused (SIGSTOP) a build with the default
// commitQuorum "votingMembers" does not commit; setIndexCommitQuorum "majority" lets the
// primary commit with the votes it has; the paused member commits when it resumes.
func TestIndexBuildCommitQuorum(t *testing.T) {
	d, ctx, coll := ibStart(t, "q", 2000, func(i int) bson.D {
		return bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i % 7}}
	})
	primary, err := d.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var paused *Process
	for _, n := range d.Nodes {
		if n != primary {
			paused = n
			break
		}
	}
	if err := paused.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = paused.Resume()
		}
	}()
	t.Logf("paused %s", paused.Name())

	done := make(chan error, 1)
	go func() {
		done <- d.Client.Database("ib").RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "q"}, {Key: "indexes", Value: bson.A{
			bson.D{{Key: "key", Value: bson.D{{Key: "v", Value: 1}}}, {Key: "name", Value: "v_1"}}}},
			{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 1}}}}).Err()
	}()
	// Without the paused member's vote the build cannot commit, however long we wait; two
	// seconds is enough for the others to vote (the primary has then logged their votes).
	select {
	case err := <-done:
		t.Fatalf("createIndexes returned (%v) without the paused member's vote", err)
	case <-time.After(2 * time.Second):
	}
	names, err := memberIndexes(ctx, d, primary, "ib", "q")
	if err != nil {
		t.Fatal(err)
	}
	if contains(names, "v_1") {
		t.Fatalf("v_1 listed on the primary before the commit: %v", names)
	}
	start := time.Now()
	if err := d.DirectClient(primary).Database("ib").RunCommand(ctx, bson.D{{Key: "setIndexCommitQuorum", Value: "q"},
		{Key: "indexNames", Value: bson.A{"v_1"}}, {Key: "commitQuorum", Value: "majority"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("createIndexes after setIndexCommitQuorum majority: %v", err)
	}
	t.Logf("committed %v after setIndexCommitQuorum", time.Since(start).Round(time.Millisecond))
	if err := paused.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "marker"}}); err != nil {
		t.Fatal(err)
	}
	waitIndexes(t, ctx, d, "ib", "q", "v_1", true)
	validateMembers(t, ctx, d, "ib", "q")
}
