package rollback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/lock"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/oplog"
	"humongo/internal/repl/recovery"
	"humongo/internal/storage"
)

// Node is Local over a data node's storage engine, catalog, collection write paths and oplog.
// Its OplogNewestFirst also makes it a Remote (tests roll one in-process node back against
// another).
type Node struct {
	Engine  *storage.Engine
	Catalog *catalog.Catalog
	Colls   *index.Collections
	Writer  *oplog.Writer
	// Locks is the lock manager whose global lock LockForRecovery takes in X; nil takes
	// none (a node nobody else uses).
	Locks *lock.Manager
	Log   *slog.Logger
	// KillLockHolders interrupts every user operation holding a lock with its cause, and
	// LockHolders describes them: LockForRecovery uses them when the global lock is slow to
	// come (nil: it just waits).
	KillLockHolders func(cause error)
	LockHolders     func() []string
	// Patience is how long LockForRecovery waits for the global lock before it logs the
	// holders and interrupts the user operations again (0: 10 s).
	Patience time.Duration
}

var _ Local = (*Node)(nil)

// OplogNewestFirst iterates our oplog from its newest entry. A reverse cursor ignores oplog
// visibility, so entries whose commit is still being applied are included, as in MongoDB.
func (n *Node) OplogNewestFirst(context.Context) (Iterator, error) {
	ru := n.Engine.NewRecoveryUnit()
	c, err := ru.NewCursor(n.Writer.Ident(), storage.CursorOptions{Reverse: true})
	if err != nil {
		ru.Close()
		return nil, err
	}
	return &cursorIterator{ru: ru, c: c}, nil
}

type cursorIterator struct {
	ru      *storage.RecoveryUnit
	c       *storage.Cursor
	started bool
}

func (it *cursorIterator) Next(context.Context) (bsoncore.Document, bool, error) {
	var ok bool
	if !it.started {
		it.started, ok = true, it.c.First()
	} else {
		ok = it.c.Next()
	}
	if !ok {
		return nil, false, it.c.Err()
	}
	if _, err := recordid.FromKey(it.c.Key()); err != nil {
		return nil, false, fmt.Errorf("oplog key: %w", err)
	}
	return append(bsoncore.Document(nil), it.c.Value()...), true, nil
}

func (it *cursorIterator) Close() {
	it.c.Close()
	it.ru.Close()
}

// StableTimestamp is the engine's stable timestamp.
func (n *Node) StableTimestamp() optime.Timestamp { return n.Engine.StableTimestamp() }

// CurrentDocument reads the newest version of the document: through the _id index, or by a
// scan of a collection that has none.
func (n *Node) CurrentDocument(_ context.Context, uuid catalog.UUID, id bsoncore.Value) (bsoncore.Document, bool, error) {
	if _, ok := n.Catalog.Latest().ByUUID(uuid); !ok {
		return nil, false, nil
	}
	coll, err := n.Colls.ByUUID(uuid)
	if err != nil {
		return nil, false, err
	}
	ru := n.Engine.NewRecoveryUnit()
	defer ru.Close()
	_, doc, found, err := coll.FindByID(ru, id)
	if mongoerr.Is(err, mongoerr.IndexNotFound) {
		return scanForID(ru, coll, id)
	}
	if err != nil || !found {
		return nil, false, err
	}
	return append(bsoncore.Document(nil), doc...), true, nil
}

func scanForID(ru *storage.RecoveryUnit, coll *index.Collection, id bsoncore.Value) (bsoncore.Document, bool, error) {
	cur, err := coll.RecordStore().NewCursor(ru, false)
	if err != nil {
		return nil, false, err
	}
	defer cur.Close()
	for {
		_, doc, ok := cur.Next()
		if !ok {
			return nil, false, cur.Err()
		}
		if v, err := bsoncore.Document(doc).LookupErr("_id"); err == nil && bsonutil.Compare(v, id) == 0 {
			return append(bsoncore.Document(nil), doc...), true, nil
		}
	}
}

// LockForRecovery takes the global lock in X (with PBWM and RSTL in IX): it waits for every
// operation holding a lock to finish, and no new one starts until unlock. Transactions the
// recovery prepares again take their collection locks at unlock (PreparedTxns.DeferLocks).
// The member entered
// ROLLBACK after interrupting every user operation; one that is slow to notice, or started
// since, is named in the log and interrupted again each Patience.
func (n *Node) LockForRecovery(ctx context.Context) (func(), error) {
	// Prepared transactions hold collection locks (and their units would keep
	// RecoverToStable from running): they are dropped first and rebuilt after the replay.
	oplog.PreparedOf(n.Engine).DropAll()
	if n.Locks == nil {
		return func() {}, nil
	}
	patience := n.Patience
	if patience <= 0 {
		patience = 10 * time.Second
	}
	l := n.Locks.NewLocker()
	for waited := time.Duration(0); ; waited += patience {
		wctx, cancel := context.WithTimeout(ctx, patience)
		scope, err := l.GlobalLock(wctx, lock.ModeX)
		cancel()
		if err == nil {
			held := oplog.PreparedOf(n.Engine)
			held.DeferLocks()
			return func() {
				_ = scope.Release()
				l.UnlockAll()
				if err := held.AcquireDeferredLocks(context.WithoutCancel(ctx)); err != nil {
					log := n.Log
					if log == nil {
						log = slog.Default()
					}
					log.Warn("Could not lock the collections of the prepared transactions after rollback", "error", err.Error())
				}
			}, nil
		}
		l.UnlockAll()
		if ctx.Err() != nil || wctx.Err() == nil {
			return nil, err
		}
		var holders []string
		if n.LockHolders != nil {
			holders = n.LockHolders()
		}
		log := n.Log
		if log == nil {
			log = slog.Default()
		}
		log.Warn("Rollback is waiting for the global lock; interrupting the operations that hold locks",
			"waited", (waited + patience).String(), "prepared", oplog.PreparedOf(n.Engine).Len(),
			"lockHolders", holders)
		oplog.PreparedOf(n.Engine).DropAll()
		if n.KillLockHolders != nil {
			n.KillLockHolders(mongoerr.New(mongoerr.InterruptedDueToReplStateChange,
				"operation was interrupted because a replica set state change occurred (rollback)"))
		}
	}
}

// SetOplogTruncateAfterPoint persists the point in local.replset.oplogTruncateAfterPoint.
func (n *Node) SetOplogTruncateAfterPoint(ctx context.Context, ts optime.Timestamp) error {
	return applier.SetOplogTruncateAfterPoint(ctx, n.Engine, n.Catalog, n.Colls, ts)
}

// recoverRetries bounds the wait for storage snapshots opened by users that do not take the
// global lock (background work that reads briefly): RecoverToStable refuses to run while any
// is open.
const (
	recoverRetries     = 200
	recoverRetryPeriod = 25 * time.Millisecond
)

// RecoverToStable recovers the engine to its stable timestamp, reloads the catalog from the
// recovered durable catalog (tables of collections created after stable are dropped, dropped
// ones come back) and forgets every collection handle, whose record store and index views
// may name tables that no longer exist.
func (n *Node) RecoverToStable(ctx context.Context) (optime.Timestamp, error) {
	before := n.Catalog.Latest().All()
	// Prepared transactions are rebuilt after the replay (ReplayOplog): their units would
	// keep RecoverToStable from running, and the replay may decide them.
	oplog.PreparedOf(n.Engine).DropAll()
	var stable optime.Timestamp
	var err error
	for attempt := 0; ; attempt++ {
		stable, err = n.Engine.RecoverToStable()
		if err == nil || !errors.Is(err, storage.ErrSnapshotsOpen) || attempt >= recoverRetries {
			break
		}
		if attempt == 0 && n.Log != nil {
			n.Log.Info("Waiting for open storage snapshots to close before recovering to the stable timestamp",
				logv2.C(logv2.Replication), "error", err.Error())
		}
		t := time.NewTimer(recoverRetryPeriod)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, context.Cause(ctx)
		}
	}
	if err != nil {
		return 0, err
	}
	if err := n.Catalog.ReloadAfterRecovery(); err != nil {
		return 0, fmt.Errorf("reload the catalog: %w", err)
	}
	for _, m := range before {
		n.Colls.Forget(m.UUID)
	}
	for _, m := range n.Catalog.Latest().All() {
		n.Colls.Forget(m.UUID)
	}
	return stable, nil
}

// TruncateOplogAfter removes our oplog entries after ts.
func (n *Node) TruncateOplogAfter(_ context.Context, ts optime.Timestamp) error {
	return n.Engine.TruncateOplogAfter(n.Writer.Ident(), ts)
}

// ReplayOplog applies our oplog entries in (from, to] again (recovery.ReplayOplog, the
// replay of startup recovery).
func (n *Node) ReplayOplog(ctx context.Context, from, to optime.Timestamp) (int, error) {
	a := n.Writer.Applier()
	applied, err := recovery.ReplayOplog(ctx, n.Engine, a, n.Writer.Ident(), from, to)
	if err != nil {
		return applied, err
	}
	if _, err := a.ReconstructPrepared(ctx); err != nil {
		return applied, fmt.Errorf("reconstruct prepared transactions after rollback: %w", err)
	}
	return applied, nil
}

// SetMinValid persists minValid (recovery.SetMinValid) and waits for the journal.
func (n *Node) SetMinValid(ctx context.Context, op optime.OpTime) error {
	return recovery.SetMinValid(ctx, n.Engine, n.Catalog, n.Colls, op)
}

// ResetOplogTop makes the oplog writer's LastWritten the new top of our oplog.
func (n *Node) ResetOplogTop(op optime.OpTime) { n.Writer.ResetLastWritten(op) }

// ClientRemote is the sync source's oplog read through the Go driver (the internal client the
// oplog fetcher uses, fetcher.Connect).
type ClientRemote struct {
	Client *mongo.Client
	// BatchTimeout bounds each batch read from the source (default 30 s), so a source that
	// stops answering fails the rollback attempt instead of hanging it.
	BatchTimeout time.Duration
}

// OplogNewestFirst queries local.oplog.rs sorted by {$natural: -1}.
func (r ClientRemote) OplogNewestFirst(ctx context.Context) (Iterator, error) {
	timeout := r.BatchTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cur, err := r.Client.Database("local").Collection("oplog.rs").Find(fctx, bson.D{},
		options.Find().SetSort(bson.D{{Key: "$natural", Value: -1}}))
	if err != nil {
		return nil, err
	}
	return &driverIterator{cur: cur, timeout: timeout}, nil
}

type driverIterator struct {
	cur     *mongo.Cursor
	timeout time.Duration
}

func (it *driverIterator) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, it.timeout)
	defer cancel()
	if !it.cur.Next(ctx) {
		return nil, false, it.cur.Err()
	}
	return append(bsoncore.Document(nil), it.cur.Current...), true, nil
}

func (it *driverIterator) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = it.cur.Close(ctx)
}
