package applier_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"humongo/internal/optime"
	"humongo/internal/repl/applier/repltest"
)

// applyOpsRound is round r of the atomic workload: insert 50 documents {_id: "r-i", r},
// replace the previous round's documents 0..48 with {done: true}, delete its document 49.
// After k rounds a collection holds 49k+1 documents, 49(k-1) of them done (k ≥ 1).
func applyOpsRound(r int) bson.D {
	ops := bson.A{}
	for i := range 50 {
		ops = append(ops, bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "app.atomic"},
			{Key: "o", Value: bson.D{{Key: "_id", Value: fmt.Sprint(r, "-", i)}, {Key: "r", Value: r}}}})
	}
	if r > 0 {
		for i := range 49 {
			id := fmt.Sprint(r-1, "-", i)
			ops = append(ops, bson.D{{Key: "op", Value: "u"}, {Key: "ns", Value: "app.atomic"},
				{Key: "o", Value: bson.D{{Key: "_id", Value: id}, {Key: "r", Value: r - 1}, {Key: "done", Value: true}}},
				{Key: "o2", Value: bson.D{{Key: "_id", Value: id}}}})
		}
		ops = append(ops, bson.D{{Key: "op", Value: "d"}, {Key: "ns", Value: "app.atomic"},
			{Key: "o", Value: bson.D{{Key: "_id", Value: fmt.Sprint(r-1, "-49")}}}})
	}
	return bson.D{{Key: "applyOps", Value: ops}}
}

// atomicState reads (documents, done documents) of app.atomic in one snapshot.
func atomicState(ctx context.Context, coll *mongo.Collection) (n, done int64, err error) {
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil},
		{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
		{Key: "done", Value: bson.D{{Key: "$sum", Value: bson.D{{Key: "$cond", Value: bson.A{"$done", 1, 0}}}}}}}}}})
	if err != nil {
		return 0, 0, err
	}
	var res []struct {
		N    int64 `bson:"n"`
		Done int64 `bson:"done"`
	}
	if err := cur.All(ctx, &res); err != nil {
		return 0, 0, err
	}
	if len(res) == 0 {
		return 0, 0, nil
	}
	return res[0].N, res[0].Done, nil
}

// consistent: (n, done) is the state after some whole number of rounds.
func consistent(n, done int64) bool {
	if n == 0 {
		return done == 0
	}
	k := (n - 1) / 49
	return n == 49*k+1 && done == 49*(k-1)
}

func dbHash(ctx context.Context, t *testing.T, n *repltest.Node) string {
	t.Helper()
	var res bson.Raw
	if err := n.Client.Database("app").RunCommand(ctx, bson.D{{Key: "dbHash", Value: 1}}).Decode(&res); err != nil {
		t.Fatalf("dbHash on %s: %v", n.Host, err)
	}
	return res.Lookup("md5").StringValue()
}

// TestApplyOpsReplicatesAtomically: applyOps on the primary logs one entry per command and
// applies all-or-nothing; secondaries apply each entry atomically, so readers polling them
// (at lastApplied) and the primary only ever see whole rounds; a failing applyOps changes
// nothing; all members end with the same dbHash.
func TestApplyOpsReplicatesAtomically(t *testing.T) {
	ns := repltest.StartReplSet(t, repltest.ReplSetOptions{Members: 3})
	p := ns[0]
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := p.Client.Database("app").CreateCollection(ctx, "atomic"); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var polls atomic.Int64
	var seen sync.Map      // distinct states observed on secondaries
	for _, s := range ns { // the primary reads its newest data, secondaries at lastApplied
		coll := s.Client.Database("app").Collection("atomic",
			options.Collection().SetReadPreference(readpref.SecondaryPreferred()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				n, done, err := atomicState(ctx, coll)
				if err != nil {
					t.Errorf("read on %s: %v", s.Host, err)
					return
				}
				polls.Add(1)
				seen.Store(n, true)
				if !consistent(n, done) {
					t.Errorf("%s showed part of an applyOps: %d documents, %d done", s.Host, n, done)
					stop.Store(true)
					return
				}
			}
		}()
	}
	const rounds = 30
	oplogColl := p.Client.Database("local").Collection("oplog.rs")
	before, err := oplogColl.CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for r := range rounds {
		var res bson.Raw
		if err := p.Client.Database("admin").RunCommand(ctx, applyOpsRound(r)).Decode(&res); err != nil {
			t.Fatalf("applyOps round %d: %v", r, err)
		}
		want := int32(50)
		if r > 0 {
			want = 100
		}
		if got := res.Lookup("applied").Int32(); got != want {
			t.Fatalf("round %d: applied %d, want %d (%v)", r, got, want, res)
		}
		time.Sleep(10 * time.Millisecond) // let the readers see many of the states
	}
	// A failing applyOps changes nothing: an insert, then an update of a missing document
	// without upsert.
	bad := bson.D{{Key: "applyOps", Value: bson.A{
		bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "app.atomic"}, {Key: "o", Value: bson.D{{Key: "_id", Value: "bad"}}}},
		bson.D{{Key: "op", Value: "u"}, {Key: "ns", Value: "app.atomic"}, {Key: "o", Value: bson.D{{Key: "$v", Value: 2}, {Key: "diff", Value: bson.D{{Key: "u", Value: bson.D{{Key: "x", Value: 1}}}}}}},
			{Key: "o2", Value: bson.D{{Key: "_id", Value: "missing"}}}},
	}}}
	var ce mongo.CommandError
	if err := p.Client.Database("admin").RunCommand(ctx, bad).Err(); !errors.As(err, &ce) || ce.Code != 218 {
		t.Fatalf("applyOps updating a missing document: %v, want UpdateOperationFailed", err)
	}
	after, err := oplogColl.CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := oplogColl.CountDocuments(ctx, bson.D{{Key: "op", Value: "c"}, {Key: "o.applyOps", Value: bson.D{{Key: "$exists", Value: true}}},
		{Key: "lsid", Value: bson.D{{Key: "$exists", Value: false}}}})
	if err != nil {
		t.Fatal(err)
	}
	if entries != rounds || after-before < rounds {
		t.Fatalf("%d applyOps entries logged (%d entries in all), want one per command (%d)", entries, after-before, rounds)
	}
	// Let the readers see the end state, then compare.
	top := repltest.TopOfOplog(t, p)
	for _, s := range ns[1:] {
		for s.RC.LastApplied().TS < optime.MakeTimestamp(top.T, top.I) {
			if ctx.Err() != nil {
				t.Fatalf("%s did not catch up", s.Host)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(100 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	distinct := 0
	seen.Range(func(any, any) bool { distinct++; return true })
	t.Logf("%d polls saw %d distinct states", polls.Load(), distinct)
	n, done, err := atomicState(ctx, p.Client.Database("app").Collection("atomic"))
	if err != nil || n != 49*rounds+1 || done != 49*(rounds-1) {
		t.Fatalf("primary: %d documents, %d done (err %v)", n, done, err)
	}
	want := dbHash(ctx, t, p)
	for _, s := range ns[1:] {
		if got := dbHash(ctx, t, s); got != want {
			t.Fatalf("dbHash on %s is %s, primary's %s", s.Host, got, want)
		}
	}
}
