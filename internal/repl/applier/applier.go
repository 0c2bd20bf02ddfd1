// Package applier is a secondary's oplog application (spec/replication.md: "Oplog Entry
// Application", "Life as a Secondary"; MongoDB's OplogApplier / SyncTail).
//
// Run takes batches from the fetcher's Buffer (at most MaxOps entries and MaxBytes; a command
// entry is a batch of its own, except a transaction's CRUD-only applyOps entry) and
// ApplyBatch applies each one:
//
//  1. persist oplogTruncateAfterPoint = lastApplied.ts (local.replset.oplogTruncateAfterPoint):
//     a crash in the middle of the batch truncates the oplog back to the last complete batch
//     at startup recovery;
//  2. write the entries verbatim into our own local.oplog.rs at their own timestamps (one
//     storage unit; oplog.Writer.AppendEntry), so our oplog is a copy of the source's and can
//     serve chained secondaries;
//  3. apply the data: CRUD entries are partitioned by document (hash of the collection UUID and
//     _id) over Writers parallel writers, each writer applying its entries in oplog order in one
//     storage unit, every entry at its own timestamp (the secondary's data has the primary's
//     history, so reads at a timestamp see what the primary had then); commands run alone,
//     in oplog order, as barriers between the CRUD groups around them: among them applyOps
//     entries (transactions, the applyOps command), each applied in one unit at its own
//     timestamp, a partialTxn chain by its last entry (oplog/txn_apply.go; the chain's
//     earlier entries are found in the batch or in our oplog, written in step 2);
//  4. clear the truncate point and move lastApplied to the batch's last entry; after a journal
//     flush OnApplied tells the coordinator, which records it as applied and durable and reports
//     both to the sync source with replSetUpdatePosition, and the oplog writer wakes the
//     awaitData getMores of members chaining from us (they read our oplog at lastApplied).
//
// Run journals in the background (MongoDB's oplog writer and applier do the same): while one
// journal flush makes batch N durable, batch N+1 is applied, and the next flush covers every
// batch finished meanwhile (group commit), so the fsync is off the apply path and a busy
// primary's w:"majority" writes share flushes instead of queueing behind one per batch.
//
// Invariant: lastApplied only moves at batch boundaries, after every write of the batch has
// committed. Secondary reads use ReadProvided at LastApplied (MongoDB's kLastApplied read
// source), so they never see half a batch even though the writers commit independently.
//
// Cross-document effects inside one batch (a unique index key freed by one document and taken
// by another) can make a writer fail when the writers' commit order differs from the oplog
// order. Such a writer's unit rolls back as a whole; after the other writers finish, its
// entries are re-applied one by one in oplog order (idempotent application makes that safe).
// A failure then is fatal: a replica must never silently diverge (STYLE 8).
package applier

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/failpoint"
	"humongo/internal/index"
	"humongo/internal/logv2"
	"humongo/internal/optime"
	"humongo/internal/repl/fetcher"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// Batch limits (MongoDB's replBatchLimitOperations and replBatchLimitBytes).
const (
	DefaultMaxOps   = 5000
	DefaultMaxBytes = 100 << 20
)

// Config configures an Applier.
type Config struct {
	Engine  *storage.Engine
	Catalog *catalog.Catalog
	Colls   *index.Collections
	// Writer writes the fetched entries into our oplog.
	Writer *oplog.Writer
	// Writers is the number of parallel writers (default GOMAXPROCS, at least 2).
	Writers int
	// MaxOps and MaxBytes bound a batch.
	MaxOps, MaxBytes int
	// Mode is ModeSecondary in steady state, ModeInitialSync during initial sync.
	Mode oplog.Mode
	// LastApplied is the optime of the newest entry already applied (top of our oplog).
	LastApplied optime.OpTime
	// OnApplied is called after each batch, once it is journaled, with the new lastApplied
	// (which is then also the last durable optime). May be nil.
	OnApplied func(optime.OpTime)
	// OnBatch is called with each applied batch's entries once its writes are committed,
	// before OnApplied reports it (in-memory state derived from data, e.g. the user cache,
	// follows the writes). May be nil.
	OnBatch func([]*oplog.Entry)
	// Fatal handles an entry that cannot be applied (default: log and exit the process).
	Fatal func(error)
	Log   *slog.Logger
}

// Applier applies batches of fetched oplog entries.
type Applier struct {
	cfg   Config
	log   *slog.Logger
	apply *oplog.Applier
	tp    localDoc

	mu      sync.Mutex
	applied optime.OpTime // guarded by mu
	moved   chan struct{} // guarded by mu; closed and replaced when applied moves
	batches int64         // guarded by mu
	retries int64         // guarded by mu; writer groups re-applied serially
}

// New returns an applier.
func New(cfg Config) *Applier {
	if cfg.Writers <= 0 {
		cfg.Writers = max(2, runtime.GOMAXPROCS(0))
	}
	if cfg.MaxOps <= 0 {
		cfg.MaxOps = DefaultMaxOps
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	log := cfg.Log.With(logv2.C(logv2.Replication))
	if cfg.Fatal == nil {
		cfg.Fatal = func(err error) {
			log.Error("Failed to apply oplog entries; this member cannot continue without diverging",
				logv2.ID(21238), "error", err.Error())
			os.Exit(14)
		}
	}
	return &Applier{
		cfg: cfg, log: log,
		apply:   oplog.NewApplier(oplog.Config{Engine: cfg.Engine, Catalog: cfg.Catalog, Colls: cfg.Colls}).WithBatchSessionUpdates(),
		tp:      localDoc{e: cfg.Engine, cat: cfg.Catalog, colls: cfg.Colls, ns: TruncateAfterPointNS},
		applied: cfg.LastApplied, moved: make(chan struct{}),
	}
}

// WithApplier replaces the single-entry applier (it carries the writer's temp dir for index
// builds); New builds one from the catalog and collections.
func (a *Applier) WithApplier(x *oplog.Applier) *Applier {
	a.apply = x.WithBatchSessionUpdates() // session records are written per batch (sessions.go)
	return a
}

// LastApplied is the optime of the newest applied entry: a read at its timestamp sees whole
// batches only.
func (a *Applier) LastApplied() optime.OpTime {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied
}

// Batches is the number of batches applied so far.
func (a *Applier) Batches() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.batches
}

// SerialRetries is how many parallel writer groups failed and were re-applied serially.
func (a *Applier) SerialRetries() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.retries
}

// WaitApplied waits until lastApplied reaches op's timestamp.
func (a *Applier) WaitApplied(ctx context.Context, ts optime.Timestamp) error {
	for {
		a.mu.Lock()
		done, ch := a.applied.TS >= ts, a.moved
		a.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// isCommand: command entries end a batch and are applied alone, except CRUD-only applyOps
// entries (transactions), which share batches (oplog.SharesBatch says why that is safe).
func isCommand(d bsoncore.Document) bool {
	op, _ := d.Lookup("op").StringValueOK()
	return op == "c" && !oplog.SharesBatch(d)
}

// IsolatedEntry reports whether d must be a batch of its own (Buffer.Next's alone
// predicate, for callers that run their own batch loop, such as initial sync).
func IsolatedEntry(d bsoncore.Document) bool { return isCommand(d) }

// Run applies batches from buf until ctx ends (returning its cause) or a fatal error. Applied
// batches are journaled and reported by a goroutine Run owns (durableReporter); Run returns
// after it has reported the last batch.
func (a *Applier) Run(ctx context.Context, buf *fetcher.Buffer) error {
	rep := newDurableReporter(a)
	// The reporter stops when the apply loop has returned, not when ctx ends: a batch that
	// finishes after ctx ended (batches are never cut short) must still be reported, or a
	// member stepping up would write its "new primary" entry behind a batch its
	// coordinator never heard of.
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		rep.run(ctx, stop)
	}()
	defer func() {
		close(stop)
		<-done
	}()
	for {
		batch, err := buf.Next(ctx, a.cfg.MaxOps, a.cfg.MaxBytes, isCommand)
		if err != nil {
			return err
		}
		// A batch is finished even when the owner stops us meanwhile: a half-applied batch
		// would leave the truncate point set for the next start to repair.
		last, moved, err := a.applyBatch(context.WithoutCancel(ctx), batch)
		if err != nil {
			a.cfg.Fatal(err)
			return err
		}
		if moved {
			rep.note(last)
		}
	}
}

// ApplyBatch writes batch to our oplog and applies it; it returns the new lastApplied. It
// journals the batch and reports it (OnApplied) before returning. Entries at or before
// lastApplied are skipped (a restarted fetcher may resend them).
func (a *Applier) ApplyBatch(ctx context.Context, batch []bsoncore.Document) (optime.OpTime, error) {
	last, moved, err := a.applyBatch(ctx, batch)
	if err != nil || !moved {
		return last, err
	}
	if err := a.reportDurable(ctx, last); err != nil {
		return last, err
	}
	return last, nil
}

// reportDurable waits until everything applied so far is journaled, then reports last (the
// coordinator moves lastApplied and lastDurable together, so one replSetUpdatePosition
// carries both; w:"majority" waits for durable optimes) and wakes oplog readers.
func (a *Applier) reportDurable(ctx context.Context, last optime.OpTime) error {
	if a.cfg.OnApplied != nil {
		// The journal flush is group-committed with every other waiter's.
		if err := a.cfg.Engine.WaitUntilDurable(ctx); err != nil {
			return fmt.Errorf("wait for the batch to be durable: %w", err)
		}
		a.cfg.OnApplied(last)
	}
	if a.cfg.Writer != nil {
		a.cfg.Writer.NotifyVisible()
	}
	return nil
}

// durableReporter journals and reports applied batches in the background: note hands it the
// newest applied optime and returns at once; run reports the newest one noted, after a
// flush that covers it, as often as flushes complete.
type durableReporter struct {
	a    *Applier
	kick chan struct{} // capacity 1: "something was noted"

	mu      sync.Mutex
	pending optime.OpTime // guarded by mu; newest applied optime not reported yet
	has     bool          // guarded by mu
}

func newDurableReporter(a *Applier) *durableReporter {
	return &durableReporter{a: a, kick: make(chan struct{}, 1)}
}

func (r *durableReporter) note(last optime.OpTime) {
	r.mu.Lock()
	r.pending, r.has = last, true
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *durableReporter) take() (optime.OpTime, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.pending, r.has
	r.has = false
	return last, ok
}

// run reports until stop is closed; then it reports what is still pending (the owner stopping
// replication waits for it, so a member that steps up has reported every applied batch).
// Reports outlive ctx (the owner's stop request); a failed report is fatal unless the owner
// is stopping (ctx ended), as the engine may be closing under it then.
func (r *durableReporter) run(ctx context.Context, stop <-chan struct{}) {
	for {
		select {
		case <-r.kick:
		case <-stop:
			r.finish(ctx)
			return
		}
		last, ok := r.take()
		if !ok {
			continue
		}
		if err := r.a.reportDurable(context.WithoutCancel(ctx), last); err != nil {
			if ctx.Err() != nil {
				r.a.log.Warn("Could not journal an applied batch while stopping", "error", err.Error())
				continue
			}
			r.a.cfg.Fatal(err)
			return
		}
	}
}

// finish reports the batch still pending when the owner stops replication.
func (r *durableReporter) finish(ctx context.Context) {
	if last, ok := r.take(); ok {
		if err := r.a.reportDurable(context.WithoutCancel(ctx), last); err != nil {
			r.a.log.Warn("Could not journal the last applied batch while stopping", "error", err.Error())
		}
	}
}

// applyBatch writes batch to our oplog and applies it; moved reports whether lastApplied
// moved (false when every entry was already applied).
func (a *Applier) applyBatch(ctx context.Context, batch []bsoncore.Document) (last optime.OpTime, moved bool, err error) {
	prev := a.LastApplied()
	entries := make([]*oplog.Entry, 0, len(batch))
	for _, raw := range batch {
		e, err := oplog.ParseEntry(raw)
		if err != nil {
			return prev, false, err
		}
		if e.OpTime.TS <= prev.TS {
			continue
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return prev, false, nil
	}
	last = entries[len(entries)-1].OpTime
	start := time.Now()
	if err := a.tp.Save(ctx, truncatePointDoc(prev.TS)); err != nil {
		return prev, false, fmt.Errorf("set oplogTruncateAfterPoint: %w", err)
	}
	if err := a.writeOplog(ctx, entries); err != nil {
		return prev, false, fmt.Errorf("write oplog entries: %w", err)
	}
	if err := a.applyEntries(ctx, entries); err != nil {
		return prev, false, err
	}
	if err := a.applySessions(ctx, entries); err != nil {
		return prev, false, fmt.Errorf("update config.transactions: %w", err)
	}
	if err := a.tp.Save(ctx, truncatePointDoc(0)); err != nil {
		return prev, false, fmt.Errorf("clear oplogTruncateAfterPoint: %w", err)
	}
	a.beforeBatchCompletes(entries)
	if a.cfg.OnBatch != nil {
		a.cfg.OnBatch(entries)
	}
	a.mu.Lock()
	a.applied = last
	a.batches++
	close(a.moved)
	a.moved = make(chan struct{})
	a.mu.Unlock()
	if d := time.Since(start); d > time.Second {
		a.log.Info("Slow oplog batch", logv2.ID(21230), "entries", len(entries), "durationMillis", d.Milliseconds(),
			"first", entries[0].Op+" "+entries[0].NS+" "+entries[0].O.String())
	}
	return last, true, nil
}

// beforeBatchCompletes is a test hook (export_test.go): it runs when every write of a batch
// has committed and before lastApplied moves, the window in which secondary reads must not
// see the batch (MongoDB's pauseBatchApplicationBeforeCompletion fail point).
var beforeBatchCompletes atomic.Pointer[func(e *storage.Engine, entries []*oplog.Entry)]

// pauseBatchApplicationBeforeCompletion is MongoDB's fail point of that name: while it is on,
// every applier in the process holds its batch at the same point as the hook above (tests of
// other packages use it to catch a member with a batch half done, e.g. during step-up).
var pauseBatchApplicationBeforeCompletion = failpoint.Register("pauseBatchApplicationBeforeCompletion")

func (a *Applier) beforeBatchCompletes(entries []*oplog.Entry) {
	if f := beforeBatchCompletes.Load(); f != nil {
		(*f)(a.cfg.Engine, entries)
	}
	// One evaluation per batch, so TimesEntered counts paused batches; then the pause lasts
	// while the fail point is on. It has no "turned off" signal, so this polls (MongoDB's
	// pauseWhileSet). The batch is not interruptible here anyway: batches are never cut short.
	if _, on := pauseBatchApplicationBeforeCompletion.Evaluate(nil); on {
		for pauseBatchApplicationBeforeCompletion.Enabled() {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// writeOplog inserts the entries into our oplog, each at its own timestamp, in one unit.
func (a *Applier) writeOplog(ctx context.Context, entries []*oplog.Entry) error {
	ru := a.cfg.Engine.NewRecoveryUnit()
	defer ru.Close()
	return storage.WriteConflictRetry(ctx, "writeOplogBatch", func() error {
		defer ru.AbandonSnapshot()
		w := ru.BeginUnitOfWork()
		defer w.End()
		for _, e := range entries {
			if _, err := a.cfg.Writer.AppendEntry(ru, e.Raw); err != nil {
				return err
			}
		}
		return w.Commit()
	})
}

// applyEntries applies a batch's data writes: a lone command directly, CRUD in parallel
// writers partitioned by document. Command entries, applyOps entries (transactions) among
// them, are barriers: the CRUD entries before one are applied first, then it alone, in its
// own unit. A transaction chain's earlier entries are looked up in the batch first
// (batchPrevs), then in our oplog (writeOplog has written the batch already).
func (a *Applier) applyEntries(ctx context.Context, entries []*oplog.Entry) error {
	if len(entries) == 1 && entries[0].Op == "c" {
		return a.applyOne(ctx, entries[0], nil)
	}
	prevs := batchPrevs(entries)
	n := a.cfg.Writers
	groups := make([][]*oplog.Entry, n)
	for _, e := range entries {
		switch e.Op {
		case "n":
			continue
		case "c":
			// The batcher isolates commands; a caller passing a mixed batch gets them
			// applied in order, serially, after the CRUD entries before them.
			if err := a.applyGroups(ctx, groups); err != nil {
				return err
			}
			clear(groups)
			if err := a.applyOne(ctx, e, prevs); err != nil {
				return err
			}
			continue
		}
		i := partition(e) % uint64(n)
		groups[i] = append(groups[i], e)
	}
	return a.applyGroups(ctx, groups)
}

// batchPrevs finds an entry of the batch (sorted by timestamp) by its timestamp.
func batchPrevs(entries []*oplog.Entry) oplog.PrevEntries {
	return func(ts optime.Timestamp) (bsoncore.Document, bool) {
		i, ok := slices.BinarySearchFunc(entries, ts, func(e *oplog.Entry, ts optime.Timestamp) int {
			return e.OpTime.TS.Compare(ts)
		})
		if !ok {
			return nil, false
		}
		return entries[i].Raw, true
	}
}

func (a *Applier) applyOne(ctx context.Context, e *oplog.Entry, prevs oplog.PrevEntries) error {
	ru := a.cfg.Engine.NewRecoveryUnit()
	defer ru.Close()
	if err := a.apply.ApplyWith(ctx, ru, e.Raw, a.cfg.Mode, prevs); err != nil {
		return fmt.Errorf("applying %s entry at %v on %s: %w", e.Op, e.OpTime, e.NS, err)
	}
	return nil
}

// applyGroups runs one writer per non-empty group; a group that fails (other than by
// context) is re-applied entry by entry in oplog order after the others committed.
func (a *Applier) applyGroups(ctx context.Context, groups [][]*oplog.Entry) error {
	var wg sync.WaitGroup
	errs := make([]error, len(groups))
	for i, g := range groups {
		if len(g) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.applyGroup(ctx, g)
		}()
	}
	wg.Wait()
	var retry []*oplog.Entry
	for i, err := range errs {
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		a.log.Debug("Parallel writer failed; re-applying its entries serially", "error", err.Error())
		retry = append(retry, groups[i]...)
		a.mu.Lock()
		a.retries++
		a.mu.Unlock()
	}
	if len(retry) > 0 {
		sortByTS(retry)
		for _, e := range retry {
			if err := a.applyOne(ctx, e, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyGroup applies one writer's entries in order in a single unit (retried whole on
// WriteConflict).
func (a *Applier) applyGroup(ctx context.Context, g []*oplog.Entry) error {
	ru := a.cfg.Engine.NewRecoveryUnit()
	defer ru.Close()
	_ = ru.SetPrepareConflictBehavior(storage.PrepareConflictIgnoreAllowWrites) // as oplog.Applier.ApplyWith
	return storage.WriteConflictRetry(ctx, "applyBatchWriter", func() error {
		defer ru.AbandonSnapshot()
		w := ru.BeginUnitOfWork()
		defer w.End()
		for _, e := range g {
			if err := a.apply.Apply(ctx, ru, e.Raw, a.cfg.Mode); err != nil {
				return err
			}
		}
		return w.Commit()
	})
}

func sortByTS(es []*oplog.Entry) {
	// Insertion sort: the retry list is a concatenation of a few already sorted groups.
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].OpTime.TS < es[j-1].OpTime.TS; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// partition hashes the entry's document identity: collection (UUID, or namespace) and the
// _id's type and bytes. FNV-1a, no allocation.
func partition(e *oplog.Entry) uint64 {
	h := uint64(14695981039346656037)
	mix := func(b []byte) {
		for _, c := range b {
			h ^= uint64(c)
			h *= 1099511628211
		}
	}
	if e.HasUI {
		mix(e.UI[:])
	} else {
		mix([]byte(e.NS))
	}
	src := e.O
	if e.Op == "u" {
		src = e.O2
	}
	if v, err := src.LookupErr("_id"); err == nil {
		mix([]byte{byte(v.Type)})
		mix(v.Data)
	}
	return h
}
