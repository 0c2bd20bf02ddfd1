package operation

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/query/plan"
	"humongo/internal/storage"
)

// Context is one operation (MongoDB's OperationContext): the context.Context it runs under,
// its Locker and RecoveryUnit, its read source, session and the request's shard versions.
// Not safe for concurrent use; Close it when the operation ends.
type Context struct {
	DB     *DB
	Locker *lock.Locker
	RU     *storage.RecoveryUnit

	// ReadSource is the read source the command's read concern chose (Request), for the
	// operation's reads and for a cursor to keep across getMores.
	ReadSource ReadSource

	// Session is the logical session and transaction number the operation runs in (zero
	// outside a session), as the request sent them.
	Session Session

	// ShardVersion and DatabaseVersion are the request's shardVersion / databaseVersion
	// fields as sent (zero when absent). They are carried, not checked: the sharding layer
	// will compare them with its filtering metadata and fail with StaleConfig /
	// StaleDbVersion.
	ShardVersion, DatabaseVersion bsoncore.Value
	// VersionedNS is the namespace the versions are for: the command's namespace ("db.coll",
	// or "db" for a command on a database). The shard version applies to that collection
	// only, the database version to every collection of its database.
	VersionedNS string

	// owners are the ownership filters DB.ShardCheck resolved for this operation's
	// namespaces under their locks (the read seam attaches them).
	owners map[string]plan.OwnershipFilter
	// releases give back the uses of the filters' metadata (PinnedFilter) at Close.
	releases []func()

	ctx   context.Context
	stats *OpStats // the command's, when its ctx carries one (WithOpStats)
	txn   *Txn     // the multi-document transaction the operation is a statement of
}

// Txn is a multi-document transaction's storage state, kept between its statements
// (MongoDB's TxnResources): the RecoveryUnit whose outer WriteUnitOfWork stays open from the
// first statement to commit or abort, so every statement reads the transaction's snapshot and
// its own writes, and buffers its writes there. Owned by internal/txn; operations started
// under a Request carrying it run in it.
type Txn struct {
	RU *storage.RecoveryUnit
	// LockTimeout bounds each lock wait of the transaction's statements
	// (maxTransactionLockRequestTimeoutMillis); 0 = no bound.
	LockTimeout time.Duration
	// AtClusterTime is a snapshot transaction's read timestamp (0 for another read concern):
	// on a shard its reads see the documents the shard owned at that time.
	AtClusterTime optime.Timestamp
}

// SnapshotTime is the cluster time the operation reads at for a snapshot read concern: the
// read's atClusterTime (given or chosen), or its transaction's; 0 for other reads.
func (o *Context) SnapshotTime() optime.Timestamp {
	if o.txn != nil {
		return o.txn.AtClusterTime
	}
	if o.ReadSource.Kind == ReadProvided {
		return o.ReadSource.TS
	}
	return 0
}

// InTxn reports whether the operation is a statement of a multi-document transaction.
func (o *Context) InTxn() bool { return o.txn != nil }

// Catalog is the catalog as the operation sees it: the latest instance, plus, in a
// multi-document transaction, the collections and indexes the transaction created
// (catalog.LatestFor), which no other operation sees before the commit.
func (o *Context) Catalog() *catalog.Snapshot {
	if o.txn != nil {
		return o.DB.Catalog.LatestFor(o.RU)
	}
	return o.DB.Catalog.Latest()
}

// Collection returns the write path of the collection with uuid as the operation sees it
// (see Catalog).
func (o *Context) Collection(uuid catalog.UUID) (*index.Collection, error) {
	if o.txn != nil {
		return o.DB.Colls.ForUnit(o.RU, uuid)
	}
	return o.DB.Colls.ByUUID(uuid)
}

// CreatedInTxn reports whether ns is a collection the operation's transaction created (it
// exists in the transaction's view of the catalog and not in the latest instance).
func (o *Context) CreatedInTxn(ns string) bool {
	if o.txn == nil {
		return false
	}
	m, ok := o.Catalog().ByNS(ns)
	if !ok {
		return false
	}
	_, committed := o.DB.Catalog.Latest().ByUUID(m.UUID)
	return !committed
}

// TxnOf returns the transaction ctx's request runs in, or nil.
func TxnOf(ctx context.Context) *Txn {
	if r := RequestOf(ctx); r != nil {
		return r.Txn
	}
	return nil
}

// CursorUnit returns the RecoveryUnit a cursor opened under ctx reads through and the
// function that releases it when the cursor closes: a fresh unit of the cursor's own, or,
// inside a multi-document transaction, the transaction's (a cursor reads the transaction's
// snapshot and writes; the transaction outlives it and its end closes it).
func (d *DB) CursorUnit(ctx context.Context) (*storage.RecoveryUnit, func()) {
	if t := TxnOf(ctx); t != nil {
		return t.RU, func() {}
	}
	ru := d.Engine.NewRecoveryUnit()
	return ru, ru.Close
}

// Session identifies the logical session of an operation.
type Session struct {
	LSID      bsoncore.Document // the request's lsid (nil outside a session)
	TxnNumber int64             // meaningful when HasTxnNumber
	// HasTxnNumber: the operation is a retryable write (or, later, a transaction statement).
	HasTxnNumber bool
}

// ReadSourceKind is how a read picks its timestamp (MongoDB's RecoveryUnit::ReadSource as
// read concern chooses it).
type ReadSourceKind uint8

const (
	ReadNewest      ReadSourceKind = iota // newest data, no timestamp
	ReadLastApplied                       // a non-writable member's lastApplied
	ReadMajority                          // the committed snapshot (stable timestamp)
	ReadProvided                          // a fixed timestamp (snapshot reads)
)

// ReadSource is a read's source and the timestamp it resolved to (0: newest data).
type ReadSource struct {
	Kind ReadSourceKind
	TS   optime.Timestamp
	// IgnorePrepare: the read returns the data as it was before prepared transactions wrote
	// it instead of waiting for them to commit or abort (spec: replication.md "Prepare
	// Conflicts"; MongoDB's canIgnorePrepareConflicts): read concern local, available or
	// majority without afterClusterTime/atClusterTime, outside a transaction, for the
	// commands that may (find, aggregate, count, distinct and their getMores). Read concern
	// decides it; false (enforce: wait) for everything else, every write included.
	IgnorePrepare bool
}

// PrepareConflictBehavior is the storage behaviour r's reads run with.
func (r ReadSource) PrepareConflictBehavior() storage.PrepareConflictBehavior {
	if r.IgnorePrepare {
		return storage.PrepareConflictIgnore
	}
	return storage.PrepareConflictEnforce
}

// Apply points ru, between snapshots, at r: its timestamp (none when 0: newest data) and its
// prepare conflict behaviour. Call it before ru's first read (and before each later snapshot
// of a cursor, after the timestamp was re-resolved).
func (r ReadSource) Apply(ru *storage.RecoveryUnit) error {
	if err := ru.SetPrepareConflictBehavior(r.PrepareConflictBehavior()); err != nil {
		return err
	}
	if r.TS == 0 {
		return nil
	}
	return ru.SetReadSource(storage.ReadProvided, r.TS)
}

// Request is what a command's generic arguments say about every operation it starts: the
// dispatcher parses them once (WithRequest) and NewOp copies them into each Context.
type Request struct {
	// ReadSource is filled in by read concern after waiting for its preconditions.
	ReadSource ReadSource
	Session    Session
	// ShardVersion and DatabaseVersion are the raw shardVersion / databaseVersion fields.
	// Session.LSID and these point into the command document: valid while the command runs.
	ShardVersion, DatabaseVersion bsoncore.Value
	// VersionedNS is the namespace the versions are for (Context.VersionedNS).
	VersionedNS string
	// Admission is the request's read/write tickets, shared by its operations so a nested
	// operation does not queue for a second ticket (nil: each operation is admitted alone).
	Admission *lock.Admission
	// Txn is the multi-document transaction the command is a statement of (nil: none).
	Txn *Txn
}

type requestKey struct{}

// WithRequest returns a context whose operations take their read source, session and shard
// versions from *r as it is when each operation starts.
func WithRequest(ctx context.Context, r *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// RequestOf is the request ctx carries, or nil.
func RequestOf(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

// ReadSourceOf is the read source ctx carries (the zero value, newest data, if none).
func ReadSourceOf(ctx context.Context) ReadSource {
	if r := RequestOf(ctx); r != nil {
		return r.ReadSource
	}
	return ReadSource{}
}

// NewOp starts an operation under ctx: ctx's deadline is the operation's maxTimeMS (a lock
// wait that reaches it fails with MaxTimeMSExpired), and its cancellation (killOp, a closed
// connection, shutdown) interrupts it. Read source, session and shard versions are the ones
// of the Request ctx carries.
func (d *DB) NewOp(ctx context.Context) *Context {
	l := d.Locks.NewLocker()
	l.SetDeadlineKind(lock.DeadlineMaxTimeMS)
	o := &Context{DB: d, Locker: l, RU: d.Engine.NewRecoveryUnit(), ctx: ctx}
	if s := opStatsOf(ctx); s != nil {
		s.add(l)
		o.stats = s
	}
	if r := RequestOf(ctx); r != nil {
		o.ReadSource, o.Session, o.ShardVersion, o.DatabaseVersion = r.ReadSource, r.Session, r.ShardVersion, r.DatabaseVersion
		o.VersionedNS = r.VersionedNS
		if r.Txn != nil {
			// A statement of a transaction: its unit is the transaction's (not closed by
			// this operation), and lock waits are bounded so a statement never queues
			// behind DDL for long while holding the transaction's writes.
			o.RU.Close()
			o.RU, o.txn = r.Txn.RU, r.Txn
			if r.Txn.LockTimeout > 0 {
				l.SetLockRequestTimeout(r.Txn.LockTimeout)
			}
		}
	}

	// Admission control: the operation takes a read or write ticket with its first Global
	// lock (storageEngineConcurrentRead/WriteTransactions), shared with its request's others.
	l.SetAdmission(admissionOf(ctx))
	return o
}

// admissionOf is the ticket state of ctx's request, or a fresh one for an operation alone.
func admissionOf(ctx context.Context) *lock.Admission {
	if r := RequestOf(ctx); r != nil && r.Admission != nil {
		return r.Admission
	}
	return new(lock.Admission)
}

// Ctx is the context the operation was created with.
func (o *Context) Ctx() context.Context { return o.ctx }

// CheckForInterrupt returns why the operation must stop (the cause its context was
// cancelled with: MaxTimeMSExpired, Interrupted, InterruptedAtShutdown...), or nil.
func (o *Context) CheckForInterrupt() error {
	if o.ctx.Err() == nil {
		return nil
	}
	return context.Cause(o.ctx)
}

// Close releases the operation's snapshot and any locks still held.
func (o *Context) Close() {
	if o.txn == nil {
		o.RU.Close()
	}
	o.Locker.UnlockAll()
	for _, release := range o.releases {
		release()
	}
	o.releases = nil
	if o.stats != nil {
		o.stats.remove(o.Locker)
	}
}

// The collection access methods take a ctx of their own: callers pass the operation's, or a
// context.WithoutCancel of it for cleanup that must finish after an interruption.

// ReadCollection locks ns for reading (Global/DB/collection IS) and returns its metadata and
// write path, both nil when the collection does not exist (reads of a missing collection
// return nothing rather than failing, as in MongoDB). release drops the locks and abandons the
// storage snapshot.
func (o *Context) ReadCollection(ctx context.Context, ns string) (meta *catalog.CollectionMeta, coll *index.Collection, release func(), err error) {
	if err := catalog.ValidateNS(ns); err != nil {
		return nil, nil, nil, err
	}
	for {
		scope, err := o.Locker.CollectionLock(ctx, ns, lock.ModeIS)
		if err != nil {
			return nil, nil, nil, err
		}
		release = func() {
			o.RU.AbandonSnapshot()
			_ = scope.Release()
		}
		if err := o.checkShard(ns); err != nil {
			release()
			return nil, nil, nil, err
		}
		meta, ok := o.Catalog().ByNS(ns)
		if !ok {
			return nil, nil, release, nil
		}
		wait, err := o.checkMinVisible(meta)
		if err != nil {
			release()
			return nil, nil, nil, err
		}
		if wait != 0 {
			// Wait without the lock (the commit point may take long: DDL must not queue
			// behind us meanwhile), then look again: the catalog may have changed.
			release()
			if err := o.advanceMajority(ctx, wait); err != nil {
				return nil, nil, nil, err
			}
			continue
		}
		coll, err = o.Collection(meta.UUID)
		if err != nil {
			release()
			return nil, nil, nil, err
		}
		return meta, coll, release, nil
	}
}

// Versioned reports whether the operation carries a shardVersion or databaseVersion.
func (o *Context) Versioned() bool {
	return o.ShardVersion.Type != 0 || o.DatabaseVersion.Type != 0
}

// checkShard runs DB.ShardCheck for ns (the caller holds ns's collection lock, or for a
// database name its database lock) and keeps the ownership filter it resolved for the read
// seam.
func (o *Context) checkShard(ns string) error {
	if o.DB.ShardCheck == nil || !o.Versioned() {
		return nil
	}
	f, err := o.DB.ShardCheck(o, ns)
	if err != nil {
		return err
	}
	if p, ok := f.(PinnedFilter); ok {
		o.releases = append(o.releases, p.Release) // the operation's use, until Close
	}
	if f != nil {
		if o.owners == nil {
			o.owners = map[string]plan.OwnershipFilter{}
		}
		o.owners[ns] = f
	} else {
		delete(o.owners, ns)
	}
	return nil
}

// checkMinVisible refuses to read meta, the latest catalog's metadata, at a timestamp older
// than its last catalog change (create, re-create after a drop, rename, index changes): the
// read would use a collection or indexes that did not exist then. A snapshot read fails with
// SnapshotUnavailable, as MongoDB's AutoGetCollectionForRead answers; for a majority read it
// returns the timestamp the commit point must reach first (MongoDB waits for the majority
// snapshot too). A secondary's lastApplied read is left alone: the applier changes the
// catalog only at timestamps it then makes visible.
func (o *Context) checkMinVisible(meta *catalog.CollectionMeta) (wait optime.Timestamp, err error) {
	rs := o.ReadSource
	if rs.TS == 0 || meta.MinValidSnapshot <= rs.TS || (rs.Kind != ReadProvided && rs.Kind != ReadMajority) {
		return 0, nil
	}
	if meta.MinValidLoaded {
		// Loaded from disk after the read's time: only the durable catalog as of that time
		// says whether this is the same collection.
		same, err := o.sameCollectionAt(meta, rs.TS)
		if err != nil || same {
			return 0, err
		}
	}
	switch rs.Kind {
	case ReadProvided:
		return 0, mongoerr.Newf(mongoerr.SnapshotUnavailable,
			"Unable to read from a snapshot due to pending collection catalog changes; please retry the operation. Snapshot timestamp is %s. Collection minimum is %s",
			rs.TS, meta.MinValidSnapshot)
	case ReadMajority:
		return meta.MinValidSnapshot, nil
	}
	return 0, nil
}

// sameCollectionAt reports whether the durable catalog at ts has meta's collection under
// meta's name.
func (o *Context) sameCollectionAt(meta *catalog.CollectionMeta, ts optime.Timestamp) (bool, error) {
	ru := o.DB.Engine.NewRecoveryUnit()
	defer ru.Close()
	if err := ru.SetReadSource(storage.ReadProvided, ts); err != nil {
		return false, err
	}
	snap, err := o.DB.Catalog.At(ru)
	if err != nil {
		return false, err
	}
	old, ok := snap.ByNS(meta.NS)
	return ok && old.UUID == meta.UUID, nil
}

// advanceMajority waits until the stable timestamp (the majority snapshot) reaches ts and
// moves the operation's majority read point there: this read and the command's later
// operations and cursors (its Request) read at the new point. It stops with the operation's
// interruption (maxTimeMS, killOp, shutdown).
func (o *Context) advanceMajority(ctx context.Context, ts optime.Timestamp) error {
	st, err := o.DB.Engine.WaitStable(ctx, ts)
	if err != nil {
		return err
	}
	o.ReadSource.TS = st
	if r := RequestOf(ctx); r != nil && r.ReadSource.Kind == ReadMajority && r.ReadSource.TS < st {
		r.ReadSource.TS = st
	}
	if src, _ := o.RU.ReadSource(); src == storage.ReadProvided {
		return o.RU.SetReadSource(storage.ReadProvided, st)
	}
	return nil
}

// WriteCollection runs f in a WriteUnitOfWork on the collection ns under its IX lock,
// retrying the whole of f on WriteConflict. When the collection does not exist it is created
// first if create is set (implicit creation on first write), else f gets a nil collection.
// f must be safe to re-run: it may be called again after a WriteConflict.
func (o *Context) WriteCollection(ctx context.Context, ns string, create bool, f func(coll *index.Collection) error) error {
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
	if err := o.checkShard(ns); err != nil {
		return err
	}
	return o.writeConflictRetry(ctx, "write", func() error {
		defer o.RU.AbandonSnapshot()
		var coll *index.Collection
		if meta, ok := o.Catalog().ByNS(ns); ok {
			c, err := o.Collection(meta.UUID)
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
// Inside a multi-document transaction the collection is created in the transaction's unit:
// invisible to others until the commit, logged in its applyOps entry, gone if it aborts.
func (o *Context) EnsureCollection(ctx context.Context, ns string, options bsoncore.Document) error {
	if _, ok := o.Catalog().ByNS(ns); ok {
		return nil
	}
	err := o.DDL(ctx, ns, func() error {
		if _, ok := o.Catalog().ByNS(ns); ok {
			return nil
		}
		m, err := o.DB.Catalog.CreateCollection(o.RU, ns, options)
		if err != nil {
			return err
		}
		return o.LogCreate(m)
	})
	if mongoerr.Is(err, mongoerr.NamespaceExists) && o.txn == nil {
		return nil
	}
	return err
}

// LogCreate tells the observer about collection m, just created in o's unit: its user
// options and the _id index spec it got (none for clustered collections and oplogs).
func (o *Context) LogCreate(m *catalog.CollectionMeta) error {
	var idIndex bsoncore.Document
	if ix, ok := m.Index(catalog.IDIndexName); ok && !m.Clustered {
		idIndex = ix.Spec
	}
	return o.DB.Observer().OnCreateCollection(o.RU, m.NS, m.UUID, UserOptions(m), idIndex)
}

// DDL runs f in a WriteUnitOfWork under the collection X lock of ns (and database IX),
// retrying on WriteConflict. Catalog DDL calls go inside f. The lock is released between
// attempts: a conflict with a transaction that created ns (catalog reservation) lasts until
// that transaction ends, and its statements on ns must not queue behind this retry loop. In
// a multi-document transaction f runs once in the transaction's unit, marked as such for the
// catalog (catalog.MarkTransaction: the lock and the catalog's DDL mutex are held for this
// statement only).
func (o *Context) DDL(ctx context.Context, ns string, f func() error) error {
	if o.txn != nil {
		scope, err := o.Locker.CollectionLock(ctx, ns, lock.ModeX)
		if err != nil {
			return err
		}
		defer func() { _ = scope.Release() }()
		if err := o.checkShard(ns); err != nil {
			return err
		}
		if err := o.DB.Catalog.MarkTransaction(o.RU); err != nil {
			return err
		}
		return o.unitOnce(f)
	}
	return storage.WriteConflictRetry(ctx, "ddl", func() error {
		scope, err := o.Locker.CollectionLock(ctx, ns, lock.ModeX)
		if err != nil {
			return err
		}
		defer func() { _ = scope.Release() }()
		if err := o.checkShard(ns); err != nil {
			return err
		}
		return o.unitOnce(f)
	})
}

// DatabaseDDL runs f in a WriteUnitOfWork under the database X lock of db (dropDatabase,
// cross-collection renames).
func (o *Context) DatabaseDDL(ctx context.Context, db string, f func() error) error {
	scope, err := o.Locker.DBLock(ctx, db, lock.ModeX)
	if err != nil {
		return err
	}
	defer func() { _ = scope.Release() }()
	if err := o.checkShard(db); err != nil {
		return err
	}
	return o.InUnit(ctx, f)
}

// InUnit runs f in a WriteUnitOfWork under the locks the caller holds, retrying on
// WriteConflict.
func (o *Context) InUnit(ctx context.Context, f func() error) error {
	return o.writeConflictRetry(ctx, "ddl", func() error { return o.unitOnce(f) })
}

// unitOnce runs f in one WriteUnitOfWork.
func (o *Context) unitOnce(f func() error) error {
	defer o.RU.AbandonSnapshot()
	w := o.RU.BeginUnitOfWork()
	defer w.End()
	if err := f(); err != nil {
		return err
	}
	return w.Commit()
}

// writeConflictRetry runs f, retrying on WriteConflict outside a transaction, and after a
// prepare conflict (a read of a document a prepared transaction wrote, spec: replication.md
// "Prepare Conflicts") waiting until that transaction commits or aborts, then retrying: f
// ends each attempt by rolling back its unit of work and abandoning its snapshot, so the
// retry reads the decided state in a new view and nothing stays pinned while it waits. The
// waits end with ctx (maxTimeMS, killOp, disconnect).
//
// Inside a transaction a WriteConflict fails the statement at once: the transaction's
// snapshot cannot move, so only the client's retry of the whole transaction
// (TransientTransactionError) can succeed. A prepare conflict that reached here (the query
// executor continues in a refreshed view where the unit allows it) has rolled back the
// statement's nested unit, which dooms the transaction: it waits for the prepared
// transaction to resolve, so the client's retry does not meet it again at once, and fails
// with WriteConflict.
func (o *Context) writeConflictRetry(ctx context.Context, opName string, f func() error) error {
	if o.txn != nil {
		err := f()
		if !storage.IsPrepareConflict(err) {
			return err
		}
		if werr := storage.WaitPrepareConflict(ctx, err); werr != nil {
			return werr
		}
		return mongoerr.NewWriteConflict()
	}
	return storage.WriteConflictRetry(ctx, opName, func() error {
		return o.DB.Engine.PrepareConflictRetry(ctx, f)
	})
}
