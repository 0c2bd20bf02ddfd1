package coord_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/failpoint"
	"humongo/internal/mongoerr"
)

// startSet starts a three-member set with settings and returns the primary and another
// member, once every member has the first write.
func startSet(t *testing.T, ctx context.Context, settings bson.D) (a, b *node) {
	t.Helper()
	ns := []*node{startNode(t, "rs0"), startNode(t, "rs0"), startNode(t, "rs0")}
	members := bson.A{}
	for i, n := range ns {
		members = append(members, bson.D{{Key: "_id", Value: i}, {Key: "host", Value: n.host}})
	}
	cfg := bson.D{{Key: "_id", Value: "rs0"}, {Key: "members", Value: members}, {Key: "settings", Value: settings}}
	if _, err := ns[0].admin(t, bson.D{{Key: "replSetInitiate", Value: cfg}}); err != nil {
		t.Fatalf("replSetInitiate: %v", err)
	}
	var p int
	waitFor(t, 20*time.Second, "one primary and two secondaries", func() bool {
		var s int
		p, s = states(t, ns)
		return p >= 0 && s == 2
	})
	a, b = ns[p], ns[(p+1)%3]
	w3 := options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 3})
	if _, err := a.client.Database("test").Collection("c", w3).InsertOne(ctx, bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatalf("insert w:3: %v", err)
	}
	return a, b
}

// oplogTail returns n's newest k oplog entries, newest first.
func oplogTail(t *testing.T, ctx context.Context, n *node, k int64) []bson.M {
	t.Helper()
	cur, err := n.client.Database("local").Collection("oplog.rs").Find(ctx, bson.D{},
		options.Find().SetSort(bson.D{{Key: "$natural", Value: -1}}).SetLimit(k))
	if err != nil {
		t.Fatal(err)
	}
	var es []bson.M
	if err := cur.All(ctx, &es); err != nil {
		t.Fatal(err)
	}
	return es
}

// TestStepUpWaitsForTheLastBatch: a member elected while its applier is in the middle of a
// batch (held by pauseBatchApplicationBeforeCompletion) stays PRIMARY-but-not-writable until
// the batch is done: no user write is accepted and no "new primary" entry is written before
// the batch is applied and visible (spec "Transitioning to PRIMARY": drain mode). Catch-up is
// off (catchUpTimeoutMillis 0), so only drain holds the node back.
func TestStepUpWaitsForTheLastBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Chaining is off: a secondary syncing from the other would never see the held batch.
	a, b := startSet(t, ctx, bson.D{{Key: "electionTimeoutMillis", Value: 2000}, {Key: "heartbeatIntervalMillis", Value: 200},
		{Key: "catchUpTimeoutMillis", Value: 0}, {Key: "chainingAllowed", Value: false}})

	// Both secondaries fetch the next write from the primary and stop inside its batch:
	// neither reports it, so the one that steps up gets the other's vote.
	fp := failpoint.Register("pauseBatchApplicationBeforeCompletion")
	entered := fp.Configure(failpoint.AlwaysOn, 0, 0, nil)
	t.Cleanup(fp.Disable) // runs before the nodes stop: a held batch would block their shutdown
	w1 := options.Collection().SetWriteConcern(writeconcern.W1())
	if _, err := a.client.Database("test").Collection("c", w1).InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if err := fp.WaitForTimesEntered(ctx, entered+2); err != nil {
		t.Fatalf("both secondaries in the batch: %v", err)
	}

	t.Logf("both secondaries hold the batch")
	if _, err := b.admin(t, bson.D{{Key: "replSetStepUp", Value: 1}}); err != nil {
		t.Fatalf("replSetStepUp: %v", err)
	}
	waitFor(t, 20*time.Second, "the stepped-up member to be PRIMARY", func() bool { return b.rc.Hello().IsWritablePrimary || isPrimaryState(t, b) })
	t.Logf("stepped up")
	// The batch is still held: the member must stay unwritable however long that lasts.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if b.rc.IsWritablePrimary() {
			t.Fatal("the new primary accepts writes while its applier is still in its last batch")
		}
	}
	t.Logf("still not writable after a second")
	reply := rawCommand(t, b.host, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 1}}}, {Key: "$db", Value: "test"}})
	if code, _ := reply.Lookup("code").AsInt64OK(); code != int64(mongoerr.NotWritablePrimary) {
		t.Fatalf("insert while draining: want NotWritablePrimary, got %v", reply)
	}

	fp.Disable()
	waitFor(t, 20*time.Second, "the new primary to become writable", b.rc.IsWritablePrimary)
	if _, err := b.client.Database("test").Collection("c", w1).InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatalf("insert on the new primary: %v", err)
	}
	// Its oplog: the held batch's insert, then "new primary", then the user write.
	es := oplogTail(t, ctx, b, 3)
	if len(es) != 3 || es[2]["op"] != "i" || toM(es[2]["o"])["_id"] != int32(1) ||
		es[1]["op"] != "n" || toM(es[1]["o"])["msg"] != "new primary" ||
		es[0]["op"] != "i" || toM(es[0]["o"])["_id"] != int32(2) {
		t.Fatalf("oplog tail (newest first): want insert _id 2, new primary, insert _id 1; got %v", es)
	}
}

// TestStepUpCatchesUp: a member elected without an entry that the old primary (still up)
// has catches up to it before it drains and accepts writes (spec "Transitioning to PRIMARY":
// primary catch-up; catchUpTimeoutMillis -1 waits as long as it takes), so the old primary's
// write is not rolled back. Without catch-up the new primary would write "new primary" at
// once and the entry would be lost.
func TestStepUpCatchesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := startSet(t, ctx, bson.D{{Key: "electionTimeoutMillis", Value: 2000}, {Key: "heartbeatIntervalMillis", Value: 200},
		{Key: "catchUpTimeoutMillis", Value: -1}})

	// The secondaries stop fetching; the primary takes a write only it has.
	fp := failpoint.Register("stopReplProducer")
	fp.Configure(failpoint.AlwaysOn, 0, 0, nil)
	t.Cleanup(fp.Disable)
	w1 := options.Collection().SetWriteConcern(writeconcern.W1())
	if _, err := a.client.Database("test").Collection("c", w1).InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	// b learns the primary's newer optime from heartbeats: that is its catch-up target.
	time.Sleep(time.Second)
	if _, err := b.admin(t, bson.D{{Key: "replSetStepUp", Value: 1}}); err != nil {
		t.Fatalf("replSetStepUp: %v", err)
	}
	waitFor(t, 20*time.Second, "the stepped-up member to be PRIMARY", func() bool { return isPrimaryState(t, b) })
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if b.rc.IsWritablePrimary() {
			t.Fatal("the new primary accepts writes before it caught up")
		}
	}

	fp.Disable()
	waitFor(t, 20*time.Second, "the new primary to become writable", b.rc.IsWritablePrimary)
	es := oplogTail(t, ctx, b, 2)
	if len(es) != 2 || es[1]["op"] != "i" || toM(es[1]["o"])["_id"] != int32(1) ||
		es[0]["op"] != "n" || toM(es[0]["o"])["msg"] != "new primary" {
		t.Fatalf("oplog tail (newest first): want new primary, then the old primary's insert _id 1; got %v", es)
	}
}

// isPrimaryState reports whether n says it is PRIMARY in replSetGetStatus (hello's
// isWritablePrimary is false while it drains).
func isPrimaryState(t *testing.T, n *node) bool {
	st, err := n.admin(t, bson.D{{Key: "replSetGetStatus", Value: 1}})
	return err == nil && st["myState"] == int32(1)
}
