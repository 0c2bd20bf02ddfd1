package router

// The router's view of the cluster (spec: sharding.md "Routing", "Shard versioning and
// database versioning"; MongoDB's Grid: catalog client, catalog cache, shard registry and the
// shards' connection pools): a client of the config server replica set, the routing table
// cache and shard registry it feeds (internal/sharding), a client per shard, and the
// versioned-request protocol: every request for a collection carries the version the router
// routed it with (shardVersion; for an unsharded collection UNSHARDED plus its database's
// databaseVersion), and a shard that knows better answers StaleConfig, StaleEpoch or
// StaleDbVersion: the router marks what it cached stale and retries, at most
// maxStaleRetries times (MongoDB's kMaxNumStaleVersionRetries), so a client never sees the
// error unless the catalog keeps changing.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/client"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardregistry"
	"humongo/internal/vclock"
)

// configShardID is the shard id of the config server replica set (MongoDB's
// ShardId::kConfigServerId).
const configShardID = "config"

// maxStaleRetries bounds the retries of one request after stale-version answers.
const maxStaleRetries = 10

// Cluster is one router's connection to its cluster. Safe for concurrent use.
type Cluster struct {
	opts   client.Options
	config *client.ReplicaSet
	Cache  *catalogcache.Cache
	Shards *shardregistry.Registry
	// hosts holds a client per shard member, for requests pinned to the member a read
	// preference selected (readpref.go).
	hosts *client.Pool

	// txns are the sessions' transactions (txn.go).
	txns txnTable

	mu     sync.Mutex
	conns  map[string]*client.ReplicaSet // shard id → client
	closed bool
	// onClose run first at Close (the router cursors' reaper and cursors: cursors.go).
	onClose []func()
}

// routerHeartbeat is the router's clients' heartbeat interval when the caller sets none:
// MongoDB's ReplicaSetMonitor checks a set whose member failed every 500 ms
// (kExpeditedRefreshPeriod) until it finds its primary again; the driver only re-checks a
// member it marked unknown after a dropped connection at its next heartbeat, so a short one
// keeps a live member from staying unselectable for the driver's default 10 s.
const routerHeartbeat = 500 * time.Millisecond

// NewCluster connects (lazily, as the driver does) to the config server replica set
// configDB and builds the caches over it.
func NewCluster(configDB client.ReplicaSetHosts, o client.Options) (*Cluster, error) {
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = routerHeartbeat
	}
	cfg, err := client.NewReplicaSet(configDB, o)
	if err != nil {
		return nil, err
	}
	loader := configLoader{cl: configclient.New(cfg.Client()).WithClock(o.Clock), set: configDB.SetName}
	return &Cluster{opts: o, config: cfg, Cache: catalogcache.New(loader), Shards: shardregistry.New(loader).WithTopologyTime(topologyTime(o.Clock)),
		hosts: client.NewPool(o), conns: map[string]*client.ReplicaSet{}}, nil
}

// Config is the config server replica set's client.
func (c *Cluster) Config() *client.ReplicaSet { return c.config }

// Shard returns a client for shard id (looked up in the registry; a shard whose connection
// string changed gets a new client).
func (c *Cluster) Shard(ctx context.Context, id string) (*client.ReplicaSet, error) {
	if id == configShardID {
		// The config and admin databases live on the config servers (the catalog cache
		// names "config" as their primary shard).
		return c.config, nil
	}
	s, err := c.Shards.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	hosts, err := client.ParseReplicaSetHosts(s.Host)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, mongoerr.New(mongoerr.ShutdownInProgress, "the router is shutting down")
	}
	if rs := c.conns[s.ID]; rs != nil && rs.Hosts().String() == hosts.String() {
		return rs, nil
	} else if rs != nil {
		go func() { _ = rs.Close(context.Background()) }()
	}
	rs, err := client.NewReplicaSet(hosts, c.opts)
	if err != nil {
		return nil, err
	}
	c.conns[s.ID] = rs
	return rs, nil
}

// Close disconnects from the shards and the config servers.
func (c *Cluster) Close() {
	c.mu.Lock()
	hooks := c.onClose
	c.onClose = nil
	c.mu.Unlock()
	for _, f := range hooks {
		f()
	}
	c.mu.Lock()
	conns := c.conns
	c.conns, c.closed = nil, true
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, rs := range conns {
		_ = rs.Close(ctx)
	}
	c.hosts.Close()
	_ = c.config.Close(ctx)
}

// Versioned returns cmd with the versions a request routed with r to shard carries: for a
// sharded collection the shard's placement version (shardVersion); for an unsharded one
// UNSHARDED and the database's version (databaseVersion).
func Versioned(cmd bsoncore.Document, r *catalogcache.Routing, shard string) bsoncore.Document {
	out := make([]byte, 0, len(cmd)+96)
	out = append(out, cmd[:len(cmd)-1]...) // without the document's terminating 0
	if r.Sharded() {
		out = r.Table.ShardVersion(shard).AppendShardVersion(out, "shardVersion")
	} else {
		out = routing.Unsharded().AppendShardVersion(out, "shardVersion")
		if !r.DB.Version.IsFixed() {
			out = r.DB.Version.AppendDoc(out, "databaseVersion")
		}
	}
	out = append(out, 0)
	n := len(out)
	out[0], out[1], out[2], out[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	return out
}

// WithRouting runs f with ns's routing information, refreshing what a stale-version answer
// says is out of date and running f again, up to maxStaleRetries times.
func (c *Cluster) WithRouting(ctx context.Context, ns string, f func(r *catalogcache.Routing) error) error {
	var err error
	for attempt := 0; attempt <= maxStaleRetries; attempt++ {
		var r *catalogcache.Routing
		if r, err = c.Cache.Routing(ctx, ns); err != nil {
			return err
		}
		if ts := readAtFrom(ctx); ts != nil {
			r = r.At(*ts) // a read at a past cluster time (cmd_read.go's readsAt)
		}
		if err = f(r); err == nil || !c.NoteStale(ns, err) || !txnMayRetryStale(ctx, c) {
			return err
		}
	}
	return err
}

// NoteStale marks the cache entries a stale-version error names (from a shard's reply
// through the driver, or a local mongoerr) stale; false if err is no such error.
func (c *Cluster) NoteStale(ns string, err error) bool {
	code, info := errorCodeAndReply(err)
	switch code {
	case mongoerr.StaleConfig, mongoerr.StaleEpoch:
		if n, ok := info.Lookup("ns").StringValueOK(); ok && n != "" {
			ns = n
		}
		var wanted *routing.ChunkVersion
		if v, err := info.LookupErr("vWanted"); err == nil {
			if w, err := routing.ParseShardVersion(v); err == nil {
				wanted = &w
			}
		}
		c.Cache.OnStaleShardVersion(ns, wanted)
		if wanted == nil || !wanted.IsSet() {
			// The shard knows no chunks: the collection may have been dropped or become
			// unsharded; its database's entry may be out of date too.
			db, _, _ := cut(ns)
			c.Cache.OnStaleDatabaseVersion(db, nil)
		}
		return true
	case mongoerr.StaleDbVersion:
		db, _, _ := cut(ns)
		if d, ok := info.Lookup("db").StringValueOK(); ok && d != "" {
			db = d
		}
		var wanted *routing.DatabaseVersion
		if v, err := info.LookupErr("vWanted"); err == nil {
			if w, err := routing.ParseDatabaseVersion(v); err == nil {
				wanted = &w
			}
		}
		c.Cache.OnStaleDatabaseVersion(db, wanted)
		return true
	}
	return false
}

// errorCodeAndReply returns err's MongoDB code and the document carrying its extra info:
// the shard's whole error reply for a driver CommandError, the Info of a local error.
func errorCodeAndReply(err error) (mongoerr.Code, bsoncore.Document) {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return mongoerr.Code(ce.Code), bsoncore.Document(ce.Raw)
	}
	if me, ok := mongoerr.As(err); ok {
		info, _ := me.Info.(bsoncore.Document)
		return me.Code, info
	}
	return 0, nil
}

func cut(ns string) (db, coll string, ok bool) {
	for i := 0; i < len(ns); i++ {
		if ns[i] == '.' {
			return ns[:i], ns[i+1:], true
		}
	}
	return ns, "", false
}

// String describes the cluster for logs.
func (c *Cluster) String() string {
	return fmt.Sprintf("cluster with config servers %s", c.config.Hosts())
}

// topologyTime is clock's TopologyTime for the shard registry (nil without a clock): a
// removeShard or addShard gossiped to this node makes the registry reload.
func topologyTime(clock *vclock.Clock) func() bson.Timestamp {
	if clock == nil {
		return nil
	}
	return func() bson.Timestamp {
		t := clock.Time().Topology
		return bson.Timestamp{T: t.Secs(), I: t.Inc()}
	}
}
