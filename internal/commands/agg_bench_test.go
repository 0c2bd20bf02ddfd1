package commands_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// aggBenchLoad inserts n small documents {_id, k: i%10, v: i} in batches.
func aggBenchLoad(b *testing.B, c *mongo.Collection, n int) {
	b.Helper()
	const batch = 10000
	docs := make([]any, 0, batch)
	for i := 0; i < n; i++ {
		docs = append(docs, D("_id", i, "k", i%10, "v", i))
		if len(docs) == batch || i == n-1 {
			if _, err := c.InsertMany(context.Background(), docs, options.InsertMany().SetOrdered(false)); err != nil {
				b.Fatal(err)
			}
			docs = docs[:0]
		}
	}
}

// BenchmarkAggGroup is the end-to-end cost of a low-cardinality $group through the
// aggregate command (planner scan, document copies, the engine, the reply).
func BenchmarkAggGroup(b *testing.B) {
	db := aggServer(b)
	c := db.Collection("g")
	const n = 200000
	aggBenchLoad(b, c, n)
	ctx := context.Background()
	pipeline := bson.A{D("$group", D("_id", "$k", "n", D("$sum", 1), "s", D("$sum", "$v")))}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cur, err := c.Aggregate(ctx, pipeline)
		if err != nil {
			b.Fatal(err)
		}
		var out []bson.Raw
		if err := cur.All(ctx, &out); err != nil || len(out) != 10 {
			b.Fatal(err, len(out))
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}

// BenchmarkAggLookup joins 10k local documents to a 10k-document foreign collection on an
// indexed field.
func BenchmarkAggLookup(b *testing.B) { benchAggLookup(b, true) }

// BenchmarkAggLookupNoIndex is BenchmarkAggLookup without the foreign index.
func BenchmarkAggLookupNoIndex(b *testing.B) { benchAggLookup(b, false) }

func benchAggLookup(b *testing.B, indexed bool) {
	db := aggServer(b)
	ctx := context.Background()
	local, foreign := db.Collection("l"), db.Collection("f")
	const n = 10000
	aggBenchLoad(b, local, n)
	aggBenchLoad(b, foreign, n)
	if indexed {
		if _, err := foreign.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: D("v", 1)}); err != nil {
			b.Fatal(err)
		}
	}
	pipeline := bson.A{D("$lookup", D("from", "f", "localField", "v", "foreignField", "v", "as", "j")),
		D("$match", D("j", D("$size", 1))), D("$count", "c")}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cur, err := local.Aggregate(ctx, pipeline)
		if err != nil {
			b.Fatal(err)
		}
		var out []bson.Raw
		if err := cur.All(ctx, &out); err != nil || len(out) != 1 || out[0].Lookup("c").AsInt64() != n {
			b.Fatal(err, out)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}

// BenchmarkAggLookupFewLocal joins 100 local documents to a 100k-document foreign
// collection on an indexed field: the shape where reading the whole foreign side costs most.
func BenchmarkAggLookupFewLocal(b *testing.B) {
	db := aggServer(b)
	ctx := context.Background()
	local, foreign := db.Collection("l"), db.Collection("f")
	aggBenchLoad(b, local, 100)
	aggBenchLoad(b, foreign, 100000)
	if _, err := foreign.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: D("v", 1)}); err != nil {
		b.Fatal(err)
	}
	pipeline := bson.A{D("$lookup", D("from", "f", "localField", "v", "foreignField", "v", "as", "j")),
		D("$match", D("j", D("$size", 1))), D("$count", "c")}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cur, err := local.Aggregate(ctx, pipeline)
		if err != nil {
			b.Fatal(err)
		}
		var out []bson.Raw
		if err := cur.All(ctx, &out); err != nil || len(out) != 1 || out[0].Lookup("c").AsInt64() != 100 {
			b.Fatal(err, out)
		}
	}
}
