package configsvr

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// fakeNode is a config server node whose commands act on a map of collections: enough of
// create, createIndexes, insert and find for the catalog's needs.
type fakeNode struct {
	mu      sync.Mutex
	colls   map[string]map[string]bool // collection -> index names
	version bsoncore.Document
	writes  int   // commands that changed something
	fail    error // returned by every command while set
}

func newFakeNode() *fakeNode { return &fakeNode{colls: map[string]map[string]bool{}} }

func (f *fakeNode) run(_ context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	if db != "config" {
		return nil, errors.New("not the config database")
	}
	elems, _ := cmd.Elements()
	coll := elems[0].Value().StringValue()
	ok := bsoncore.NewDocumentBuilder().AppendDouble("ok", 1)
	switch elems[0].Key() {
	case "create":
		if f.colls[coll] != nil {
			return nil, mongoerr.Newf(mongoerr.NamespaceExists, "Collection config.%s already exists.", coll)
		}
		f.colls[coll] = map[string]bool{"_id_": true}
		f.writes++
	case "createIndexes":
		if f.colls[coll] == nil {
			f.colls[coll] = map[string]bool{"_id_": true}
		}
		name := cmd.Lookup("indexes", "0", "name").StringValue()
		if !f.colls[coll][name] {
			f.colls[coll][name] = true
			f.writes++
		}
	case "insert":
		if f.version != nil {
			ok.AppendArray("writeErrors", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
				AppendInt32("index", 0).AppendInt32("code", int32(mongoerr.DuplicateKey)).AppendString("errmsg", "dup").Build()).Build())
			break
		}
		f.version = cmd.Lookup("documents", "0").Document()
		f.writes++
	case "find":
		batch := bsoncore.NewArrayBuilder()
		if f.version != nil {
			batch.AppendDocument(f.version)
		}
		ok.AppendDocument("cursor", bsoncore.NewDocumentBuilder().AppendArray("firstBatch", batch.Build()).Build())
	}
	return ok.Build(), nil
}

func TestInitCatalogIdempotent(t *testing.T) {
	f := newFakeNode()
	ctx := context.Background()
	id, err := InitCatalog(ctx, f.run)
	if err != nil || id.IsZero() {
		t.Fatalf("InitCatalog = %v, %v", id, err)
	}
	for _, c := range []string{"shards", "databases", "collections", "chunks", "tags", "settings", "version"} {
		if f.colls[c] == nil {
			t.Errorf("config.%s not created", c)
		}
	}
	for _, want := range []struct{ coll, name string }{
		{"chunks", "uuid_1_min_1"}, {"chunks", "uuid_1_shard_1_min_1"}, {"chunks", "uuid_1_lastmod_1"},
		{"chunks", "uuid_1_shard_1_onCurrentShardSince_1"}, {"shards", "host_1"}, {"tags", "ns_1_min_1"},
		{"tags", "ns_1_tag_1"}, {"placementHistory", "nss_1_timestamp_-1"},
	} {
		if !f.colls[want.coll][want.name] {
			t.Errorf("index %s on config.%s missing", want.name, want.coll)
		}
	}
	if f.version.Lookup("_id").Int32() != 1 || f.version.Lookup("clusterId").ObjectID() != id {
		t.Errorf("config.version = %s", f.version)
	}
	writes := f.writes
	again, err := InitCatalog(ctx, f.run)
	if err != nil || again != id || f.writes != writes {
		t.Fatalf("second InitCatalog = %v, %v, %d writes (first made %d)", again, err, f.writes-writes, writes)
	}
}

// fakePrimary is a Node whose primary state the test flips.
type fakePrimary struct {
	mu      sync.Mutex
	primary bool
	term    int64
	counter int64
	changed chan struct{}
}

func (p *fakePrimary) TopologyVersion() (int64, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counter, p.changed
}

func (p *fakePrimary) IsWritablePrimary() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.primary
}

func (p *fakePrimary) Term() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.term
}

func (p *fakePrimary) set(primary bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.primary = primary
	if primary {
		p.term++ // each election is a new term
	}
	p.counter++
	close(p.changed)
	p.changed = make(chan struct{})
}

func TestWatcherRunsOnEveryStepUp(t *testing.T) {
	f := newFakeNode()
	f.fail = mongoerr.New(mongoerr.NotWritablePrimary, "not primary") // the first attempt fails
	node := &fakePrimary{changed: make(chan struct{})}
	inits := make(chan bson.ObjectID, 10)
	stop := Start(context.Background(), Config{Node: node, Run: f.run, Retry: time.Millisecond,
		Initialized: func(id bson.ObjectID) { inits <- id }})
	defer stop()
	node.set(true)
	time.Sleep(20 * time.Millisecond) // some failed attempts
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	next := func() bson.ObjectID {
		select {
		case id := <-inits:
			return id
		case <-time.After(30 * time.Second): // a bound against a hang, not a timing check
			t.Fatal("the catalog was never initialised")
			return bson.ObjectID{}
		}
	}
	first := next() // retried until it succeeded
	node.set(false)
	node.set(true)
	if second := next(); second != first {
		t.Fatalf("cluster id changed across step-ups: %v, %v", first, second)
	}
	select {
	case id := <-inits:
		t.Fatalf("initialised twice in one primary stint: %v", id)
	case <-time.After(20 * time.Millisecond):
	}
}
