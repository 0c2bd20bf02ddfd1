package routing

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/sharding/shardkey"
)

// benchTable splits {a: 1} (or {a: "hashed"}) into n chunks over s shards.
func benchTable(b *testing.B, kp bson.D, n int) *RoutingTable {
	p := shardkey.MustParse(docOf(b, kp))
	var splits []bsoncore.Document
	for i := 1; i < n; i++ {
		if p.IsHashed() {
			// Even splits of the hash space, as presplitting makes them.
			step := uint64(1<<64-1) / uint64(n)
			splits = append(splits, intKey(p, int64(uint64(1<<63)+uint64(i)*step)))
		} else {
			splits = append(splits, intKey(p, int64(i*1000)))
		}
	}
	rt, err := New(testUUID, p, gen1, chunksAt(p, gen1, splits, []string{"s0", "s1", "s2", "s3"}))
	if err != nil {
		b.Fatal(err)
	}
	return rt
}

func BenchmarkShardForKey(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		rt := benchTable(b, bson.D{{Key: "a", Value: 1}}, n)
		keys := make([]bsoncore.Document, 1024)
		for i := range keys {
			keys[i] = intKey(rt.Pattern(), int64(i*997%(n*1000)))
		}
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := rt.ShardForKey(keys[i%len(keys)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkShardForDocHashed includes extracting and hashing the key, as an insert does.
func BenchmarkShardForDocHashed(b *testing.B) {
	rt := benchTable(b, bson.D{{Key: "a", Value: "hashed"}}, 1000)
	docs := make([]bsoncore.Document, 1024)
	for i := range docs {
		docs[i] = docOf(b, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i}, {Key: "payload", Value: "xxxxxxxxxxxxxxxx"}})
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := rt.ShardForDoc(docs[i%len(docs)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkShardsForQueryEquality(b *testing.B) {
	rt := benchTable(b, bson.D{{Key: "a", Value: 1}}, 1000)
	f := docOf(b, bson.D{{Key: "a", Value: 12345}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rt.ShardsForQuery(f, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIncrementalRefresh: a split of one chunk applied to a large cached table.
func BenchmarkIncrementalRefresh(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		rt := benchTable(b, bson.D{{Key: "a", Value: 1}}, n)
		c := *rt.Chunks()[n/2]
		v1, _ := rt.Version().IncMinor()
		v2, _ := v1.IncMinor()
		mid := intKey(rt.Pattern(), int64((n/2)*1000+500))
		left, right := c, c
		left.Max, left.Version = mid, v1
		right.Min, right.Version = mid, v2
		changed := []Chunk{left, right}
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.Update(changed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
