// Package rangedel is a shard's range deleter (spec: sharding.md "Orphaned range deletion";
// MongoDB 7.0's RangeDeleterService and range_deletion_util): it deletes the orphaned
// documents of the ranges recorded in config.rangeDeletions once they are ready.
//
// The migration protocol (another part of sharding) writes the tasks, pending while the
// migration's outcome is unknown, and marks them ready (unsets pending) on the side that
// lost the range. The deleter runs on the shard's primary only: one executor per primary
// stint, started when the node becomes a writable primary and stopped when it steps down,
// resubmitting every ready task it finds in config.rangeDeletions. Each task then
//
//  1. refreshes the collection's filtering metadata, and waits while this shard still owns a
//     part of the range (a task is never allowed to delete owned documents);
//  2. waits until no read that got its ownership filter from older metadata that owned the
//     range is in flight (filtering.Runtime.WaitForRangeQueries: cursors included);
//  3. for whenToClean "delayed", waits orphanCleanupDelaySecs more (default 900: reads on
//     secondaries are not tracked, the delay is their grace period); "now" skips it;
//  4. is queued for the executor's one deletion loop, which deletes the documents of the
//     range through the shard key index in batches of rangeDeleterBatchSize (0 or the default
//     INT_MAX: the whole range) with rangeDeleterBatchDelayMS between batches, each document
//     deleted as a fromMigrate write (not a user's delete for change streams and migration
//     cloners), in units of work of at most unitDocs documents;
//  5. removes its task document.
//
// Before each batch the task document must still exist, ready, for the same range (else the
// deletion stops: MongoDB's ensureRangeDeletionTaskStillExists), and is marked processing
// (whenToClean becomes "now"); after it, its numOrphanDocs drops by the documents deleted.
//
// A task whose collection is gone or has another UUID is dropped (MongoDB's
// RangeDeletionAbandonedBecauseCollectionWithUUIDDoesNotExist). Pending tasks are never
// processed. Failures are logged and the task is retried on the executor's next pass.
//
// WaitForOverlapping (a recipient before it clones, a donor's waitForDelete) and
// WaitForCollection (cleanupOrphaned) wait on the task documents themselves, on any member.
package rangedel

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/primaryonly"
	"humongo/internal/query/plan"
	"humongo/internal/sharding/filtering"
	"humongo/internal/sharding/shardkey"
)

// Server parameters (MongoDB's sharding_runtime_d_params.idl).
const (
	ParamOrphanCleanupDelaySecs = "orphanCleanupDelaySecs"   // default 900
	ParamBatchSize              = "rangeDeleterBatchSize"    // default INT_MAX; 0 means the default
	ParamBatchDelayMS           = "rangeDeleterBatchDelayMS" // default 20
)

// Defaults of the parameters, used when Config.Param is nil.
const (
	DefaultOrphanCleanupDelaySecs = 900
	DefaultBatchSize              = math.MaxInt32
	DefaultBatchDelayMS           = 20
)

// unitDocs bounds the documents deleted in one unit of work: a batch of INT_MAX documents is
// many short units, as MongoDB's DELETE stage commits each document on its own.
const unitDocs = 128

// Node is what the deleter needs of the replication coordinator (coord.Coordinator).
type Node = primaryonly.Node

// Config configures Start.
type Config struct {
	DB *operation.DB
	// Node is the replica-set member; nil on a standalone, which is always its own primary.
	Node Node
	// Runtime is the shard's filtering runtime (nil result: the node is not a shard, and
	// neither ownership nor in-flight reads are checked).
	Runtime func() *filtering.Runtime
	// Param reads an integer server parameter (nil: the defaults).
	Param func(name string) int64
	Log   *slog.Logger
	// Poll is how often the executor re-reads config.rangeDeletions when nothing kicks it,
	// and how often the waits re-read it (default 1 s).
	Poll time.Duration
}

// Stats are the deleter's counters since Start.
type Stats struct {
	TasksCompleted int64 // task documents removed after their range was deleted
	TasksAbandoned int64 // task documents removed because the collection is gone
	DocsDeleted    int64 // orphaned documents deleted
	Batches        int64 // batches run
}

// Service is one shard's range deleter.
type Service struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // buffered(1): re-read the tasks and the parameters now

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when a task document is removed
	running bool          // an executor runs (this node is primary)

	tasksCompleted, tasksAbandoned, docsDeleted, batches atomic.Int64
}

// Start starts the deleter: a watcher that runs an executor during each primary stint of
// cfg.Node. Stop ends both.
func Start(ctx context.Context, cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Runtime == nil {
		cfg.Runtime = func() *filtering.Runtime { return nil }
	}
	s := &Service{cfg: cfg, kick: make(chan struct{}, 1), changed: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Add(1)
	go s.watch()
	return s
}

// Stop stops the executor and the watcher and waits for them.
func (s *Service) Stop() {
	s.cancel()
	s.wg.Wait()
}

// Kick makes the executor re-read config.rangeDeletions and the parameters now (a task was
// marked ready, orphanCleanupDelaySecs changed). Safe after Stop.
func (s *Service) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Running reports whether an executor runs (the node is primary).
func (s *Service) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// Stats returns the counters.
func (s *Service) Stats() Stats {
	return Stats{TasksCompleted: s.tasksCompleted.Load(), TasksAbandoned: s.tasksAbandoned.Load(),
		DocsDeleted: s.docsDeleted.Load(), Batches: s.batches.Load()}
}

func (s *Service) param(name string, def int64) int64 {
	if s.cfg.Param == nil {
		return def
	}
	return s.cfg.Param(name)
}

// watch runs an executor while the node is a writable primary: started on step-up (a new
// term), stopped on step-down. Without a node (tests) the executor just runs.
func (s *Service) watch() {
	defer s.wg.Done()
	if s.cfg.Node == nil {
		stop := s.startExecutor()
		<-s.ctx.Done()
		stop()
		return
	}
	var stopExec func()
	primaryonly.FollowTerms(s.ctx, s.cfg.Node, time.Second, s.cfg.Log, "RangeDeleterService", primaryonly.TermHooks{
		StepUp: func(context.Context, int64) error {
			stopExec = s.startExecutor()
			return nil
		},
		StepDown: func() { stopExec() },
	})
}

// startExecutor starts one primary stint's executor; stop cancels it and waits for it and
// every goroutine it started.
func (s *Service) startExecutor() (stop func()) {
	ctx, cancel := context.WithCancel(s.ctx)
	e := &executor{s: s, ctx: ctx, tasks: map[string]*taskState{}, ready: make(chan struct{}, 1)}
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.run()
	}()
	return func() {
		cancel()
		<-done
		e.wg.Wait()
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}
}

// executor is one primary stint: a waiter goroutine per known ready task, and run, the one
// deletion loop.
type executor struct {
	s   *Service
	ctx context.Context
	wg  sync.WaitGroup // the waiters

	mu    sync.Mutex
	tasks map[string]*taskState // by Task.key
	queue []*taskState          // waited out, in the order they became ready
	ready chan struct{}         // buffered(1): the queue grew
}

type taskState struct {
	t      Task
	cancel context.CancelFunc
	seen   bool // in the last read of config.rangeDeletions
}

// run reads the tasks, starts a waiter for each new ready one, and deletes the ranges of the
// tasks the waiters queued, one at a time, until the stint ends.
func (e *executor) run() {
	s := e.s
	s.cfg.Log.Info("Range deleter executor started", logv2.C(logv2.Sharding))
	defer s.cfg.Log.Info("Range deleter executor stopped", logv2.C(logv2.Sharding))
	for {
		e.resubmit()
		for e.ctx.Err() == nil {
			ts := e.pop()
			if ts == nil {
				break
			}
			e.process(ts)
		}
		timer := time.NewTimer(s.cfg.Poll)
		select {
		case <-e.ctx.Done():
		case <-s.kick:
		case <-e.ready:
		case <-timer.C:
		}
		timer.Stop()
		if e.ctx.Err() != nil {
			return // the waiters' contexts derive from e.ctx
		}
	}
}

// resubmit reads config.rangeDeletions: each ready task not known yet gets a waiter; a
// known task whose document is gone (or pending again) is forgotten.
func (e *executor) resubmit() {
	tasks, err := e.s.readTasks(e.ctx)
	if err != nil {
		if e.ctx.Err() == nil {
			e.s.cfg.Log.Warn("Failed to read the range deletion tasks", logv2.C(logv2.Sharding), "error", err.Error())
		}
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ts := range e.tasks {
		ts.seen = false
	}
	for _, t := range tasks {
		if t.Pending {
			continue
		}
		if ts, ok := e.tasks[t.key()]; ok {
			ts.seen = true
			continue
		}
		ctx, cancel := context.WithCancel(e.ctx)
		ts := &taskState{t: t, cancel: cancel, seen: true}
		e.tasks[t.key()] = ts
		e.wg.Add(1)
		go e.wait(ctx, ts)
	}
	for k, ts := range e.tasks {
		if !ts.seen {
			ts.cancel()
			delete(e.tasks, k)
		}
	}
	kept := e.queue[:0]
	for _, ts := range e.queue {
		if e.tasks[ts.t.key()] == ts {
			kept = append(kept, ts)
		}
	}
	e.queue = kept
}

// pop takes the next queued task.
func (e *executor) pop() *taskState {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queue) == 0 {
		return nil
	}
	ts := e.queue[0]
	e.queue = e.queue[1:]
	return ts
}

// forget drops a task from memory (done, abandoned, or to be read again on the next pass).
func (e *executor) forget(ts *taskState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tasks[ts.t.key()] == ts {
		ts.cancel()
		delete(e.tasks, ts.t.key())
	}
}

// wait is a task's waiter: ownership, in-flight reads, the cleanup delay; then it queues the
// task. On a failure it forgets the task, which the next pass resubmits.
func (e *executor) wait(ctx context.Context, ts *taskState) {
	defer e.wg.Done()
	s, t := e.s, &ts.t
	if err := s.waitNotOwned(ctx, t); err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Info("Range deletion task not ready", logv2.C(logv2.Sharding),
				"namespace", t.NS, "range", t.RangeString(), "reason", err.Error())
			e.forgetAfter(ctx, ts)
		}
		return
	}
	if rt := s.cfg.Runtime(); rt != nil {
		if err := rt.WaitForRangeQueries(ctx, t.NS, t.CollectionUUID, t.Min, t.Max); err != nil {
			return
		}
	}
	if t.WhenToClean == CleanDelayed {
		start := time.Now()
		for {
			delay := time.Duration(s.param(ParamOrphanCleanupDelaySecs, DefaultOrphanCleanupDelaySecs)) * time.Second
			left := time.Until(start.Add(delay))
			if left <= 0 {
				break
			}
			// Re-read the delay when the parameter may have changed (setParameter kicks).
			timer := time.NewTimer(min(left, s.cfg.Poll))
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
	}
	e.mu.Lock()
	if e.tasks[t.key()] == ts {
		e.queue = append(e.queue, ts)
	}
	e.mu.Unlock()
	select {
	case e.ready <- struct{}{}:
	default:
	}
}

// forgetAfter forgets a task after one poll interval, so that the next pass retries it
// without spinning.
func (e *executor) forgetAfter(ctx context.Context, ts *taskState) {
	timer := time.NewTimer(e.s.cfg.Poll)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
		e.forget(ts)
	}
}

// requeueAfter queues a task whose deletion failed again after one poll interval: the
// waits it went through stay done.
func (e *executor) requeueAfter(ctx context.Context, ts *taskState) {
	timer := time.NewTimer(e.s.cfg.Poll)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return
	case <-timer.C:
	}
	e.mu.Lock()
	if e.tasks[ts.t.key()] == ts {
		e.queue = append(e.queue, ts)
	}
	e.mu.Unlock()
	select {
	case e.ready <- struct{}{}:
	default:
	}
}

// errStillOwned is the reason a task waits: this shard owns part of its range.
var errStillOwned = errors.New("this shard owns a part of the range")

// waitNotOwned refreshes the collection's filtering metadata and fails while this shard
// still owns a part of the task's range. Without a runtime (not a shard) there is nothing to
// check.
func (s *Service) waitNotOwned(ctx context.Context, t *Task) error {
	rt := s.cfg.Runtime()
	if rt == nil {
		return nil
	}
	m, err := rt.RefreshCollection(ctx, t.NS)
	if err != nil {
		return err
	}
	if m.OwnsOverlapping(t.CollectionUUID, t.Min, t.Max) {
		return errStillOwned
	}
	return nil
}

// stillOwned checks the installed metadata again right before deleting (no refresh).
func (s *Service) stillOwned(t *Task) bool {
	rt := s.cfg.Runtime()
	if rt == nil {
		return false
	}
	m, ok := rt.Collection(t.NS)
	return ok && m.OwnsOverlapping(t.CollectionUUID, t.Min, t.Max)
}

// errAbandoned: the task's collection is gone or is another collection now.
var errAbandoned = errors.New("collection with the task's UUID does not exist")

// process deletes a queued task's range and removes the task document.
func (e *executor) process(ts *taskState) {
	s, t := e.s, &ts.t
	ctx := e.ctx
	fail := func(err error) {
		if ctx.Err() == nil {
			s.cfg.Log.Warn("Range deletion failed; it will be retried", logv2.C(logv2.Sharding),
				"namespace", t.NS, "collectionUUID", t.CollectionUUID.String(), "range", t.RangeString(), "error", err.Error())
		}
		e.wg.Add(1)
		go func() { defer e.wg.Done(); e.requeueAfter(ctx, ts) }()
	}
	if s.stillOwned(t) {
		fail(errStillOwned)
		return
	}
	s.cfg.Log.Info("Beginning deletion of documents in orphan range", logv2.C(logv2.Sharding),
		"namespace", t.NS, "collectionUUID", t.CollectionUUID.String(), "range", t.RangeString())
	var total int64
	for first := true; ; first = false {
		if !first {
			delay := time.Duration(s.param(ParamBatchDelayMS, DefaultBatchDelayMS)) * time.Millisecond
			if delay > 0 {
				timer := time.NewTimer(delay)
				select {
				case <-ctx.Done():
					timer.Stop()
					return
				case <-timer.C:
				}
			}
		}
		size := s.param(ParamBatchSize, DefaultBatchSize)
		if size <= 0 || size > math.MaxInt32 {
			size = DefaultBatchSize
		}
		// Each batch first checks that the task document is still there, ready and for this
		// range (no migration can bring the range back while it is), and marks it processing.
		found, err := s.updateTask(ctx, t, true, 0)
		if err != nil {
			fail(err)
			return
		}
		if !found {
			s.cfg.Log.Info("Range deletion task no longer exists", logv2.C(logv2.Sharding), "namespace", t.NS,
				"range", t.RangeString(), "reason", mongoerr.RangeDeletionAbandonedBecauseTaskDocumentDoesNotExist.String())
			e.forget(ts)
			return
		}
		n, err := s.deleteBatch(ctx, t, size)
		total += n
		if n > 0 {
			// persistUpdatedNumOrphans: the task's orphan count follows the deletions.
			if _, err := s.updateTask(ctx, t, false, -n); err != nil {
				fail(err)
				return
			}
		}
		if errors.Is(err, errAbandoned) {
			s.cfg.Log.Info("Abandoning range deletion task", logv2.C(logv2.Sharding), "namespace", t.NS,
				"collectionUUID", t.CollectionUUID.String(), "range", t.RangeString(),
				"reason", mongoerr.RangeDeletionAbandonedBecauseCollectionWithUUIDDoesNotExist.String())
			if err := s.removeTask(ctx, t); err != nil {
				fail(err)
				return
			}
			s.tasksAbandoned.Add(1)
			e.forget(ts)
			return
		}
		if err != nil {
			fail(err)
			return
		}
		if n > 0 {
			s.batches.Add(1)
		}
		if n < size {
			break // the range is empty
		}
	}
	if err := s.removeTask(ctx, t); err != nil {
		fail(err)
		return
	}
	s.tasksCompleted.Add(1)
	e.forget(ts)
	s.cfg.Log.Info("Finished deleting documents in orphan range", logv2.C(logv2.Sharding),
		"namespace", t.NS, "collectionUUID", t.CollectionUUID.String(), "range", t.RangeString(), "numDeleted", total)
}

// deleteBatch deletes up to limit documents of the task's range, in units of work of at most
// unitDocs, and returns how many it deleted (fewer than limit: the range is empty now).
func (s *Service) deleteBatch(ctx context.Context, t *Task, limit int64) (int64, error) {
	pattern, err := shardkey.Parse(t.KeyPattern)
	if err != nil {
		return 0, err
	}
	op := s.cfg.DB.NewOp(ctx)
	defer op.Close()
	var total int64
	for total < limit {
		want := min(limit-total, unitDocs)
		var n int64
		err := op.WriteCollection(ctx, t.NS, false, func(coll *index.Collection) error {
			n = 0
			if coll == nil || coll.UUID() != t.CollectionUUID {
				return errAbandoned
			}
			rd, err := op.ReadLocked(t.NS, nil, coll, operation.ReadAllRecords)
			if err != nil {
				return err
			}
			ix, lo, hi, err := shardKeyIndex(rd.Meta(), pattern, t.Min, t.Max)
			if err != nil {
				return err
			}
			targets, ex, err := rd.Targets(ctx, op.RU, plan.Request{NS: t.NS,
				Hint: bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, ix)},
				Min:  lo, Max: hi, Limit: want})
			if err != nil {
				return err
			}
			ex.Close()
			for _, tg := range targets {
				// The index bounds are the range; a document whose key cannot be extracted
				// (an array on the shard key path) is no orphan of it.
				key, err := pattern.ExtractKey(tg.Doc)
				if err != nil || !shardkey.InHalfOpen(key, t.Min, t.Max) {
					continue
				}
				if err := coll.DeleteDocumentFromMigrate(op.RU, tg.RID, tg.Doc); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		s.docsDeleted.Add(n)
		if n < want {
			break
		}
	}
	return total, nil
}

// shardKeyIndex finds the index the deletion scans (MongoDB's findShardKeyPrefixedIndex: ready,
// not partial, sparse, multikey or hidden-irrelevant, simple collation, its key pattern
// starting with the shard key's) and extends the range's bounds to its fields with MinKey
// (extendRangeBound). IndexNotFound when there is none: the task waits for one.
func shardKeyIndex(meta *catalog.CollectionMeta, pattern *shardkey.Pattern, min, max bsoncore.Document) (string, bsoncore.Document, bsoncore.Document, error) {
	want, _ := pattern.Doc().Elements()
	if meta != nil {
	next:
		for _, im := range meta.Indexes {
			if !im.Ready || im.PartialFilterExpression != nil || im.Sparse || im.Multikey || im.Collation != nil {
				continue
			}
			elems, err := im.KeyPattern.Elements()
			if err != nil || len(elems) < len(want) {
				continue
			}
			for i, w := range want {
				if elems[i].Key() != w.Key() || !sameDirection(elems[i].Value(), w.Value()) {
					continue next
				}
			}
			return im.Name, extend(min, elems), extend(max, elems), nil
		}
	}
	return "", nil, nil, mongoerr.Newf(mongoerr.IndexNotFound,
		"Unable to find shard key index for %s", pattern.String())
}

// sameDirection reports whether an index key field serves a shard key field: both hashed, or
// both ascending (shard keys have no descending fields).
func sameDirection(ix, sk bsoncore.Value) bool {
	ixs, ixHashed := ix.StringValueOK()
	sks, skHashed := sk.StringValueOK()
	if ixHashed || skHashed {
		return ixHashed && skHashed && ixs == sks
	}
	n, ok := ix.AsFloat64OK()
	return ok && n > 0
}

// extend appends MinKey for the index fields past the shard key's.
func extend(bound bsoncore.Document, ixFields []bsoncore.Element) bsoncore.Document {
	have, _ := bound.Elements()
	if len(have) >= len(ixFields) {
		return bound
	}
	idx, out := bsoncore.AppendDocumentStart(nil)
	for _, e := range have {
		out = bsoncore.AppendValueElement(out, e.Key(), e.Value())
	}
	for _, f := range ixFields[len(have):] {
		out = bsoncore.AppendMinKeyElement(out, f.Key())
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}
