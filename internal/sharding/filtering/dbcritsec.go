package filtering

// The database critical section (MongoDB 7.0's DatabaseShardingState critical section, taken
// by the MovePrimaryCoordinator through the ShardingRecoveryService): while a database's
// primary moves, versioned requests for it are refused with StaleDbVersion, writes from the
// moment the section is entered, reads too once it is promoted. Before the refusal goes back
// the node waits for the section's release (OnStaleError), so the router's retry comes after
// the move and finds the new primary. Leaving the section forgets the database's metadata,
// so the first request after it refreshes from the config server.
//
// Not done here, as MongoDB does: persisting the section in config.collection_critical_sections
// (recoverable across restarts and on secondaries); the section lives in the primary's
// memory and the movePrimary that took it runs inside one request (ddl package doc).

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/sharding/routing"
)

// dbCriticalSection is one database's section.
type dbCriticalSection struct {
	reason     string
	blockReads bool
	released   chan struct{} // closed by ExitDatabaseCriticalSection
}

// criticalSectionWait bounds how long a refused request waits for the section's release
// before its StaleDbVersion goes back (the router retries it then).
const criticalSectionWait = 30 * time.Second

// EnterDatabaseCriticalSection blocks the versioned writes to db (acquireRecoverable-
// CriticalSectionBlockWrites). A section already held with the same reason is kept; another
// reason is ConflictingOperationInProgress.
func (r *Runtime) EnterDatabaseCriticalSection(db, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cs := r.dbSections[db]; cs != nil {
		if cs.reason == reason {
			return nil
		}
		return mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"the critical section for the database %s is already held with reason: %s", db, cs.reason)
	}
	if r.dbSections == nil {
		r.dbSections = map[string]*dbCriticalSection{}
	}
	r.dbSections[db] = &dbCriticalSection{reason: reason, released: make(chan struct{})}
	return nil
}

// PromoteDatabaseCriticalSection makes db's section block reads too
// (promoteRecoverableCriticalSectionToBlockAlsoReads).
func (r *Runtime) PromoteDatabaseCriticalSection(db string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cs := r.dbSections[db]; cs != nil {
		cs.blockReads = true
	}
}

// ExitDatabaseCriticalSection forgets db's metadata and releases its section (MongoDB's
// clearDbInfo then releaseRecoverableCriticalSection): the waiting requests answer
// StaleDbVersion, the router refreshes and retries.
func (r *Runtime) ExitDatabaseCriticalSection(db string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.dbs, db)
	if cs := r.dbSections[db]; cs != nil {
		delete(r.dbSections, db)
		close(cs.released)
	}
}

// InDatabaseCriticalSection reports whether db's section is held and whether it blocks reads.
func (r *Runtime) InDatabaseCriticalSection(db string) (held, blockReads bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := r.dbSections[db]
	return cs != nil, cs != nil && cs.blockReads
}

// checkDatabaseCriticalSection refuses a versioned request for db while its section blocks
// the request's kind (a write: the operation holds the global lock in IX or X, MongoDB's
// isWriteLocked).
func (r *Runtime) checkDatabaseCriticalSection(op *operation.Context, db string, received routing.DatabaseVersion) error {
	r.mu.Lock()
	cs := r.dbSections[db]
	r.mu.Unlock()
	if cs == nil || (!cs.blockReads && !isWrite(op)) {
		return nil
	}
	idx, info := bsoncore.AppendDocumentStart(nil)
	info = bsoncore.AppendStringElement(info, "db", db)
	info = received.AppendDoc(info, "vReceived")
	info, _ = bsoncore.AppendDocumentEnd(info, idx)
	return mongoerr.Newf(mongoerr.StaleDbVersion, "The critical section for the database %s is acquired with reason: %s",
		db, cs.reason).WithInfo(bsoncore.Document(info))
}

func isWrite(op *operation.Context) bool {
	if op.Locker == nil {
		return false
	}
	for _, h := range op.Locker.HeldModes() {
		if h.Name == "Global" {
			return h.Mode == lock.ModeIX || h.Mode == lock.ModeX
		}
	}
	return false
}

// waitDatabaseCriticalSection waits until db's section (if any) is released, ctx ends or
// criticalSectionWait passes.
func (r *Runtime) waitDatabaseCriticalSection(ctx context.Context, db string) {
	r.mu.Lock()
	cs := r.dbSections[db]
	r.mu.Unlock()
	if cs == nil {
		return
	}
	t := time.NewTimer(criticalSectionWait)
	defer t.Stop()
	select {
	case <-cs.released:
	case <-ctx.Done():
	case <-t.C:
	}
}
