package cluster

// Prepared transactions survive the death of their primary (issue 11, Scope 4): after
// prepareTransaction the primary is killed with SIGKILL; the new primary holds the
// transaction prepared (applied from the prepare entry) and so does the killed member once
// restarted (rebuilt by startup recovery), and so does a member that initial-syncs while it
// is prepared; a writer of a prepared document waits; a reader
// that must see it waits too, then sees the decided result; commitTransaction with a
// commitTimestamp on the new primary makes the writes visible on every member at exactly that
// timestamp and not before.

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

func currentPrepared(ctx context.Context, cl *mongo.Client) (int64, error) {
	var st struct {
		Transactions struct {
			CurrentPrepared int64 `bson:"currentPrepared"`
		} `bson:"transactions"`
	}
	err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&st)
	return st.Transactions.CurrentPrepared, err
}

// waitPrepared waits until node holds want prepared transactions.
func waitPrepared(t *testing.T, ctx context.Context, d *Deployment, node *Process, want int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := currentPrepared(ctx, d.DirectClient(node))
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d prepared transactions (%v), want %d", node.Name(), n, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestPreparedTxnSurvivesPrimaryKill(t *testing.T) {
	d := Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 3}, Options{ReplSetSettings: ShortElections,
		Args: []string{"--setParameter", "enableTestCommands=1", "--setParameter", "minSnapshotHistoryWindowInSeconds=120"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	coll := d.Client.Database("prep").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	sess, err := d.Client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	sc := mongo.NewSessionContext(ctx, sess)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(sc, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	var prep struct {
		PrepareTimestamp bson.Timestamp `bson:"prepareTimestamp"`
	}
	if err := d.Client.Database("admin").RunCommand(sc, bson.D{{Key: "prepareTransaction", Value: 1},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}}).Decode(&prep); err != nil {
		t.Fatalf("prepareTransaction: %v", err)
	}
	P := prep.PrepareTimestamp
	for _, n := range d.Nodes {
		waitPrepared(t, ctx, d, n, 1)
	}

	f, err := d.FailPrimary(ctx, FaultKill, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	primary := d.DirectClient(f.NewPrimary)
	waitPrepared(t, ctx, d, f.NewPrimary, 1)
	if err := f.Node.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.installRoutes(ctx, f.Node); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitForState(ctx, f.Node, "SECONDARY"); err != nil {
		t.Fatal(err)
	}
	waitPrepared(t, ctx, d, f.Node, 1) // rebuilt by startup recovery
	// A member that initial-syncs while the transaction is prepared holds it too: the entries
	// older than its copy come with it, and it rebuilds the transaction at the end.
	other := d.Nodes[0]
	for _, n := range d.Nodes {
		if n != f.Node && n != f.NewPrimary {
			other = n
		}
	}
	if err := d.Resync(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitForState(ctx, other, "SECONDARY"); err != nil {
		t.Fatal(err)
	}
	waitPrepared(t, ctx, d, other, 1)

	// A writer of a prepared document waits for the decision (here until its maxTimeMS).
	pcoll := primary.Database("prep").Collection("c")
	wctx, wcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = pcoll.UpdateOne(wctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}})
	wcancel()
	if err == nil {
		t.Fatal("a write to a prepared document did not wait for the decision")
	}
	// A reader that must see the prepared document (snapshot read concern) waits, then
	// sees the committed result.
	read := make(chan error, 1)
	go func() {
		var doc struct{ V int }
		err := pcoll.Database().RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 1}}},
			{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}}).Err()
		if err == nil {
			err = pcoll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc)
		}
		if err == nil && doc.V != 1 {
			err = errors.New("the waiting reader did not see the committed write")
		}
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("a snapshot read of a prepared document did not wait: %v", err)
	case <-time.After(300 * time.Millisecond):
	}

	// Commit at a timestamp after the prepare timestamp, on the new primary.
	C := bson.Timestamp{T: P.T, I: P.I + 1}
	if err := d.Client.Database("admin").RunCommand(sc, bson.D{{Key: "commitTransaction", Value: 1},
		{Key: "commitTimestamp", Value: C}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}}).Err(); err != nil {
		t.Fatalf("commitTransaction on the new primary: %v", err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if _, err := d.WaitCaughtUp(ctx, d.Nodes...); err != nil {
		t.Fatal(err)
	}
	for _, n := range d.Nodes {
		waitPrepared(t, ctx, d, n, 0)
		db := d.DirectClient(n).Database("prep")
		count := func(ts bson.Timestamp) (int, error) {
			var reply struct {
				Cursor struct {
					FirstBatch []struct{ V int } `bson:"firstBatch"`
				} `bson:"cursor"`
			}
			err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "v", Value: 1}}},
				{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: ts}}}}).Decode(&reply)
			return len(reply.Cursor.FirstBatch), err
		}
		below, err1 := count(P)
		at, err2 := count(C)
		if (err1 != nil || err2 != nil) && n != f.NewPrimary {
			// The restarted member's history starts at its recovery point and the resynced
			// one's collections at its copy, both after P: it has the committed data.
			t.Logf("%s: no snapshot at the transaction's timestamps (%v, %v)", n.Name(), err1, err2)
			if got, err := db.Collection("c").CountDocuments(ctx, bson.D{{Key: "v", Value: 1}}); err != nil || got != 2 {
				t.Fatalf("%s: %d documents of the transaction (%v), want 2", n.Name(), got, err)
			}
			continue
		}
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: snapshot reads: %v, %v", n.Name(), err1, err2)
		}
		if below != 0 {
			t.Fatalf("%s: %d documents of the transaction visible at the prepare timestamp, below the commit timestamp", n.Name(), below)
		}
		if at != 2 {
			t.Fatalf("%s: %d documents of the transaction visible at the commit timestamp, want 2", n.Name(), at)
		}
	}
	if _, err := d.CompareDBHashes(ctx, "prep", d.Nodes...); err != nil {
		t.Fatal(err)
	}
}
