// Package shardregistry is a node's mirror of config.shards (spec: sharding.md "The shard
// registry"; MongoDB's ShardRegistry and ShardType): every shard's id and connection string,
// looked up by shard id, replica-set name, host or connection string. It reloads from a
// Loader (the config server's config.shards) when first used, when a lookup misses, when told
// to (Reload), when the node's vector clock TopologyTime is newer than the newest topologyTime
// it loaded (WithTopologyTime: a shard added or removed since), and periodically by its
// owner's Run loop (every 30 s in MongoDB).
package shardregistry

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// RefreshInterval is how often Run reloads (MongoDB's kRefreshPeriod).
const RefreshInterval = 30 * time.Second

// Shard is a config.shards document (MongoDB's ShardType).
type Shard struct {
	ID string
	// Host is the connection string: "setName/host:port,host:port" for a replica set.
	Host     string
	Draining bool
	Tags     []string
	// TopologyTime is when the shard was added or removed (the vector clock's topologyTime).
	TopologyTime bson.Timestamp
	State        int32
}

// SetName is the replica set name of the shard's connection string ("" for a bare host list).
func (s Shard) SetName() string {
	name, _, ok := strings.Cut(s.Host, "/")
	if !ok {
		return ""
	}
	return name
}

// Hosts are the hosts of the shard's connection string.
func (s Shard) Hosts() []string {
	_, hosts, ok := strings.Cut(s.Host, "/")
	if !ok {
		hosts = s.Host
	}
	var out []string
	for h := range strings.SplitSeq(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// Doc is the shard's config.shards document.
func (s Shard) Doc() bsoncore.Document {
	b := bsoncore.NewDocumentBuilder().AppendString("_id", s.ID).AppendString("host", s.Host)
	if s.Draining {
		b.AppendBoolean("draining", true)
	}
	if len(s.Tags) > 0 {
		ab := bsoncore.NewArrayBuilder()
		for _, t := range s.Tags {
			ab.AppendString(t)
		}
		b.AppendArray("tags", ab.Build())
	}
	b.AppendInt32("state", s.State)
	b.AppendTimestamp("topologyTime", s.TopologyTime.T, s.TopologyTime.I)
	return b.Build()
}

// ParseShard reads a config.shards document as ShardType::fromBSON does.
func ParseShard(doc bsoncore.Document) (Shard, error) {
	var s Shard
	var ok bool
	if s.ID, ok = doc.Lookup("_id").StringValueOK(); !ok || s.ID == "" {
		return Shard{}, mongoerr.New(mongoerr.NoSuchKey, "missing _id field")
	}
	if s.Host, ok = doc.Lookup("host").StringValueOK(); !ok || s.Host == "" {
		return Shard{}, mongoerr.New(mongoerr.NoSuchKey, "missing host field")
	}
	s.Draining, _ = doc.Lookup("draining").BooleanOK()
	if v, err := doc.LookupErr("tags"); err == nil {
		arr, ok := v.ArrayOK()
		if !ok {
			return Shard{}, mongoerr.New(mongoerr.TypeMismatch, "tags field must be an array")
		}
		vals, err := arr.Values()
		if err != nil {
			return Shard{}, mongoerr.Newf(mongoerr.InvalidBSON, "tags: %v", err)
		}
		for _, t := range vals {
			str, ok := t.StringValueOK()
			if !ok {
				return Shard{}, mongoerr.New(mongoerr.TypeMismatch, "tags must be strings")
			}
			s.Tags = append(s.Tags, str)
		}
	}
	if t, i, ok := doc.Lookup("topologyTime").TimestampOK(); ok {
		s.TopologyTime = bson.Timestamp{T: t, I: i}
	}
	if st, ok := doc.Lookup("state").AsInt64OK(); ok {
		s.State = int32(st)
	}
	return s, nil
}

// Loader reads config.shards.
type Loader interface {
	Shards(ctx context.Context) ([]Shard, error)
}

// Registry is the mirror. Safe for concurrent use.
type Registry struct {
	loader Loader

	mu     sync.Mutex
	shards []Shard
	loaded bool

	// topology, when set, is the node's vector clock TopologyTime; loadedTopology is the
	// newest topologyTime of the shards last loaded. A newer clock means a shard was added or
	// removed since: the next use reloads (MongoDB's ShardRegistry refreshes on a gossiped
	// topologyTime newer than its own; removeShard stamps the new time on a remaining shard).
	topology       func() bson.Timestamp
	loadedTopology bson.Timestamp

	reload sync.Mutex // serialises loads
}

// New returns a registry over loader; nothing is loaded until first use.
func New(loader Loader) *Registry { return &Registry{loader: loader} }

// WithTopologyTime makes the registry reload when topology (the node's vector clock
// TopologyTime) is newer than the newest topologyTime it loaded. Call before first use.
func (r *Registry) WithTopologyTime(topology func() bson.Timestamp) *Registry {
	r.topology = topology
	return r
}

// stale reports whether the registry was never loaded or the clock's TopologyTime is newer
// than what it loaded.
func (r *Registry) stale() bool {
	r.mu.Lock()
	loaded, have := r.loaded, r.loadedTopology
	r.mu.Unlock()
	if !loaded {
		return true
	}
	if r.topology == nil {
		return false
	}
	t := r.topology()
	return t.T > have.T || t.T == have.T && t.I > have.I
}

// Reload reads config.shards now.
func (r *Registry) Reload(ctx context.Context) error {
	r.reload.Lock()
	defer r.reload.Unlock()
	shards, err := r.loader.Shards(ctx)
	if err != nil {
		return fmt.Errorf("reload the shard registry: %w", err)
	}
	slices.SortFunc(shards, func(a, b Shard) int { return strings.Compare(a.ID, b.ID) })
	var newest bson.Timestamp
	for _, s := range shards {
		if t := s.TopologyTime; t.T > newest.T || t.T == newest.T && t.I > newest.I {
			newest = t
		}
	}
	r.mu.Lock()
	r.shards, r.loaded, r.loadedTopology = shards, true, newest
	r.mu.Unlock()
	return nil
}

// All returns every shard, loading first if the registry was never loaded or its
// TopologyTime is behind the clock's.
func (r *Registry) All(ctx context.Context) ([]Shard, error) {
	if r.stale() {
		if err := r.Reload(ctx); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.shards), nil
}

// Lookup finds a shard by id, replica set name, one of its hosts, or its connection string,
// reloading once on a miss (a shard added since the last load). ShardNotFound if none.
func (r *Registry) Lookup(ctx context.Context, name string) (Shard, error) {
	if r.stale() {
		if err := r.Reload(ctx); err != nil {
			return Shard{}, err
		}
	}
	if s, ok := r.find(name); ok {
		return s, nil
	}
	if err := r.Reload(ctx); err != nil {
		return Shard{}, err
	}
	if s, ok := r.find(name); ok {
		return s, nil
	}
	return Shard{}, mongoerr.Newf(mongoerr.ShardNotFound, "Shard %s not found", name)
}

func (r *Registry) find(name string) (Shard, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.shards {
		if s.ID == name || s.Host == name || (s.SetName() != "" && s.SetName() == name) || slices.Contains(s.Hosts(), name) {
			return s, true
		}
	}
	return Shard{}, false
}

// Run reloads every interval until ctx ends (the owner's background loop); a failed reload
// keeps the previous shards.
func (r *Registry) Run(ctx context.Context, interval time.Duration, logf func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.Reload(ctx); err != nil && ctx.Err() == nil && logf != nil {
			logf(err)
		}
	}
}
