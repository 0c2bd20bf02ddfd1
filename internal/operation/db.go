package operation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/lock"
	"humongo/internal/opobserver"
	"humongo/internal/query/plan"
	"humongo/internal/storage"
)

// DB is the storage side of a data node, shared by every operation: the engine, the catalog,
// one write path per collection and the lock manager (MongoDB's ServiceContext storage
// decorations).
type DB struct {
	Engine  *storage.Engine
	Catalog *catalog.Catalog
	Colls   *index.Collections
	Locks   *lock.Manager
	// TempDir holds external-sorter spill files (index builds, blocking sorts).
	TempDir string
	Log     *slog.Logger
	// OwnershipFilterFor, when set, gives the read seam the ownership filter of a namespace
	// (a predicate on its shard key) for every owned read, versioned or not: a test
	// override set before the server starts. nil in production, where the filter of a
	// versioned request comes from ShardCheck.
	OwnershipFilterFor func(ns string) plan.OwnershipFilter
	// ShardCheck is the shard's check of a versioned request (the sharding layer's
	// filtering metadata, internal/sharding/filtering): the collection access methods call
	// it with ns's collection lock held when the operation carries a shardVersion or
	// databaseVersion, as MongoDB's AutoGetCollection checks under its lock. It fails with
	// StaleConfig / StaleDbVersion, or returns the ownership filter owned reads of ns use
	// (nil: none). nil on a node that is not a shard: nothing is checked.
	ShardCheck func(op *Context, ns string) (plan.OwnershipFilter, error)

	mu       sync.Mutex
	decos    map[any]any // guarded by mu; *decoCell by *Decoration; nil once closed
	onClose  []func()    // guarded by mu; run newest first by Close, before the engine closes
	isClosed bool        // guarded by mu
}

// OpenDB opens (or creates) the data directory dbpath: the storage engine, the catalog with
// startup reconciliation, and the collection write paths; then it restarts the index builds
// that the last shutdown or crash interrupted (before the server accepts connections).
func OpenDB(ctx context.Context, dbpath string, log *slog.Logger) (*DB, error) {
	return OpenDBWithCache(ctx, dbpath, log, 0)
}

// OpenDBWithCache is OpenDB with the storage engine's block cache of cacheBytes (0: the
// engine's default), what mongod's WiredTiger cache size options map onto.
func OpenDBWithCache(ctx context.Context, dbpath string, log *slog.Logger, cacheBytes int64) (*DB, error) {
	if log == nil {
		log = slog.Default()
	}
	e, err := storage.Open(storage.Options{Dir: dbpath, Logger: log, CacheSize: cacheBytes})
	if err != nil {
		return nil, fmt.Errorf("open storage engine in %s: %w", dbpath, err)
	}
	cat, err := catalog.Open(ctx, e)
	if err != nil {
		_ = e.Close()
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	d := &DB{
		Engine:  e,
		Catalog: cat,
		Colls:   index.NewCollections(e, cat),
		Locks:   lock.NewManager(),
		TempDir: filepath.Join(dbpath, "_tmp"),
		Log:     log,
		decos:   map[any]any{},
	}
	// The external sorter creates its spill files there and does not create the directory.
	if err := os.MkdirAll(d.TempDir, 0o750); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("create %s: %w", d.TempDir, err)
	}
	// Index builds interrupted by a crash or shutdown restart from scratch, synchronously:
	// nobody can connect yet, so the default write gate excludes all the writers there are.
	if err := index.RestartUnfinishedBuilds(ctx, d.Colls, index.BuildOptions{TempDir: d.TempDir, Log: log}); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("restart unfinished index builds: %w", err)
	}
	return d, nil
}

// SetObserver installs the op observer every write calls (standalone: opobserver.NoOp, the
// default; a replica-set member: the oplog writer, installed after OpenDB and oplog.Open and
// before the server accepts connections).
func (d *DB) SetObserver(o opobserver.Observer) { d.Colls.SetObserver(o) }

// Observer returns the installed op observer.
func (d *DB) Observer() opobserver.Observer { return d.Colls.Observer() }

// OnClose registers f to run when d closes, before the engine closes under it (newest first).
// Owners of per-node state (Decoration) stop their goroutines here.
// Registered after Close, f runs at once.
func (d *DB) OnClose(f func()) {
	d.mu.Lock()
	if d.isClosed {
		d.mu.Unlock()
		f()
		return
	}
	d.onClose = append(d.onClose, f)
	d.mu.Unlock()
}

// Close stops what runs on d (OnClose, then the index builds' scans), stops the catalog's
// background work and closes the engine cleanly (fast counts are persisted and the WAL
// synced, so the next start needs no recovery).
func (d *DB) Close() error {
	d.mu.Lock()
	hooks := d.onClose
	d.onClose, d.isClosed = nil, true
	d.mu.Unlock()
	for i := len(hooks) - 1; i >= 0; i-- {
		hooks[i]()
	}
	// Running index builds stop before the engine closes under them; they stay unfinished in
	// the catalog and restart at the next start.
	d.Colls.IndexBuilds().Shutdown()
	d.mu.Lock()
	d.decos = nil // per-node state is released with the node
	d.mu.Unlock()
	return errors.Join(d.Catalog.Close(), d.Engine.Close())
}

// Decoration is a per-DB value of type T that a package above this one keeps on the node
// (MongoDB's ServiceContext decorations): the index-build coordinator, the retryable-write
// session catalog, the compiled validators. Declare one per owner in a package variable
// (the key is immutable; the values live on each DB and go away with it).
type Decoration[T any] struct {
	init func(*DB) T
}

// NewDecoration declares a decoration whose value is built by init on first use on each DB.
// init runs under no lock of d's; it may call d.OnClose.
func NewDecoration[T any](init func(*DB) T) *Decoration[T] { return &Decoration[T]{init: init} }

// Get returns k's value on d, building it on first use (exactly once per DB).
func (k *Decoration[T]) Get(d *DB) T {
	d.mu.Lock()
	c, ok := d.decos[k].(*decoCell[T])
	if !ok {
		c = &decoCell[T]{}
		if d.decos != nil { // a closed DB keeps nothing
			d.decos[k] = c
		}
	}
	d.mu.Unlock()
	c.once.Do(func() { c.v = k.init(d) })
	return c.v
}

// Lookup returns k's value on d if it was built.
func (k *Decoration[T]) Lookup(d *DB) (T, bool) {
	d.mu.Lock()
	c, ok := d.decos[k].(*decoCell[T])
	d.mu.Unlock()
	if !ok {
		var zero T
		return zero, false
	}
	c.once.Do(func() { c.v = k.init(d) }) // waits for a concurrent first Get
	return c.v, true
}

type decoCell[T any] struct {
	once sync.Once
	v    T
}

// UserOptions returns m's options as the user gave them (without the catalog's uuid), as
// create oplog entries and listCollections show them.
func UserOptions(m *catalog.CollectionMeta) bsoncore.Document {
	elems, _ := m.Options.Elements()
	idx, b := bsoncore.AppendDocumentStart(nil)
	for _, e := range elems {
		if e.Key() != "uuid" {
			b = append(b, e...)
		}
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// FirstDocument returns a copy of the first record of ns in storage order, nil when ns is
// missing or empty. It reads the single-document internal collections (the replica-set config
// and election record, the default read/write concern), which are not user data and so do not
// go through the read seam.
func (d *DB) FirstDocument(ctx context.Context, ns string) (bsoncore.Document, error) {
	var first bsoncore.Document
	err := d.ScanDocuments(ctx, ns, func(doc bsoncore.Document) bool {
		first = append(bsoncore.Document(nil), doc...)
		return false
	})
	return first, err
}

// ScanDocuments hands each record of ns, in storage order, to f until f returns false (the
// document is valid only during the call); nothing when ns is missing. Like FirstDocument,
// for the internal collections (config.migrationCoordinators, config.transactions) that
// are read whole, outside the read seam.
func (d *DB) ScanDocuments(ctx context.Context, ns string, f func(doc bsoncore.Document) bool) error {
	op := d.NewOp(ctx)
	defer op.Close()
	_, coll, release, err := op.ReadCollection(ctx, ns)
	if err != nil {
		return err
	}
	defer release()
	if coll == nil {
		return nil
	}
	cur, err := coll.RecordStore().NewCursor(op.RU, false)
	if err != nil {
		return err
	}
	defer cur.Close()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, doc, ok := cur.Next()
		if !ok || !f(doc) {
			break
		}
	}
	return cur.Err()
}
