package routing

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/sharding/shardkey"
)

func TestChunkShardAt(t *testing.T) {
	c := Chunk{Shard: "s1", History: []HistoryEntry{
		{ValidAfter: bson.Timestamp{T: 200, I: 5}, Shard: "s1"},
		{ValidAfter: bson.Timestamp{T: 100, I: 1}, Shard: "s0"},
	}}
	for _, tc := range []struct {
		ts   bson.Timestamp
		want string
	}{
		{bson.Timestamp{T: 300}, "s1"},
		{bson.Timestamp{T: 200, I: 5}, "s1"}, // validAfter is inclusive
		{bson.Timestamp{T: 200, I: 4}, "s0"},
		{bson.Timestamp{T: 100, I: 1}, "s0"},
	} {
		if got, err := c.ShardAt(tc.ts); err != nil || got != tc.want {
			t.Errorf("ShardAt(%v) = %q, %v; want %q", tc.ts, got, err, tc.want)
		}
	}
	_, err := c.ShardAt(bson.Timestamp{T: 100, I: 0})
	if !mongoerr.Is(err, mongoerr.StaleChunkHistory) ||
		err.(*mongoerr.Error).Msg != "Cannot find shardId the chunk belonged to at cluster time Timestamp(100, 0)" {
		t.Errorf("ShardAt before the history: %v, want StaleChunkHistory", err)
	}
	// No history (an old catalog): the current shard at any time.
	if got, err := (&Chunk{Shard: "s2"}).ShardAt(bson.Timestamp{T: 1}); err != nil || got != "s2" {
		t.Errorf("ShardAt without history = %q, %v", got, err)
	}
}

// A table after a migration: [MinKey, 0) created on s0 at 100; [0, 10) created on s0 at
// 100, moved to s1 at 200; [10, MaxKey) split off at 100 with history since 150 only (its
// older entries trimmed).
func TestRoutingTableAt(t *testing.T) {
	p := shardkey.MustParse(docOf(t, bson.D{{Key: "a", Value: 1}}))
	chunks := chunksAt(p, gen1, []bsoncore.Document{intKey(p, 0), intKey(p, 10)}, []string{"s0"})
	chunks[0].History = []HistoryEntry{{ValidAfter: bson.Timestamp{T: 100}, Shard: "s0"}}
	chunks[1].Shard, chunks[1].Version = "s1", cv(2, 0, gen1)
	chunks[1].History = []HistoryEntry{{ValidAfter: bson.Timestamp{T: 200}, Shard: "s1"}, {ValidAfter: bson.Timestamp{T: 100}, Shard: "s0"}}
	chunks[2].History = []HistoryEntry{{ValidAfter: bson.Timestamp{T: 150}, Shard: "s0"}}
	rt, err := New(testUUID, p, gen1, chunks)
	if err != nil {
		t.Fatal(err)
	}
	shardFor := func(rt *RoutingTable, k int) (string, error) { return rt.ShardForKey(intKey(p, k)) }

	now := rt.At(bson.Timestamp{T: 250})
	if s, err := shardFor(now, 5); err != nil || s != "s1" {
		t.Errorf("at 250 the moved chunk is on %q (%v), want s1", s, err)
	}
	before := rt.At(bson.Timestamp{T: 160})
	if s, err := shardFor(before, 5); err != nil || s != "s0" {
		t.Errorf("at 160 the moved chunk is on %q (%v), want s0", s, err)
	}
	if !slices.Equal(before.Shards(), []string{"s0"}) || !slices.Equal(now.Shards(), []string{"s0", "s1"}) {
		t.Errorf("owners at 160 %v, at 250 %v", before.Shards(), now.Shards())
	}
	// Versions are the current ones: the shard checks them against its current metadata.
	if !before.ShardVersion("s1").Equal(rt.ShardVersion("s1")) || !before.Version().Equal(rt.Version()) {
		t.Errorf("view versions %s/%s, want the table's %s/%s", before.ShardVersion("s1"), before.Version(), rt.ShardVersion("s1"), rt.Version())
	}
	// The current table is untouched by its views.
	if s, _ := shardFor(rt, 5); s != "s1" || rt.AtTime() != nil {
		t.Errorf("current table changed: %q", s)
	}
	// Targeting: [0, 5] at 160 goes to s0 only; the whole key space at 120 reaches the
	// chunk whose history starts at 150: StaleChunkHistory, while a key of another chunk
	// still routes (lazily, as MongoDB).
	if got, err := before.ShardsForQuery(docOf(t, bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 0}, {Key: "$lte", Value: 5}}}}), false); err != nil || !slices.Equal(got, []string{"s0"}) {
		t.Errorf("ShardsForQuery at 160 = %v, %v", got, err)
	}
	old := rt.At(bson.Timestamp{T: 120})
	if _, err := old.ShardsForQuery(docOf(t, bson.D{}), false); !mongoerr.Is(err, mongoerr.StaleChunkHistory) {
		t.Errorf("ShardsForQuery at 120: %v, want StaleChunkHistory", err)
	}
	if _, err := shardFor(old, 20); !mongoerr.Is(err, mongoerr.StaleChunkHistory) {
		t.Errorf("key 20 at 120: %v, want StaleChunkHistory", err)
	}
	if s, err := shardFor(old, 5); err != nil || s != "s0" {
		t.Errorf("key 5 at 120 = %q, %v; want s0", s, err)
	}
	if _, err := shardFor(rt.At(bson.Timestamp{T: 50}), -5); !mongoerr.Is(err, mongoerr.StaleChunkHistory) {
		t.Errorf("before the collection existed: %v, want StaleChunkHistory", err)
	}
}
