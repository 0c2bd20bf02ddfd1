package filtering

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
	"humongo/internal/sharding/shardstate"
)

// fakeConfig is the config server's catalog in memory: database test (primary shard0) with
// test.c sharded on {a: 1}, chunks [MinKey, 10) on shard0 and [10, MaxKey) on shard1;
// database other has shard1 as its primary.
type fakeConfig struct {
	mu      sync.Mutex
	dbs     map[string]catalogcache.Database
	coll    catalogcache.Collection
	chunks  []routing.Chunk
	loads   atomic.Int32
	dropped atomic.Bool   // test.c was dropped: unsharded
	entered chan struct{} // signalled when a collection load starts (if set)
	block   chan struct{} // collection loads wait for it (if set)
}

func key(v any) bsoncore.Document {
	b, _ := bson.Marshal(bson.D{{Key: "a", Value: v}})
	return b
}

func newFake() *fakeConfig {
	p := shardkey.MustParse(key(1))
	gen := routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 10, I: 1}}
	f := &fakeConfig{
		dbs: map[string]catalogcache.Database{
			"test":  {Name: "test", Primary: "shard0", Version: routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 1, I: 1})},
			"other": {Name: "other", Primary: "shard1", Version: routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 2, I: 1})},
		},
		coll: catalogcache.Collection{NS: "test.c", UUID: catalog.NewUUID(), Pattern: p, Gen: gen},
	}
	f.chunks = []routing.Chunk{
		{ID: bson.NewObjectID(), CollectionUUID: f.coll.UUID, Min: p.GlobalMin(), Max: key(10), Shard: "shard0",
			Version: routing.ChunkVersion{Major: 1, Minor: 1, Generation: gen}},
		{ID: bson.NewObjectID(), CollectionUUID: f.coll.UUID, Min: key(10), Max: p.GlobalMax(), Shard: "shard1",
			Version: routing.ChunkVersion{Major: 1, Minor: 2, Generation: gen}},
	}
	return f
}

func (f *fakeConfig) Database(ctx context.Context, name string) (catalogcache.Database, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.dbs[name]
	if !ok {
		return d, mongoerr.Newf(mongoerr.NamespaceNotFound, "database %s not found", name)
	}
	return d, nil
}

func (f *fakeConfig) Collection(ctx context.Context, ns string, since *routing.ChunkVersion) (catalogcache.Collection, []routing.Chunk, bool, error) {
	f.loads.Add(1)
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return catalogcache.Collection{}, nil, false, context.Cause(ctx)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ns != "test.c" || f.dropped.Load() {
		return catalogcache.Collection{NS: ns}, nil, false, nil
	}
	var out []routing.Chunk
	for _, c := range f.chunks {
		if since == nil || !since.SameCollection(f.coll.Gen) || !c.Version.IsOlderThan(*since) {
			out = append(out, c)
		}
	}
	return f.coll, out, true, nil
}

// moveSecond gives the chunk [10, MaxKey) to shard0 at the next major version.
func (f *fakeConfig) moveSecond() routing.ChunkVersion {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := routing.ChunkVersion{Major: 2, Generation: f.coll.Gen}
	f.chunks[1].Shard, f.chunks[1].Version = "shard0", v
	return v
}

func newRuntime(f *fakeConfig, aware *atomic.Bool) *Runtime {
	return New(Config{
		Identity: func() (shardstate.Identity, bool) {
			return shardstate.Identity{ShardName: "shard0", ClusterID: bson.NewObjectID(), ConfigsvrConnectionString: "cfg/h:1"}, aware.Load()
		},
		Connect: func(string) (catalogcache.Loader, func(context.Context) error, error) {
			return f, func(context.Context) error { return nil }, nil
		},
	})
}

func svValue(v routing.ChunkVersion) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: v.ShardVersionDoc()}
}

func dbvValue(v routing.DatabaseVersion) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: v.Doc()}
}

// versioned is an operation of a request carrying shardVersion sv for ns.
func versioned(ns string, sv routing.ChunkVersion) *operation.Context {
	return &operation.Context{ShardVersion: svValue(sv), VersionedNS: ns}
}

func wantCode(t *testing.T, err error, code mongoerr.Code, msg string) *mongoerr.Error {
	t.Helper()
	me, ok := mongoerr.As(err)
	if !ok || me.Code != code || (msg != "" && me.Msg != msg) {
		t.Fatalf("error %v, want %s %q", err, code, msg)
	}
	return me
}

func TestShardVersionCheckAndRefresh(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	var aware atomic.Bool
	aware.Store(true)
	rt := newRuntime(f, &aware)
	gen := f.coll.Gen
	v11 := routing.ChunkVersion{Major: 1, Minor: 1, Generation: gen}

	// Unknown metadata: StaleConfig without vWanted; the error path refreshes.
	_, err := rt.Check(versioned("test.c", v11), "test.c")
	me := wantCode(t, err, mongoerr.StaleConfig, "sharding status of collection test.c is not currently known and needs to be recovered")
	info := me.Info.(bsoncore.Document)
	if ns, _ := info.Lookup("ns").StringValueOK(); ns != "test.c" {
		t.Fatalf("info %s", info)
	}
	if sid, _ := info.Lookup("shardId").StringValueOK(); sid != "shard0" {
		t.Fatalf("info %s", info)
	}
	if info.Lookup("vWanted").Type != 0 {
		t.Fatalf("vWanted with unknown metadata: %s", info)
	}
	rt.OnStaleError(ctx, err)
	m, ok := rt.Collection("test.c")
	if !ok || !m.Sharded() || !m.ShardVersion().Equal(v11) {
		t.Fatalf("after refresh: %v %v", m, ok)
	}

	// The current version passes and gives the ownership filter.
	filter, err := rt.Check(versioned("test.c", v11), "test.c")
	if err != nil || filter == nil {
		t.Fatalf("check current: %v %v", filter, err)
	}
	for _, c := range []struct {
		doc  bsoncore.Document
		mine bool
	}{{key(5), true}, {key(10), false}, {key(99), false}, {bsoncore.NewDocumentBuilder().AppendInt32("b", 1).Build(), true}} {
		if got := filter.KeyBelongs(c.doc); got != c.mine {
			t.Errorf("KeyBelongs(%s) = %v", c.doc, got)
		}
	}

	// Another generation: timestamp mismatch, with vWanted.
	other := routing.ChunkVersion{Major: 1, Generation: routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 99, I: 1}}}
	_, err = rt.Check(versioned("test.c", other), "test.c")
	me = wantCode(t, err, mongoerr.StaleConfig, "timestamp mismatch detected for test.c")
	if w, err := routing.ParseShardVersion(me.Info.(bsoncore.Document).Lookup("vWanted")); err != nil || !w.Equal(v11) {
		t.Fatalf("vWanted %v %v", w, err)
	}

	// The config server moved the other chunk here: a router with 2|0 is ahead of us; the
	// error path refreshes and the retry passes.
	loads := f.loads.Load()
	v20 := f.moveSecond()
	_, err = rt.Check(versioned("test.c", v20), "test.c")
	wantCode(t, err, mongoerr.StaleConfig, "placement version mismatch detected for test.c")
	rt.OnStaleError(ctx, err)
	if f.loads.Load() != loads+1 {
		t.Fatalf("loads %d, want %d", f.loads.Load(), loads+1)
	}
	if filter, err = rt.Check(versioned("test.c", v20), "test.c"); err != nil || !filter.KeyBelongs(key(99)) {
		t.Fatalf("after the move: %v", err)
	}

	// A router behind us (1|1 of the same generation): StaleConfig, and no refresh.
	loads = f.loads.Load()
	_, err = rt.Check(versioned("test.c", v11), "test.c")
	wantCode(t, err, mongoerr.StaleConfig, "placement version mismatch detected for test.c")
	rt.OnStaleError(ctx, err)
	if f.loads.Load() != loads {
		t.Fatalf("refreshed for a stale router")
	}

	// The collection is dropped on the config server: a router sending UNSHARDED makes the
	// shard refresh, and then it passes.
	f.dropped.Store(true)
	_, err = rt.Check(versioned("test.c", routing.Unsharded()), "test.c")
	wantCode(t, err, mongoerr.StaleConfig, "")
	rt.OnStaleError(ctx, err)
	if f, err := rt.Check(versioned("test.c", routing.Unsharded()), "test.c"); err != nil || f != nil {
		t.Fatalf("after the drop: %v %v", f, err)
	}

	// IGNORED passes whatever the version.
	if _, err := rt.Check(versioned("test.c", routing.Ignored()), "test.c"); err != nil {
		t.Fatal(err)
	}
	// The shard version applies to the request's namespace only.
	if f, err := rt.Check(versioned("test.c", other), "test.d"); err != nil || f != nil {
		t.Fatalf("other namespace checked: %v %v", f, err)
	}
	// An unversioned operation is never checked.
	if f, err := rt.Check(&operation.Context{VersionedNS: "test.c"}, "test.c"); err != nil || f != nil {
		t.Fatalf("unversioned: %v %v", f, err)
	}
}

func TestUnshardedCollection(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	var aware atomic.Bool
	aware.Store(true)
	rt := newRuntime(f, &aware)
	if _, err := rt.RefreshCollection(ctx, "test.u"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.RefreshCollection(ctx, "nodb.u"); err != nil {
		t.Fatal(err) // a database missing from the catalog: unsharded
	}
	for _, ns := range []string{"test.u", "nodb.u"} {
		m, ok := rt.Collection(ns)
		if !ok || m.Sharded() {
			t.Fatalf("%s: %v %v", ns, m, ok)
		}
		if f, err := rt.Check(versioned(ns, routing.Unsharded()), ns); err != nil || f != nil {
			t.Fatalf("%s UNSHARDED: %v %v", ns, f, err)
		}
	}
	sharded := routing.ChunkVersion{Major: 1, Generation: f.coll.Gen}
	_, err := rt.Check(versioned("test.u", sharded), "test.u")
	wantCode(t, err, mongoerr.StaleConfig, "")
}

func TestDatabaseVersion(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	var aware atomic.Bool
	aware.Store(true)
	rt := newRuntime(f, &aware)
	want := f.dbs["test"].Version
	op := &operation.Context{DatabaseVersion: dbvValue(want), VersionedNS: "test.u"}

	_, err := rt.Check(op, "test.u")
	me := wantCode(t, err, mongoerr.StaleDbVersion, "sharding status of database test is not currently known and needs to be recovered")
	if db, _ := me.Info.(bsoncore.Document).Lookup("db").StringValueOK(); db != "test" {
		t.Fatalf("info %s", me.Info)
	}
	rt.OnStaleError(ctx, err)
	if _, err := rt.Check(op, "test.u"); err != nil {
		t.Fatalf("after refresh: %v", err)
	}
	// The database version applies to every collection of the request's database.
	if _, err := rt.Check(op, "test.other"); err != nil {
		t.Fatal(err)
	}

	stale := routing.NewDatabaseVersion(catalog.NewUUID(), bson.Timestamp{T: 1, I: 1})
	_, err = rt.Check(&operation.Context{DatabaseVersion: dbvValue(stale), VersionedNS: "test.u"}, "test.u")
	me = wantCode(t, err, mongoerr.StaleDbVersion, "version mismatch detected for test")
	w, perr := routing.ParseDatabaseVersion(me.Info.(bsoncore.Document).Lookup("vWanted"))
	if perr != nil || w != want {
		t.Fatalf("vWanted %v %v", w, perr)
	}

	// A router ahead of the shard: the error path refreshes; a router behind it: no refresh.
	newer := want.Updated() // movePrimary
	f.mu.Lock()
	d := f.dbs["test"]
	d.Version = newer
	f.dbs["test"] = d
	f.mu.Unlock()
	_, err = rt.Check(&operation.Context{DatabaseVersion: dbvValue(newer), VersionedNS: "test.u"}, "test.u")
	wantCode(t, err, mongoerr.StaleDbVersion, "version mismatch detected for test")
	rt.OnStaleError(ctx, err)
	if got, _ := rt.Database("test"); got == nil || got.Version != newer {
		t.Fatalf("after a refresh: %v", got)
	}
	refreshes := rt.Refreshes()
	_, err = rt.Check(op, "test.u")
	wantCode(t, err, mongoerr.StaleDbVersion, "version mismatch detected for test")
	rt.OnStaleError(ctx, err)
	if rt.Refreshes() != refreshes {
		t.Fatal("refreshed for a stale router")
	}

	// As in MongoDB 7.0 a shard that is not the primary knows the version too.
	if _, err := rt.RefreshDatabase(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if d, ok := rt.Database("other"); !ok || d.Primary != "shard1" {
		t.Fatalf("other: %v %v", d, ok)
	}
	// A database missing from the catalog is unknown.
	if _, err := rt.RefreshDatabase(ctx, "nodb"); err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.Database("nodb"); ok {
		t.Fatal("a dropped database is known")
	}
}

func TestNotShardAware(t *testing.T) {
	var aware atomic.Bool
	rt := newRuntime(newFake(), &aware)
	_, err := rt.Check(versioned("test.c", routing.Unsharded()), "test.c")
	wantCode(t, err, mongoerr.ShardingStateNotInitialized, "")
	if _, err := rt.RefreshCollection(context.Background(), "test.c"); !mongoerr.Is(err, mongoerr.ShardingStateNotInitialized) {
		t.Fatal(err)
	}
	if f, err := rt.Check(&operation.Context{}, "test.c"); err != nil || f != nil {
		t.Fatal("unversioned operation refused before shard awareness")
	}
}

// Concurrent refreshes of one namespace share one load from the config server.
func TestRefreshSingleFlight(t *testing.T) {
	f := newFake()
	f.entered, f.block = make(chan struct{}, 16), make(chan struct{})
	var aware atomic.Bool
	aware.Store(true)
	rt := newRuntime(f, &aware)
	const n = 8
	errs := make(chan error, n)
	go func() {
		_, err := rt.RefreshCollection(context.Background(), "test.c")
		errs <- err
	}()
	<-f.entered
	for range n - 1 {
		go func() {
			_, err := rt.RefreshCollection(context.Background(), "test.c")
			errs <- err
		}()
	}
	// Wait (without a bound on time: the test fails by hanging, not by timing) until every
	// caller joined the flight, then let the load finish.
	for {
		rt.mu.Lock()
		w := rt.inflight["c\x00test.c"].waiters
		rt.mu.Unlock()
		if w == n-1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(f.block)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := f.loads.Load(); got != 1 {
		t.Fatalf("%d loads, want 1", got)
	}
	if rt.Refreshes() != 1 {
		t.Fatalf("%d refreshes", rt.Refreshes())
	}
}

// A caller that gives up does not stop the refresh others wait for; Close stops it.
func TestRefreshOwnedByRuntime(t *testing.T) {
	f := newFake()
	f.entered, f.block = make(chan struct{}, 4), make(chan struct{})
	var aware atomic.Bool
	aware.Store(true)
	rt := newRuntime(f, &aware)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() {
		_, err := rt.RefreshCollection(ctx, "test.c")
		errs <- err
	}()
	<-f.entered
	go func() {
		_, err := rt.RefreshCollection(context.Background(), "test.c")
		errs <- err
	}()
	for {
		rt.mu.Lock()
		w := rt.inflight["c\x00test.c"].waiters
		rt.mu.Unlock()
		if w == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errs; err == nil {
		t.Fatal("the caller that gave up got no error")
	}
	close(f.block)
	if err := <-errs; err != nil {
		t.Fatalf("the other caller: %v", err)
	}

	// Close interrupts a running refresh and waits for it.
	f.block = make(chan struct{})
	rt.ClearCollection("test.c")
	go func() {
		_, err := rt.RefreshCollection(context.Background(), "test.c")
		errs <- err
	}()
	<-f.entered
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !mongoerr.Is(err, mongoerr.Interrupted) {
		t.Fatalf("refresh at Close: %v", err)
	}
	if _, err := rt.RefreshCollection(context.Background(), "test.c"); !mongoerr.Is(err, mongoerr.ShutdownInProgress) {
		t.Fatalf("refresh after Close: %v", err)
	}
}
