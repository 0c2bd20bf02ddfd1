// Package catalogcache is the routing table cache (spec: sharding.md "The routing table
// cache", "How the routing table cache refreshes", "When the routing table cache will
// refresh", "Types of refreshes"; MongoDB's CatalogCache): every router and shard keeps, per
// database, its primary shard and database version, and per collection, its routing table
// (nil for an unsharded collection), as last read from the authoritative source through a
// Loader (the config server for routers and shard primaries; later a shard's config.cache.*).
//
// Refreshes are lazy: an entry is read on first use and again only after it was marked stale
// (a versioned request answered StaleConfig or StaleDbVersion with a newer version than the
// cached one: OnStaleShardVersion, OnStaleDatabaseVersion) or invalidated
// (flushRouterConfig, a drop). A collection's refresh is incremental (the chunks changed since
// the cached collection version) when the cached table is of the same generation, and full
// otherwise; routing.Refresh decides. Concurrent users of one entry share its refresh
// (single flight) and wait for it with their own context. A failed refresh is retried twice
// (three attempts, as MongoDB's kMaxInconsistentRoutingInfoRefreshAttempts), then the error is
// returned and the entry stays stale, so the next use tries again.
package catalogcache

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

// maxRefreshAttempts bounds the attempts of one refresh (MongoDB's
// kMaxInconsistentRoutingInfoRefreshAttempts is 3).
const maxRefreshAttempts = 3

// Database is a database's entry in config.databases.
type Database struct {
	Name    string
	Primary string // the primary shard's id
	Version routing.DatabaseVersion
}

// Collection is a sharded collection's entry in config.collections.
type Collection struct {
	NS      string
	UUID    catalog.UUID
	Pattern *shardkey.Pattern
	Gen     routing.Generation
	Unique  bool
}

// Loader reads the authoritative routing information.
type Loader interface {
	// Database returns the database's entry; an error matching NamespaceNotFound when the
	// database does not exist.
	Database(ctx context.Context, name string) (Database, error)
	// Collection returns the collection's entry and its chunks: all of them when since is
	// nil or of another generation than the collection's current one, else those with a
	// version at or after *since. sharded is false for an unsharded (or missing) collection.
	Collection(ctx context.Context, ns string, since *routing.ChunkVersion) (coll Collection, chunks []routing.Chunk, sharded bool, err error)
}

// Routing is a collection's routing information: Table is nil when the collection is not
// sharded (it lives on its database's primary shard).
type Routing struct {
	DB    Database
	Coll  Collection
	Table *routing.RoutingTable
}

// Sharded reports whether the collection is sharded.
func (r *Routing) Sharded() bool { return r.Table != nil }

// At is the routing as of cluster time ts (MongoDB's getCollectionRoutingInfoAt): a sharded
// collection's chunks owned by the shards their history names at ts (routing.RoutingTable.At),
// its versions the current ones. An unsharded collection's routing is r itself.
func (r *Routing) At(ts bson.Timestamp) *Routing {
	if r.Table == nil {
		return r
	}
	at := *r
	at.Table = r.Table.At(ts)
	return &at
}

// Cache is one node's routing table cache. Safe for concurrent use.
type Cache struct {
	loader Loader

	mu    sync.Mutex
	dbs   map[string]*entry[Database]
	colls map[string]*entry[*Routing]
}

// New returns an empty cache over loader.
func New(loader Loader) *Cache {
	return &Cache{loader: loader, dbs: map[string]*entry[Database]{}, colls: map[string]*entry[*Routing]{}}
}

// entry is one cached value with its refresh state. Fields are guarded by Cache.mu.
type entry[T any] struct {
	val   T
	valid bool          // val holds a loaded value
	stale bool          // the next use refreshes
	busy  chan struct{} // non-nil while a refresh runs; closed when it ends
	// last is the channel of the last refresh that ended and err its error: its waiters
	// get that error rather than starting another refresh each.
	last chan struct{}
	err  error
}

// Database returns the database's entry, loading or refreshing it first if needed.
func (c *Cache) Database(ctx context.Context, name string) (Database, error) {
	return get(ctx, c, c.dbs, name, func(ctx context.Context, _ Database, _ bool) (Database, error) {
		return c.loader.Database(ctx, name)
	})
}

// Routing returns the collection's routing information, loading or refreshing it first if
// needed (its database's entry too).
func (c *Cache) Routing(ctx context.Context, ns string) (*Routing, error) {
	db, _, ok := cutNS(ns)
	if !ok {
		return nil, fmt.Errorf("catalogcache: invalid namespace %q", ns)
	}
	return get(ctx, c, c.colls, ns, func(ctx context.Context, old *Routing, valid bool) (*Routing, error) {
		dbe, err := c.Database(ctx, db)
		if err != nil {
			return nil, err
		}
		var since *routing.ChunkVersion
		var oldTable *routing.RoutingTable
		if valid && old.Table != nil {
			v := old.Table.Version()
			since, oldTable = &v, old.Table
		}
		coll, chunks, sharded, err := c.loader.Collection(ctx, ns, since)
		if err != nil {
			return nil, err
		}
		r := &Routing{DB: dbe, Coll: coll}
		if !sharded {
			return r, nil
		}
		if r.Table, err = routing.Refresh(oldTable, coll.UUID, coll.Pattern, coll.Gen, chunks); err != nil {
			return nil, err
		}
		return r, nil
	})
}

// get returns m[key], running load when the entry is missing or stale; concurrent callers
// share one load.
func get[T any](ctx context.Context, c *Cache, m map[string]*entry[T], key string, load func(context.Context, T, bool) (T, error)) (T, error) {
	var zero T
	for {
		c.mu.Lock()
		e := m[key]
		if e == nil {
			e = &entry[T]{stale: true}
			m[key] = e
		}
		// A refresh in progress means the value is known stale: wait for the refresh
		// rather than hand out the old value (it clears stale when it starts).
		if e.busy == nil && e.valid && !e.stale {
			v := e.val
			c.mu.Unlock()
			return v, nil
		}
		if e.busy != nil {
			busy := e.busy
			c.mu.Unlock()
			select {
			case <-busy:
			case <-ctx.Done():
				return zero, context.Cause(ctx)
			}
			c.mu.Lock()
			if e.last == busy && e.err != nil {
				err := e.err
				c.mu.Unlock()
				return zero, err // the refresh we waited for failed
			}
			c.mu.Unlock()
			continue
		}
		old, valid := e.val, e.valid
		busy := make(chan struct{})
		e.busy, e.stale = busy, false
		c.mu.Unlock()

		v, err := refresh(ctx, old, valid, load)

		c.mu.Lock()
		if err == nil {
			// Marked stale again while loading, the value is kept (it is at least as new as
			// before) and the next use refreshes once more.
			e.val, e.valid = v, true
		} else {
			e.stale = true
		}
		e.busy, e.last, e.err = nil, busy, err
		close(busy)
		c.mu.Unlock()
		if err != nil {
			return zero, err
		}
		return v, nil
	}
}

// refresh runs load up to maxRefreshAttempts times while it fails with anything but a
// cancelled context or a missing namespace.
func refresh[T any](ctx context.Context, old T, valid bool, load func(context.Context, T, bool) (T, error)) (T, error) {
	var v T
	var err error
	for range maxRefreshAttempts {
		if v, err = load(ctx, old, valid); err == nil || ctx.Err() != nil || !retriable(err) {
			return v, err
		}
		// An inconsistent answer (a table that failed validation, say mid-commit on the
		// config server): the next attempt starts over from a full load.
		valid = false
	}
	return v, err
}

// retriable reports whether a failed refresh is worth repeating at once.
func retriable(err error) bool {
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		!mongoerr.Is(err, mongoerr.NamespaceNotFound)
}

// OnStaleDatabaseVersion marks the database's entry stale if wanted (the version the shard
// has, nil if unknown) is newer than the cached one, or unknown. Its collections' entries,
// which carry the database's entry as they loaded it (Routing.DB: the primary shard and
// version an unsharded collection is routed by), are marked stale with it: their next use
// reloads the database, and refreshes their tables incrementally.
func (c *Cache) OnStaleDatabaseVersion(name string, wanted *routing.DatabaseVersion) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.dbs[name]
	if e == nil {
		return
	}
	if wanted == nil || !e.valid || !wanted.Equal(e.val.Version) {
		e.stale = true
		// The database's unsharded collections are routed with its version: their entries
		// go stale with it. A sharded collection's routing table does not depend on the
		// database version (a StaleDbVersion about an unsharded namespace must not make every
		// sharded one refresh: with the config servers unreachable they keep being served
		// from the cache).
		for ns, ce := range c.colls {
			if db, _, _ := cutNS(ns); db == name && !(ce.valid && ce.val.Table != nil) {
				ce.stale = true
			}
		}
	}
}

// OnStaleShardVersion marks the collection's entry stale unless the cached table is already
// at least as new as wanted (the version the shard has, nil if unknown, 0|0 if the shard
// owns no chunks).
func (c *Cache) OnStaleShardVersion(ns string, wanted *routing.ChunkVersion) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.colls[ns]
	if e == nil {
		return
	}
	// A shard reporting 0|0 (it owns no chunks any more) always refreshes the entry, as
	// MongoDB's ComparableChunkVersion orders unset versions by arrival.
	if wanted != nil && wanted.IsSet() && e.valid && e.val.Table != nil {
		have := e.val.Table.Version()
		if have.SameCollection(wanted.Generation) && !have.IsOlderThan(*wanted) {
			return // a refresh already caught up with the shard
		}
	}
	e.stale = true
}

// InvalidateCollection makes the next use of ns reload it fully (a drop, flushRouterConfig).
func (c *Cache) InvalidateCollection(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.colls[ns]; e != nil {
		e.stale, e.valid = true, false
	}
}

// InvalidateDatabase makes the next use of the database and of each of its collections
// reload them fully.
func (c *Cache) InvalidateDatabase(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.dbs[name]; e != nil {
		e.stale, e.valid = true, false
	}
	for ns, e := range c.colls {
		if db, _, _ := cutNS(ns); db == name {
			e.stale, e.valid = true, false
		}
	}
}

// Purge forgets everything (flushRouterConfig without arguments).
func (c *Cache) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.dbs {
		e.stale, e.valid = true, false
	}
	for _, e := range c.colls {
		e.stale, e.valid = true, false
	}
}

func cutNS(ns string) (db, coll string, ok bool) {
	for i := 0; i < len(ns); i++ {
		if ns[i] == '.' {
			return ns[:i], ns[i+1:], i > 0 && i < len(ns)-1
		}
	}
	return ns, "", false
}
