package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// End-to-end benchmarks over loopback with the Go driver against a real humongod (issue 3,
// Performance): each reports ns/op (throughput of one client) and p50/p99 latency in µs.
// Run: go test -run '^$' -bench . -benchtime 2s ./internal/integration/

// latencies records per-operation latency and reports percentiles.
type latencies struct{ d []time.Duration }

func (l *latencies) time(f func() error) error {
	start := time.Now()
	err := f()
	l.d = append(l.d, time.Since(start))
	return err
}

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	pct := func(p float64) float64 {
		return float64(l.d[min(len(l.d)-1, int(p*float64(len(l.d))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// benchServer starts a dedicated humongod (so benchmarks do not share a server with tests)
// and a connected client whose pool is warm.
func benchServer(b *testing.B) *mongo.Collection {
	b.Helper()
	s := newServer(b, "")
	cl := connect(b, s.uri())
	ctx := context.Background()
	if err := cl.Ping(ctx, nil); err != nil {
		b.Fatal(err)
	}
	coll := cl.Database("bench").Collection("c")
	if err := coll.Drop(ctx); err != nil {
		b.Fatal(err)
	}
	return coll
}

func BenchmarkPing(b *testing.B) {
	coll := benchServer(b)
	db := coll.Database()
	ctx := context.Background()
	cmd := bson.D{{Key: "ping", Value: 1}}
	var lat latencies
	b.ResetTimer()
	for b.Loop() {
		if err := lat.time(func() error { return db.RunCommand(ctx, cmd).Err() }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	lat.report(b)
}

const benchDocs = 10000

func seed(b *testing.B, coll *mongo.Collection) {
	b.Helper()
	docs := make([]any, benchDocs)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int64(i)}, {Key: "n", Value: int64(0)}, {Key: "s", Value: "some payload of moderate size for a document"}}
	}
	if _, err := coll.InsertMany(context.Background(), docs); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkFindOneByID(b *testing.B) {
	coll := benchServer(b)
	seed(b, coll)
	ctx := context.Background()
	var lat latencies
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i = (i + 7919) % benchDocs
		var out bson.Raw
		err := lat.time(func() error {
			return coll.FindOne(ctx, bson.D{{Key: "_id", Value: int64(i)}}).Decode(&out)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	lat.report(b)
}

func BenchmarkInsertOne(b *testing.B) {
	coll := benchServer(b)
	ctx := context.Background()
	var lat latencies
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i++
		doc := bson.D{{Key: "_id", Value: int64(i)}, {Key: "n", Value: int64(i)}, {Key: "s", Value: "some payload of moderate size for a document"}}
		if err := lat.time(func() error { _, err := coll.InsertOne(ctx, doc); return err }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	lat.report(b)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}

func BenchmarkUpdateOneByID(b *testing.B) {
	coll := benchServer(b)
	seed(b, coll)
	ctx := context.Background()
	var lat latencies
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i = (i + 7919) % benchDocs
		err := lat.time(func() error {
			res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int64(i)}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
			if err == nil && res.MatchedCount != 1 {
				b.Fatalf("matched %d", res.MatchedCount)
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	lat.report(b)
}
