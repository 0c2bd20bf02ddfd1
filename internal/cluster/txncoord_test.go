package cluster

// The shard-side two-phase commit coordinator (issue 14, scope 3; internal/sharding/txncoord)
// driven without a router: the same lsid/txnNumber starts a transaction on each shard's
// primary directly, then coordinateCommitTransaction goes to shard0 naming both. Commit:
// both shards' writes become visible at one commit timestamp (snapshot reads just before
// and at it) and config.transaction_coordinators drains; abort: a participant without the
// transaction makes everyone abort; failover: the coordinator's primary is killed at a
// fail point between the protocol's steps and the new primary finishes with one outcome;
// a participant's primary killed after it prepared gets the commit on its new primary.

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

type coordTxn struct {
	lsid bson.D
	uuid []byte
	n    int64
}

func newCoordTxn(n int64) coordTxn {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	return coordTxn{lsid: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: id}}}, uuid: id, n: n}
}

func (x coordTxn) fields(extra ...bson.E) bson.D {
	return append(bson.D(extra), bson.E{Key: "lsid", Value: x.lsid}, bson.E{Key: "txnNumber", Value: x.n},
		bson.E{Key: "autocommit", Value: false})
}

// insert runs the transaction's first statement (an insert of _id) on cl.
func (x coordTxn) insert(ctx context.Context, cl *mongo.Client, id int) error {
	cmd := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}}
	cmd = append(cmd, x.fields(bson.E{Key: "startTransaction", Value: true})...)
	return cl.Database("tc").RunCommand(ctx, cmd).Err()
}

func (x coordTxn) coordinate(ctx context.Context, cl *mongo.Client, shards ...string) error {
	parts := bson.A{}
	for _, s := range shards {
		parts = append(parts, bson.D{{Key: "shardId", Value: s}})
	}
	cmd := bson.D{{Key: "coordinateCommitTransaction", Value: 1}, {Key: "participants", Value: parts}}
	cmd = append(cmd, x.fields(bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}})...)
	return cl.Database("admin").RunCommand(ctx, cmd).Err()
}

// waitCommitTimestamp waits for the transaction's commit entry in cl's oplog: the
// coordinator answers once the decision is durable, the participants commit after.
func (x coordTxn) waitCommitTimestamp(ctx context.Context, cl *mongo.Client) (bson.Timestamp, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ts, err := x.commitTimestamp(ctx, cl)
		if err == nil || time.Now().After(deadline) {
			return ts, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// commitTimestamp is the commitTimestamp of the transaction's commit entry in cl's oplog.
func (x coordTxn) commitTimestamp(ctx context.Context, cl *mongo.Client) (bson.Timestamp, error) {
	var e struct {
		O struct {
			CommitTimestamp bson.Timestamp `bson:"commitTimestamp"`
		} `bson:"o"`
	}
	err := cl.Database("local").Collection("oplog.rs").FindOne(ctx, bson.D{
		{Key: "lsid.id", Value: bson.Binary{Subtype: 4, Data: x.uuid}}, {Key: "txnNumber", Value: x.n},
		{Key: "o.commitTransaction", Value: 1}}).Decode(&e)
	return e.O.CommitTimestamp, err
}

// visibleAt reports whether _id id of tc.c is visible on cl at ts (a snapshot read).
func visibleAt(ctx context.Context, cl *mongo.Client, id int, ts bson.Timestamp) (bool, error) {
	var reply struct {
		Cursor struct {
			FirstBatch []bson.Raw `bson:"firstBatch"`
		} `bson:"cursor"`
	}
	err := cl.Database("tc").RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: id}}},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: ts}}}}).Decode(&reply)
	return len(reply.Cursor.FirstBatch) == 1, err
}

func coordinatorDocs(ctx context.Context, cl *mongo.Client) (int64, error) {
	return cl.Database("config").Collection("transaction_coordinators").CountDocuments(ctx, bson.D{})
}

func waitCoordinatorDocs(t *testing.T, ctx context.Context, cl *mongo.Client, want int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := coordinatorDocs(ctx, cl)
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("config.transaction_coordinators holds %d documents (%v), want %d", n, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkCommittedTogether checks both shards committed x at one timestamp: each shard's
// document is invisible just before it and visible at it.
func checkCommittedTogether(t *testing.T, ctx context.Context, c0, c1 *mongo.Client, x coordTxn, id0, id1 int) {
	t.Helper()
	ts0, err := x.waitCommitTimestamp(ctx, c0)
	if err != nil {
		t.Fatalf("shard0 commit entry: %v", err)
	}
	ts1, err := x.waitCommitTimestamp(ctx, c1)
	if err != nil {
		t.Fatalf("shard1 commit entry: %v", err)
	}
	if ts0 != ts1 || ts0.IsZero() {
		t.Fatalf("commit timestamps differ: shard0 %v, shard1 %v", ts0, ts1)
	}
	before := bson.Timestamp{T: ts0.T, I: ts0.I - 1}
	if ts0.I == 0 {
		before = bson.Timestamp{T: ts0.T - 1, I: 1 << 31}
	}
	for i, c := range []struct {
		cl *mongo.Client
		id int
	}{{c0, id0}, {c1, id1}} {
		v, err := visibleAt(ctx, c.cl, c.id, ts0)
		if commandCode(err) == 239 {
			// SnapshotTooOld: a member restarted (or resynced) by an earlier failover keeps
			// no history from before its restart, which the prepare may predate. The
			// equal commit entries above are the check; the document must be there now.
			t.Logf("shard%d: no snapshot at %v (%v); checking the current state", i, ts0, err)
			n, err := c.cl.Database("tc").Collection("c").CountDocuments(ctx, bson.D{{Key: "_id", Value: c.id}})
			if err != nil || n != 1 {
				t.Fatalf("shard%d: _id %d not committed (%d, %v)", i, c.id, n, err)
			}
			continue
		}
		if err != nil || !v {
			t.Fatalf("shard%d: _id %d not visible at the commit timestamp %v (%v)", i, c.id, ts0, err)
		}
		if v, err := visibleAt(ctx, c.cl, c.id, before); err != nil || v {
			t.Fatalf("shard%d: _id %d visible before the commit timestamp %v (%v)", i, c.id, ts0, err)
		}
	}
}

func commandCode(err error) int32 {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

func shardPrimaries(t *testing.T, ctx context.Context, d *Deployment) (c0, c1 *mongo.Client) {
	t.Helper()
	var cls []*mongo.Client
	for _, s := range d.Shards {
		p, err := s.WaitForPrimary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cls = append(cls, s.DirectClient(p))
	}
	return cls[0], cls[1]
}

func TestTxnCoordinatorCommitAndAbort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2, Members: 1}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c0, c1 := shardPrimaries(t, ctx, d)
	for _, cl := range []*mongo.Client{c0, c1} {
		if err := cl.Database("tc").CreateCollection(ctx, "c"); err != nil {
			t.Fatal(err)
		}
	}

	// Commit: both participants prepared, one commit timestamp.
	x := newCoordTxn(1)
	if err := x.insert(ctx, c0, 1); err != nil {
		t.Fatal(err)
	}
	if err := x.insert(ctx, c1, 2); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := x.coordinate(ctx, c0, "shard0", "shard1"); err != nil {
		t.Fatalf("coordinateCommitTransaction: %v", err)
	}
	t.Logf("coordinateCommitTransaction of 2 participants took %v", time.Since(t0))
	checkCommittedTogether(t, ctx, c0, c1, x, 1, 2)
	waitCoordinatorDocs(t, ctx, c0, 0)
	// A commit retried through another router (no participants) learns the outcome from
	// the coordinator shard's own participant.
	if err := x.coordinate(ctx, c0); err != nil {
		t.Fatalf("recovering a committed transaction's outcome: %v", err)
	}

	// Abort: shard1 never saw txnNumber 2 and refuses to prepare; shard0 aborts too.
	y := newCoordTxn(2)
	if err := y.insert(ctx, c0, 3); err != nil {
		t.Fatal(err)
	}
	err := y.coordinate(ctx, c0, "shard0", "shard1")
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 251 || !ce.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("coordinateCommitTransaction of a transaction shard1 does not have: %v", err)
	}
	waitCoordinatorDocs(t, ctx, c0, 0)
	if n, err := c0.Database("tc").Collection("c").CountDocuments(ctx, bson.D{{Key: "_id", Value: 3}}); err != nil || n != 0 {
		t.Fatalf("the aborted insert is visible on shard0: %d, %v", n, err)
	}
	// shard0's participant knows it aborted: a later recovery answers NoSuchTransaction.
	if err := y.coordinate(ctx, c0); commandCode(err) != 251 {
		t.Fatalf("recovering an aborted transaction's outcome: %v", err)
	}
	// Bad input.
	if err := y.coordinate(ctx, c0, "shard0", "shard0"); commandCode(err) != 72 {
		t.Fatalf("duplicate participants: %v", err)
	}
	for _, bad := range []struct {
		cmd  bson.D
		code int32
	}{
		{y.fields(bson.E{Key: "coordinateCommitTransaction", Value: 1}), 40414},
		{y.fields(bson.E{Key: "coordinateCommitTransaction", Value: 1}, bson.E{Key: "participants", Value: "shard0"}), 14},
		{y.fields(bson.E{Key: "coordinateCommitTransaction", Value: 1}, bson.E{Key: "participants", Value: bson.A{bson.D{}}}), 40414},
		{bson.D{{Key: "coordinateCommitTransaction", Value: 1}, {Key: "participants", Value: bson.A{}}}, 72},
	} {
		if err := c0.Database("admin").RunCommand(ctx, bad.cmd).Err(); commandCode(err) != bad.code {
			t.Fatalf("%v: want code %d, got %v", bad.cmd, bad.code, err)
		}
	}
	// A participant the cluster does not know votes abort.
	z := newCoordTxn(3)
	if err := z.insert(ctx, c0, 4); err != nil {
		t.Fatal(err)
	}
	if err := z.coordinate(ctx, c0, "shard0", "nosuchshard"); commandCode(err) != 70 {
		t.Fatalf("an unknown participant: %v", err)
	}
	waitCoordinatorDocs(t, ctx, c0, 0)
	var st struct {
		C struct {
			Created   int64 `bson:"totalCreated"`
			Committed int64 `bson:"totalCommittedTwoPhaseCommit"`
			Aborted   int64 `bson:"totalAbortedTwoPhaseCommit"`
		} `bson:"twoPhaseCommitCoordinator"`
	}
	if err := c0.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.C.Created != 3 || st.C.Committed != 1 || st.C.Aborted != 2 {
		t.Fatalf("twoPhaseCommitCoordinator: %+v", st.C)
	}
}

// The coordinator's primary (3-member shard0) is killed at each fail point; the new primary
// resumes the coordinator from its document and both shards end with the same outcome.
func TestTxnCoordinatorFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2, Members: 3}, Options{ReplSetSettings: ShortElections,
		Args: []string{"--setParameter", "enableTestCommands=1", "--setParameter", "minSnapshotHistoryWindowInSeconds=120"}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c0, c1 := shardPrimaries(t, ctx, d)
	for _, cl := range []*mongo.Client{c0, c1} {
		if err := cl.Database("tc").CreateCollection(ctx, "c"); err != nil {
			t.Fatal(err)
		}
	}
	for i, fp := range []string{"hangBeforeWritingParticipantList", "hangBeforeWritingDecision", "hangBeforeDeletingCoordinatorDoc"} {
		t.Run(fp, func(t *testing.T) {
			c0, c1 := shardPrimaries(t, ctx, d)
			x := newCoordTxn(int64(10 + i))
			id0, id1 := 100*i+1, 100*i+2
			if err := x.insert(ctx, c0, id0); err != nil {
				t.Fatal(err)
			}
			if err := x.insert(ctx, c1, id1); err != nil {
				t.Fatal(err)
			}
			if err := c0.Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: fp}, {Key: "mode", Value: "alwaysOn"}}).Err(); err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() { errc <- x.coordinate(ctx, c0, "shard0", "shard1") }()
			if err := c0.Database("admin").RunCommand(ctx, bson.D{{Key: "waitForFailPoint", Value: fp}, {Key: "timesEntered", Value: 1},
				{Key: "maxTimeMS", Value: 30000}}).Err(); err != nil {
				t.Fatal(err)
			}
			f, err := d.Shards[0].FailPrimary(ctx, FaultKill, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%v", f)
			defer func() {
				// The next round needs three members again.
				if err := d.Shards[0].Heal(ctx, f, 60*time.Second); err != nil {
					t.Error(err)
				}
			}()
			// The killed primary's client sees a network error, or the decision when it was
			// returned before the kill (hangBeforeDeletingCoordinatorDoc).
			if err := <-errc; err == nil && fp != "hangBeforeDeletingCoordinatorDoc" {
				t.Fatalf("coordinateCommitTransaction answered before the decision was durable")
			}
			n0 := d.Shards[0].DirectClient(f.NewPrimary)
			if fp != "hangBeforeWritingParticipantList" {
				// The new primary resumes the coordinator from its document on its own.
				waitCoordinatorDocs(t, ctx, n0, 0)
				checkCommittedTogether(t, ctx, n0, c1, x, id0, id1)
			}
			// The client retries on the new primary: with the participant list it joins (or
			// recreates) the coordinator; the outcome is one for both shards.
			var outcome error
			deadline := time.Now().Add(60 * time.Second)
			for {
				outcome = x.coordinate(ctx, n0, "shard0", "shard1")
				c := commandCode(outcome)
				if outcome == nil || c == 251 || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			waitCoordinatorDocs(t, ctx, n0, 0)
			if fp == "hangBeforeWritingParticipantList" {
				// Nothing was durable: the retry started a new coordination; either outcome
				// is allowed, but it must be the same on both shards.
				if outcome != nil {
					for _, c := range []*mongo.Client{n0, c1} {
						if _, err := x.commitTimestamp(ctx, c); err == nil {
							t.Fatalf("aborted (%v) but a shard committed", outcome)
						}
					}
				} else {
					checkCommittedTogether(t, ctx, n0, c1, x, id0, id1)
				}
			} else {
				if outcome != nil {
					t.Fatalf("the decision was commit-bound (all prepared) but the retry answered %v", outcome)
				}
				checkCommittedTogether(t, ctx, n0, c1, x, id0, id1)
			}
		})
	}

	// A participant's primary dies after it prepared: the decision's commitTransaction is
	// retried on its new primary, which holds the transaction prepared.
	t.Run("participantFailover", func(t *testing.T) {
		c0, c1 := shardPrimaries(t, ctx, d)
		x := newCoordTxn(20)
		if err := x.insert(ctx, c0, 1001); err != nil {
			t.Fatal(err)
		}
		if err := x.insert(ctx, c1, 1002); err != nil {
			t.Fatal(err)
		}
		fp := "hangBeforeWritingDecision"
		if err := c0.Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: fp}, {Key: "mode", Value: "alwaysOn"}}).Err(); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- x.coordinate(ctx, c0, "shard0", "shard1") }()
		if err := c0.Database("admin").RunCommand(ctx, bson.D{{Key: "waitForFailPoint", Value: fp}, {Key: "timesEntered", Value: 1},
			{Key: "maxTimeMS", Value: 30000}}).Err(); err != nil {
			t.Fatal(err)
		}
		f, err := d.Shards[1].FailPrimary(ctx, FaultKill, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v", f)
		defer func() {
			if err := d.Shards[1].Heal(ctx, f, 60*time.Second); err != nil {
				t.Error(err)
			}
		}()
		if err := c0.Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: fp}, {Key: "mode", Value: "off"}}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("coordinateCommitTransaction: %v", err)
		}
		n1 := d.Shards[1].DirectClient(f.NewPrimary)
		waitCoordinatorDocs(t, ctx, c0, 0)
		checkCommittedTogether(t, ctx, c0, n1, x, 1001, 1002)
	})
}
