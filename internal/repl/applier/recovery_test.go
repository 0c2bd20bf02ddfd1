package applier_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/applier/repltest"
	"humongo/internal/repl/fetcher"
)

func start(t *testing.T, m *repltest.Node, source string, writers int) *applier.Replication {
	t.Helper()
	r, err := applier.Start(context.Background(), applier.Deps{Engine: m.DB.Engine, Catalog: m.DB.Catalog, Colls: m.DB.Colls,
		Writer: m.Writer, Chooser: fetcher.FixedSource{Host: source}, AwaitTime: 50 * time.Millisecond, Writers: writers,
		Fatal: func(err error) { t.Errorf("fatal apply error: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func caughtUp(t *testing.T, p *repltest.Node, r *applier.Replication) {
	t.Helper()
	top := repltest.TopOfOplog(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Applier().WaitApplied(ctx, optime.MakeTimestamp(top.T, top.I)); err != nil {
		t.Fatalf("not caught up to %v: %v (lastApplied %v)", top, err, r.LastApplied())
	}
}

// TestUniqueKeysMoveWithinABatch: unique index keys handed from one document to another in
// the same batch; the parallel writers may commit out of oplog order and hit DuplicateKey,
// which the serial re-application resolves.
func TestUniqueKeysMoveWithinABatch(t *testing.T) {
	p, m := repltest.StartPrimary(t), repltest.StartMember(t)
	ctx := context.Background()
	c := p.Client.Database("app").Collection("u")
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "u", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "u", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	r := start(t, m, p.Host, 8)
	caughtUp(t, p, r)
	r.Stop()
	// Free every key, then hand key (i+1)%n to document i: in oplog order each key is
	// released before it is taken, but not necessarily in the writers' commit order.
	for i := range n {
		if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: i}}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: 1000 + i}}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: (i + n - 1) % n}}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: i}}}}); err != nil && i > 0 {
			t.Fatal(err)
		}
	}
	r = start(t, m, p.Host, 8)
	defer r.Stop()
	caughtUp(t, p, r)
	repltest.Compare(t, p, m)
	t.Logf("%d batches, %d writer groups re-applied serially", r.Applier().Batches(), r.Applier().SerialRetries())
}

// TestInterruptedBatchIsRepaired: a batch that wrote its oplog entries but was interrupted
// leaves oplogTruncateAfterPoint set; the next start truncates the oplog back to it and
// refetches, ending with the same data.
func TestInterruptedBatchIsRepaired(t *testing.T) {
	p, m := repltest.StartPrimary(t), repltest.StartMember(t)
	ctx := context.Background()
	if err := repltest.Workload(ctx, p.Client, 0, 30); err != nil {
		t.Fatal(err)
	}
	r := start(t, m, p.Host, 0)
	caughtUp(t, p, r)
	mid := r.LastApplied()
	r.Stop()
	if err := repltest.Workload(ctx, p.Client, 1, 30); err != nil {
		t.Fatal(err)
	}
	r = start(t, m, p.Host, 0)
	caughtUp(t, p, r)
	r.Stop()
	// Pretend the batches after mid were interrupted.
	if err := applier.SetOplogTruncateAfterPoint(ctx, m.DB.Engine, m.DB.Catalog, m.DB.Colls, mid.TS); err != nil {
		t.Fatal(err)
	}
	top, err := applier.RecoverTruncatePoint(ctx, m.DB.Engine, m.DB.Catalog, m.DB.Colls, m.Writer)
	if err != nil {
		t.Fatal(err)
	}
	if top != mid {
		t.Fatalf("top of oplog after truncation %v, want %v", top, mid)
	}
	if ts, err := applier.OplogTruncateAfterPoint(m.DB.Engine, m.DB.Catalog, m.DB.Colls); err != nil || !ts.IsNull() {
		t.Fatalf("truncate point not cleared: %v %v", ts, err)
	}
	r = start(t, m, p.Host, 0)
	defer r.Stop()
	if r.LastApplied() != mid {
		t.Fatalf("restarted at %v, want %v", r.LastApplied(), mid)
	}
	caughtUp(t, p, r)
	repltest.Compare(t, p, m)
}
