package cluster

// `humongo bench txn --cross-shard` through a router (issue 14's performance point): the
// store places the records of a range-sharded collection on both shards (split at the median
// record, upper chunk moved), the run alternates transfers within one shard (TXN: one
// participant, committed directly) and across the two (TXN-CROSS-SHARD: two-phase commit
// through the coordinator), every transfer succeeds, both kinds are reported, and money is
// conserved: the balances read through the router sum to 0, on both shards.

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

func TestBenchTxnCrossShard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store, err := bench.NewMongoStore(ctx, d.URI, bench.MongoOptions{WriteConcern: writeconcern.Majority(), PoolSize: 4,
		ShardKey: bench.ShardKeyRange}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close(context.Background()) }()
	cfg := bench.Defaults()
	cfg.Workload, cfg.Records, cfg.Ops, cfg.Threads, cfg.FieldCount, cfg.FieldLength, cfg.Drop, cfg.CrossShard = "txn", 50, 200, 2, 2, 10, true, true
	res, err := bench.Run(ctx, store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Phases[len(res.Phases)-1]
	single, cross := p.Ops[bench.OpTxn], p.Ops[bench.OpTxnCross]
	if p.Phase != "txn" || p.StoppedBy != bench.StopCompleted || single == nil || cross == nil || p.Total() != 200 {
		t.Fatalf("phase %s stopped by %s, %d ops: %+v / %+v", p.Phase, p.StoppedBy, p.Total(), single, cross)
	}
	if p.Errors() != 0 {
		t.Fatalf("%d of 200 transfers failed: %q / %q", p.Errors(), single.FirstError, cross.FirstError)
	}
	if single.Latency.Count() < 50 || cross.Latency.Count() < 50 {
		t.Fatalf("%d single-shard and %d cross-shard transfers, want about 100 each", single.Latency.Count(), cross.Latency.Count())
	}
	t.Logf("single-shard p50 %v p99 %v; cross-shard p50 %v p99 %v",
		time.Duration(single.Latency.Quantile(0.5)), time.Duration(single.Latency.Quantile(0.99)),
		time.Duration(cross.Latency.Quantile(0.5)), time.Duration(cross.Latency.Quantile(0.99)))

	// The records are on both shards and the balances, read through the router, sum to 0.
	// The read is a snapshot read: a local read ignores prepare conflicts (as MongoDB's
	// does), so it could see the last cross-shard transfer committed on one shard and still
	// prepared on the other (the router's commit returns once the decision is durable, the
	// participants commit after); at the router's cluster time, past every commit it
	// acknowledged, a snapshot read waits for the prepared documents' commit.
	snap := options.Collection().SetReadConcern(readconcern.Snapshot())
	cur, err := d.Client.Database("ycsb").Collection("usertable", snap).Aggregate(ctx, bson.A{bson.D{{Key: "$group", Value: bson.D{
		{Key: "_id", Value: nil}, {Key: "sum", Value: bson.D{{Key: "$sum", Value: "$balance"}}}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var out []struct{ Sum, N int64 }
	if err := cur.All(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Sum != 0 || out[0].N != 50 {
		t.Fatalf("balances %+v, want 50 records summing to 0", out)
	}
	for _, s := range d.Shards {
		n, err := s.Client.Database("ycsb").Collection("usertable").CountDocuments(ctx, bson.D{})
		if err != nil || n == 0 {
			t.Fatalf("%s holds %d records (%v), want some", s.Topology.Name, n, err)
		}
	}
}
