package cluster

// Rollback acceptance test of issue 5 (spec/replication.md "Rollback"; checklist §9): an old
// primary's w:1 writes that no other member has are rolled back when it rejoins the set under
// a new primary: it goes ROLLBACK → SECONDARY, its rollback id increases (and survives a
// restart), the removed documents are in <dbpath>/rollback/<uuid>/removed.*.bson, it ends with
// the new primary's data, and no majority read ever returned a rolled-back write.
//
// How the histories diverge, without depending on timing: the secondaries' oplog fetchers are
// parked with the stopReplProducer fail point (as MongoDB's rollback tests do) while
// heartbeats go on, so the primary stays primary and takes w:1 writes nobody fetches; then
// the primary is frozen (SIGSTOP), the secondaries elect a new primary, which takes its own
// writes, and the old primary is resumed.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// rollbackBudget bounds the whole test; every wait inside is a liveness guard.
const rollbackBudget = 120 * time.Second

func TestRollbackOfDivergedPrimary(t *testing.T) {
	start := time.Now()
	d := Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 3},
		Options{ReplSetSettings: ShortElections, Args: []string{"--setParameter", "enableTestCommands=1"}})
	ctx, cancel := context.WithTimeout(context.Background(), rollbackBudget)
	defer cancel()
	old, secondaries := waitPrimaryAndSecondaries(t, ctx, d)
	majority := options.Collection().SetWriteConcern(writeconcern.Majority())
	local := options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 1, Journal: boolPtr(true)})
	oldC := d.DirectClient(old).Database("app").Collection("c", local)

	// Majority-committed data every member has.
	rbInsertBase(t, ctx, d, old, secondaries)
	rbidBefore := rbGetRBID(t, ctx, d.DirectClient(old), old)
	t.Logf("%v: set up, base data on every member", time.Since(start).Round(time.Millisecond))

	// Park the secondaries' fetchers; from the fail point's first firing on, nothing the
	// primary writes reaches them.
	for _, s := range secondaries {
		n := rbFailPoint(t, ctx, d.DirectClient(s), s, "stopReplProducer", true)
		rbWaitFailPoint(t, ctx, d.DirectClient(s), s, "stopReplProducer", n+1)
	}

	// The old primary's branch: acknowledged (w:1, journaled) but never replicated.
	for i := 100; i < 105; i++ {
		if _, err := oldC.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: "old-branch"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := oldC.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "old-branch"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := oldC.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DirectClient(old).Database("app").Collection("onlyold", local).InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	// The old primary itself sees its branch, but its majority reads do not: no majority has it.
	if docs := rbFind(t, ctx, d.DirectClient(old), "c", readconcern.Local()); !slices.Contains(docs, "104:old-branch") {
		t.Fatalf("local read on the old primary misses its own writes: %v", docs)
	}
	majorityBefore := rbFind(t, ctx, d.DirectClient(old), "c", readconcern.Majority())
	rbRequireNoOldBranch(t, "majority read on the old primary before the rollback", majorityBefore)

	// Freeze the old primary; the others elect a new one in a newer term. When it is back,
	// it will stop in ROLLBACK before modifying anything, so the test can look at it there.
	hang := rbFailPoint(t, ctx, d.DirectClient(old), old, "rollbackHangAfterTransitionToRollback", true)
	if err := old.Pause(); err != nil {
		t.Fatal(err)
	}
	newP, err := d.WaitForPrimary(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: %s elected after %s was frozen", time.Since(start).Round(time.Millisecond), newP.Name(), old.Name())
	// Let the other secondary replicate again, once it no longer counts the frozen node as a
	// sync source candidate (a fetcher talking to a frozen process would wait forever).
	for _, s := range secondaries {
		if s != newP {
			rbWaitUnhealthy(t, ctx, d, s, old)
		}
		rbFailPoint(t, ctx, d.DirectClient(s), s, "stopReplProducer", false)
	}
	newC := d.DirectClient(newP).Database("app").Collection("c", majority)
	for i := 200; i < 205; i++ {
		if _, err := newC.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: "new-branch"}}); err != nil {
			t.Fatal(err)
		}
	}
	// The same _id as one of the old branch's inserts, with other contents.
	if _, err := newC.InsertOne(ctx, bson.D{{Key: "_id", Value: 100}, {Key: "v", Value: "new-branch"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := newC.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "new-branch"}}}}); err != nil {
		t.Fatal(err)
	}
	want := rbFind(t, ctx, d.DirectClient(newP), "c", readconcern.Majority())
	t.Logf("%v: new branch written", time.Since(start).Round(time.Millisecond))

	// Heal: the old primary learns of the new term, steps down, finds that its oplog
	// diverged and rolls back.
	healed := time.Now()
	if err := old.Resume(); err != nil {
		t.Fatal(err)
	}
	// A new client for the old primary: the direct client's round-trip statistics include the
	// freeze, and the driver refuses operations whose deadline is shorter than them. It does
	// not retry, so the errors of a member in ROLLBACK reach the test (a retry would wait for
	// the member to become selectable again).
	oldCl := rbConnect(t, old)
	oldC = oldCl.Database("app").Collection("c", local)
	rbWaitFailPoint(t, ctx, oldCl, old, "rollbackHangAfterTransitionToRollback", hang+1)
	t.Logf("%s is in ROLLBACK %v after it was resumed", old.Name(), time.Since(healed).Round(time.Millisecond))
	// In ROLLBACK: no reads even with secondaryOk (NotPrimaryOrSecondary), no writes, and
	// nothing rolled back yet.
	var st ReplSetStatus
	if err := oldCl.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&st); err != nil ||
		st.MyState != stateCode("ROLLBACK") {
		t.Fatalf("status of %s while rolling back: %+v %v", old.Name(), st, err)
	}
	if _, err := rbTryFind(ctx, oldCl, "c", readconcern.Local()); rbCode(err) != 13436 {
		t.Fatalf("read on a ROLLBACK member: %v, want NotPrimaryOrSecondary (13436)", err)
	}
	if _, err := oldC.InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}}); rbCode(err) != 10107 {
		t.Fatalf("write on a ROLLBACK member: %v, want NotWritablePrimary (10107)", err)
	}
	if r := rbGetRBID(t, ctx, oldCl, old); r != rbidBefore {
		t.Fatalf("rbid %d before the rollback modified anything, want %d", r, rbidBefore)
	}
	rbFailPoint(t, ctx, oldCl, old, "rollbackHangAfterTransitionToRollback", false)
	rbidAfter := rbWaitRolledBack(t, ctx, d, oldCl, old, rbidBefore)
	t.Logf("%s rolled back and is SECONDARY %v after it was resumed", old.Name(), time.Since(healed).Round(time.Millisecond))

	// It has the new branch's data and none of its own.
	got := rbWaitFind(t, ctx, oldCl, old, want)
	rbRequireNoOldBranch(t, "the old primary after the rollback", got)
	if names, err := oldCl.Database("app").ListCollectionNames(ctx, bson.D{},
		options.ListCollections().SetNameOnly(true)); err != nil || slices.Contains(names, "onlyold") {
		t.Fatalf("collections after rollback: %v %v (app.onlyold was created on the rolled-back branch)", names, err)
	}

	// The rolled-back documents are in the rollback files (not the deleted one: recovery
	// brought back its old version).
	var saved []string
	files := rbReadFiles(t, old, func(_ string, doc bsoncore.Document) { saved = append(saved, rbDesc(doc)) })
	slices.Sort(saved)
	wantSaved := []string{"1:", "1:old-branch", "100:old-branch", "101:old-branch", "102:old-branch", "103:old-branch", "104:old-branch"}
	slices.Sort(wantSaved)
	if fmt.Sprint(saved) != fmt.Sprint(wantSaved) {
		t.Fatalf("rollback files %v hold %v, want %v", files, saved, wantSaved)
	}

	// The rollback id is durable.
	t.Logf("%v: rollback checked; restarting %s", time.Since(start).Round(time.Millisecond), old.Name())
	restartCtx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	if err := old.Restart(restartCtx); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitForState(ctx, old, "SECONDARY"); err != nil {
		t.Fatal(err)
	}
	if r := rbGetRBID(t, ctx, oldCl, old); r != rbidAfter {
		t.Fatalf("rbid %d after a restart, want %d", r, rbidAfter)
	}
	t.Logf("test took %v", time.Since(start).Round(time.Millisecond))
}

func boolPtr(b bool) *bool { return &b }

// rbConnect is a direct client to node without retryable reads or writes.
func rbConnect(t *testing.T, node *Process) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(withInternalAuth(options.Client().ApplyURI(node.URI()).SetRetryReads(false).SetRetryWrites(false).
		SetServerSelectionTimeout(10 * time.Second).SetConnectTimeout(5 * time.Second).
		SetHeartbeatInterval(500 * time.Millisecond).SetServerMonitoringMode(options.ServerMonitoringModePoll)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = cl.Disconnect(ctx)
	})
	return cl
}

// rbCode is the server error code in err (0 if none).
func rbCode(err error) int {
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, c := range []int{13436, 13435, 10107} {
			if se.HasErrorCode(c) {
				return c
			}
		}
		return -1
	}
	return 0
}

// rbDesc is "<_id>:<v>" of a test document.
func rbDesc(doc bsoncore.Document) string {
	id := doc.Lookup("_id")
	v, _ := doc.Lookup("v").StringValueOK()
	n, _ := id.AsInt64OK()
	return fmt.Sprintf("%d:%s", n, v)
}

// rbFind reads app.<coll> on cl (any member state) with read concern rc, in _id order.
func rbFind(t *testing.T, ctx context.Context, cl *mongo.Client, coll string, rc *readconcern.ReadConcern) []string {
	t.Helper()
	docs, err := rbTryFind(ctx, cl, coll, rc)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func rbTryFind(ctx context.Context, cl *mongo.Client, coll string, rc *readconcern.ReadConcern) ([]string, error) {
	c := cl.Database("app").Collection(coll, options.Collection().SetReadConcern(rc).SetReadPreference(readpref.Nearest()))
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cur, err := c.Find(fctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var out []string
	for cur.Next(fctx) {
		out = append(out, rbDesc(bsoncore.Document(cur.Current)))
	}
	return out, cur.Err()
}

// rbRequireNoOldBranch fails if docs contain any write of the old primary's branch.
func rbRequireNoOldBranch(t *testing.T, what string, docs []string) {
	t.Helper()
	for _, d := range docs {
		id, v, _ := strings.Cut(d, ":")
		if v == "old-branch" || id == "101" || id == "102" || id == "103" || id == "104" {
			t.Fatalf("%s returned the rolled-back write %s: %v", what, d, docs)
		}
	}
	if !slices.Contains(docs, "2:base") {
		t.Fatalf("%s misses document 2, whose delete was rolled back: %v", what, docs)
	}
}

// rbWaitDocs waits until node has n documents in app.<coll>.
func rbWaitDocs(t *testing.T, ctx context.Context, d *Deployment, node *Process, coll string, n int) {
	t.Helper()
	for {
		docs, err := rbTryFind(ctx, d.DirectClient(node), coll, readconcern.Local())
		if err == nil && len(docs) == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never had %d documents in app.%s (last: %v %v)", node.Name(), n, coll, docs, err)
		case <-time.After(pollInterval):
		}
	}
}

// rbWaitFind waits until app.c on node (through cl) equals want, and returns it.
func rbWaitFind(t *testing.T, ctx context.Context, cl *mongo.Client, node *Process, want []string) []string {
	t.Helper()
	for {
		docs, err := rbTryFind(ctx, cl, "c", readconcern.Local())
		if err == nil && fmt.Sprint(docs) == fmt.Sprint(want) {
			return docs
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never caught up with the new primary:\n got %v (%v)\nwant %v", node.Name(), docs, err, want)
		case <-time.After(pollInterval):
		}
	}
}

// rbFailPoint turns a fail point on (alwaysOn) or off and returns how often it had fired.
func rbFailPoint(t *testing.T, ctx context.Context, cl *mongo.Client, node *Process, name string, on bool) int64 {
	t.Helper()
	mode := "off"
	if on {
		mode = "alwaysOn"
	}
	var r struct {
		Count int64 `bson:"count"`
	}
	err := cl.Database("admin").RunCommand(ctx,
		bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: mode}}).Decode(&r)
	if err != nil {
		t.Fatalf("configureFailPoint %s on %s: %v", name, node.Name(), err)
	}
	return r.Count
}

// rbWaitFailPoint waits until the fail point has fired n times in total.
func rbWaitFailPoint(t *testing.T, ctx context.Context, cl *mongo.Client, node *Process, name string, n int64) {
	t.Helper()
	err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "waitForFailPoint", Value: name},
		{Key: "timesEntered", Value: n}, {Key: "maxTimeMS", Value: 30000}}).Err()
	if err != nil {
		t.Fatalf("waitForFailPoint %s on %s: %v", name, node.Name(), err)
	}
}

// rbWaitUnhealthy waits until node's replSetGetStatus reports member down.
func rbWaitUnhealthy(t *testing.T, ctx context.Context, d *Deployment, node, member *Process) {
	t.Helper()
	for {
		s, err := d.Status(ctx, node)
		if err == nil {
			for _, m := range s.Members {
				if m.Name == member.Addr() && m.Health == 0 {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never saw %s down (last: %+v %v)", node.Name(), member.Name(), s, err)
		case <-time.After(pollInterval):
		}
	}
}

func rbTryRBID(ctx context.Context, cl *mongo.Client) int32 {
	var r struct {
		RBID int32 `bson:"rbid"`
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := cl.Database("admin").RunCommand(cctx, bson.D{{Key: "replSetGetRBID", Value: 1}}).Decode(&r); err != nil {
		return 0
	}
	return r.RBID
}

func rbGetRBID(t *testing.T, ctx context.Context, cl *mongo.Client, node *Process) int32 {
	t.Helper()
	for {
		if r := rbTryRBID(ctx, cl); r != 0 {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("replSetGetRBID on %s never answered", node.Name())
		case <-time.After(pollInterval):
		}
	}
}
