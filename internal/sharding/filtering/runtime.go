// Package filtering is a shard's versioning runtime (spec: sharding.md "Shard versioning and
// database versioning", "When the routing table cache will refresh", and the orphan filter of
// "Routing"; MongoDB 7.0's CollectionShardingRuntime, DatabaseShardingState,
// OperationShardingState, shard_filtering_metadata_refresh and, for the source of truth, the
// CatalogCache a shard refreshes from the config server).
//
// Per node it keeps the filtering metadata of each namespace (unknown, unsharded, or sharded:
// the collection's routing table and this shard's placement version) and of each database
// (unknown, or its primary shard and database version). A versioned
// request (one carrying shardVersion or databaseVersion: only routers send them) is checked
// against it under the collection lock (Check, the operation layer's DB.ShardCheck): a
// mismatch or unknown metadata is StaleConfig (13388) / StaleDbVersion (249) with MongoDB's
// extra info; the command fails, and before the error goes back the node refreshes from the
// config server (OnStaleError, MongoDB's handleException calling onShardVersionMismatch /
// onDbVersionMismatch), so the router's retry finds it current. Refreshes of one namespace
// or database are single-flight. A request without versions (a direct connection) is never
// checked and sees every document; a versioned read of a sharded collection gets the
// ownership filter of the checked metadata (SHARDING_FILTER), which hides orphans.
//
// A read at a cluster time (a snapshot read, a snapshot transaction's statement) is checked
// against the current version but filtered by the ownership of its time, from the chunks'
// history (preserver.go's checkAndPin, routing.RoutingTable.At): a migration's donor still
// returns the moved range at a time before the commit, its recipient does not.
//
// A shard primary also writes what it refreshed to config.cache.* (persist.go). A database
// whose primary moves is held in a critical section meanwhile (dbcritsec.go).
//
// A migration's critical section (critical.go) blocks versioned writes, then reads, of a
// collection on its donor until the commit is known.
//
// Not yet (later parts of issue 12 and the issues after it): secondaries reading config.cache.* (they refresh from the config server themselves),
// recovering the metadata from config.cache.* after a restart, and index versions in the
// shard version.
package filtering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/client"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query/plan"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardstate"
)

// CollectionMetadata is one namespace's known filtering metadata (MongoDB's
// CollectionMetadata): Table nil for an unsharded collection.
type CollectionMetadata struct {
	Table  *routing.RoutingTable
	Shard  string // this shard's id
	Unique bool   // the shard key is unique (config.collections' unique)
}

// Sharded reports whether the collection is sharded.
func (m *CollectionMetadata) Sharded() bool { return m.Table != nil }

// ShardVersion is this shard's placement version: UNSHARDED for an unsharded collection,
// else the highest version of its chunks (0|0 of the generation when it owns none).
func (m *CollectionMetadata) ShardVersion() routing.ChunkVersion {
	if m.Table == nil {
		return routing.Unsharded()
	}
	return m.Table.ShardVersion(m.Shard)
}

// Filter is the ownership filter of the metadata (nil when unsharded).
func (m *CollectionMetadata) Filter() plan.OwnershipFilter {
	if m.Table == nil {
		return nil
	}
	return ownership{m.Table, m.Shard}
}

// ownership is MongoDB's ScopedCollectionFilter: a document belongs to this shard when the
// chunk of its shard key is this shard's (in table, which for a read at a past cluster time
// is the placement of that time: routing.RoutingTable.At). A document whose key cannot be extracted (an array
// on the shard key path) belongs to nobody, as ShardFilterStage drops it.
type ownership struct {
	table *routing.RoutingTable
	shard string
}

func (o ownership) KeyBelongs(doc bsoncore.Document) bool {
	s, err := o.table.ShardForDoc(doc)
	return err == nil && s == o.shard
}

// DatabaseInfo is a database's known metadata (DatabaseShardingState).
type DatabaseInfo struct {
	Primary string
	Version routing.DatabaseVersion
}

// Config is what a Runtime needs from its node.
type Config struct {
	// Identity is the node's shard identity and whether it is shard-aware yet.
	Identity func() (shardstate.Identity, bool)
	// Connect returns the loader of the authoritative catalog for the config server
	// replica set connString and a close function (nil: a configclient over a
	// client.ReplicaSet dialed with ClientOptions).
	Connect func(connString string) (catalogcache.Loader, func(context.Context) error, error)
	// ClientOptions are the options of the default Connect's client.
	ClientOptions client.Options
	// Persist, when set, writes config.cache.* after each refresh on a writable primary.
	Persist *Persister
	Log     *slog.Logger
}

// Runtime is one shard's filtering metadata and its refreshes. Safe for concurrent use.
type Runtime struct {
	cfg Config

	// ctx is cancelled by Close; refreshes run under it, counted by wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	cache     *catalogcache.Cache // built on first refresh, from the identity's config servers
	connStr   string
	closeFn   func(context.Context) error
	closed    bool
	colls     map[string]*CollectionMetadata // absent: unknown
	dbs       map[string]*DatabaseInfo       // absent: unknown
	inflight  map[string]*flight
	refreshes int64 // completed refreshes from the config server, for tests and serverStatus

	users usersOf // in-flight uses of each metadata (preserver.go), guarded by mu
	// dbSections are the databases' critical sections (dbcritsec.go).
	dbSections map[string]*dbCriticalSection
	crit       criticalSections // the migration critical sections (critical.go)
}

// flight is one refresh in progress; its waiters share its result.
type flight struct {
	done    chan struct{}
	err     error
	waiters int // callers that joined it (guarded by Runtime.mu)
}

// New returns a runtime that knows nothing yet.
func New(cfg Config) *Runtime {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Connect == nil {
		o := cfg.ClientOptions
		if o.AppName == "" {
			o.AppName = "humongod-shard-catalog"
		}
		cfg.Connect = func(connString string) (catalogcache.Loader, func(context.Context) error, error) {
			hosts, err := client.ParseReplicaSetHosts(connString)
			if err != nil {
				return nil, nil, err
			}
			rs, err := client.NewReplicaSet(hosts, o)
			if err != nil {
				return nil, nil, err
			}
			return configclient.New(rs.Client()).WithClock(o.Clock), rs.Close, nil
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Runtime{cfg: cfg, ctx: ctx, cancel: cancel, colls: map[string]*CollectionMetadata{}, dbs: map[string]*DatabaseInfo{},
		inflight: map[string]*flight{}}
}

// Close stops the running refreshes and disconnects from the config servers; later
// refreshes fail with ShutdownInProgress.
func (r *Runtime) Close(ctx context.Context) error {
	r.cancel()
	r.wg.Wait() // the refreshes end with their context
	r.mu.Lock()
	fn := r.closeFn
	r.closeFn, r.closed, r.cache = nil, true, nil
	r.mu.Unlock()
	if fn != nil {
		return fn(ctx)
	}
	return nil
}

// identity returns the shard identity, or ShardingStateNotInitialized (ShardingState's
// canAcceptShardedCommands) before the node is shard-aware.
func (r *Runtime) identity() (shardstate.Identity, error) {
	id, ok := r.cfg.Identity()
	if !ok {
		return id, mongoerr.New(mongoerr.ShardingStateNotInitialized,
			"Cannot accept sharding commands if sharding state has not been initialized with a shardIdentity document")
	}
	return id, nil
}

// Collection returns ns's known metadata (nil, false when unknown).
func (r *Runtime) Collection(ns string) (*CollectionMetadata, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.colls[ns]
	return m, ok
}

// Database returns the database's known metadata (nil, false when unknown).
func (r *Runtime) Database(db string) (*DatabaseInfo, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.dbs[db]
	return d, ok
}

// Refreshes is the number of completed refreshes from the config server.
func (r *Runtime) Refreshes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refreshes
}

// ClearCollection forgets ns's metadata (the next versioned request refreshes it).
func (r *Runtime) ClearCollection(ns string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.colls, ns)
}

// Check is DB.ShardCheck: called with ns's collection lock held (ns a database name: its
// database lock; collection and database DDL are checked too) by an operation carrying a
// shardVersion or databaseVersion for op.VersionedNS. The database version applies to every
// collection of that database (AutoGetDb's assertMatchingDbVersion), the shard version to
// that collection only (checkShardVersionOrThrow). It returns the ownership filter of the
// checked metadata for a sharded collection.
func (r *Runtime) Check(op *operation.Context, ns string) (plan.OwnershipFilter, error) {
	vdb, _, _ := strings.Cut(op.VersionedNS, ".")
	db, _, _ := strings.Cut(ns, ".")
	checkDB := op.DatabaseVersion.Type != 0 && vdb == db
	checkShard := op.ShardVersion.Type != 0 && op.VersionedNS == ns && strings.Contains(ns, ".")
	if !checkDB && !checkShard {
		return nil, nil
	}
	id, err := r.identity()
	if err != nil {
		return nil, err
	}
	if checkDB {
		received, err := routing.ParseDatabaseVersion(op.DatabaseVersion)
		if err != nil {
			return nil, err
		}
		if err := r.checkDatabaseCriticalSection(op, db, received); err != nil {
			return nil, err
		}
		// The fixed version of admin and config is never stale.
		if err := r.CheckDatabase(db, received); err != nil && !received.IsFixed() {
			return nil, err
		}
	}
	if !checkShard {
		return nil, nil
	}
	received, err := routing.ParseShardVersion(op.ShardVersion)
	if err != nil {
		return nil, err
	}
	m, err := r.CheckCollection(ns, id.ShardName, received)
	if err != nil || m == nil {
		return nil, err
	}
	if err := r.checkCriticalSection(op, ns, id.ShardName, received, m.ShardVersion()); err != nil {
		return nil, err
	}
	return r.checkAndPin(ns, id.ShardName, received, op.SnapshotTime()) // preserver.go
}

// CheckDatabase checks a received database version against the known one.
func (r *Runtime) CheckDatabase(db string, received routing.DatabaseVersion) error {
	var wanted *routing.DatabaseVersion
	if d, ok := r.Database(db); ok {
		v := d.Version
		wanted = &v
	}
	return routing.CheckDatabaseVersion(db, received, wanted)
}

// CheckCollection checks a received shard version against ns's known metadata and returns
// the metadata it passed against.
func (r *Runtime) CheckCollection(ns, shard string, received routing.ChunkVersion) (*CollectionMetadata, error) {
	m, ok := r.Collection(ns)
	if !ok {
		return nil, mongoerr.New(mongoerr.StaleConfig,
			"sharding status of collection "+ns+" is not currently known and needs to be recovered").
			WithInfo(routing.StaleConfigInfo(ns, shard, received, nil))
	}
	if err := routing.CheckShardVersion(ns, shard, received, m.ShardVersion()); err != nil {
		return nil, err
	}
	return m, nil
}

// OnStaleError is what the node does with a command's StaleConfig or StaleDbVersion before
// replying (MongoDB's handleException): refresh the metadata the error was about when the
// request was newer than what the node knows, or the node knows nothing. Refresh errors are
// logged and dropped: the command's answer is the stale error either way.
func (r *Runtime) OnStaleError(ctx context.Context, err error) {
	me, ok := mongoerr.As(err)
	if !ok {
		return
	}
	info, _ := me.Info.(bsoncore.Document)
	if info == nil {
		return
	}
	var rerr error
	switch me.Code {
	case mongoerr.StaleConfig:
		ns, _ := info.Lookup("ns").StringValueOK()
		received, perr := routing.ParseShardVersion(info.Lookup("vReceived"))
		if ns == "" || perr != nil {
			return
		}
		rerr = r.OnShardVersionMismatch(ctx, ns, received)
	case mongoerr.StaleDbVersion:
		db, _ := info.Lookup("db").StringValueOK()
		received, perr := routing.ParseDatabaseVersion(info.Lookup("vReceived"))
		if db == "" || perr != nil {
			return
		}
		r.waitDatabaseCriticalSection(ctx, db)
		rerr = r.OnDbVersionMismatch(ctx, db, received)
	default:
		return
	}
	if rerr != nil && ctx.Err() == nil {
		r.cfg.Log.Warn("Failed to refresh the filtering metadata after a stale version", "error", rerr.Error())
	}
}

// OnShardVersionMismatch is onShardVersionMismatch: refresh ns unless its metadata is known
// and the received version is older than or equal to this shard's (the router is the stale
// side then; versions of different generations order by their timestamps). One departure:
// a router sending UNSHARDED for a collection this shard knows sharded makes it refresh too,
// as MongoDB's drop coordinator would have cleared the shard's metadata, and a drop reaching
// this shard any other way must not leave it answering StaleConfig for ever.
func (r *Runtime) OnShardVersionMismatch(ctx context.Context, ns string, received routing.ChunkVersion) error {
	r.waitCriticalSection(ctx, ns) // a migration's commit: its refresh is the one to have
	if m, ok := r.Collection(ns); ok && received.IsOlderOrEqualThan(m.ShardVersion()) &&
		!(m.Sharded() && received.Equal(routing.Unsharded())) {
		return nil
	}
	_, err := r.RefreshCollection(ctx, ns)
	return err
}

// OnDbVersionMismatch is onDbVersionMismatch: refresh the database unless its version is
// known and the received one is not newer. The admin and config databases have fixed
// versions and are never refreshed.
func (r *Runtime) OnDbVersionMismatch(ctx context.Context, db string, received routing.DatabaseVersion) error {
	if db == "admin" || db == "config" {
		return nil
	}
	if d, ok := r.Database(db); ok && !d.Version.Less(received) {
		return nil
	}
	_, err := r.RefreshDatabase(ctx, db)
	return err
}

// loader returns the catalog cache over the config servers of the node's identity, built on
// first use (and again if the identity's connection string changed).
func (r *Runtime) loader() (*catalogcache.Cache, error) {
	id, err := r.identity()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, mongoerr.New(mongoerr.ShutdownInProgress, "the shard's filtering metadata is shut down")
	}
	if r.cache != nil && r.connStr == id.ConfigsvrConnectionString {
		return r.cache, nil
	}
	ld, closeFn, err := r.cfg.Connect(id.ConfigsvrConnectionString)
	if err != nil {
		return nil, fmt.Errorf("connect to the config servers %s: %w", id.ConfigsvrConnectionString, err)
	}
	if old := r.closeFn; old != nil {
		go func() { _ = old(context.Background()) }() // the previous set's client: nothing uses it any more
	}
	r.cache, r.connStr, r.closeFn = catalogcache.New(ld), id.ConfigsvrConnectionString, closeFn
	return r.cache, nil
}

// RefreshCollection reads ns's routing information from the config server and installs it
// (forceShardFilteringMetadataRefresh). Concurrent refreshes of ns share one.
func (r *Runtime) RefreshCollection(ctx context.Context, ns string) (*CollectionMetadata, error) {
	err := r.singleFlight(ctx, "c\x00"+ns, func(ctx context.Context) error {
		id, err := r.identity()
		if err != nil {
			return err
		}
		cache, err := r.loader()
		if err != nil {
			return err
		}
		// A shard's refresh always goes to the config server: the request that sent us
		// here knew of a version we do not have.
		cache.OnStaleShardVersion(ns, nil)
		m := &CollectionMetadata{Shard: id.ShardName}
		rt, err := cache.Routing(ctx, ns)
		switch {
		case mongoerr.Is(err, mongoerr.NamespaceNotFound):
			// No such database in the catalog: the collection is not sharded.
		case err != nil:
			return err
		default:
			m.Table, m.Unique = rt.Table, rt.Coll.Unique
		}
		r.mu.Lock()
		r.refreshes++
		if old := r.colls[ns]; old != nil && old.Sharded() && m.Sharded() && m.Table.Version().IsOlderThan(old.Table.Version()) {
			r.mu.Unlock()
			return nil // never install older metadata than we have
		}
		r.colls[ns] = m
		r.mu.Unlock()
		r.persist(func(ctx context.Context) error { return r.persistCollection(ctx, ns, m) })
		return nil
	})
	if err != nil {
		return nil, err
	}
	m, _ := r.Collection(ns)
	return m, nil
}

// RefreshDatabase reads the database's entry from the config server (refreshDbMetadata): its
// primary shard and version become known, or unknown when the database does not exist. As in
// MongoDB 7.0 every shard keeps the version it refreshed, primary or not: a router routes
// unsharded collections to the primary, and a change of primary changes the version.
func (r *Runtime) RefreshDatabase(ctx context.Context, db string) (*DatabaseInfo, error) {
	err := r.singleFlight(ctx, "d\x00"+db, func(ctx context.Context) error {
		cache, err := r.loader()
		if err != nil {
			return err
		}
		cache.OnStaleDatabaseVersion(db, nil)
		d, err := cache.Database(ctx, db)
		if err != nil && !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
			return err
		}
		var info *DatabaseInfo
		r.mu.Lock()
		r.refreshes++
		if err != nil {
			delete(r.dbs, db) // dropped
		} else {
			info = &DatabaseInfo{Primary: d.Primary, Version: d.Version}
			r.dbs[db] = info
		}
		r.mu.Unlock()
		r.persist(func(ctx context.Context) error { return r.persistDatabase(ctx, db, info) })
		return nil
	})
	if err != nil {
		return nil, err
	}
	d, _ := r.Database(db)
	return d, nil
}

// persist runs a config.cache.* write with a context of its own: the refresh may run in a
// client's operation (its transaction, its read concern), which the writes must not join.
// A failed write is logged: the in-memory metadata is what versioned requests use.
func (r *Runtime) persist(write func(context.Context) error) {
	if r.cfg.Persist == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
	defer cancel()
	if err := write(ctx); err != nil {
		r.cfg.Log.Warn("Failed to persist refreshed routing information in config.cache", "error", err.Error())
	}
}

// persistTimeout bounds one refresh's config.cache.* writes.
const persistTimeout = 10 * time.Second

// singleFlight runs load for key unless one runs already, and waits for its result with
// ctx. The load runs in a goroutine of the runtime under a context of its own (bounded by
// refreshTimeout, cancelled by Close), as MongoDB refreshes on a thread of its own: a caller
// that gives up (maxTimeMS, a closed connection) does not fail the others, and the load
// carries none of the caller's request state.
func (r *Runtime) singleFlight(ctx context.Context, key string, load func(context.Context) error) error {
	r.mu.Lock()
	f := r.inflight[key]
	if f != nil {
		f.waiters++
	} else {
		f = &flight{done: make(chan struct{})}
		r.inflight[key] = f
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			lctx, cancel := context.WithTimeout(r.ctx, refreshTimeout)
			defer cancel()
			err := load(lctx)
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				err = mongoerr.Newf(mongoerr.Interrupted, "refresh of the filtering metadata interrupted: %v", err)
			}
			r.mu.Lock()
			f.err = err
			delete(r.inflight, key)
			r.mu.Unlock()
			close(f.done)
		}()
	}
	r.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// refreshTimeout bounds one refresh from the config server.
const refreshTimeout = 30 * time.Second
