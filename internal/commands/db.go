package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/query/plan"
	"humongo/internal/storage"
)

// DB is the storage side of a data node, shared by every command handler: the engine, the
// catalog, one write path per collection and the lock manager (MongoDB's ServiceContext
// storage decorations). Handlers reach it as dbOf(env.State).
type DB struct {
	Engine  *storage.Engine
	Catalog *catalog.Catalog
	Colls   *index.Collections
	Locks   *lock.Manager
	// TempDir holds external-sorter spill files (index builds, blocking sorts).
	TempDir string
	Log     *slog.Logger

	OwnershipFilterFor func(ns string) plan.OwnershipFilter // read seam (read_seam.go): the ownership filter of ns; nil in production (no sharding yet), set by tests before Start
}

// OpenDB opens (or creates) the data directory dbpath: the storage engine, the catalog with
// startup reconciliation, and the collection write paths; then it restarts the index builds
// that the last shutdown or crash interrupted (before the server accepts connections).
func OpenDB(ctx context.Context, dbpath string, log *slog.Logger) (*DB, error) {
	if log == nil {
		log = slog.Default()
	}
	e, err := storage.Open(storage.Options{Dir: dbpath, Logger: log})
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

// logCreate tells the observer about collection m, just created in o's unit: its user
// options and the _id index spec it got (none for clustered collections and oplogs).
func (o *OpCtx) logCreate(m *catalog.CollectionMeta) error {
	var idIndex bsoncore.Document
	if ix, ok := m.Index(catalog.IDIndexName); ok && !m.Clustered {
		idIndex = ix.Spec
	}
	return o.DB.Observer().OnCreateCollection(o.RU, m.NS, m.UUID, ddlUserOptions(m), idIndex)
}

// Close stops the catalog's background work and closes the engine cleanly (fast counts are
// persisted and the WAL synced, so the next start needs no recovery).
func (d *DB) Close() error {
	stopIndexBuilds(d) // running index builds stop before the engine closes under them
	return errors.Join(d.Catalog.Close(), d.Engine.Close())
}

// OpCtx is one operation's storage context: its Locker and RecoveryUnit. Not safe for concurrent
// use; Close it when the operation ends.
type OpCtx struct {
	DB     *DB
	Locker *lock.Locker
	RU     *storage.RecoveryUnit
}

// NewOp starts an operation. maxTimeMS deadlines on ctx surface as MaxTimeMSExpired.
func (d *DB) NewOp() *OpCtx {
	l := d.Locks.NewLocker()
	l.SetDeadlineKind(lock.DeadlineMaxTimeMS)
	return &OpCtx{DB: d, Locker: l, RU: d.Engine.NewRecoveryUnit()}
}

// Close releases the operation's snapshot and any locks still held.
func (o *OpCtx) Close() {
	o.RU.Close()
	o.Locker.UnlockAll()
}

// ReadCollection locks ns for reading (Global/DB/collection IS) and returns its metadata and
// write path, both nil when the collection does not exist (reads of a missing collection
// return nothing rather than failing, as in MongoDB). release drops the locks and abandons the
// storage snapshot.
func (o *OpCtx) ReadCollection(ctx context.Context, ns string) (meta *catalog.CollectionMeta, coll *index.Collection, release func(), err error) {
	if err := catalog.ValidateNS(ns); err != nil {
		return nil, nil, nil, err
	}
	scope, err := o.Locker.CollectionLock(ctx, ns, lock.ModeIS)
	if err != nil {
		return nil, nil, nil, err
	}
	release = func() {
		o.RU.AbandonSnapshot()
		_ = scope.Release()
	}
	meta, ok := o.DB.Catalog.Latest().ByNS(ns)
	if !ok {
		return nil, nil, release, nil
	}
	coll, err = o.DB.Colls.ByUUID(meta.UUID)
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	return meta, coll, release, nil
}

// WriteCollection runs f in a WriteUnitOfWork on the collection ns under its IX lock,
// retrying the whole of f on WriteConflict. When the collection does not exist it is created
// first if create is set (implicit creation on first write), else f gets a nil collection.
// f must be safe to re-run: it may be called again after a WriteConflict.
func (o *OpCtx) WriteCollection(ctx context.Context, ns string, create bool, f func(coll *index.Collection) error) error {
	if err := catalog.ValidateNS(ns); err != nil {
		return err
	}
	if create {
		if err := o.EnsureCollection(ctx, ns, nil); err != nil {
			return err
		}
	}
	scope, err := o.Locker.CollectionLock(ctx, ns, lock.ModeIX)
	if err != nil {
		return err
	}
	defer func() { _ = scope.Release() }()
	return storage.WriteConflictRetry(ctx, "write", func() error {
		defer o.RU.AbandonSnapshot()
		var coll *index.Collection
		if meta, ok := o.DB.Catalog.Latest().ByNS(ns); ok {
			c, err := o.DB.Colls.ByUUID(meta.UUID)
			if err != nil {
				return err
			}
			coll = c
		}
		w := o.RU.BeginUnitOfWork()
		defer w.End()
		if err := f(coll); err != nil {
			return err
		}
		return w.Commit()
	})
}

// EnsureCollection creates ns with options unless it exists (implicit creation: a concurrent
// creator winning the race is not an error). It takes the database IX and collection X locks.
func (o *OpCtx) EnsureCollection(ctx context.Context, ns string, options bsoncore.Document) error {
	if _, ok := o.DB.Catalog.Latest().ByNS(ns); ok {
		return nil
	}
	err := o.DDL(ctx, ns, func() error {
		if _, ok := o.DB.Catalog.Latest().ByNS(ns); ok {
			return nil
		}
		m, err := o.DB.Catalog.CreateCollection(o.RU, ns, options)
		if err != nil {
			return err
		}
		return o.logCreate(m)
	})
	if mongoerr.Is(err, mongoerr.NamespaceExists) {
		return nil
	}
	return err
}

// DDL runs f in a WriteUnitOfWork under the collection X lock of ns (and database IX),
// retrying on WriteConflict. Catalog DDL calls go inside f.
func (o *OpCtx) DDL(ctx context.Context, ns string, f func() error) error {
	scope, err := o.Locker.CollectionLock(ctx, ns, lock.ModeX)
	if err != nil {
		return err
	}
	defer func() { _ = scope.Release() }()
	return o.inUnit(ctx, f)
}

// DatabaseDDL runs f in a WriteUnitOfWork under the database X lock of db (dropDatabase,
// cross-collection renames).
func (o *OpCtx) DatabaseDDL(ctx context.Context, db string, f func() error) error {
	scope, err := o.Locker.DBLock(ctx, db, lock.ModeX)
	if err != nil {
		return err
	}
	defer func() { _ = scope.Release() }()
	return o.inUnit(ctx, f)
}

func (o *OpCtx) inUnit(ctx context.Context, f func() error) error {
	return storage.WriteConflictRetry(ctx, "ddl", func() error {
		defer o.RU.AbandonSnapshot()
		w := o.RU.BeginUnitOfWork()
		defer w.End()
		if err := f(); err != nil {
			return err
		}
		return w.Commit()
	})
}
