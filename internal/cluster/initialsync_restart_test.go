package cluster

// Issue 5, the durable initial-sync flag (spec/replication.md "Initial Sync" step 1, "Startup
// Recovery"; checklist §10-11: "kill -9 mid-sync → sync restarts"): a member killed while its
// initial sync is under way restarts with a partial copy and a non-empty oplog; the flag makes
// it skip startup recovery, enter STARTUP2 (never SECONDARY) and copy everything again, ending
// with the same data as the others.

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

func TestInitialSyncRestartsAfterKill(t *testing.T) {
	start := time.Now()
	opts := Options{ReplSetSettings: ShortElections, Args: []string{"--setParameter", "enableTestCommands=1"}}
	d := Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 2}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	t.Logf("replica set of 2 up in %v", time.Since(start).Round(time.Millisecond))

	db := d.Client.Database("isyncrestart")
	for b := 0; b < 2000; b += 500 {
		var docs []any
		for i := b; i < b+500; i++ {
			docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i % 97}, {Key: "pad", Value: strings.Repeat("x", 64)}})
		}
		if _, err := db.Collection("docs").InsertMany(ctx, docs); err != nil {
			t.Fatalf("preload: %v", err)
		}
	}
	if _, err := db.Collection("docs").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
		t.Fatalf("createIndex: %v", err)
	}

	// The new member is held after it set the flag, dropped its data and seeded its oplog,
	// before it clones anything. It does not vote, so killing it costs the set nothing.
	n2, err := d.StartNewMember(t, ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	cl := d.DirectClient(n2)
	fired := rbFailPoint(t, ctx, cl, n2, "initialSyncHangBeforeCopyingDatabases", true)
	if err := d.AddToConfig(ctx, n2, bson.D{{Key: "votes", Value: 0}, {Key: "priority", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	rbWaitFailPoint(t, ctx, cl, n2, "initialSyncHangBeforeCopyingDatabases", fired+1)
	o, err := d.Optimes(ctx, n2)
	if err != nil {
		t.Fatal(err)
	}
	if o.MyState != stateCode("STARTUP2") {
		t.Fatalf("%s is in state %d while its initial sync is held, want STARTUP2 (5)", n2.Name(), o.MyState)
	}
	t.Logf("%s held in STARTUP2 before cloning at %v", n2.Name(), time.Since(start).Round(time.Millisecond))

	// More writes the first attempt never sees, then the crash. A journaled write of its own
	// first makes what the held attempt wrote (the seeded oplog entry) survive the kill: the
	// member restarts with a non-empty oplog, which alone would pass for a member with data.
	if _, err := db.Collection("docs").InsertOne(ctx, bson.D{{Key: "_id", Value: "after-hold"}}); err != nil {
		t.Fatal(err)
	}
	// w:1 explicitly: the default write concern is majority, which a non-primary cannot wait for.
	journaled := options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 1, Journal: boolPtr(true)})
	if _, err := cl.Database("local").Collection("isyncrestart", journaled).InsertOne(ctx, bson.D{{Key: "flush", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := n2.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := n2.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n2.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s killed and restarted at %v", n2.Name(), time.Since(start).Round(time.Millisecond))
	flagged := false
	for _, line := range n2.Tail(5000) {
		flagged = flagged || strings.Contains(line, "Initial sync flag set; skipping startup recovery")
	}
	if !flagged {
		t.Errorf("%s did not find its initial sync flag set at restart", n2.Name())
	}

	// It copies again: STARTUP2 until a finished initial sync, never SECONDARY before.
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	defer scancel()
	var states []int
	var status bson.Raw
	waitFor(t, sctx, n2.Name()+" SECONDARY after a new initial sync", func() bool {
		raw, err := cl.Database("admin").RunCommand(sctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Raw()
		if err != nil {
			return false
		}
		state, _ := raw.Lookup("myState").AsInt64OK()
		if len(states) == 0 || states[len(states)-1] != int(state) {
			states = append(states, int(state))
		}
		is, ok := raw.Lookup("initialSyncStatus").DocumentOK()
		finished := ok && is.Lookup("initialSyncEnd").Type != 0
		if state == 2 && !finished {
			t.Fatalf("%s reported SECONDARY before its new initial sync finished: %.600s", n2.Name(), raw.String())
		}
		status = is
		return state == 2 && finished
	})
	t.Logf("%s states after the restart: %v; initialSyncStatus %v", n2.Name(), states, status)
	if copied, _ := status.Lookup("databases", "documentsCopied").AsInt64OK(); copied < 2000 {
		t.Errorf("the new initial sync copied %d documents, want all of them (>= 2000)", copied)
	}

	if _, err := db.Collection("docs").InsertOne(ctx, bson.D{{Key: "_id", Value: "after-sync"}}); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	defer ccancel()
	if _, err := d.WaitCaughtUp(cctx); err != nil {
		t.Fatal(err)
	}
	hashes, err := d.CompareDBHashes(ctx, "isyncrestart")
	for name, h := range hashes {
		t.Logf("dbHash on %s: %v", name, h.Collections)
	}
	if err != nil {
		t.Fatalf("members differ after the restarted initial sync:\n%v", err)
	}
	if _, ok := hashes[n2.Name()].Collections["docs"]; !ok {
		t.Fatalf("docs missing on %s", n2.Name())
	}
	primary, err := d.WaitForPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := indexNames(t, ctx, d, n2, "isyncrestart"), indexNames(t, ctx, d, primary, "isyncrestart"); got != want {
		t.Errorf("indexes of docs: %s on %s, %s on the primary", got, n2.Name(), want)
	}
}
