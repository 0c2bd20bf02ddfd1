package index

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/storage"
)

// Two-phase (replicated) index builds (spec execution.md: "Replica Set Index Builds"; MongoDB's
// IndexBuildsCoordinator and ReplIndexBuildState).
//
// A TwoPhaseBuild builds one or more indexes of one collection under one build UUID. Unlike
// Build, which registers, builds and commits in one call, it separates the phases so that
// replication can put its oplog entries in the right units and decide who commits:
//
//  1. StartTwoPhaseBuild: with writes blocked, every index is added to the catalog (not
//     ready, carrying the build UUID) and gets its interceptor, in one unit that also runs the
//     caller's hook (the primary logs startIndexBuild there; a secondary stamps the unit with
//     the entry's timestamp). The build is added to the node's registry (Collections.
//     IndexBuilds) and a goroutine the build owns starts the collection scan.
//  2. The goroutine scans, bulk-loads and drains each index (Build's phases 2–4) and then
//     reports the build ready to commit (ReadyToCommit; the registry's ready hook, which
//     votes for the commit quorum).
//  3. Commit (the primary after its commit quorum, a secondary applying commitIndexBuild) waits
//     for the scan, blocks writes, drains the rest and, on the primary, re-checks skipped
//     records and duplicates; then one unit marks every index ready and runs the caller's
//     hook (commitIndexBuild entry, or the entry's timestamp). Abort (a failed constraint
//     check, abortIndexBuild, dropIndexes) stops the scan and drops the indexes in one unit
//     with the caller's hook (abortIndexBuild entry).
//
// Commit and Abort are each done once: whichever completes first wins, and later calls
// return ErrBuildFinished. A Commit whose hook fails (the node is no longer primary) leaves
// the build running, so another Commit or an Abort can still finish it.

// ErrBuildFinished is returned by Commit and Abort on a build already committed or aborted.
var ErrBuildFinished = errors.New("index build already committed or aborted")

// TwoPhaseBuild is one replicated index build; see the section comment above.
type TwoPhaseBuild struct {
	id    catalog.UUID
	coll  *Collection
	reg   *IndexBuilds
	opts  BuildOptions
	ns    string
	specs []bsoncore.Document // as the catalog stored them
	names []string
	bs    []*builder

	ctx    context.Context // the scan's; cancelled by Abort
	cancel context.CancelCauseFunc
	ready  chan struct{} // closed when the scan goroutine returned; runErr set before
	runErr error

	// fin serialises Commit and Abort.
	fin      sync.Mutex
	finished bool          // guarded by fin
	done     chan struct{} // closed when committed or aborted
	outcome  error         // nil when committed; the abort cause otherwise (set before done)
}

// UUID is the build's UUID (the indexBuildUUID of its oplog entries).
func (t *TwoPhaseBuild) UUID() catalog.UUID { return t.id }

// CollectionUUID is the UUID of the collection being indexed.
func (t *TwoPhaseBuild) CollectionUUID() catalog.UUID { return t.coll.uuid }

// NS is the collection's namespace when the build started.
func (t *TwoPhaseBuild) NS() string { return t.ns }

// Specs are the index specs as the catalog stored them (the entries' indexes array).
func (t *TwoPhaseBuild) Specs() []bsoncore.Document { return t.specs }

// Names are the index names.
func (t *TwoPhaseBuild) Names() []string { return t.names }

// ReadyToCommit is closed when the scan, bulk load and first drains are done (or failed:
// see RunErr).
func (t *TwoPhaseBuild) ReadyToCommit() <-chan struct{} { return t.ready }

// RunErr is the scan goroutine's error, valid once ReadyToCommit is closed.
func (t *TwoPhaseBuild) RunErr() error {
	select {
	case <-t.ready:
		return t.runErr
	default:
		return nil
	}
}

// Done is closed once the build is committed or aborted; Outcome tells which.
func (t *TwoPhaseBuild) Done() <-chan struct{} { return t.done }

// Outcome is nil for a committed build and the abort cause for an aborted one; valid once
// Done is closed.
func (t *TwoPhaseBuild) Outcome() error {
	<-t.done
	return t.outcome
}

// StartTwoPhaseBuild registers a build of specs on coll with build UUID id and starts its
// scan in the background; see the section comment. onRegister (may be nil) runs inside the
// registration unit with the specs as the catalog stored them. ctx bounds the scan (the
// node's lifetime, not one operation's). An index that already exists fails the whole start
// with the catalog's error (IndexAlreadyExists, IndexOptionsConflict, ...).
func StartTwoPhaseBuild(ctx context.Context, coll *Collection, id catalog.UUID, specs []bsoncore.Document, opts BuildOptions,
	onRegister func(ru *storage.RecoveryUnit, specs []bsoncore.Document) error) (*TwoPhaseBuild, error) {
	if coll.owner == nil {
		return nil, mongoerr.New(mongoerr.InternalError, "two-phase index builds need a collection from Collections")
	}
	if len(specs) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "index build without indexes")
	}
	reg := coll.owner.IndexBuilds()
	bid := id
	opts.BuildUUID = &bid
	opts = opts.withDefaults(coll)
	bctx, cancel := context.WithCancelCause(ctx)
	t := &TwoPhaseBuild{id: id, coll: coll, reg: reg, opts: opts, ctx: bctx, cancel: cancel,
		ready: make(chan struct{}), done: make(chan struct{})}
	// The UUID is reserved before registration so that a concurrent start of the same build
	// (a replayed startIndexBuild) fails instead of registering twice.
	if !reg.add(t) {
		cancel(nil)
		return nil, mongoerr.Newf(mongoerr.IndexBuildAlreadyInProgress, "index build %s is already in progress", id)
	}
	for range specs {
		t.bs = append(t.bs, newBuilder(bctx, coll, opts))
	}
	if err := t.register(specs, onRegister); err != nil {
		reg.remove(t)
		cancel(nil)
		for _, b := range t.bs {
			b.close()
		}
		return nil, err
	}
	for _, b := range t.bs {
		t.specs = append(t.specs, b.spec)
		t.names = append(t.names, b.name)
	}
	t.ns = t.bs[0].ns
	reg.wg.Add(1)
	go func() {
		defer reg.wg.Done()
		t.run()
	}()
	return t, nil
}

// register is phase 1 for every index at once.
func (t *TwoPhaseBuild) register(specs []bsoncore.Document, onRegister func(*storage.RecoveryUnit, []bsoncore.Document) error) error {
	unblock, err := t.opts.BlockWrites()
	if err != nil {
		return err
	}
	defer unblock()
	for _, b := range t.bs {
		if err := b.prepare(); err != nil {
			t.cancelRegistration()
			return err
		}
	}
	ru := t.coll.e.NewRecoveryUnit()
	defer ru.Close()
	err = storage.WriteConflictRetry(t.ctx, "startIndexBuild", func() error {
		defer ru.AbandonSnapshot()
		w := ru.BeginUnitOfWork()
		defer w.End()
		stored := make([]bsoncore.Document, 0, len(specs))
		for i, b := range t.bs {
			if err := b.registerIn(ru, specs[i]); err != nil {
				return err
			}
			stored = append(stored, b.spec)
		}
		if onRegister != nil {
			if err := onRegister(ru, stored); err != nil {
				return err
			}
		}
		return w.Commit()
	})
	if err != nil {
		t.cancelRegistration()
		return err
	}
	return nil
}

func (t *TwoPhaseBuild) cancelRegistration() {
	for _, b := range t.bs {
		b.cancelRegistration()
	}
}

// run is the scan goroutine: phases 2–4 for each index in turn, then the ready hook.
func (t *TwoPhaseBuild) run() {
	var err error
	for _, b := range t.bs {
		if err = b.run(); err != nil {
			break
		}
	}
	if err != nil {
		if c := context.Cause(t.ctx); c != nil && t.ctx.Err() != nil {
			err = c
		}
	}
	t.runErr = err
	close(t.ready)
	if err != nil {
		t.reg.log().Info("index build scan stopped", "buildUUID", t.id.String(), "ns", t.ns, "error", err.Error())
		return
	}
	t.reg.log().Info("index build ready to commit", "buildUUID", t.id.String(), "ns", t.ns, "indexes", t.names)
	if h := t.reg.readyHook(); h != nil {
		h(t)
	}
}

// SetBlockWrites replaces how Commit and Abort exclude writers (BuildOptions.BlockWrites): a
// build the oplog applier started on a secondary excludes only the collection's gate, and
// the node that commits it as primary must also exclude writers holding collection locks.
func (t *TwoPhaseBuild) SetBlockWrites(f func() (unblock func(), err error)) {
	if f == nil {
		return
	}
	t.fin.Lock()
	t.opts.BlockWrites = f
	t.fin.Unlock()
}

// Commit waits (bounded by ctx) for the scan, then finishes the build: with writes blocked
// it drains the side tables, re-checks constraints when checkConstraints is set, and in one
// unit marks every index ready and runs onCommit (may be nil). A constraint violation is
// returned with the build still running (the caller aborts it); so is an error of onCommit.
func (t *TwoPhaseBuild) Commit(ctx context.Context, checkConstraints bool, onCommit func(ru *storage.RecoveryUnit) error) error {
	select {
	case <-t.ready:
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.done:
	}
	t.fin.Lock()
	defer t.fin.Unlock()
	if t.finished {
		return ErrBuildFinished
	}
	if t.runErr != nil {
		return t.runErr
	}
	unblock, err := t.opts.BlockWrites()
	if err != nil {
		return err
	}
	defer unblock()
	for _, b := range t.bs {
		b.hook("final")
		// The drains and checks run outside the caller's cancellation: stopping half-way
		// would only waste their work, the build stays consistent either way.
		if err := b.finish(checkConstraints); err != nil {
			return err
		}
	}
	ru := t.coll.e.NewRecoveryUnit()
	defer ru.Close()
	err = storage.WriteConflictRetry(context.WithoutCancel(ctx), "commitIndexBuild", func() error {
		defer ru.AbandonSnapshot()
		w := ru.BeginUnitOfWork()
		defer w.End()
		for _, b := range t.bs {
			if err := b.readyIn(ru); err != nil {
				return err
			}
		}
		if onCommit != nil {
			if err := onCommit(ru); err != nil {
				return err
			}
		}
		return w.Commit()
	})
	if err != nil {
		return err
	}
	// Still under the write block: the next writer sees the ready indexes and no interceptor.
	for _, b := range t.bs {
		b.unregister()
		b.dropTemps()
	}
	t.finishLocked(nil)
	t.reg.log().Info("index build committed", "buildUUID", t.id.String(), "ns", t.ns, "indexes", t.names)
	return nil
}

// Abort stops the scan and removes the build's indexes: with writes blocked, one unit drops
// them and runs onAbort (may be nil). cause is what Outcome reports.
func (t *TwoPhaseBuild) Abort(onAbort func(ru *storage.RecoveryUnit) error, cause error) error {
	if cause == nil {
		cause = mongoerr.New(mongoerr.IndexBuildAborted, "index build aborted")
	}
	t.cancel(cause)
	<-t.ready
	t.fin.Lock()
	defer t.fin.Unlock()
	if t.finished {
		return ErrBuildFinished
	}
	return t.abortLocked(onAbort, cause)
}

func (t *TwoPhaseBuild) abortLocked(onAbort func(ru *storage.RecoveryUnit) error, cause error) error {
	unblock, err := t.opts.BlockWrites()
	if err != nil {
		return err
	}
	defer unblock()
	ru := t.coll.e.NewRecoveryUnit()
	defer ru.Close()
	err = storage.WriteConflictRetry(context.WithoutCancel(t.ctx), "abortIndexBuild", func() error {
		defer ru.AbandonSnapshot()
		w := ru.BeginUnitOfWork()
		defer w.End()
		for _, b := range t.bs {
			if b.ix == nil {
				continue
			}
			if err := t.coll.cat.DropIndex(ru, b.ns, b.name); err != nil && !mongoerr.Is(err, mongoerr.IndexNotFound) &&
				!mongoerr.Is(err, mongoerr.NamespaceNotFound) {
				return err
			}
		}
		if onAbort != nil {
			if err := onAbort(ru); err != nil {
				return err
			}
		}
		return w.Commit()
	})
	if err != nil {
		return err
	}
	for _, b := range t.bs {
		if b.ix != nil {
			b.unregister()
		}
		b.dropTemps()
	}
	t.finishLocked(cause)
	t.reg.log().Info("index build aborted", "buildUUID", t.id.String(), "ns", t.ns, "indexes", t.names,
		"cause", cause.Error())
	return nil
}

// finishLocked records the outcome and leaves the registry. Holds fin.
func (t *TwoPhaseBuild) finishLocked(outcome error) {
	t.finished = true
	t.outcome = outcome
	t.cancel(ErrBuildFinished)
	t.reg.remove(t)
	for _, b := range t.bs {
		b.close()
	}
	close(t.done)
}

// IndexBuilds is a node's registry of running two-phase builds, by build UUID (MongoDB's
// IndexBuildsCoordinator's active builds). It owns the builds' scan goroutines.
type IndexBuilds struct {
	mu     sync.Mutex
	m      map[catalog.UUID]*TwoPhaseBuild // guarded by mu
	hook   func(*TwoPhaseBuild)            // guarded by mu
	logger *slog.Logger                    // guarded by mu
	wg     sync.WaitGroup
}

func newIndexBuilds() *IndexBuilds { return &IndexBuilds{m: map[catalog.UUID]*TwoPhaseBuild{}} }

// IndexBuilds returns the node's registry of running two-phase builds.
func (cs *Collections) IndexBuilds() *IndexBuilds {
	cs.buildsOnce.Do(func() { cs.builds = newIndexBuilds() })
	return cs.builds
}

// SetReadyHook installs f, called (on the scan goroutine) when a build becomes ready to
// commit: the replication layer votes for the commit quorum there. Builds already ready are
// not replayed; callers look at List.
func (r *IndexBuilds) SetReadyHook(f func(*TwoPhaseBuild)) {
	r.mu.Lock()
	r.hook = f
	r.mu.Unlock()
}

// SetLogger sets the logger of the builds' progress messages.
func (r *IndexBuilds) SetLogger(l *slog.Logger) {
	r.mu.Lock()
	r.logger = l
	r.mu.Unlock()
}

func (r *IndexBuilds) readyHook() func(*TwoPhaseBuild) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hook
}

func (r *IndexBuilds) log() *slog.Logger {
	r.mu.Lock()
	l := r.logger
	r.mu.Unlock()
	if l == nil {
		l = slog.Default()
	}
	return l.With("c", "INDEX")
}

// Get returns the running build with UUID id.
func (r *IndexBuilds) Get(id catalog.UUID) (*TwoPhaseBuild, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.m[id]
	return t, ok
}

// List returns the running builds.
func (r *IndexBuilds) List() []*TwoPhaseBuild {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*TwoPhaseBuild, 0, len(r.m))
	for _, t := range r.m {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *TwoPhaseBuild) int { return slices.Compare(a.id[:], b.id[:]) })
	return out
}

// ForCollection returns the running builds on the collection with UUID coll.
func (r *IndexBuilds) ForCollection(coll catalog.UUID) []*TwoPhaseBuild {
	var out []*TwoPhaseBuild
	for _, t := range r.List() {
		if t.coll.uuid == coll {
			out = append(out, t)
		}
	}
	return out
}

func (r *IndexBuilds) add(t *TwoPhaseBuild) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[t.id]; ok {
		return false
	}
	r.m[t.id] = t
	return true
}

func (r *IndexBuilds) remove(t *TwoPhaseBuild) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[t.id] == t {
		delete(r.m, t.id)
	}
}

// Shutdown stops every running build's scan and waits for the scan goroutines (and ready
// hooks) to return. The builds stay registered in the catalog, not ready: the next start
// restarts them (RestartUnfinishedBuilds).
func (r *IndexBuilds) Shutdown() {
	for _, t := range r.List() {
		t.cancel(mongoerr.New(mongoerr.InterruptedAtShutdown, "index build interrupted at shutdown"))
	}
	r.wg.Wait()
}

// String names the build for logs.
func (t *TwoPhaseBuild) String() string {
	return fmt.Sprintf("index build %s on %s %v", t.id, t.ns, t.names)
}
