package catalogcache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

// fakeConfig is an authoritative catalog in memory: one sharded collection test.c on {a: 1}
// whose chunks the test splits and moves, and unsharded collections elsewhere.
type fakeConfig struct {
	mu      sync.Mutex
	db      Database
	coll    Collection
	chunks  []routing.Chunk
	dbLoads atomic.Int32
	loads   atomic.Int32
	sinces  []*routing.ChunkVersion
	fail    atomic.Int32 // the next n collection loads fail
	block   chan struct{}
}

func key(v any) bsoncore.Document {
	if v == nil {
		return nil
	}
	b, _ := bson.Marshal(bson.D{{Key: "a", Value: v}})
	return b
}

func newFake(t *testing.T) *fakeConfig {
	p := shardkey.MustParse(key(1))
	f := &fakeConfig{
		db:   Database{Name: "test", Primary: "shard0", Version: routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 1, I: 1})},
		coll: Collection{NS: "test.c", UUID: catalog.NewUUID(), Pattern: p, Gen: routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 10, I: 1}}},
	}
	f.chunks = []routing.Chunk{{ID: bson.NewObjectID(), CollectionUUID: f.coll.UUID, Min: p.GlobalMin(), Max: p.GlobalMax(),
		Shard: "shard0", Version: routing.ChunkVersion{Major: 1, Generation: f.coll.Gen}}}
	return f
}

func (f *fakeConfig) Database(ctx context.Context, name string) (Database, error) {
	f.dbLoads.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "test" {
		return Database{}, mongoerr.Newf(mongoerr.NamespaceNotFound, "database %s not found", name)
	}
	return f.db, nil
}

func (f *fakeConfig) Collection(ctx context.Context, ns string, since *routing.ChunkVersion) (Collection, []routing.Chunk, bool, error) {
	f.loads.Add(1)
	if b := f.block; b != nil {
		select {
		case <-b:
		case <-ctx.Done():
			return Collection{}, nil, false, context.Cause(ctx)
		}
	}
	if f.fail.Load() > 0 {
		f.fail.Add(-1)
		return Collection{}, nil, false, errors.New("config server unreachable")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sinces = append(f.sinces, since)
	if ns != "test.c" {
		return Collection{NS: ns}, nil, false, nil
	}
	var out []routing.Chunk
	for _, c := range f.chunks {
		if since == nil || since.Generation != f.coll.Gen || !c.Version.IsOlderThan(*since) {
			out = append(out, c)
		}
	}
	return f.coll, out, true, nil
}

// split splits the chunk holding at at at, bumping minor versions as MongoDB does.
func (f *fakeConfig) split(at int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	top := f.top()
	for i, c := range f.chunks {
		if contains(c, at) {
			left, right := c, c
			left.Max, right.Min = key(at), key(at)
			left.ID, right.ID = bson.NewObjectID(), bson.NewObjectID()
			left.Version = routing.ChunkVersion{Major: top.Major, Minor: top.Minor + 1, Generation: f.coll.Gen}
			right.Version = routing.ChunkVersion{Major: top.Major, Minor: top.Minor + 2, Generation: f.coll.Gen}
			f.chunks = append(f.chunks[:i], append([]routing.Chunk{left, right}, f.chunks[i+1:]...)...)
			return
		}
	}
}

// move gives the chunk holding at to shard, bumping the major version.
func (f *fakeConfig) move(at int, shard string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	top := f.top()
	for i, c := range f.chunks {
		if contains(c, at) {
			f.chunks[i].Shard = shard
			f.chunks[i].Version = routing.ChunkVersion{Major: top.Major + 1, Generation: f.coll.Gen}
			return
		}
	}
}

// recreate drops and re-creates test.c: a new uuid and generation, one chunk on shard.
func (f *fakeConfig) recreate(shard string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.coll.UUID = catalog.NewUUID()
	f.coll.Gen = routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: f.coll.Gen.Timestamp.T + 1, I: 1}}
	p := f.coll.Pattern
	f.chunks = []routing.Chunk{{ID: bson.NewObjectID(), CollectionUUID: f.coll.UUID, Min: p.GlobalMin(), Max: p.GlobalMax(),
		Shard: shard, Version: routing.ChunkVersion{Major: 1, Generation: f.coll.Gen}}}
}

func (f *fakeConfig) top() routing.ChunkVersion {
	var top routing.ChunkVersion
	for _, c := range f.chunks {
		if top.IsOlderThan(c.Version) || !top.IsSet() {
			top = c.Version
		}
	}
	return top
}

func contains(c routing.Chunk, at int) bool {
	lo, hi := c.Min.Lookup("a"), c.Max.Lookup("a")
	if lo.Type == bsoncore.TypeInt32 && int(lo.Int32()) > at {
		return false
	}
	if hi.Type == bsoncore.TypeInt32 && int(hi.Int32()) <= at {
		return false
	}
	return true
}

func shardOf(t *testing.T, c *Cache, at int) string {
	t.Helper()
	r, err := c.Routing(context.Background(), "test.c")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Table.ShardForKey(key(at))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Entries load on first use and stay cached until marked stale; a stale mark with a newer
// shard version refreshes incrementally (only the changed chunks are asked for), one that
// the cache already caught up with does nothing.
func TestLazyIncrementalRefresh(t *testing.T) {
	f := newFake(t)
	c := New(f)
	if s := shardOf(t, c, 5); s != "shard0" {
		t.Fatalf("shard of 5 = %s", s)
	}
	shardOf(t, c, 50)
	if f.loads.Load() != 1 || f.dbLoads.Load() != 1 {
		t.Fatalf("loads %d, database loads %d; want 1 and 1 (cached)", f.loads.Load(), f.dbLoads.Load())
	}
	f.split(10)
	f.move(20, "shard1")
	// The cache does not know until a shard says so.
	if s := shardOf(t, c, 50); s != "shard0" {
		t.Fatalf("the cache refreshed by itself: %s", s)
	}
	wanted := f.top()
	c.OnStaleShardVersion("test.c", &wanted)
	if s := shardOf(t, c, 50); s != "shard1" {
		t.Fatalf("after the refresh, 50 on %s, want shard1", s)
	}
	if s := shardOf(t, c, 5); s != "shard0" {
		t.Fatalf("after the refresh, 5 on %s, want shard0", s)
	}
	if n := f.loads.Load(); n != 2 {
		t.Fatalf("%d collection loads, want 2", n)
	}
	if since := f.sinces[1]; since == nil || since.Major != 1 || since.Minor != 0 {
		t.Fatalf("the refresh asked for chunks since %v, want 1|0 (incremental)", since)
	}
	// A stale report the cache already caught up with refreshes nothing.
	c.OnStaleShardVersion("test.c", &wanted)
	shardOf(t, c, 5)
	if n := f.loads.Load(); n != 2 {
		t.Fatalf("%d collection loads after an old stale report, want 2", n)
	}
	// A shard that owns no chunks any more reports 0|0: that always refreshes.
	empty := routing.ChunkVersion{Generation: f.coll.Gen}
	c.OnStaleShardVersion("test.c", &empty)
	shardOf(t, c, 5)
	if n := f.loads.Load(); n != 3 {
		t.Fatalf("%d collection loads after a 0|0 stale report, want 3", n)
	}
}

// A stale router routes a dropped and re-created namespace to the new incarnation: the
// generation changed, so the refresh is full.
func TestRecreatedCollectionRefreshesFully(t *testing.T) {
	f := newFake(t)
	c := New(f)
	shardOf(t, c, 5)
	f.recreate("shard7")
	c.OnStaleShardVersion("test.c", nil)
	if s := shardOf(t, c, 5); s != "shard7" {
		t.Fatalf("after re-creation: %s", s)
	}
	r, _ := c.Routing(context.Background(), "test.c")
	if r.Table.UUID() != f.coll.UUID || r.Table.NumChunks() != 1 {
		t.Fatalf("table of the old incarnation: %v", r.Table.UUID())
	}
}

// Concurrent users of a stale entry share one refresh.
func TestSingleFlight(t *testing.T) {
	f := newFake(t)
	f.block = make(chan struct{})
	c := New(f)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Routing(context.Background(), "test.c")
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them all queue (the result does not depend on it)
	close(f.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.loads.Load(); n != 1 {
		t.Fatalf("%d loads for 16 concurrent users, want 1", n)
	}
}

// A failing refresh is attempted three times, then fails; the entry stays stale and the
// next use tries again. A waiter's context ends its wait.
func TestRefreshFailures(t *testing.T) {
	f := newFake(t)
	c := New(f)
	f.fail.Store(5)
	if _, err := c.Routing(context.Background(), "test.c"); err == nil {
		t.Fatal("refresh against an unreachable config server succeeded")
	}
	if n := f.loads.Load(); n != maxRefreshAttempts {
		t.Fatalf("%d attempts, want %d", n, maxRefreshAttempts)
	}
	if _, err := c.Routing(context.Background(), "test.c"); err != nil {
		t.Fatalf("the next use did not refresh again: %v", err)
	}
	// A missing database is not retried.
	before := f.dbLoads.Load()
	if _, err := c.Routing(context.Background(), "nope.c"); !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		t.Fatalf("missing database: %v", err)
	}
	if n := f.dbLoads.Load() - before; n != 1 {
		t.Fatalf("%d loads of a missing database, want 1", n)
	}
	f.block = make(chan struct{})
	defer close(f.block)
	c.OnStaleShardVersion("test.c", nil)
	loads := f.loads.Load()
	go func() { _, _ = c.Routing(context.Background(), "test.c") }() // holds the refresh
	for f.loads.Load() == loads {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Routing(ctx, "test.c"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter with an expired context: %v", err)
	}
}

// Unsharded collections have no table and live on their database's primary shard; database
// entries refresh when a shard reports another database version.
func TestUnshardedAndDatabaseVersion(t *testing.T) {
	f := newFake(t)
	c := New(f)
	r, err := c.Routing(context.Background(), "test.u")
	if err != nil {
		t.Fatal(err)
	}
	if r.Sharded() || r.DB.Primary != "shard0" {
		t.Fatalf("unsharded routing: %+v", r)
	}
	f.mu.Lock()
	f.db.Primary, f.db.Version = "shard1", f.db.Version.Updated()
	wanted := f.db.Version
	f.mu.Unlock()
	c.OnStaleDatabaseVersion("test", &wanted)
	d, err := c.Database(context.Background(), "test")
	if err != nil || d.Primary != "shard1" || !d.Version.Equal(wanted) {
		t.Fatalf("database after a stale report: %+v %v", d, err)
	}
	// A stale database version reported for a collection's request reaches the collection's
	// entry too: its routing carries the database's new primary and version (else a router
	// retries with the version it had, for ever).
	r, err = c.Routing(context.Background(), "test.u")
	if err != nil || r.DB.Primary != "shard1" || !r.DB.Version.Equal(wanted) {
		t.Fatalf("unsharded routing after a stale database version: %+v %v", r, err)
	}
	// Collections of an invalidated database reload with it.
	c.InvalidateDatabase("test")
	r, err = c.Routing(context.Background(), "test.u")
	if err != nil || r.DB.Primary != "shard1" {
		t.Fatalf("unsharded routing after the database moved: %+v %v", r, err)
	}
	if got := fmt.Sprint(f.dbLoads.Load()); got != "3" {
		t.Fatalf("database loads %s, want 3", got)
	}
}
