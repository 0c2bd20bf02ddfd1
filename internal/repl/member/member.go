package member

import (
	"context"
	"path/filepath"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/coord"
	"humongo/internal/repl/indexbuild"
	"humongo/internal/repl/oplog"
)

// Config is what Attach needs.
type Config struct {
	// DB is the node's storage (required).
	DB *operation.DB
	// Coord are the coordinator's options: the caller sets SetName, Self, the tick and
	// timing knobs, the Logger, the Dialer and KillWrites; Attach fills Store, Engine, Locks,
	// Oplog and TopOfOplog from DB.
	Coord coord.Options
	// OplogSizeBytes is --oplogSize in bytes (0: the default). An existing oplog keeps the
	// size in its catalog options (set at creation, changed by replSetResizeOplog), as
	// mongod ignores --oplogSize once the oplog exists.
	OplogSizeBytes int64
	// Data are the data-replication options: the caller may set AwaitTime, Fatal, OnRollback
	// and KillCursors; Attach fills Engine, Catalog, Colls and Writer, and RollbackDir
	// (<dbpath>/rollback) when empty.
	Data coord.DataReplication
	// Publish, when set, is called with the coordinator before it starts (the server makes
	// it its Repl, so the replSet* commands that arrive while it starts find it) and with nil
	// if it fails to start.
	Publish func(*coord.Coordinator)
	// ClusterTime is the vector clock's ClusterTime, which the oplog's timestamps follow
	// (oplog.Config.ClusterTime); nil: the wall clock and the oplog alone.
	ClusterTime func() optime.Timestamp
}

// Attach makes cfg.DB a replica-set member and returns its started coordinator and oplog
// writer. The caller closes the coordinator at shutdown, before the DB.
func Attach(ctx context.Context, cfg Config) (*coord.Coordinator, *oplog.Writer, error) {
	db := cfg.DB
	if db == nil {
		return nil, nil, mongoerr.New(mongoerr.IllegalOperation, "replication needs storage")
	}
	opts := cfg.Coord
	opts.Store = Store{DB: db}
	opts.Engine = db.Engine
	opts.Locks = db.Locks
	// Prepared transactions, held from startup recovery on, lock their collections.
	oplog.PreparedOf(db.Engine).SetLocks(db.Locks)
	var rc *coord.Coordinator
	// Every replicated write now logs its oplog entry in its own storage unit.
	w, err := oplog.Open(ctx, oplog.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls,
		MaxSizeBytes: oplogSizeAtStartup(db, cfg.OplogSizeBytes), Term: func() (int64, bool) { return rc.OplogTerm() },
		TempDir: db.TempDir, Log: opts.Logger, ClusterTime: cfg.ClusterTime})
	if err != nil {
		return nil, nil, err
	}
	opts.Oplog = noopWriter{w}
	opts.TopOfOplog = func() (optime.OpTime, error) { return applier.TopOfOplog(db.Engine, w.Ident()) }
	rc = coord.New(opts)
	db.SetObserver(w)
	if cfg.Publish != nil {
		cfg.Publish(rc)
	}
	indexbuild.SetReplication(db, rc) // two-phase index builds vote and commit through rc
	if err := rc.Start(ctx); err != nil {
		if cfg.Publish != nil {
			cfg.Publish(nil)
		}
		return nil, nil, err
	}
	// Secondaries copy data: initial sync when empty, then the oplog fetcher and applier.
	// Rollback writes its data files to <dbpath>/rollback (OpenDB puts TempDir in the dbpath).
	d := cfg.Data
	d.Engine, d.Catalog, d.Colls, d.Writer = db.Engine, db.Catalog, db.Colls, w
	if d.RollbackDir == "" && db.TempDir != "" {
		d.RollbackDir = filepath.Join(filepath.Dir(db.TempDir), "rollback")
	}
	rc.StartDataReplication(d)
	return rc, w, nil
}

// oplogSizeAtStartup is the oplog's cap in bytes: the size in the existing oplog's catalog
// options, else requested.
func oplogSizeAtStartup(db *operation.DB, requested int64) int64 {
	m, ok := db.Catalog.Latest().ByNS(oplog.NS)
	if !ok {
		return requested
	}
	if v, err := bsoncore.Document(m.Options).LookupErr("size"); err == nil {
		if f, ok := v.AsFloat64OK(); ok && f > 0 {
			return int64(f)
		}
	}
	return requested
}

// noopWriter adapts the oplog writer to the coordinator's Oplog API.
type noopWriter struct{ w *oplog.Writer }

// LastVisible is the writer's newest visible entry of its own (the primary's lastApplied).
func (r noopWriter) LastVisible() optime.OpTime { return r.w.LastVisible() }

// AppendPrimaryNoop writes a no-op as a user write would: only on a writable primary.
func (r noopWriter) AppendPrimaryNoop(ctx context.Context, msg string) (optime.OpTime, error) {
	return r.w.LogNoop(ctx, bsoncore.NewDocumentBuilder().AppendString("msg", msg).Build())
}

func (r noopWriter) AppendNoop(ctx context.Context, msg string) (optime.OpTime, error) {
	ot, err := r.w.LogReplSetNoop(ctx, bsoncore.NewDocumentBuilder().AppendString("msg", msg).Build())
	if err != nil {
		return optime.OpTime{}, err
	}
	return ot, nil
}
