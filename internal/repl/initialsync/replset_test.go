package initialsync_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/repl/applier/repltest"
)

// waitFor polls cond (test code only) until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicaSetReplicatesData is the end-to-end path through the coordinator: three empty
// members, replSetInitiate on one; the other two initial-sync (STARTUP2) and become
// SECONDARY; writes on the primary replicate (w:"majority" is acknowledged, which needs the
// secondaries' replSetUpdatePosition reports); all members end with identical data.
func TestReplicaSetReplicatesData(t *testing.T) {
	ns := []*repltest.Node{repltest.StartReplSetMember(t, "rs0"), repltest.StartReplSetMember(t, "rs0"),
		repltest.StartReplSetMember(t, "rs0")}
	members := bson.A{}
	for i, n := range ns {
		members = append(members, bson.D{{Key: "_id", Value: i}, {Key: "host", Value: n.Host}})
	}
	cfg := bson.D{{Key: "_id", Value: "rs0"}, {Key: "members", Value: members},
		{Key: "settings", Value: bson.D{{Key: "electionTimeoutMillis", Value: 3000}, {Key: "heartbeatIntervalMillis", Value: 200}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := ns[0].Client.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: cfg}}).Err(); err != nil {
		t.Fatalf("replSetInitiate: %v", err)
	}
	start := time.Now()
	primary := -1
	waitFor(t, 45*time.Second, "one primary and two secondaries", func() bool {
		p, s := -1, 0
		for i, n := range ns {
			h := n.RC.Hello()
			if h.IsWritablePrimary {
				p = i
			} else if h.Secondary {
				s++
			}
		}
		primary = p
		return p >= 0 && s == 2
	})
	t.Logf("primary %d after %v", primary, time.Since(start))
	p := ns[primary]
	for round := range 2 {
		if err := repltest.Workload(ctx, p.Client, round, 40); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("workload done after %v", time.Since(start))
	// w:"majority" needs a secondary to report its progress.
	wc := options.Collection().SetWriteConcern(writeconcern.Majority())
	if _, err := p.Client.Database("app").Collection("wmaj", wc).InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("w:majority insert: %v", err)
	}
	t.Logf("w:majority insert acknowledged after %v", time.Since(start))
	top := repltest.TopOfOplog(t, p)
	for i, n := range ns {
		if i == primary {
			continue
		}
		waitFor(t, 60*time.Second, "secondary caught up", func() bool {
			a := n.RC.LastApplied()
			return a.TS.Secs() > top.T || (a.TS.Secs() == top.T && a.TS.Inc() >= top.I)
		})
		repltest.Compare(t, p, n)
	}
	t.Logf("secondaries caught up and compared after %v", time.Since(start))
	// Steady-state w:"majority" latency (one secondary must fetch, apply, journal and report).
	const n = 20
	t0 := time.Now()
	for i := range n {
		if _, err := p.Client.Database("app").Collection("wmaj", wc).InsertOne(ctx, bson.D{{Key: "_id", Value: 10 + i}}); err != nil {
			t.Fatalf("w:majority insert: %v", err)
		}
	}
	t.Logf("w:majority insert latency: %v average over %d", time.Since(t0)/n, n)
	// The members that initial-synced report it in replSetGetStatus.
	synced := 0
	for i, n := range ns {
		var st bson.M
		if err := n.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&st); err != nil {
			t.Fatal(err)
		}
		if is, ok := st["initialSyncStatus"]; ok {
			synced++
			t.Logf("member %d initialSyncStatus: %v", i, is)
		}
	}
	if synced < 2 {
		t.Errorf("%d members report initialSyncStatus, want 2", synced)
	}
}
