package cluster

// Issue 5's retryable-write acceptance across a failover (spec/replication.md, "Retryable
// Writes"; MongoDB's config.transactions): the server applies an $inc, the client never gets
// the reply, the primary changes, and the driver's retry (same lsid and txnNumber, sent to the
// new primary) must return the original result without applying the $inc again. The
// single-node case (closeConnectionAfterCommand on one member) is
// commands.TestRetryableWriteDriverRetryAfterApply; these are the failover cases.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

const retryDB, retryColl = "retry", "inc"

// retryResult is the outcome of the update run in the background.
type retryResult struct {
	res  *mongo.UpdateResult
	err  error
	done time.Time
}

// startInc runs the $inc of document id through the replica-set client in the background
// with write concern wc. The context allows the driver to retry for a minute: with a deadline
// it retries a retryable error as often as the deadline allows.
func startInc(ctx context.Context, d *Deployment, id int, wc *writeconcern.WriteConcern) (<-chan retryResult, func()) {
	coll := d.Client.Database(retryDB).Collection(retryColl, options.Collection().SetWriteConcern(wc))
	out := make(chan retryResult, 1)
	var wg sync.WaitGroup
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	wg.Go(func() {
		res, err := coll.UpdateOne(octx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
		out <- retryResult{res: res, err: err, done: time.Now()}
	})
	return out, func() { cancel(); wg.Wait() }
}

// retryStart starts a replica set of 3 with opts, seeds document id (retrySeed) and returns
// the set, a context bounding the test (cancelled at cleanup) and the primary.
func retryStart(t *testing.T, opts Options, id int) (*Deployment, context.Context, *Process) {
	t.Helper()
	d := Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 3}, opts)
	d.LogReplOnFailure(t, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	retrySeed(t, ctx, d, id)
	primary, err := d.WaitForPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return d, ctx, primary
}

// retrySeed inserts {_id: id, n: 0} on every member.
func retrySeed(t *testing.T, ctx context.Context, d *Deployment, id int) {
	t.Helper()
	coll := d.Client.Database(retryDB).Collection(retryColl, options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: len(d.Nodes)}))
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "n", Value: 0}}); err != nil {
		t.Fatalf("insert %d: %v", id, err)
	}
}

// retryN reads n of document id on node (0 and false when absent).
func retryN(ctx context.Context, d *Deployment, node *Process, id int) (int64, bool, error) {
	var doc bson.Raw
	err := d.DirectClient(node).Database(retryDB).Collection(retryColl).FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc)
	if err == mongo.ErrNoDocuments {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, ok := doc.Lookup("n").AsInt64OK()
	return n, ok, nil
}

// retryCheckExactlyOnce waits until every member applied everything and checks that n of
// document id is 1 everywhere and that the oplog holds exactly one update of it.
func retryCheckExactlyOnce(t *testing.T, ctx context.Context, d *Deployment, id int) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := d.WaitCaughtUp(cctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range d.Nodes {
		got, ok, err := retryN(ctx, d, n, id)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || got != 1 {
			t.Errorf("%s: n=%d (present %v) after one $inc, want 1: the retry applied it again or lost it", n.Name(), got, ok)
		}
	}
	p, err := d.WaitForPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := d.DirectClient(p).Database("local").Collection("oplog.rs").CountDocuments(ctx,
		bson.D{{Key: "ns", Value: retryDB + "." + retryColl}, {Key: "op", Value: "u"}, {Key: "o2._id", Value: id}})
	if err != nil {
		t.Fatal(err)
	}
	if entries != 1 {
		t.Errorf("the oplog of %s has %d update entries for _id %d, want exactly 1", p.Name(), entries, id)
	}
}

// The primary applies the $inc and a secondary replicates it, but the reply waits for w:3
// because the other secondary is paused; the primary is killed before it can answer. The
// paused secondary resumes and a new primary is elected, which must have the $inc (it is on
// a majority); the driver's retry, sent there, must find the write in the replicated
// config.transactions and return its result without applying it again.
func TestRetryableWriteAcrossKill(t *testing.T) {
	d, ctx, old := retryStart(t, Options{ReplSetSettings: ShortElections}, 1)
	var has, paused *Process
	for _, n := range d.Nodes {
		switch {
		case n == old:
		case paused == nil:
			paused = n
		default:
			has = n
		}
	}
	if err := paused.Pause(); err != nil {
		t.Fatal(err)
	}
	res, wait := startInc(ctx, d, 1, &writeconcern.WriteConcern{W: 3})
	defer wait()
	// The $inc is applied on the primary and on the unpaused secondary; the w:3 reply waits.
	waitFor(t, ctx, "the $inc on "+has.Name(), func() bool {
		n, _, err := retryN(ctx, d, has, 1)
		return err == nil && n == 1
	})
	select {
	case r := <-res:
		t.Fatalf("the w:3 update returned with a member paused: %+v %v", r.res, r.err)
	default:
	}
	// The $inc is on a majority (the primary and `has`): whoever is elected must have it,
	// and the retry must be answered from it rather than write a new entry.
	applied, err := retryOplogTS(ctx, d, has, 1)
	if err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	f := &Fault{Kind: FaultKill, Node: old, At: killedAt}
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := paused.Resume(); err != nil {
		t.Fatal(err)
	}
	p := waitNewPrimary(t, ctx, d, old, majElect)
	t.Logf("killed primary %s with the $inc applied on it and on %s (%s paused); %s primary after %v",
		old.Name(), has.Name(), paused.Name(), p.Name(), time.Since(killedAt).Round(time.Millisecond))
	// w:3 needs the killed member back.
	if err := d.Heal(ctx, f, majRejoin); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v", f)
	r := <-res
	if r.err != nil {
		t.Fatalf("the retried $inc failed: %v", r.err)
	}
	if !r.done.After(killedAt) {
		t.Fatalf("the update returned before the kill")
	}
	if r.res.MatchedCount != 1 || r.res.ModifiedCount != 1 {
		t.Errorf("retried $inc result %+v, want the original {matched 1, modified 1}", r.res)
	}
	t.Logf("the driver's retry returned %v after the kill", r.done.Sub(killedAt).Round(time.Millisecond))
	retryCheckExactlyOnce(t, ctx, d, 1)
	p, err = d.WaitForPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := retryOplogTS(ctx, d, p, 1); err != nil {
		t.Fatal(err)
	} else if ts != applied {
		t.Errorf("the $inc's oplog entry on %s is at %v, the original (on a majority before the kill) was at %v: the retry wrote it anew and the original was lost",
			p.Name(), ts, applied)
	}
}

// retryOplogTS is the timestamp of the (first) update entry of document id in node's oplog.
func retryOplogTS(ctx context.Context, d *Deployment, node *Process, id int) (bson.Timestamp, error) {
	var e struct {
		TS bson.Timestamp `bson:"ts"`
	}
	err := d.DirectClient(node).Database("local").Collection("oplog.rs").FindOne(ctx,
		bson.D{{Key: "ns", Value: retryDB + "." + retryColl}, {Key: "op", Value: "u"}, {Key: "o2._id", Value: id}}).Decode(&e)
	if err != nil {
		return bson.Timestamp{}, fmt.Errorf("the update of %d in the oplog of %s: %w", id, node.Name(), err)
	}
	return e.TS, nil
}

// The primary applies the $inc (w:"majority") and closes the connection instead of replying
// (closeConnectionAfterCommand). The driver's retry reaches the same primary, where failCommand
// holds it (blockConnection) until the primary steps down; the retry then goes to the new
// primary, which must answer from config.transactions.
func TestRetryableWriteAcrossStepDown(t *testing.T) {
	d, ctx, old := retryStart(t, Options{ReplSetSettings: ShortElections,
		Args: []string{"--setParameter", "enableTestCommands=1"}}, 2)
	admin := d.DirectClient(old).Database("admin")
	configure := func(name string, mode any, data bson.D) int64 {
		t.Helper()
		cmd := bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: mode}}
		if data != nil {
			cmd = append(cmd, bson.E{Key: "data", Value: data})
		}
		var r struct {
			Count int64 `bson:"count"`
		}
		if err := admin.RunCommand(ctx, cmd).Decode(&r); err != nil {
			t.Fatalf("configureFailPoint %s on %s: %v", name, old.Name(), err)
		}
		return r.Count
	}
	// failCommand lets the first update through ({skip: 1}) and holds every later one.
	blocked := configure("failCommand", bson.D{{Key: "skip", Value: 1}},
		bson.D{{Key: "failCommands", Value: bson.A{"update"}}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 20000}})
	configure("closeConnectionAfterCommand", bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"update"}}})
	defer func() {
		if old.Running() {
			octx, ocancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer ocancel()
			for _, fp := range []string{"failCommand", "closeConnectionAfterCommand"} {
				_ = admin.RunCommand(octx, bson.D{{Key: "configureFailPoint", Value: fp}, {Key: "mode", Value: "off"}}).Err()
			}
		}
	}()

	res, wait := startInc(ctx, d, 2, writeconcern.Majority())
	defer wait()
	// The retry is held on the old primary once failCommand fired for it.
	if err := admin.RunCommand(ctx, bson.D{{Key: "waitForFailPoint", Value: "failCommand"},
		{Key: "timesEntered", Value: blocked + 1}, {Key: "maxTimeMS", Value: 30000}}).Err(); err != nil {
		t.Fatalf("waitForFailPoint: %v", err)
	}
	if n, _, err := retryN(ctx, d, old, 2); err != nil || n != 1 {
		t.Fatalf("the first attempt's $inc on %s: n=%d %v", old.Name(), n, err)
	}
	stepStart := time.Now()
	if _, err := d.StepDown(ctx, false); err != nil {
		t.Fatal(err)
	}
	p := waitNewPrimary(t, ctx, d, old, majElect)
	t.Logf("%s stepped down with the retry held; %s primary after %v", old.Name(), p.Name(), time.Since(stepStart).Round(time.Millisecond))
	r := <-res
	if r.err != nil {
		t.Fatalf("the retried $inc failed: %v", r.err)
	}
	if r.res.MatchedCount != 1 || r.res.ModifiedCount != 1 {
		t.Errorf("retried $inc result %+v, want the original {matched 1, modified 1}", r.res)
	}
	t.Logf("the driver's retry returned %v after the step-down", r.done.Sub(stepStart).Round(time.Millisecond))
	retryCheckExactlyOnce(t, ctx, d, 2)
}
