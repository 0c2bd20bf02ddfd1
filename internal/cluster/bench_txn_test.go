package cluster

// `humongo bench txn` against a real replica set (internal/bench's MongoStore.Transfer,
// Session.WithTransaction, w:"majority" commits): every transfer succeeds, including under
// contention where transactions conflict (WriteConflict, TransientTransactionError) and the
// driver retries them, and money is conserved: the balances sum to 0 on every member.

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/bench"
)

func TestBenchTxnWorkload(t *testing.T) {
	d := Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 3}, Options{ReplSetSettings: ShortElections})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	store, err := bench.NewMongoStore(ctx, d.URI, bench.MongoOptions{Database: "ycsb", Collection: "usertable",
		WriteConcern: writeconcern.Majority(), PoolSize: 8}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close(context.Background()) }()

	// 40 records, 4 threads: few conflicts; then 3 records, 8 threads: mostly conflicts.
	for _, c := range []struct {
		records int64
		threads int
	}{{40, 4}, {3, 8}} {
		cfg := bench.Defaults()
		cfg.Workload, cfg.Records, cfg.Ops, cfg.Threads, cfg.FieldCount, cfg.FieldLength, cfg.Drop = "txn", c.records, 300, c.threads, 2, 10, true
		res, err := bench.Run(ctx, store, cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := res.Phases[len(res.Phases)-1]
		tx := p.Ops[bench.OpTxn]
		if p.Phase != "txn" || p.StoppedBy != bench.StopCompleted || tx == nil || tx.Latency.Count() != 300 {
			t.Fatalf("%d records, %d threads: phase %s stopped by %s, %d ops", c.records, c.threads, p.Phase, p.StoppedBy, p.Total())
		}
		if tx.Errors != 0 {
			t.Fatalf("%d records, %d threads: %d of 300 transfers failed, first: %s", c.records, c.threads, tx.Errors, tx.FirstError)
		}
		t.Logf("%d records, %d threads: %.0f transfers/s, p50 %v, p99 %v", c.records, c.threads, p.Throughput,
			time.Duration(tx.Latency.Quantile(0.5)), time.Duration(tx.Latency.Quantile(0.99)))

		// Every member, caught up, holds balances summing to 0, some of them moved.
		if _, err := d.WaitCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
		for _, n := range d.Nodes {
			coll := d.DirectClient(n).Database("ycsb").Collection("usertable", options.Collection().SetReadConcern(readconcern.Local()))
			cur, err := coll.Aggregate(ctx, bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil},
				{Key: "sum", Value: bson.D{{Key: "$sum", Value: "$balance"}}},
				{Key: "moved", Value: bson.D{{Key: "$sum", Value: bson.D{{Key: "$cond", Value: bson.A{
					bson.D{{Key: "$ne", Value: bson.A{bson.D{{Key: "$ifNull", Value: bson.A{"$balance", 0}}}, 0}}}, 1, 0}}}}}},
				{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}})
			if err != nil {
				t.Fatalf("%s: %v", n.Name(), err)
			}
			var out []struct {
				Sum, Moved, N int64
			}
			if err := cur.All(ctx, &out); err != nil {
				t.Fatalf("%s: %v", n.Name(), err)
			}
			if len(out) != 1 || out[0].Sum != 0 || out[0].N != c.records || out[0].Moved < 2 {
				t.Fatalf("%s after %d transfers over %d records: %+v, want %d records summing to 0, several moved", n.Name(), 300, c.records, out, c.records)
			}
		}
	}
}
