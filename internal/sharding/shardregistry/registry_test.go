package shardregistry

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/mongoerr"
)

type fakeShards struct {
	mu     sync.Mutex
	shards []Shard
	loads  int
	err    error
}

func (f *fakeShards) Shards(context.Context) ([]Shard, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	if f.err != nil {
		return nil, f.err
	}
	return append([]Shard(nil), f.shards...), nil
}

func (f *fakeShards) set(s ...Shard) {
	f.mu.Lock()
	f.shards = s
	f.mu.Unlock()
}

func TestLookupByEveryName(t *testing.T) {
	f := &fakeShards{}
	f.set(Shard{ID: "rs0", Host: "rs0/127.0.0.1:27018,127.0.0.1:27019"}, Shard{ID: "s1", Host: "shard1rs/h1:1"})
	r := New(f)
	ctx := context.Background()
	for _, name := range []string{"rs0", "rs0/127.0.0.1:27018,127.0.0.1:27019", "127.0.0.1:27019", "shard1rs", "s1", "h1:1"} {
		if _, err := r.Lookup(ctx, name); err != nil {
			t.Fatalf("lookup %q: %v", name, err)
		}
	}
	if f.loads != 1 {
		t.Fatalf("%d loads, want 1", f.loads)
	}
	// A miss reloads once: a shard added since is found, an unknown one is ShardNotFound.
	f.set(append(f.shards, Shard{ID: "s2", Host: "s2/h2:2"})...)
	if s, err := r.Lookup(ctx, "s2"); err != nil || s.SetName() != "s2" || len(s.Hosts()) != 1 {
		t.Fatalf("new shard: %+v %v", s, err)
	}
	if _, err := r.Lookup(ctx, "nope"); !mongoerr.Is(err, mongoerr.ShardNotFound) {
		t.Fatalf("unknown shard: %v", err)
	}
	if f.loads != 3 {
		t.Fatalf("%d loads, want 3 (one per miss)", f.loads)
	}
	all, err := r.All(ctx)
	if err != nil || len(all) != 3 || all[0].ID != "rs0" {
		t.Fatalf("all: %v %v", all, err)
	}
}

func TestShardDocRoundTrip(t *testing.T) {
	s := Shard{ID: "a", Host: "a/h:1", Draining: true, Tags: []string{"x", "y"}, State: 1, TopologyTime: bson.Timestamp{T: 5, I: 2}}
	got, err := ParseShard(s.Doc())
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != s.ID || got.Host != s.Host || !got.Draining || len(got.Tags) != 2 || got.State != 1 || got.TopologyTime != s.TopologyTime {
		t.Fatalf("round trip: %+v", got)
	}
	bad, _ := bson.Marshal(bson.D{{Key: "_id", Value: "a"}})
	if _, err := ParseShard(bad); !mongoerr.Is(err, mongoerr.NoSuchKey) {
		t.Fatalf("missing host: %v", err)
	}
}

// Run reloads periodically and keeps the old shards when a reload fails.
func TestRunKeepsShardsOnFailure(t *testing.T) {
	f := &fakeShards{}
	f.set(Shard{ID: "a", Host: "a/h:1"})
	r := New(f)
	f.err = errors.New("config server down")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	failures := make(chan error, 100)
	go func() {
		defer close(done)
		r.Run(ctx, time.Millisecond, func(err error) {
			select {
			case failures <- err:
			default:
			}
		})
	}()
	<-failures
	if s, err := r.Lookup(context.Background(), "a"); err == nil {
		t.Fatalf("lookup while the config server is down answered %v without loading", s)
	}
	f.mu.Lock()
	f.err = nil
	f.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := r.find("a"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run never reloaded")
		}
		time.Sleep(time.Millisecond)
	}
	for len(failures) > 0 {
		<-failures
	}
	f.mu.Lock()
	f.err = errors.New("config server down again")
	f.mu.Unlock()
	<-failures
	<-failures // at least one whole failed reload happened after the error was set
	if _, ok := r.find("a"); !ok {
		t.Fatal("a failed reload dropped the known shards")
	}
	cancel()
	<-done
}

// A TopologyTime newer than the newest topologyTime loaded (a removeShard gossiped to the
// node) makes the next use reload: the removed shard is forgotten without a miss.
func TestReloadOnNewerTopologyTime(t *testing.T) {
	f := &fakeShards{}
	f.set(Shard{ID: "a", Host: "a/h:1", TopologyTime: bson.Timestamp{T: 10, I: 1}},
		Shard{ID: "b", Host: "b/h:2", TopologyTime: bson.Timestamp{T: 10, I: 2}})
	clock := bson.Timestamp{T: 10, I: 2}
	r := New(f).WithTopologyTime(func() bson.Timestamp { return clock })
	ctx := context.Background()
	if all, err := r.All(ctx); err != nil || len(all) != 2 {
		t.Fatalf("all: %v %v", all, err)
	}
	if _, err := r.Lookup(ctx, "b"); err != nil || f.loads != 1 {
		t.Fatalf("lookup at the same topologyTime: %v, %d loads", err, f.loads)
	}
	// b removed: a carries the new topologyTime, the clock heard of it.
	f.set(Shard{ID: "a", Host: "a/h:1", TopologyTime: bson.Timestamp{T: 11, I: 1}})
	clock = bson.Timestamp{T: 11, I: 1}
	if all, err := r.All(ctx); err != nil || len(all) != 1 || all[0].ID != "a" {
		t.Fatalf("all after the removal: %v %v", all, err)
	}
	if _, err := r.Lookup(ctx, "a"); err != nil || f.loads != 2 {
		t.Fatalf("lookup after catching up: %v, %d loads, want 2", err, f.loads)
	}
}
