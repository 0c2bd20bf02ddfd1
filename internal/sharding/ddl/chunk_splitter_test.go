package ddl

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

func TestStrictlyIncreasing(t *testing.T) {
	// A top-chunk key equal to or below its neighbour is dropped, as is one at the minimum.
	got := keyInts(t, strictlyIncreasing(intKeys(1, 1, 5, 3, 9), intKeys(1)[0]))
	if want := []int32{5, 9}; !equalInts(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestShardKeyOfEquality(t *testing.T) {
	doc := func(b *bsoncore.DocumentBuilder) bsoncore.Document { return b.Build() }
	ranged, err := shardkey.Parse(doc(bsoncore.NewDocumentBuilder().AppendInt32("a", 1).AppendInt32("b.c", 1)))
	if err != nil {
		t.Fatal(err)
	}
	q := doc(bsoncore.NewDocumentBuilder().AppendInt32("a", 3).AppendInt32("b.c", 4).AppendInt32("z", 1))
	k, ok := ShardKeyOfEquality(ranged, q)
	if !ok || k.Lookup("a").Int32() != 3 || k.Lookup("b.c").Int32() != 4 {
		t.Fatalf("equality: %v %v", k, ok)
	}
	nested := doc(bsoncore.NewDocumentBuilder().AppendInt32("a", 3).
		AppendDocument("b", doc(bsoncore.NewDocumentBuilder().AppendInt32("c", 4))))
	if k, ok := ShardKeyOfEquality(ranged, nested); !ok || k.Lookup("b.c").Int32() != 4 {
		t.Fatalf("nested: %v %v", k, ok)
	}
	op := doc(bsoncore.NewDocumentBuilder().AppendInt32("a", 3).
		AppendDocument("b.c", doc(bsoncore.NewDocumentBuilder().AppendInt32("$gt", 4))))
	if _, ok := ShardKeyOfEquality(ranged, op); ok {
		t.Fatal("an operator is not an equality")
	}
	if _, ok := ShardKeyOfEquality(ranged, doc(bsoncore.NewDocumentBuilder().AppendInt32("a", 3))); ok {
		t.Fatal("a missing field is not an equality")
	}
	hashed, err := shardkey.Parse(doc(bsoncore.NewDocumentBuilder().AppendString("h", "hashed")))
	if err != nil {
		t.Fatal(err)
	}
	k, ok = ShardKeyOfEquality(hashed, doc(bsoncore.NewDocumentBuilder().AppendInt32("h", 7)))
	want, _ := shardkey.HashValue(bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 7)})
	if !ok || k.Lookup("h").Int64() != want.Int64() {
		t.Fatalf("hashed: %v %v", k, ok)
	}
}

// The splitter's tracking: nothing is split before the settings are known or below half
// the chunk size; once over it, exactly one task runs for the chunk however many writes
// follow while it runs; writes of chunks of other shards are not counted.
func TestChunkSplitterOneTaskPerChunk(t *testing.T) {
	p, err := shardkey.Parse(bsoncore.NewDocumentBuilder().AppendInt32("x", 1).Build())
	if err != nil {
		t.Fatal(err)
	}
	gen := routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 1, I: 1}}
	mid := intKeys(100)[0]
	table, err := routing.New(catalog.UUID{1}, p, gen, []routing.Chunk{
		{ID: bson.NewObjectID(), Min: p.GlobalMin(), Max: mid, Shard: "sh0", Version: routing.ChunkVersion{Major: 1, Generation: gen}},
		{ID: bson.NewObjectID(), Min: mid, Max: p.GlobalMax(), Shard: "sh1", Version: routing.ChunkVersion{Major: 1, Minor: 1, Generation: gen}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	scans := 0
	release := make(chan struct{})
	local := func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
		if cmd.Index(0).Key() == "listIndexes" {
			mu.Lock()
			scans++
			mu.Unlock()
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "ns not found")
	}
	refreshed := make(chan string, 4)
	s := NewChunkSplitter(SplitterConfig{
		Local: local,
		Remote: func() (*Remote, error) {
			return nil, mongoerr.New(mongoerr.ShutdownInProgress, "no cluster in this test")
		},
		Metadata: func(string) (*routing.RoutingTable, string) { return table, "sh0" },
		Refresh:  func(_ context.Context, ns string) error { refreshed <- ns; return nil },
	})
	defer s.Close()
	s.mu.Lock()
	s.settings = splitSettings{fetched: time.Now().Add(time.Hour), chunkBytes: 1000, autoSplitOn: true}
	s.mu.Unlock()
	low, high := intKeys(5)[0], intKeys(500)[0]
	s.NoteWrites("db.c", []bsoncore.Document{low}, []int64{499})
	s.NoteWrites("db.c", []bsoncore.Document{high}, []int64{10000}) // sh1's chunk
	count := func() int { mu.Lock(); defer mu.Unlock(); return scans }
	time.Sleep(50 * time.Millisecond)
	if n := count(); n != 0 {
		t.Fatalf("%d split tasks below half the chunk size", n)
	}
	for range 10 {
		s.NoteWrites("db.c", []bsoncore.Document{low}, []int64{600})
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := count(); n != 1 {
		t.Fatalf("%d split tasks for one chunk, want 1", n)
	}
	close(release)
	// The task fails (no such collection here) and gives the chunk back; the next write
	// over the threshold starts another.
	deadline = time.Now().Add(10 * time.Second)
	for count() < 2 && time.Now().Before(deadline) {
		s.NoteWrites("db.c", []bsoncore.Document{low}, []int64{600})
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(); n < 2 {
		t.Fatalf("no second task after the first ended: %d", n)
	}
}

// BenchmarkNoteWrites is the splitter's cost on the write path: one routed insert batch of
// 100 keys over a table of 1,000 chunks, below the split threshold.
func BenchmarkNoteWrites(b *testing.B) {
	p, _ := shardkey.Parse(bsoncore.NewDocumentBuilder().AppendInt32("x", 1).Build())
	gen := routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 1, I: 1}}
	var chunks []routing.Chunk
	min := p.GlobalMin()
	for i := 1; i <= 1000; i++ {
		max := p.GlobalMax()
		if i < 1000 {
			max = intKeys(int32(i * 100))[0]
		}
		chunks = append(chunks, routing.Chunk{ID: bson.NewObjectID(), Min: min, Max: max, Shard: "sh0",
			Version: routing.ChunkVersion{Major: 1, Minor: uint32(i), Generation: gen}})
		min = max
	}
	table, err := routing.New(catalog.UUID{1}, p, gen, chunks)
	if err != nil {
		b.Fatal(err)
	}
	s := NewChunkSplitter(SplitterConfig{Metadata: func(string) (*routing.RoutingTable, string) { return table, "sh0" }})
	defer s.Close()
	s.settings = splitSettings{fetched: time.Now().Add(time.Hour), chunkBytes: 1 << 60, autoSplitOn: true}
	keys := make([]bsoncore.Document, 100)
	sizes := make([]int64, 100)
	for i := range keys {
		keys[i] = intKeys(int32(i * 997))[0]
		sizes[i] = 1000
	}
	b.ResetTimer()
	for range b.N {
		s.NoteWrites("db.c", keys, sizes)
	}
}
