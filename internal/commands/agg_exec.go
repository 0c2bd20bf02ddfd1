package commands

// Aggregation plumbing between internal/agg and storage (issue 6): the planner-backed input
// of a pipeline, the cursor Source that runs a pipeline across getMores, and the
// CollectionResolver/Writer that $lookup, $unionWith, $graphLookup, $out and $merge use.
//
// Cursor model (the brief's "simplest correct approach"): the pipeline runs lazily in the
// goroutine of whichever command pulls it (aggregate for the first batch, then each getMore).
// Only the leaf (aggInput, a plan.Executor over the cursor's own RecoveryUnit) touches
// storage; it holds the collection's IS lock and snapshot only while a batch is being filled
// and gives both up in SaveState, like find's cursors. Because agg's contract lets stages keep
// the documents they received, the leaf copies each document out of the snapshot. The leaf
// also gives up its lock as soon as the plan reaches EOF, so a blocking $out that replaces the
// collection it reads from does not wait on its own reader.
//
// Foreign collections ($lookup & co.) are read through aggResolver.Open and Query, which
// stream them in bounded chunks, each under its own short-lived lock and snapshot
// (agg_foreign.go), so no foreign lock or snapshot is held across getMores.

import (
	"bytes"
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/catalog"
	"humongo/internal/collation"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/opobserver"
	"humongo/internal/query/plan"
	"humongo/internal/service"
	"humongo/internal/storage"
	"humongo/internal/wire"
)

// aggInput is the pipeline's leaf: a query plan over the source collection (with the
// pushed-down $match/$sort/$limit). It is an agg.Source.
type aggInput struct {
	db        *operation.DB
	ns        string
	ru        *storage.RecoveryUnit // the cursor's own (a transaction's inside one); outlives each command
	ruRelease func()
	ex        *plan.Executor
	op        *operation.Context // holds the collection lock while locked; nil otherwise
	rel       func()
	eof       bool
	// rs is the read concern's read source and st the server: each later batch (getMore)
	// re-resolves the timestamp before the new snapshot opens, as find cursors do: a
	// secondary's current lastApplied, the current committed snapshot for majority.
	rs operation.ReadSource
	st *service.State
	// slab is where documents are copied out of the snapshot: one allocation per
	// aggSlabSize bytes instead of one per document. A document kept by a stage pins its
	// slab, which bounds the waste to aggSlabSize per kept document.
	slab []byte
}

// aggSlabSize is the size of aggInput's copy slabs.
const aggSlabSize = 64 << 10

// aggOpenInput locks ns, plans req over it and returns the locked leaf.
func aggOpenInput(ctx context.Context, st *service.State, ns string, req plan.Request) (*aggInput, error) {
	db := st.DB
	in := &aggInput{db: db, ns: ns, st: st}
	op := db.NewOp(ctx)
	rd, release, err := op.OpenRead(ctx, ns, operation.ReadOwned) // the read seam (operation/read.go)
	if err != nil {
		op.Close()
		return nil, err
	}
	// After OpenRead: a majority read point may have moved past the collection's last
	// catalog change there.
	in.rs = findReadSource(ctx, ns)
	in.op, in.rel = op, release
	in.ru, in.ruRelease = db.CursorUnit(ctx)
	if err := applyReadSource(in.rs, in.ru); err != nil { // readConcern (repl/concern)
		in.unlockNoSave()
		in.ruRelease()
		return nil, err
	}
	in.ex, err = rd.Plan(ctx, in.ru, req)
	if err != nil {
		in.unlockNoSave()
		in.ruRelease()
		return nil, err
	}
	return in, nil
}

func (in *aggInput) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	if in.eof {
		return nil, false, nil
	}
	if in.op == nil {
		// A Next outside a batch (cannot happen through aggCursor) must not read unlocked.
		return nil, false, mongoerr.New(mongoerr.InternalError, "aggregation input read without its collection lock")
	}
	_, d, ok, err := in.ex.Next(ctx)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		in.eof = true
		in.unlock()
		return nil, false, nil
	}
	return in.own(d), true, nil
}

// own copies d into the current slab.
func (in *aggInput) own(d bsoncore.Document) bsoncore.Document {
	if cap(in.slab)-len(in.slab) < len(d) {
		if len(d) > aggSlabSize/4 {
			return bytes.Clone(d)
		}
		in.slab = make([]byte, 0, aggSlabSize)
	}
	start := len(in.slab)
	in.slab = append(in.slab, d...)
	return in.slab[start:len(in.slab):len(in.slab)]
}

// lock re-acquires the collection lock and restores the plan (start of a getMore).
func (in *aggInput) lock(ctx context.Context) error {
	if in.eof || in.op != nil {
		return nil
	}
	op := in.db.NewOp(ctx)
	meta, _, release, err := op.ReadCollection(ctx, in.ns)
	if err != nil {
		op.Close()
		return err
	}
	in.op, in.rel = op, release
	// aggOpenInput took the first snapshot; this is a later one (a getMore's, or after a
	// yield), at the read source's current timestamp.
	if err := rcReapply(in.st, &in.rs, in.ru); err != nil {
		in.unlockNoSave()
		return err
	}
	if err := in.ex.Restore(meta); err != nil {
		in.unlockNoSave()
		return err
	}
	return nil
}

// unlock saves the plan, abandons the snapshot and drops the lock (end of a batch).
func (in *aggInput) unlock() {
	if in.op == nil {
		return
	}
	in.ex.Save()
	in.unlockNoSave()
}

func (in *aggInput) unlockNoSave() {
	in.ru.AbandonSnapshot()
	in.rel()
	in.op.Close()
	in.op, in.rel = nil, nil
}

func (in *aggInput) Close() {
	if in.ex == nil {
		return
	}
	in.unlock()
	in.ex.Close()
	in.ruRelease()
	in.ex = nil
}

// aggCursor adapts a running pipeline to cursor.Source.
type aggCursor struct {
	out  agg.Source
	in   *aggInput           // nil for pipelines not reading a collection
	coll *collation.Collator // the operation's collation (distinct on a view dedupes under it)
}

// collation is the collation the pipeline runs under (nil: simple).
func (c *aggCursor) collation() *collation.Collator { return c.coll }

func (c *aggCursor) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	doc, ok, err := c.out.Next(ctx)
	if err == nil && ok && len(doc) > wire.MaxBSONInternalSize {
		return nil, false, aggResultTooLarge(doc)
	}
	return doc, ok, err
}

// aggResultTooLarge is the error for a pipeline result larger than any BSON object may be.
// Stages may build larger documents along the way; a result is serialised into a BSONObj,
// whose constructor refuses more than BSONObjMaxInternalSize (16 MiB + 16 KiB, so results
// just over 16 MiB are still returned, as MongoDB's bson_size_limit.js checks) with
// BSONObj::_assertInvalid's message.
func aggResultTooLarge(doc bsoncore.Document) error {
	n := len(doc)
	return mongoerr.Newf(mongoerr.BSONObjectTooLarge,
		"BSONObj size: %d (0x%X) is invalid. Size must be between 0 and %d(%dMB) First element: %s",
		n, n, wire.MaxBSONInternalSize, wire.MaxBSONInternalSize>>20, firstElementString(doc))
}

// firstElementString prints doc's first element as BSONElement::toString does for error
// messages ("name: value"; a string of 160 bytes or more is cut to 150 and '..."').
func firstElementString(doc bsoncore.Document) string {
	e, err := doc.IndexErr(0)
	if err != nil {
		return "EOO"
	}
	if str, ok := e.Value().StringValueOK(); ok && len(str)+1 > 160 {
		return e.Key() + `: "` + str[:150] + `..."`
	}
	one := bsoncore.NewDocumentBuilder().AppendValue(e.Key(), e.Value()).Build()
	s := strings.TrimSuffix(strings.TrimPrefix(index.FormatDoc(one), "{ "), " }")
	if len(s) > 1024 { // an error message need not carry a whole large value
		s = s[:1024] + "..."
	}
	return s
}

func (c *aggCursor) SaveState() {
	if c.in != nil {
		c.in.unlock()
	}
}

func (c *aggCursor) RestoreState(ctx context.Context) error {
	if c.in != nil {
		return c.in.lock(ctx)
	}
	return nil
}

func (c *aggCursor) Close() {
	c.out.Close()
	if c.in != nil {
		c.in.Close() // idempotent; out normally closed it already
	}
}

// aggScan reads every document of ns matching filter (nil: all) into memory under a
// short-lived lock and snapshot. A missing collection reads as empty.
func aggScan(ctx context.Context, db *operation.DB, ns string, filter bsoncore.Document) ([]bsoncore.Document, error) {
	op := db.NewOp(ctx)
	defer op.Close()
	return aggScanOp(ctx, op, ns, filter)
}

// aggScanOp is aggScan under op's Locker (its RecoveryUnit's snapshot is abandoned after).
func aggScanOp(ctx context.Context, op *operation.Context, ns string, filter bsoncore.Document) ([]bsoncore.Document, error) {
	rd, release, err := op.OpenRead(ctx, ns, operation.ReadOwned) // the read seam (operation/read.go)
	if err != nil {
		return nil, err
	}
	defer release()
	if rd.Meta() == nil {
		return nil, nil
	}
	ex, err := rd.Plan(ctx, op.RU, plan.Request{NS: ns, Filter: filter})
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	var out []bsoncore.Document
	for {
		_, d, ok, err := ex.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, bytes.Clone(d))
	}
}

// aggResolver is the agg.CollectionResolver of one aggregate command.
//
// Every lock it takes while the pipeline's input holds its collection lock is taken by the
// input's own Locker (op). A second Locker in the same goroutine could deadlock: its request
// would queue behind a waiting X request (FIFO) that itself waits for the first Locker's IS.
// Requests of the Locker that already holds the resource are recursive acquisitions or
// conversions, which the lock manager grants ahead of its queue.
type aggResolver struct {
	env *service.Env
	in  *aggInput // the pipeline's input, nil when it reads no collection
	// bypassValidation is the command's bypassDocumentValidation.
	bypassValidation bool
	// writeConcern is the command's writeConcern, forwarded with the writes a secondary
	// sends to the primary (agg_remote.go); nil when the command has none.
	writeConcern bsoncore.Document
	// coll is the operation's collation: a foreign view's pipeline runs under it.
	coll *collation.Collator
	// views caches each foreign namespace's view resolution for the command: $lookup asks
	// once per input document, and resolving reads system.views through an operation of
	// its own (a second Locker in this goroutine), which should happen once per run.
	views map[string]resolvedView
}

// resolvedView is viewResolve's answer for one namespace.
type resolvedView struct {
	backing string
	pipe    []bsoncore.Document
	isView  bool
}

// resolveView is viewResolve, once per namespace and command.
func (r *aggResolver) resolveView(ctx context.Context, ns string) (string, []bsoncore.Document, bool, error) {
	if v, ok := r.views[ns]; ok {
		return v.backing, v.pipe, v.isView, nil
	}
	backing, pipe, isView, err := viewResolve(ctx, r.env, ns)
	if err != nil {
		return "", nil, false, err
	}
	if r.views == nil {
		r.views = map[string]resolvedView{}
	}
	r.views[ns] = resolvedView{backing, pipe, isView}
	return backing, pipe, isView, nil
}

// Open streams db.coll in bounded chunks (agg_foreign.go); a view is resolved and its
// pipeline run over its streamed backing collection.
func (r *aggResolver) Open(ctx context.Context, db, coll string) (agg.Source, error) {
	ns := db + "." + coll
	backing, pipe, isView, err := r.resolveView(ctx, ns)
	if err != nil {
		return nil, err
	}
	src := r.newForeignReader(ctx, backing, nil)
	if !isView || len(pipe) == 0 {
		return src, nil
	}
	pl, err := agg.Parse(pipe, agg.ParseContext{DB: db, Collator: r.coll})
	if err != nil {
		src.Close()
		return nil, err
	}
	return pl.Run(ctx, src, r.subContext())
}

// op returns the operation context for one storage access: the input's while it holds its lock, else a
// fresh one; done releases what op created.
func (r *aggResolver) op(ctx context.Context) (op *operation.Context, done func()) {
	if r.in != nil && r.in.op != nil {
		return r.in.op, func() {}
	}
	op = r.env.State.DB.NewOp(ctx)
	return op, op.Close
}

// OpenWriter opens the target of $out (replace) or $merge.
func (r *aggResolver) OpenWriter(ctx context.Context, db, coll string, replace bool) (agg.Writer, error) {
	ns := db + "." + coll
	if err := aggCheckOutputNS(ctx, r.env, ns); err != nil {
		return nil, err
	}
	// On a member that is not primary the writes go to the primary (agg_remote.go); the
	// local database is this node's own.
	if rw, err := r.aggPrimaryWriter(ctx, db, coll, replace); err != nil || rw != nil {
		if err != nil {
			return nil, err
		}
		return rw, nil
	}
	w := &aggWriter{db: r.env.State.DB, env: r.env, r: r, target: ns, writeNS: ns, replace: replace, bypass: r.bypassValidation}
	if replace {
		// $out writes a temporary collection and renames it over the target at Commit, so
		// readers see the old or the new contents, never a mix (MongoDB's semantics).
		w.writeNS = db + ".tmp.agg_out." + bson.NewObjectID().Hex()
		op, done := r.op(ctx)
		defer done()
		var opts bsoncore.Document
		if m, ok := w.db.Catalog.Latest().ByNS(ns); ok {
			// The new collection keeps the old one's options (validator, collation...).
			opts = operation.UserOptions(m)
			w.indexes = ddlIndexSpecs(m)
		}
		if err := op.EnsureCollection(ctx, w.writeNS, opts); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// aggCheckOutputNS rejects $out/$merge targets MongoDB refuses, before anything is written.
func aggCheckOutputNS(ctx context.Context, env *service.Env, ns string) error {
	if err := catalog.ValidateNS(ns); err != nil {
		return err
	}
	_, coll, _ := strings.Cut(ns, ".")
	if strings.HasPrefix(coll, "system.") {
		return mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid target namespace, %s", ns)
	}
	if _, _, isView, err := viewLookup(ctx, env, ns); err != nil {
		return err
	} else if isView {
		return mongoerr.Newf(mongoerr.CommandNotSupportedOnView, "Namespace %s is a view, not a collection", ns)
	}
	return nil
}

// aggWriteBatch bounds the documents buffered before one WriteUnitOfWork.
const aggWriteBatch = 500

// aggWriter writes $out/$merge output through the collection write path.
type aggWriter struct {
	db      *operation.DB
	env     *service.Env
	r       *aggResolver // hands out the operation context (see aggResolver)
	target  string
	writeNS string // target, or $out's temporary collection
	replace bool
	bypass  bool                // bypassDocumentValidation
	indexes []bsoncore.Document // $out: the target's index specs to rebuild on the temp
	buf     []bsoncore.Document
}

func (w *aggWriter) FindOne(ctx context.Context, filter bsoncore.Document) (bsoncore.Document, bool, error) {
	if err := w.flush(ctx); err != nil {
		return nil, false, err
	}
	op, done := w.r.op(ctx)
	docs, err := aggScanOp(ctx, op, w.writeNS, filter)
	done()
	if err != nil || len(docs) == 0 {
		return nil, false, err
	}
	if len(docs) > 1 {
		return nil, false, mongoerr.New(mongoerr.Location51125,
			"$merge: the 'on' field values match more than one document in the target collection")
	}
	return docs[0], true, nil
}

func (w *aggWriter) Insert(ctx context.Context, d bsoncore.Document) error {
	fixed, err := writeFixForInsert(w.db, d)
	if err != nil {
		return err
	}
	w.buf = append(w.buf, fixed)
	if len(w.buf) >= aggWriteBatch {
		return w.flush(ctx)
	}
	return nil
}

func (w *aggWriter) flush(ctx context.Context) error {
	if len(w.buf) == 0 {
		return nil
	}
	op, done := w.r.op(ctx)
	defer done()
	err := op.WriteCollection(ctx, w.writeNS, true, func(coll *index.Collection) error {
		for _, d := range w.buf {
			if err := validCheckDoc(op, coll, d, nil, w.bypass); err != nil {
				return err
			}
		}
		_, err := coll.InsertDocuments(op.RU, w.buf)
		return err
	})
	w.buf = w.buf[:0]
	return err
}

func (w *aggWriter) Replace(ctx context.Context, filter, d bsoncore.Document) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	op, done := w.r.op(ctx)
	defer done()
	return op.WriteCollection(ctx, w.writeNS, false, func(coll *index.Collection) error {
		if coll == nil {
			return nil
		}
		meta, _ := w.db.Catalog.Latest().ByNS(w.writeNS)
		rd, err := op.ReadLocked(w.writeNS, meta, coll, operation.ReadOwned) // the read seam (operation/read.go)
		if err != nil {
			return err
		}
		targets, ex, err := rd.Targets(ctx, op.RU, plan.Request{NS: w.writeNS, Filter: filter, Limit: 1})
		if err != nil {
			return err
		}
		ex.Close()
		if len(targets) == 0 {
			return nil
		}
		if err := validCheckDoc(op, coll, d, targets[0].Doc, w.bypass); err != nil {
			return err
		}
		return coll.UpdateDocument(op.RU, targets[0].RID, targets[0].Doc, d)
	})
}

func (w *aggWriter) Commit(ctx context.Context) error {
	if err := w.flush(ctx); err != nil {
		w.Abort(ctx)
		return err
	}
	if !w.replace {
		return nil
	}
	op, done := w.r.op(ctx)
	defer done()
	for _, spec := range w.indexes {
		if lookup(spec, "name").StringValue() == catalog.IDIndexName {
			continue
		}
		// Rebuilding the target's secondary indexes on the temporary collection keeps them
		// across $out, as MongoDB does.
		if _, err := aggRunCreateIndex(ctx, w.env, w.writeNS, spec); err != nil {
			w.Abort(ctx)
			return err
		}
	}
	err := op.DDL(ctx, w.target, func() error {
		snap := w.db.Catalog.Latest()
		tmp, ok := snap.ByNS(w.writeNS)
		if !ok {
			return mongoerr.Newf(mongoerr.NamespaceNotFound, "$out's temporary collection %s disappeared", w.writeNS)
		}
		tgt, exists := snap.ByNS(w.target)
		// Logged like renameCollection {dropTarget: true} (MongoDB's $out does exactly
		// that), so secondaries swap the collections at the same point in the oplog.
		ra := opobserver.RenameArgs{From: w.writeNS, To: w.target, UUID: tmp.UUID}
		if exists {
			ra.DropTarget, ra.HasDropTarget = tgt.UUID, true
		}
		if err := w.db.Observer().OnRenameCollection(op.RU, &ra); err != nil {
			return err
		}
		if err := w.db.Catalog.RenameCollection(op.RU, w.writeNS, w.target, true); err != nil {
			return err
		}
		if exists {
			ddlForgetOnCommit(op, tgt.UUID)
		}
		return nil
	})
	if err != nil {
		w.Abort(ctx)
		return err
	}
	ddlKillCursors(w.env, w.target)
	return nil
}

func (w *aggWriter) Abort(ctx context.Context) {
	w.buf = nil
	if !w.replace {
		return
	}
	op, done := w.r.op(ctx)
	defer done()
	_ = op.DDL(context.WithoutCancel(ctx), w.writeNS, func() error {
		m, ok := w.db.Catalog.Latest().ByNS(w.writeNS)
		if !ok {
			return nil
		}
		// The temporary collection's create was replicated, so its drop is too.
		if err := w.db.Observer().OnDropCollection(op.RU, w.writeNS, m.UUID); err != nil {
			return err
		}
		if err := w.db.Catalog.DropCollection(op.RU, w.writeNS); err != nil {
			return err
		}
		ddlForgetOnCommit(op, m.UUID)
		return nil
	})
}

// aggRunCreateIndex builds one index on ns by running createIndexes, so $out's rebuilt
// indexes go through the same build path as a client's.
func aggRunCreateIndex(ctx context.Context, env *service.Env, ns string, spec bsoncore.Document) (bsoncore.Document, error) {
	db, coll, _ := strings.Cut(ns, ".")
	spec = ddlWithout(spec, "ns")
	cmd := bsoncore.NewDocumentBuilder().
		AppendString("createIndexes", coll).
		AppendArray("indexes", bsoncore.NewArrayBuilder().AppendDocument(spec).Build()).
		AppendString("$db", db).Build()
	c := env.Registry.Lookup("createIndexes")
	if c == nil {
		return nil, mongoerr.New(mongoerr.InternalError, "createIndexes is not registered")
	}
	sub := *env
	sub.DB = db
	return c.Handler(ctx, &sub, cmd)
}
