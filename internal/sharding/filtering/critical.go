package filtering

// The migration critical section (spec: sharding.md "The live migration protocol", steps
// "Enter the critical section" and "Commit on the config server"; MongoDB 7.0's
// ShardingMigrationCriticalSection in CollectionShardingRuntime). A donor enters it for a
// collection once the recipient is steady: first writes are blocked (catch-up phase), then
// reads too (commit phase), until the config server's commit is known and the donor's
// metadata refreshed. A versioned operation that meets it fails under its collection lock
// with StaleConfig; before that error is answered the node waits for the section to end
// (OnShardVersionMismatch, bounded by the operation's deadline) and refreshes, so the
// router's retry finds the new placement. Unversioned operations (direct connections, the
// migration's own _migrateClone/_transferMods reads) are not blocked, as in MongoDB.

import (
	"context"
	"sync"

	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/sharding/routing"
)

// criticalSection is one collection's section.
type criticalSection struct {
	reason     string
	blockReads bool
	done       chan struct{} // closed on exit
}

// criticalSections are a runtime's sections by namespace.
type criticalSections struct {
	mu sync.Mutex
	m  map[string]*criticalSection
}

// EnterCriticalSection blocks versioned writes to ns (the catch-up phase). The caller must
// then drain the writes that passed their check before (take ns's collection lock in a mode
// conflicting with IX once): those hold the collection lock until their unit ends. reason is
// shown in the StaleConfig of a blocked operation. Entering twice is an error.
func (r *Runtime) EnterCriticalSection(ns, reason string) error {
	cs := &r.crit
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m == nil {
		cs.m = map[string]*criticalSection{}
	}
	if cur := cs.m[ns]; cur != nil {
		return mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"The critical section for %s is already acquired with reason: %s", ns, cur.reason)
	}
	cs.m[ns] = &criticalSection{reason: reason, done: make(chan struct{})}
	return nil
}

// PromoteCriticalSectionToBlockReads blocks versioned reads of ns too (the commit phase).
func (r *Runtime) PromoteCriticalSectionToBlockReads(ns string) {
	r.crit.mu.Lock()
	defer r.crit.mu.Unlock()
	if c := r.crit.m[ns]; c != nil {
		c.blockReads = true
	}
}

// ExitCriticalSection releases ns's section and wakes the operations waiting for it.
func (r *Runtime) ExitCriticalSection(ns string) {
	r.crit.mu.Lock()
	defer r.crit.mu.Unlock()
	if c := r.crit.m[ns]; c != nil {
		close(c.done)
		delete(r.crit.m, ns)
	}
}

// InCriticalSection reports whether ns's section is held and whether it blocks reads.
func (r *Runtime) InCriticalSection(ns string) (held, blockReads bool) {
	r.crit.mu.Lock()
	defer r.crit.mu.Unlock()
	c := r.crit.m[ns]
	return c != nil, c != nil && c.blockReads
}

// criticalSectionSignal returns the channel closed when ns's section ends (nil: none).
func (r *Runtime) criticalSectionSignal(ns string) <-chan struct{} {
	r.crit.mu.Lock()
	defer r.crit.mu.Unlock()
	if c := r.crit.m[ns]; c != nil {
		return c.done
	}
	return nil
}

// checkCriticalSection fails op (which holds ns's collection lock and passed the version
// check) with StaleConfig while ns's section blocks it: writes (the collection held IX or
// X) from the catch-up phase on, reads in the commit phase.
func (r *Runtime) checkCriticalSection(op *operation.Context, ns, shard string, received, wanted routing.ChunkVersion) error {
	r.crit.mu.Lock()
	c := r.crit.m[ns]
	r.crit.mu.Unlock()
	if c == nil || (!c.blockReads && !holdsForWrite(op)) {
		return nil
	}
	return mongoerr.Newf(mongoerr.StaleConfig, "The critical section for %s is acquired with reason: %s", ns, c.reason).
		WithInfo(routing.StaleConfigInfo(ns, shard, received, &wanted))
}

// holdsForWrite reports whether op holds a collection lock in a write mode.
func holdsForWrite(op *operation.Context) bool {
	if op.Locker == nil {
		return false
	}
	for _, h := range op.Locker.HeldModes() {
		if h.Name == "Collection" && (h.Mode == lock.ModeIX || h.Mode == lock.ModeX) {
			return true
		}
	}
	return false
}

// waitCriticalSection waits until ns's section (if any) ends or ctx is done; ctx's end is
// not an error (the operation answers its StaleConfig either way).
func (r *Runtime) waitCriticalSection(ctx context.Context, ns string) {
	if sig := r.criticalSectionSignal(ns); sig != nil {
		select {
		case <-sig:
		case <-ctx.Done():
		}
	}
}

// ClearAll forgets every collection's metadata (the next versioned request refreshes it):
// ShardingStateRecovery's reset after an interrupted metadata change.
func (r *Runtime) ClearAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.colls)
}

// OnStepUp forgets every collection's and database's metadata before the node takes writes
// in a new term. Metadata from an earlier stint as primary may predate a migration or
// movePrimary that another primary of this shard committed meanwhile; with a router as
// stale, its versions would still match and a write would land in a range this shard no
// longer owns. (MongoDB's secondaries drop a namespace's metadata whenever the primary's
// refresh replicates to them through config.cache.*; this node refreshes from the config
// server instead, so it drops everything once, at step-up.)
func (r *Runtime) OnStepUp() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.colls)
	clear(r.dbs)
}
