package cluster

// Issue 5, minValid (spec/replication.md "Rollback", "Startup Recovery"; MongoDB's
// local.replset.minvalid): a member whose data is behind minValid — rollback sets it to the
// sync source's top, and a crash keeps it — is RECOVERING (no reads: NotPrimaryOrSecondary;
// hello secondary: false; not electable) while it keeps fetching and applying, and becomes
// SECONDARY once it has applied up to minValid.
//
// The test makes a secondary's minValid lie a few seconds in the future of the primary's
// oplog (written into its local database, which is always writable, then kill -9 and
// restart): nothing can reach it before the primary writes again, so the RECOVERING state is
// observed without depending on timing; then a write on the primary takes the member past it.

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

func TestRecoveringUntilMinValid(t *testing.T) {
	start := time.Now()
	d := Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 3}, Options{ReplSetSettings: ShortElections})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	primary, err := d.WaitForPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sec *Process
	for _, n := range d.Nodes {
		if n != primary {
			sec = n
			break
		}
	}
	majority := options.Collection().SetWriteConcern(writeconcern.Majority())
	coll := d.DirectClient(primary).Database("mv").Collection("c", majority)
	for i := range 20 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.WaitCaughtUp(ctx, sec); err != nil {
		t.Fatal(err)
	}
	po, err := d.Optimes(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	// Oplog timestamps are wall-clock seconds of this machine: nothing the primary has
	// written, or writes before mvSecs, reaches minValid.
	mvSecs := uint32(time.Now().Unix()) + 3
	minValid := bson.D{{Key: "_id", Value: "minvalid"}, {Key: "ts", Value: bson.Timestamp{T: mvSecs, I: 1}},
		{Key: "t", Value: po.Optimes.Applied.T}}
	// w:1 explicitly: the default write concern is majority, which a non-primary cannot wait for.
	journaled := options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 1, Journal: boolPtr(true)})
	if _, err := d.DirectClient(sec).Database("local").Collection("replset.minvalid", journaled).
		ReplaceOne(ctx, bson.D{{Key: "_id", Value: "minvalid"}}, minValid, options.Replace().SetUpsert(true)); err != nil {
		t.Fatalf("write minValid on %s: %v", sec.Name(), err)
	}
	if err := sec.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := sec.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sec.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: %s restarted with minValid %d:1 (primary applied %v)", time.Since(start).Round(time.Millisecond),
		sec.Name(), mvSecs, po.Optimes.Applied)

	// RECOVERING, and stays so while nothing reaches minValid.
	if err := d.WaitForState(ctx, sec, "RECOVERING"); err != nil {
		t.Fatal(err)
	}
	h, err := d.Hello(ctx, sec)
	if err != nil {
		t.Fatal(err)
	}
	if h.Secondary || h.IsWritablePrimary {
		t.Fatalf("hello of a RECOVERING member: %+v", h)
	}
	// The direct connection sends secondaryOk (primaryPreferred), so the refusal is about the
	// state: NotPrimaryOrSecondary (13436). No retries: the error is the answer.
	rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
	_, err = rbConnect(t, sec).Database("mv").Collection("c").CountDocuments(rctx, bson.D{})
	rcancel()
	if code := rbCode(err); code != 13436 {
		t.Fatalf("read on a RECOVERING member: %v (code %d), want NotPrimaryOrSecondary (13436)", err, code)
	}
	o, err := d.Optimes(ctx, sec)
	if err != nil {
		t.Fatal(err)
	}
	if o.MyState != stateCode("RECOVERING") {
		t.Fatalf("%s left RECOVERING at %v before anything reached minValid", sec.Name(), o.Optimes.Applied)
	}
	logged := false
	for _, line := range sec.Tail(5000) {
		logged = logged || strings.Contains(line, "behind minValid")
	}
	if !logged {
		t.Errorf("%s did not log that its data is behind minValid", sec.Name())
	}

	// A write after minValid's second reaches the member through its fetcher and applier.
	for uint32(time.Now().Unix()) <= mvSecs {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "past-minvalid"}}); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitForState(ctx, sec, "SECONDARY"); err != nil {
		t.Fatal(err)
	}
	o, err = d.Optimes(ctx, sec)
	if err != nil {
		t.Fatal(err)
	}
	if o.Optimes.Applied.Less(OpTime{TS: bson.Timestamp{T: mvSecs, I: 1}, T: po.Optimes.Applied.T}) {
		t.Fatalf("%s SECONDARY at %v, before minValid %d:1", sec.Name(), o.Optimes.Applied, mvSecs)
	}
	n, err := d.DirectClient(sec).Database("mv").Collection("c").CountDocuments(ctx, bson.D{})
	if err != nil || n != 21 {
		t.Fatalf("read on %s after it became SECONDARY: %d documents, %v; want 21", sec.Name(), n, err)
	}
	t.Logf("%v: %s SECONDARY at %v", time.Since(start).Round(time.Millisecond), sec.Name(), o.Optimes.Applied)
}
