package oplog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// NS is the oplog's namespace.
const NS = "local.oplog.rs"

// Sizes of the oplog cap (mongod's defaults: 5% of the disk, at least 990 MB, at most 50 GB).
const (
	MinDefaultMaxSize = 990 << 20
	MaxDefaultMaxSize = 50 << 30
)

// DefaultMaxSize is mongod's default oplog size for a data directory on dir's filesystem.
func DefaultMaxSize(dir string) int64 {
	var st syscall.Statfs_t
	if dir == "" || syscall.Statfs(dir, &st) != nil {
		return MinDefaultMaxSize
	}
	size := int64(st.Blocks) * st.Bsize / 20
	return max(MinDefaultMaxSize, min(size, MaxDefaultMaxSize))
}

// Config configures Open.
type Config struct {
	Engine  *storage.Engine
	Catalog *catalog.Catalog
	// Colls is the write path Apply uses.
	Colls *index.Collections
	// MaxSizeBytes caps the oplog (--oplogSize in bytes); 0 means MinDefaultMaxSize. An
	// existing oplog is resized to it.
	MaxSizeBytes int64
	// Term is the coordinator's OplogTerm: the term of this node's own entries and whether
	// it may log replicated writes (CanAcceptNonLocalWrites). Every replicated write passes
	// logEntries, so a node that is not a writable primary fails it with NotWritablePrimary
	// whatever the path (a command, an aggregation stage, the TTL monitor, an index build).
	// Replication's own writes (oplog application, initial sync, rollback, startup recovery)
	// run with opobserver.UnreplicatedWrites and never get here; no-ops (ns "") and the
	// local database are exempt, as in MongoDB's logOp. nil: a writer with no coordinator
	// (tests that drive a data node directly), which logs with UninitializedTerm and never
	// refuses.
	Term TermSource
	// Now is the wall clock (entries' wall field and slot seconds); default time.Now.
	Now func() time.Time
	// ClusterTime, when set, is the vector clock's ClusterTime: slots come after it, so an
	// entry is never timestamped below a cluster time this node has heard of (MongoDB
	// reserves oplog timestamps as ticks of the ClusterTime). A snapshot or afterClusterTime
	// read at a time ahead of this node's oplog writes a no-op to get there, which must land
	// at or after that time.
	ClusterTime func() optime.Timestamp
	// TempDir holds index-build spill files for applied createIndexes entries.
	TempDir string
	Log     *slog.Logger
}

// Writer writes `local.oplog.rs` entries; it implements opobserver.Observer.
type Writer struct {
	cfg   Config
	info  *LocalOplogInfo
	ident string
	uuid  catalog.UUID
	// lastWritten is the largest committed OpTime (packed ts; term kept alongside).
	lastTS   atomic.Uint64
	lastTerm atomic.Int64

	// visCh is closed when oplog entries may have become visible to readers (awaitData
	// getMores of oplog fetchers wait on it); nil while nobody waits, so a write with no
	// waiter pays one uncontended lock.
	visMu sync.Mutex
	visCh chan struct{} // guarded by visMu

	// The newest of this node's own entries (logged as primary) that readers can see, for
	// LastVisible. pending holds committed entries still behind a hole (an earlier slot in
	// flight), in timestamp order; it stays as short as the number of concurrent writers.
	ownMu   sync.Mutex
	pending []optime.OpTime // guarded by ownMu
	visTop  optime.OpTime   // guarded by ownMu

	// shardKeys, once a shard's runtime set it, returns the shard key pattern of a sharded
	// collection (nil otherwise): documentKey below.
	shardKeys atomic.Pointer[func(ns string, uuid catalog.UUID) bsoncore.Document]
}

// SetShardKeyPatterns gives the writer the shard key patterns of the node's sharded
// collections (a shard's filtering runtime): entries then carry MongoDB's documentKey, the
// shard key's fields and _id, as an insert's o2, an update's o2 and a delete's o, which
// change streams report as documentKey. Appliers and rollback read only _id of them.
func (w *Writer) SetShardKeyPatterns(f func(ns string, uuid catalog.UUID) bsoncore.Document) {
	w.shardKeys.Store(&f)
}

// documentKey is doc's key in an entry of ns: {<shard key fields>, _id} on a sharded
// collection (a missing field null, as MongoDB's getDocumentKey), nil otherwise.
func (w *Writer) documentKey(ns string, uuid catalog.UUID, doc bsoncore.Document) bsoncore.Document {
	f := w.shardKeys.Load()
	if f == nil || len(doc) < 5 {
		return nil
	}
	pattern := (*f)(ns, uuid)
	els, err := pattern.Elements()
	if err != nil || len(els) == 0 {
		return nil
	}
	start, d := bsoncore.AppendDocumentStart(nil)
	hasID := false
	for _, e := range els {
		k := e.Key()
		hasID = hasID || k == "_id"
		v, ok := bsonutil.Lookup(doc, k)
		if !ok {
			v = bsoncore.Value{Type: bsoncore.TypeNull}
		}
		d = bsoncore.AppendValueElement(d, k, v)
	}
	if id := doc.Lookup("_id"); !hasID && id.Type != 0 {
		d = bsoncore.AppendValueElement(d, "_id", id)
	}
	d, _ = bsoncore.AppendDocumentEnd(d, start)
	return d
}

var _ opobserver.Observer = (*Writer)(nil)

// Open creates local.oplog.rs if it is missing (capped, oplog-style table), sets its
// maximum size on the engine and returns a Writer whose slots follow the newest entry.
func Open(ctx context.Context, cfg Config) (*Writer, error) {
	if cfg.Engine == nil || cfg.Catalog == nil {
		return nil, errors.New("oplog: Open needs an engine and a catalog")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxSizeBytes <= 0 {
		cfg.MaxSizeBytes = MinDefaultMaxSize
	}
	e, cat := cfg.Engine, cfg.Catalog
	if _, ok := cat.Latest().ByNS(NS); !ok {
		ru := e.NewRecoveryUnit()
		err := storage.WriteConflictRetry(ctx, "createOplog", func() error {
			defer ru.AbandonSnapshot()
			w := ru.BeginUnitOfWork()
			defer w.End()
			if _, ok := cat.Latest().ByNS(NS); ok {
				return nil
			}
			opts := bsoncore.NewDocumentBuilder().
				AppendBoolean("capped", true).
				AppendInt64("size", cfg.MaxSizeBytes).Build()
			if _, err := cat.CreateCollection(ru, NS, opts); err != nil {
				return err
			}
			return w.Commit()
		})
		ru.Close()
		if err != nil {
			return nil, fmt.Errorf("oplog: create %s: %w", NS, err)
		}
		cfg.Log.Info("created oplog", "ns", NS, "maxSizeBytes", cfg.MaxSizeBytes)
	}
	meta, ok := cat.Latest().ByNS(NS)
	if !ok {
		return nil, fmt.Errorf("oplog: %s missing after creation", NS)
	}
	// Every member records the change stream pre-images of the writes it logs or applies.
	if err := EnsurePreImagesCollection(ctx, e, cat); err != nil {
		return nil, fmt.Errorf("oplog: create %s: %w", PreImagesNS, err)
	}
	e.SetOplogMaxSize(meta.Ident, cfg.MaxSizeBytes)
	w := &Writer{cfg: cfg, ident: meta.Ident, uuid: meta.UUID}
	top, err := w.topTimestamp()
	if err != nil {
		return nil, err
	}
	w.info = NewLocalOplogInfo(e, top, cfg.Now)
	w.info.clusterTime = cfg.ClusterTime
	w.lastTS.Store(uint64(top))
	return w, nil
}

// topTimestamp reads the newest entry's timestamp (a reverse cursor ignores visibility).
func (w *Writer) topTimestamp() (optime.Timestamp, error) {
	ru := w.cfg.Engine.NewRecoveryUnit()
	defer ru.Close()
	c, err := ru.NewCursor(w.ident, storage.CursorOptions{Reverse: true})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if !c.First() {
		return 0, c.Err()
	}
	id, err := recordid.FromKey(c.Key())
	if err != nil {
		return 0, fmt.Errorf("oplog: %w", err)
	}
	return optime.Timestamp(id.Int64()), nil
}

// Ident is the oplog's storage table (oplog-style: keys are recordid.Long(ts).Key()).
func (w *Writer) Ident() string { return w.ident }

// UUID is the oplog collection's UUID.
func (w *Writer) UUID() catalog.UUID { return w.uuid }

// Info is the slot allocator.
func (w *Writer) Info() *LocalOplogInfo { return w.info }

// LastWritten is the OpTime of the newest committed entry written through this Writer (or
// found at Open, with an unknown term of UninitializedTerm).
func (w *Writer) LastWritten() optime.OpTime {
	return optime.OpTime{TS: optime.Timestamp(w.lastTS.Load()), Term: w.lastTerm.Load()}
}

func (w *Writer) noteCommitted(o optime.OpTime) {
	for {
		cur := w.lastTS.Load()
		if uint64(o.TS) <= cur {
			return
		}
		if w.lastTS.CompareAndSwap(cur, uint64(o.TS)) {
			w.lastTerm.Store(o.Term)
			return
		}
	}
}

// ResetLastWritten moves LastWritten back to o, the new top of the oplog after rollback
// truncated it (noteCommitted only moves it forward, so it would keep reporting the
// rolled-back top as operationTime and as the optime writes wait for). Rollback calls it
// while it holds the global lock in X, so no write commits concurrently.
func (w *Writer) ResetLastWritten(o optime.OpTime) {
	w.lastTS.Store(uint64(o.TS))
	w.lastTerm.Store(o.Term)
	w.ownMu.Lock()
	w.pending, w.visTop = nil, o
	w.ownMu.Unlock()
}

// noteOwnCommitted records a committed unit's newest entry logged by this node (not one
// copied from a sync source), after the engine released the unit's slots.
func (w *Writer) noteOwnCommitted(o optime.OpTime) {
	vis := w.cfg.Engine.AllDurableTimestamp()
	w.ownMu.Lock()
	defer w.ownMu.Unlock()
	w.advanceVisibleLocked(vis)
	if o.TS <= vis {
		if w.visTop.Less(o) {
			w.visTop = o
		}
		return
	}
	i := len(w.pending)
	for i > 0 && o.TS < w.pending[i-1].TS {
		i--
	}
	w.pending = slices.Insert(w.pending, i, o)
}

// advanceVisibleLocked moves the pending entries at or below the all-durable point vis into
// visTop.
func (w *Writer) advanceVisibleLocked(vis optime.Timestamp) {
	n := 0
	for n < len(w.pending) && w.pending[n].TS <= vis {
		if w.visTop.Less(w.pending[n]) {
			w.visTop = w.pending[n]
		}
		n++
	}
	if n > 0 {
		w.pending = slices.Delete(w.pending, 0, n)
	}
}

// LastVisible is the optime of the newest entry this node logged as primary that oplog
// readers can see (every timestamp at or below it has committed): a primary's lastApplied.
// It is not the all-durable timestamp itself, which commits that log no entry also move
// (a unit with no writes, such as a read-only transaction's commit, or a write to an
// unreplicated collection, takes an engine-assigned timestamp): a lastApplied at such a
// timestamp names an entry that does not exist, which no secondary can ever reach.
func (w *Writer) LastVisible() optime.OpTime {
	vis := w.cfg.Engine.AllDurableTimestamp()
	w.ownMu.Lock()
	defer w.ownMu.Unlock()
	w.advanceVisibleLocked(vis)
	return w.visTop
}

// VisibilityChanged returns a channel closed at the next NotifyVisible. Readers take it
// before they read the oplog and wait on it when they found nothing new.
func (w *Writer) VisibilityChanged() <-chan struct{} {
	w.visMu.Lock()
	defer w.visMu.Unlock()
	if w.visCh == nil {
		w.visCh = make(chan struct{})
	}
	return w.visCh
}

// NotifyVisible wakes the readers waiting in VisibilityChanged. Entries become visible on a
// primary when the all-durable point passes them: every commit or rollback of a unit holding
// oplog slots calls it after the engine released the unit's slots (OnCommit and OnRollback
// hooks run after that), so the commit that fills the last hole below an entry is the one
// whose notification finds it readable. On a secondary, readers read at lastApplied: the
// applier calls it once a batch is reported applied.
func (w *Writer) NotifyVisible() {
	w.visMu.Lock()
	if w.visCh != nil {
		close(w.visCh)
		w.visCh = nil
	}
	w.visMu.Unlock()
}

// entry is one oplog entry before its OpTime is known.
type entry struct {
	op          string
	ns          string
	ui          *catalog.UUID
	o, o2       bsoncore.Document
	fromMigrate bool
	// replSet marks the replication coordinator's own no-ops (replSetInitiate's, a
	// primary-elect's "new primary", a reconfig's), the only entries a node that is not a
	// writable primary logs.
	replSet bool
	// extra holds encoded elements appended after prevOpTime (a migrated session entry's
	// preImageOpTime/postImageOpTime).
	extra []byte
}

// logEntries reserves one slot per entry and writes each entry at its slot's timestamp in
// ru's unit. On return ru's current timestamp is the last entry's.
func (w *Writer) logEntries(ru *storage.RecoveryUnit, es []entry) ([]optime.OpTime, error) {
	slots, _, err := w.logEntriesWall(ru, es)
	return slots, err
}

// logEntriesWall is logEntries that also returns the entries' wall clock (milliseconds).
// Inside a transaction it collects the operations and returns no slots.
func (w *Writer) logEntriesWall(ru *storage.RecoveryUnit, es []entry) ([]optime.OpTime, int64, error) {
	if !ru.InUnitOfWork() {
		return nil, 0, storage.ErrNotInUnit
	}
	term, err := w.slotTerm(es)
	if err != nil {
		return nil, 0, err
	}
	if tc := opobserver.Transaction(ru); tc != nil {
		// Inside a multi-document transaction: the operations are logged together at
		// commit (LogTransaction), so the data writes carry the commit's timestamp.
		return nil, 0, collectTxnOps(tc, es)
	}
	var buf [1]optime.OpTime
	// Registered before the slots: a rollback releases every slot already reserved, which
	// can make later entries of other writers visible.
	ru.OnRollback(w.NotifyVisible)
	slots, err := w.info.ReserveSlots(ru, term, len(es), buf[:0])
	if err != nil {
		return nil, 0, err
	}
	sess := opobserver.Session(ru)
	wall := w.cfg.Now().UnixMilli()
	var doc []byte
	for i := range es {
		if len(es) > 1 {
			// Re-select slot i (already in flight) for this entry's writes.
			if err := ru.SetTimestamp(slots[i].TS); err != nil {
				return nil, 0, err
			}
		}
		doc = appendEntry(doc[:0], &es[i], slots[i], wall, sess)
		if err := w.put(ru, slots[i].TS, doc); err != nil {
			return nil, 0, err
		}
		if sess != nil {
			sess.PrevTS, sess.PrevTerm = slots[i].TS, slots[i].Term
			sess.StmtID++
		}
	}
	last := slots[len(slots)-1]
	ru.OnCommit(func(optime.Timestamp) {
		w.noteCommitted(last)
		w.noteOwnCommitted(last)
		w.NotifyVisible()
	})
	return slots, wall, nil
}

// Writable reports whether this node may log entries of its own now (true for a writer
// without a coordinator).
func (w *Writer) Writable() bool {
	if w.cfg.Term == nil {
		return true
	}
	_, ok := w.cfg.Term()
	return ok
}

// slotTerm is the term of es's slots. It refuses entries a node that is not a writable
// primary must not log (MongoDB's _logOpsInner: "logOp() but can't accept write to
// collection"); the coordinator's own no-ops are exempt.
func (w *Writer) slotTerm(es []entry) (int64, error) {
	if len(es) == 0 {
		return 0, nil
	}
	return w.ownTerm(es[0].ns, es[0].replSet)
}

// ownTerm is the term for an entry about ns logged by this node itself, read together with
// its writability (TermSource says why). exempt skips the writability check.
func (w *Writer) ownTerm(ns string, exempt bool) (int64, error) {
	if w.cfg.Term == nil {
		return optime.UninitializedTerm, nil
	}
	term, ok := w.cfg.Term()
	if !ok && !exempt {
		return 0, mongoerr.Newf(mongoerr.NotWritablePrimary, "logOp() but can't accept write to collection %s", ns)
	}
	return term, nil
}

func (w *Writer) put(ru *storage.RecoveryUnit, ts optime.Timestamp, doc []byte) error {
	if err := ru.Put(w.ident, recordid.Long(int64(ts)).Key(), doc); err != nil {
		return err
	}
	ru.AdjustCounts(w.ident, 1, int64(len(doc)))
	return nil
}

// appendOpFields appends what an operation is: op, ns, ui, o, o2 (an entry's, or an inner
// operation of a transaction's applyOps).
func appendOpFields(dst []byte, e *entry) []byte {
	dst = bsoncore.AppendStringElement(dst, "op", e.op)
	dst = bsoncore.AppendStringElement(dst, "ns", e.ns)
	if e.ui != nil {
		dst = bsoncore.AppendBinaryElement(dst, "ui", 4, e.ui[:])
	}
	dst = bsoncore.AppendDocumentElement(dst, "o", e.o)
	if e.o2 != nil {
		dst = bsoncore.AppendDocumentElement(dst, "o2", e.o2)
	}
	return dst
}

// appendEntry builds the entry document, in MongoDB's field order.
func appendEntry(dst []byte, e *entry, ot optime.OpTime, wall int64, sess *opobserver.SessionInfo) []byte {
	start, dst := bsoncore.AppendDocumentStart(dst)
	if sess != nil && len(sess.LSID) > 0 {
		dst = bsoncore.AppendDocumentElement(dst, "lsid", sess.LSID)
		dst = bsoncore.AppendInt64Element(dst, "txnNumber", sess.TxnNumber)
	}
	dst = appendOpFields(dst, e)
	if e.fromMigrate {
		dst = bsoncore.AppendBooleanElement(dst, "fromMigrate", true)
	}
	if sess != nil && len(sess.LSID) > 0 {
		dst = bsoncore.AppendInt32Element(dst, "stmtId", sess.StmtID)
	}
	dst = bsoncore.AppendTimestampElement(dst, "ts", ot.TS.Secs(), ot.TS.Inc())
	dst = bsoncore.AppendInt64Element(dst, "t", ot.Term)
	dst = bsoncore.AppendInt64Element(dst, "v", 2)
	dst = bsoncore.AppendDateTimeElement(dst, "wall", wall)
	if sess != nil && len(sess.LSID) > 0 {
		prev := optime.OpTime{TS: sess.PrevTS, Term: sess.PrevTerm}
		if prev.IsNull() {
			prev.Term = optime.UninitializedTerm
		}
		dst = prev.AppendElement(dst, "prevOpTime")
	}
	dst = append(dst, e.extra...)
	dst, _ = bsoncore.AppendDocumentEnd(dst, start)
	return dst
}

func logged(ru *storage.RecoveryUnit, ns string) bool {
	return opobserver.IsReplicatedNS(ns) && opobserver.WritesReplicated(ru)
}

// idDoc returns {_id: id}.
func idDoc(id bsoncore.Value) bsoncore.Document {
	start, d := bsoncore.AppendDocumentStart(make([]byte, 0, 16+len(id.Data)))
	d = bsoncore.AppendValueElement(d, "_id", id)
	d, _ = bsoncore.AppendDocumentEnd(d, start)
	return d
}

func cmdNS(ns string) string {
	db, _ := catalog.SplitNS(ns)
	return db + ".$cmd"
}

// OnInserts logs one `i` entry per document (o: the document).
func (w *Writer) OnInserts(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, docs []bsoncore.Document, fromMigrate bool) error {
	if !logged(ru, ns) || len(docs) == 0 {
		return nil
	}
	if ns == TransactionsNS {
		for _, d := range docs {
			if err := w.checkNotPrepared(d.Lookup("_id")); err != nil {
				return err
			}
		}
	}
	var one [1]entry
	es := one[:0]
	if len(docs) > 1 {
		es = make([]entry, 0, len(docs))
	}
	for _, d := range docs {
		es = append(es, entry{op: "i", ns: ns, ui: &uuid, o: d, o2: w.documentKey(ns, uuid, d), fromMigrate: fromMigrate})
	}
	_, err := w.logEntries(ru, es)
	return err
}

// OnUpdate logs a `u` entry: o is the $v:2 diff from the pre to the post image (or the
// whole post image when the diff would be larger: a replacement), o2 is {_id}.
func (w *Writer) OnUpdate(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, args *opobserver.OnUpdateArgs) error {
	if !logged(ru, ns) {
		return nil
	}
	if ns == TransactionsNS {
		if err := w.checkNotPrepared(args.ID); err != nil {
			return err
		}
	}
	o, err := updateO(args)
	if err != nil {
		return err
	}
	o2 := w.documentKey(ns, uuid, args.Post)
	if o2 == nil {
		o2 = idDoc(args.ID)
	}
	slots, wall, err := w.logEntriesWall(ru, []entry{{op: "u", ns: ns, ui: &uuid, o: o, o2: o2, fromMigrate: args.FromMigrate}})
	if err != nil || !args.PreImage || args.FromMigrate {
		return err
	}
	return w.recordPreImage(ru, uuid, slots, wall, args.Pre)
}

// recordPreImage records pre as the change stream pre-image of the entry just logged at
// slots[0] (preimages.go), or, inside a transaction, of the operation just collected.
func (w *Writer) recordPreImage(ru *storage.RecoveryUnit, uuid catalog.UUID, slots []optime.OpTime, wall int64, pre bsoncore.Document) error {
	if len(slots) == 0 {
		tc := opobserver.Transaction(ru)
		if tc == nil || len(tc.Ops) == 0 {
			return nil
		}
		// The transaction's unit may be reused after this statement: keep a copy.
		tc.PreImages = append(tc.PreImages, opobserver.TxnPreImage{Op: len(tc.Ops) - 1, UUID: uuid,
			Doc: append(bsoncore.Document(nil), pre...)})
		return nil
	}
	return writePreImage(ru, w.cfg.Colls, uuid, slots[0].TS, 0, wall, pre)
}

// updateO returns the o of args' entry: the post image of a replacement, the guided diff of
// an operator update, UpdateO's choice otherwise.
func updateO(args *opobserver.OnUpdateArgs) (bsoncore.Document, error) {
	if args.Replacement {
		return args.Post, nil
	}
	if args.Paths == nil {
		return UpdateO(args.Pre, args.Post)
	}
	diff, err := DiffUpdate(args.Pre, args.Post, args.Paths)
	if errors.Is(err, errDupField) {
		return args.Post, nil
	}
	if err != nil {
		return nil, err
	}
	return diffO(diff), nil
}

// diffO wraps an object diff as an update entry's o: {$v: 2, diff: diff}.
func diffO(diff bsoncore.Document) bsoncore.Document {
	start, o := bsoncore.AppendDocumentStart(make([]byte, 0, len(diff)+24))
	o = bsoncore.AppendInt32Element(o, "$v", 2)
	o = bsoncore.AppendDocumentElement(o, "diff", diff)
	o, _ = bsoncore.AppendDocumentEnd(o, start)
	return o
}

// UpdateO returns an update entry's o for the change pre → post: {$v: 2, diff: ...}, or
// post itself when the diff is larger than post (MongoDB's differ gives up at the post
// image's size and logs a replacement).
func UpdateO(pre, post bsoncore.Document) (bsoncore.Document, error) {
	diff, err := DiffDocuments(pre, post)
	if errors.Is(err, errDupField) || (err == nil && len(diff) > len(post)) {
		return post, nil
	}
	if err != nil {
		return nil, err
	}
	return diffO(diff), nil
}

// OnDelete logs a `d` entry with o: {_id}.
func (w *Writer) OnDelete(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, args *opobserver.OnDeleteArgs) error {
	if !logged(ru, ns) {
		return nil
	}
	if ns == TransactionsNS {
		if err := w.checkNotPrepared(args.ID); err != nil {
			return err
		}
	}
	o := w.documentKey(ns, uuid, args.Pre)
	if o == nil {
		o = idDoc(args.ID)
	}
	slots, wall, err := w.logEntriesWall(ru, []entry{{op: "d", ns: ns, ui: &uuid, o: o, fromMigrate: args.FromMigrate}})
	if err != nil || !args.PreImage || args.FromMigrate {
		return err
	}
	return w.recordPreImage(ru, uuid, slots, wall, args.Pre)
}

func (w *Writer) logCommand(ru *storage.RecoveryUnit, ns string, uuid *catalog.UUID, o, o2 bsoncore.Document) error {
	_, err := w.logEntries(ru, []entry{{op: "c", ns: cmdNS(ns), ui: uuid, o: o, o2: o2}})
	return err
}

// OnCreateCollection logs {create: coll, ...options, idIndex: spec}.
func (w *Writer) OnCreateCollection(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, options, idIndex bsoncore.Document) error {
	if !logged(ru, ns) {
		return nil
	}
	_, coll := catalog.SplitNS(ns)
	start, o := bsoncore.AppendDocumentStart(nil)
	o = bsoncore.AppendStringElement(o, "create", coll)
	if len(options) > 0 {
		els, err := options.Elements()
		if err != nil {
			return err
		}
		for _, e := range els {
			switch e.Key() {
			case "uuid", "create", "idIndex":
				continue
			}
			o = append(o, e...)
		}
	}
	if idIndex != nil {
		o = bsoncore.AppendDocumentElement(o, "idIndex", idIndex)
	}
	o, _ = bsoncore.AppendDocumentEnd(o, start)
	return w.logCommand(ru, ns, &uuid, o, nil)
}

// OnDropCollection logs {drop: coll}.
func (w *Writer) OnDropCollection(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID) error {
	if !logged(ru, ns) {
		return nil
	}
	_, coll := catalog.SplitNS(ns)
	_, err := w.logEntries(ru, []entry{{op: "c", ns: cmdNS(ns), ui: &uuid,
		o: bsoncore.NewDocumentBuilder().AppendString("drop", coll).Build(), fromMigrate: opobserver.FromMigrate(ru)}})
	return err
}

// OnRenameCollection logs {renameCollection: from, to: to, stayTemp, dropTarget: uuid}.
// A rename into or out of `local` is logged unless both sides are local.
func (w *Writer) OnRenameCollection(ru *storage.RecoveryUnit, a *opobserver.RenameArgs) error {
	if !opobserver.WritesReplicated(ru) || (!opobserver.IsReplicatedNS(a.From) && !opobserver.IsReplicatedNS(a.To)) {
		return nil
	}
	start, o := bsoncore.AppendDocumentStart(nil)
	o = bsoncore.AppendStringElement(o, "renameCollection", a.From)
	o = bsoncore.AppendStringElement(o, "to", a.To)
	o = bsoncore.AppendBooleanElement(o, "stayTemp", a.StayTemp)
	if a.HasDropTarget {
		o = bsoncore.AppendBinaryElement(o, "dropTarget", 4, a.DropTarget[:])
	}
	o, _ = bsoncore.AppendDocumentEnd(o, start)
	u := a.UUID
	return w.logCommand(ru, a.From, &u, o, nil)
}

// OnCreateIndexes logs {createIndexes: coll, ...spec} per index.
func (w *Writer) OnCreateIndexes(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, specs []bsoncore.Document) error {
	if !logged(ru, ns) || len(specs) == 0 {
		return nil
	}
	_, coll := catalog.SplitNS(ns)
	es := make([]entry, 0, len(specs))
	for _, s := range specs {
		start, o := bsoncore.AppendDocumentStart(nil)
		o = bsoncore.AppendStringElement(o, "createIndexes", coll)
		els, err := s.Elements()
		if err != nil {
			return err
		}
		for _, e := range els {
			if e.Key() == "ns" {
				continue
			}
			o = append(o, e...)
		}
		o, _ = bsoncore.AppendDocumentEnd(o, start)
		es = append(es, entry{op: "c", ns: cmdNS(ns), ui: &uuid, o: o})
	}
	_, err := w.logEntries(ru, es)
	return err
}

// OnDropIndex logs {dropIndexes: coll, index: name} with the dropped spec in o2.
func (w *Writer) OnDropIndex(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, name string, spec bsoncore.Document) error {
	if !logged(ru, ns) {
		return nil
	}
	_, coll := catalog.SplitNS(ns)
	o := bsoncore.NewDocumentBuilder().AppendString("dropIndexes", coll).AppendString("index", name).Build()
	return w.logCommand(ru, ns, &uuid, o, spec)
}

// OnCollMod logs the modification as given ({collMod: coll, ...}).
func (w *Writer) OnCollMod(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, cmd bsoncore.Document) error {
	if !logged(ru, ns) {
		return nil
	}
	return w.logCommand(ru, ns, &uuid, cmd, nil)
}

// OnDropDatabase logs {dropDatabase: 1}.
func (w *Writer) OnDropDatabase(ru *storage.RecoveryUnit, db string) error {
	if !logged(ru, db+".$cmd") {
		return nil
	}
	_, err := w.logEntries(ru, []entry{{op: "c", ns: db + ".$cmd",
		o: bsoncore.NewDocumentBuilder().AppendInt32("dropDatabase", 1).Build(), fromMigrate: opobserver.FromMigrate(ru)}})
	return err
}

// LogNoopInUnit writes an `n` entry {op: "n", ns: "", o: msg} in ru's open unit; only a
// writable primary may.
func (w *Writer) LogNoopInUnit(ru *storage.RecoveryUnit, msg bsoncore.Document) (optime.OpTime, error) {
	return w.logNoopInUnit(ru, msg, false)
}

func (w *Writer) logNoopInUnit(ru *storage.RecoveryUnit, msg bsoncore.Document, replSet bool) (optime.OpTime, error) {
	slots, err := w.logEntries(ru, []entry{{op: "n", ns: "", o: msg, replSet: replSet}})
	if err != nil {
		return optime.OpTime{}, err
	}
	return slots[0], nil
}

// LogEventNoop writes an `n` entry {ns, ui, o, o2} in ru's open unit: a sharding DDL
// operation's note for change streams (MongoDB's onInternalOpMessage, as shardCollection's
// {msg: {shardCollection: ns}} with its options in o2), which nothing applies.
func (w *Writer) LogEventNoop(ru *storage.RecoveryUnit, ns string, ui *catalog.UUID, o, o2 bsoncore.Document) (optime.OpTime, error) {
	slots, err := w.logEntries(ru, []entry{{op: "n", ns: ns, ui: ui, o: o, o2: o2}})
	if err != nil {
		return optime.OpTime{}, err
	}
	return slots[0], nil
}

// LogMigratedNoop writes a session migration's `n` entry {op: "n", ns, ui, o, o2,
// fromMigrate: true} in ru's open unit, with the session attached to ru (lsid, txnNumber,
// stmtId, prevOpTime) and extra, encoded elements appended last (MongoDB's
// preImageOpTime/postImageOpTime).
func (w *Writer) LogMigratedNoop(ru *storage.RecoveryUnit, ns string, ui *catalog.UUID, o, o2 bsoncore.Document, extra []byte) (optime.OpTime, error) {
	slots, err := w.logEntries(ru, []entry{{op: "n", ns: ns, ui: ui, o: o, o2: o2, fromMigrate: true, extra: extra}})
	if err != nil {
		return optime.OpTime{}, err
	}
	return slots[0], nil
}

// LogNoop writes and commits an `n` entry (the linearizable-read and read-concern no-ops),
// retrying on WriteConflict; only a writable primary may.
func (w *Writer) LogNoop(ctx context.Context, msg bsoncore.Document) (optime.OpTime, error) {
	return w.logNoop(ctx, msg, false)
}

// LogReplSetNoop is LogNoop for the replication coordinator's own no-ops (replSetInitiate's,
// the primary-elect's "new primary" while it drains, a reconfig's), which it writes before
// the node is a writable primary or without being one.
func (w *Writer) LogReplSetNoop(ctx context.Context, msg bsoncore.Document) (optime.OpTime, error) {
	return w.logNoop(ctx, msg, true)
}

func (w *Writer) logNoop(ctx context.Context, msg bsoncore.Document, replSet bool) (optime.OpTime, error) {
	ru := w.cfg.Engine.NewRecoveryUnit()
	defer ru.Close()
	var ot optime.OpTime
	err := storage.WriteConflictRetry(ctx, "noop", func() error {
		defer ru.AbandonSnapshot()
		wu := ru.BeginUnitOfWork()
		defer wu.End()
		var err error
		if ot, err = w.logNoopInUnit(ru, msg, replSet); err != nil {
			return err
		}
		return wu.Commit()
	})
	return ot, err
}

// AppendEntry writes an entry received from a sync source at its own timestamp (a
// secondary's oplog write, made before the entry is applied), in ru's open unit.
func (w *Writer) AppendEntry(ru *storage.RecoveryUnit, raw bsoncore.Document) (optime.OpTime, error) {
	ot, err := EntryOpTime(raw)
	if err != nil {
		return optime.OpTime{}, err
	}
	if err := ru.SetTimestamp(ot.TS); err != nil {
		return optime.OpTime{}, err
	}
	if err := w.put(ru, ot.TS, raw); err != nil {
		return optime.OpTime{}, err
	}
	w.info.Observe(ot.TS)
	ru.OnCommit(func(optime.Timestamp) { w.noteCommitted(ot) })
	return ot, nil
}
