package plan

import (
	"context"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/collation"
	"humongo/internal/index"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

var nilRID recordid.ID

// build assembles the stage tree: access (COLLSCAN | IDHACK | IXSCAN [+FETCH]) → SORT →
// SKIP → LIMIT → projection.
func (b *builder) build(env *execEnv) (stage, string) {
	p := b.p
	r := p.req
	var root stage
	ixName := ""
	filter := p.matcher
	if isEmptyDoc(p.filterDoc) {
		filter = nil
	}
	covered := false
	var keyNamesOut []string
	switch {
	case b.idhack:
		v, _ := idHackValue(p)
		root = &idHack{env: env, id: v}
	case len(b.or) > 0:
		or := &orStage{}
		for _, c := range b.or {
			s := newIxScan(env, c, nil, r.ForWrite)
			s.needVals = s.needVals || r.ReturnKey
			or.kids = append(or.kids, s)
		}
		root = &fetchStage{env: env, oneChild: oneChild{child: or}, filter: filter, rawFilt: rawIf(filter, p.filterDoc)}
	case b.cand != nil:
		c := b.cand
		ixName = c.ix.Name()
		covered = c.covered
		keyNamesOut = c.names
		s := newIxScan(env, c, b.minMax, r.ForWrite)
		if covered || r.ReturnKey {
			s.needVals = true
		}
		if covered {
			if filter != nil {
				s.keyFilter, s.rawFilt = filter, p.filterDoc
			}
			root = s
		} else {
			root = &fetchStage{env: env, oneChild: oneChild{child: s}, filter: filter, rawFilt: rawIf(filter, p.filterDoc)}
		}
	default:
		root = &collScan{env: env, reverse: b.reverse, filter: filter, rawFilt: rawIf(filter, p.filterDoc), tailable: r.Tailable}
	}
	if r.Ownership != nil {
		// Right above the access path, below SORT/SKIP/LIMIT, as MongoDB places it: orphans
		// must not count towards skip or limit. Every access path here yields whole documents
		// (isCovered refuses covered plans under an ownership filter).
		root = &shardFilterStage{oneChild: oneChild{child: root}, owner: r.Ownership}
	}
	if len(p.sort) > 0 && !(b.cand != nil && b.cand.providesSrt) && !b.idhack {
		fields := append([]sortField(nil), p.sort...)
		ord := keystring.Ordering(0)
		for i := range fields {
			if fields[i].desc {
				ord |= 1 << uint(i)
			}
			if covered {
				fields[i].keyPos = b.cand.keyPos[fields[i].path]
			}
		}
		var lim int64
		if r.Limit > 0 {
			lim = r.Limit + r.Skip
		}
		root = &sortStage{oneChild: oneChild{child: root}, pattern: r.Sort, fields: fields, ord: ord, limit: lim,
			memLimit: r.MaxBlockingSortBytes, allowDisk: r.AllowDiskUse, tempDir: r.TempDir,
			covered: covered, keyNames: keyNamesOut, coll: r.Collation}
	}
	if r.Skip > 0 {
		root = &skipStage{oneChild: oneChild{child: root}, n: r.Skip, left: r.Skip}
	}
	if r.Limit > 0 {
		root = &limitStage{oneChild: oneChild{child: root}, n: r.Limit}
	}
	switch {
	case r.ForWrite || r.CountOnly:
	case r.ReturnKey:
		// MongoDB's ReturnKeyStage clears the record id: showRecordId adds nothing then.
		root = &projStage{oneChild: oneChild{child: root}, kind: projReturnKey}
	case covered:
		ps := &projStage{oneChild: oneChild{child: root}, kind: projCovered, spec: r.Projection}
		if p.projID {
			ps.fields = append(ps.fields, "_id")
			ps.keyPos = append(ps.keyPos, b.cand.keyPos["_id"])
		}
		for _, f := range p.projFields {
			ps.fields = append(ps.fields, f)
			ps.keyPos = append(ps.keyPos, b.cand.keyPos[f])
		}
		root = ps
	case p.proj != nil:
		kind := projDefault
		if p.projSimple {
			kind = projSimple
		}
		root = &projStage{oneChild: oneChild{child: root}, kind: kind, proj: p.proj, spec: r.Projection, showRID: r.ShowRecordID}
	case r.ShowRecordID:
		root = &projStage{oneChild: oneChild{child: root}, kind: projDefault, showRID: true}
	}
	return root, ixName
}

// Collation is the collation the query ran under (the command's or the collection default;
// nil is simple), for callers that compare result values themselves (distinct).
func (ex *Executor) Collation() *collation.Collator { return ex.p.req.Collation }

// newIxScan builds the IXSCAN of candidate c (over minMax when set, else c's bounds).
func newIxScan(env *execEnv, c *candidate, minMax *scanRange, forWrite bool) *ixScan {
	im := c.ix.Meta()
	s := &ixScan{env: env, ix: c.ix, meta: im, names: c.names, bounds: c.bounds, desc: c.desc,
		reverse: c.reverse, dedup: im.Multikey || forWrite}
	if minMax != nil {
		s.ranges = []scanRange{*minMax}
		s.minMax = true
		return s
	}
	var k int
	s.ranges, k = c.ranges()
	// Fields after the range-defining ones are checked per key.
	s.check = make([]bool, len(c.names))
	for i := range c.names {
		if i > k && !c.bounds[i].isFull() {
			s.check[i] = true
			s.needVals = true
		}
	}
	return s
}

// scannedIndexes lists the indexes a plan's IXSCANs read.
func scannedIndexes(root stage) []string {
	var out []string
	walk(root, func(s stage) {
		if x, ok := s.(*ixScan); ok {
			out = append(out, x.meta.Name)
		}
	})
	return out
}

func isEmptyDoc(d bsoncore.Document) bool { return len(d) <= 5 }

func rawIf(m interface{}, d bsoncore.Document) bsoncore.Document {
	if m == nil || isEmptyDoc(d) {
		return nil
	}
	return d
}

// Executor runs a plan. Not safe for concurrent use.
type Executor struct {
	p           *prepared
	env         *execEnv
	meta        *catalog.CollectionMeta
	ns          string
	root        stage
	rejected    []stage
	trialWinner stage
	ixName      string
	nReturned   int64
	elapsed     time.Duration
	sinceYield  int
	done        bool
	// accessed: the indexes of the plan have been counted for $indexStats (once per
	// execution, at the first Next, so explain's queryPlanner mode counts nothing).
	accessed bool
	// onClose runs at Close (OnClose).
	onClose []func()
}

// OnClose makes Close call f (at every Close: f must be idempotent): the read seam releases
// there what the plan kept alive, such as the metadata of its ownership filter.
func (ex *Executor) OnClose(f func()) { ex.onClose = append(ex.onClose, f) }

// Next returns the next result. doc is valid until the next call.
func (ex *Executor) Next(ctx context.Context) (recordid.ID, bsoncore.Document, bool, error) {
	if ex.done {
		return recordid.ID{}, nil, false, nil
	}
	start := time.Now()
	defer func() { ex.elapsed += time.Since(start) }()
	if !ex.accessed {
		ex.accessed = true
		ex.recordIndexAccesses()
	}
	yieldEvery := ex.p.req.YieldEvery
	if yieldEvery == 0 {
		yieldEvery = 1000
	}
	for n := 0; ; n++ {
		// Each work is bounded (one key or document, and a long match checks on its own),
		// so checking every few works stops an operation promptly.
		if n%8 == 0 && ctx.Err() != nil {
			return recordid.ID{}, nil, false, context.Cause(ctx)
		}
		m, st, err := ex.root.work(ctx)
		if err != nil {
			if storage.IsPrepareConflict(err) {
				if err = waitPrepared(ctx, ex.env, ex.root, ex.p.req.InTransaction, err); err == nil {
					continue
				}
			}
			return recordid.ID{}, nil, false, err
		}
		switch st {
		case advanced:
			ex.nReturned++
			return m.rid, m.doc, true, nil
		case isEOF:
			if !ex.p.req.Tailable {
				ex.done = true
			}
			return recordid.ID{}, nil, false, nil
		}
		ex.sinceYield++
		if yieldEvery > 0 && ex.sinceYield >= yieldEvery && !ex.env.ru.InUnitOfWork() {
			// Yield: release the snapshot so long scans do not pin old versions (locks stay
			// held; MongoDB also yields them).
			ex.sinceYield = 0
			countYield(ctx)
			ex.root.save()
			ex.env.ru.AbandonSnapshot()
			if err := ex.root.restore(ex.env); err != nil {
				return recordid.ID{}, nil, false, err
			}
		}
	}
}

// waitPrepared waits out a prepare conflict (spec: replication.md "Prepare Conflicts") that a
// work of root met (in a query, or in a candidate's trial run), then lets the plan continue
// in a new view from where it stood: the stages redo the step that failed (the storage
// cursors their failed move, FETCH its pending record, IDHACK its lookup). A Pebble view
// never gains a commit made after it opened, so the new view is needed. Outside a unit of
// work that is the yield's save / AbandonSnapshot / restore around the wait, with no view
// pinned while waiting. Inside one (a transaction's statement)
// the unit's view is refreshed at the same timestamp when the unit allows it
// (RecoveryUnit.RefreshSnapshot: it reads at a timestamp, its writes are isolated);
// otherwise the conflict is returned at once for the caller's retry loop (a write rolls its
// unit back and waits), except in a transaction's unit (inTxn), which nothing can roll back
// and retry: it waits for the prepared transaction to resolve, then fails with WriteConflict
// for the client to retry the transaction. The waits end with ctx (maxTimeMS, killOp,
// disconnect): the plan is then left saved and must be closed.
func waitPrepared(ctx context.Context, env *execEnv, root stage, inTxn bool, conflict error) error {
	ru := env.ru
	inUnit := ru.InUnitOfWork()
	if inUnit && !ru.CanRefreshSnapshot() {
		if !inTxn {
			return conflict
		}
		if err := storage.WaitPrepareConflict(ctx, conflict); err != nil {
			return err
		}
		return mongoerr.NewWriteConflict()
	}
	for {
		root.save()
		ru.AbandonSnapshot() // a no-op inside a unit of work
		if err := storage.WaitPrepareConflict(ctx, conflict); err != nil {
			return err
		}
		if inUnit {
			if err := ru.RefreshSnapshot(); err != nil {
				// Something else of the unit still reads the old view (an unsaved cursor):
				// the statement cannot continue here.
				if inTxn {
					return mongoerr.NewWriteConflict()
				}
				return conflict
			}
		}
		err := root.restore(env)
		if err == nil || !storage.IsPrepareConflict(err) {
			return err
		}
		conflict = err // a stage's restore met another prepared key (none defers it)
	}
}

// recordIndexAccesses counts one use of each index the plan reads ($indexStats accesses).
func (ex *Executor) recordIndexAccesses() {
	var seen []*index.Index
	walk(ex.root, func(s stage) {
		var ix *index.Index
		switch x := s.(type) {
		case *ixScan:
			ix = x.ix
		case *idHack:
			if x.env != nil && x.env.coll != nil {
				ix, _ = x.env.coll.IDIndex()
			}
		}
		if ix != nil && !slices.Contains(seen, ix) {
			seen = append(seen, ix)
			ix.RecordAccess()
		}
	})
}

// IsEOF reports whether Next returned the end (tailable executors never end).
func (ex *Executor) IsEOF() bool { return ex.done }

// IndexName is the index the winning plan scans ("" for collection scans).
func (ex *Executor) IndexName() string { return ex.ixName }

// Save prepares for the RecoveryUnit abandoning its snapshot (end of a batch).
func (ex *Executor) Save() { ex.root.save() }

// Restore resumes after Save, in the RecoveryUnit's new snapshot. meta is the collection's
// current metadata (nil if it was dropped): the executor fails with QueryPlanKilled when the
// collection was dropped or the index it scans went away.
func (ex *Executor) Restore(meta *catalog.CollectionMeta) error {
	if ex.meta != nil {
		if meta == nil || meta.UUID != ex.meta.UUID {
			return mongoerr.New(mongoerr.QueryPlanKilled, "collection dropped")
		}
		for _, name := range scannedIndexes(ex.root) {
			im, ok := meta.Index(name)
			old, _ := ex.meta.Index(name)
			if !ok || old == nil || im.Ident != old.Ident {
				return mongoerr.Newf(mongoerr.QueryPlanKilled, "index '%s' dropped", name)
			}
		}
	}
	return ex.root.restore(ex.env)
}

// Stats returns the running totals.
func (ex *Executor) Stats() Stats {
	return Stats{NReturned: ex.nReturned, KeysExamined: ex.env.keys, DocsExamined: ex.env.docs}
}

// Close releases the plan.
func (ex *Executor) Close() {
	ex.root.close()
	for _, f := range ex.onClose {
		f()
	}
}

// Explain renders the plan (queryPlanner) and, for the other verbosities, the execution
// statistics of the work done so far (run the executor to its end first).
func (ex *Executor) Explain(v Verbosity) (queryPlanner, executionStats bsoncore.Document) {
	r := ex.p.req
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = bsoncore.AppendStringElement(b, "namespace", ex.ns)
	b = bsoncore.AppendBooleanElement(b, "indexFilterSet", false)
	b = bsoncore.AppendDocumentElement(b, "parsedQuery", ex.p.filterDoc)
	b = bsoncore.AppendBooleanElement(b, "maxIndexedOrSolutionsReached", false)
	b = bsoncore.AppendBooleanElement(b, "maxIndexedAndSolutionsReached", false)
	b = bsoncore.AppendBooleanElement(b, "maxScansToExplodeReached", false)
	b = bsoncore.AppendDocumentElement(b, "winningPlan", wrapWrite(r, renderPlan(ex.root, false)))
	ai, b := bsoncore.AppendArrayElementStart(b, "rejectedPlans")
	for i, s := range ex.rejected {
		b = bsoncore.AppendDocumentElement(b, itoa(i), wrapWrite(r, renderPlan(s, false)))
	}
	b, _ = bsoncore.AppendArrayEnd(b, ai)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	queryPlanner = b
	if v == QueryPlanner {
		return queryPlanner, nil
	}
	idx, b = bsoncore.AppendDocumentStart(nil)
	b = bsoncore.AppendBooleanElement(b, "executionSuccess", true)
	b = bsoncore.AppendInt32Element(b, "nReturned", int32(ex.nReturned))
	b = bsoncore.AppendInt32Element(b, "executionTimeMillis", int32(ex.elapsed.Milliseconds()))
	b = bsoncore.AppendInt32Element(b, "totalKeysExamined", int32(ex.env.keys))
	b = bsoncore.AppendInt32Element(b, "totalDocsExamined", int32(ex.env.docs))
	b = bsoncore.AppendDocumentElement(b, "executionStages", wrapWrite(r, renderPlan(ex.root, true)))
	if v == AllPlansExecution {
		ai, b = bsoncore.AppendArrayElementStart(b, "allPlansExecution")
		all := append([]stage(nil), ex.rejected...)
		if ex.trialWinner != nil {
			all = append([]stage{ex.trialWinner}, all...)
		}
		for i, s := range all {
			b = bsoncore.AppendDocumentElement(b, itoa(i), planSummary(s))
		}
		b, _ = bsoncore.AppendArrayEnd(b, ai)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return queryPlanner, b
}

// wrapWrite puts an UPDATE/DELETE/COUNT stage over the plan for write and count explains.
func wrapWrite(r Request, plan bsoncore.Document) bsoncore.Document {
	name := r.WriteStage
	if name == "" && r.CountOnly {
		name = "COUNT"
	}
	if name == "" {
		return plan
	}
	return bsoncore.NewDocumentBuilder().AppendString("stage", name).
		AppendDocument("inputStage", plan).Build()
}

func planSummary(s stage) bsoncore.Document {
	var nRet, keys, docs int64
	walk(s, func(st stage) {
		switch x := st.(type) {
		case *ixScan:
			keys += x.keys
		case *collScan:
			docs += x.docs
		case *fetchStage:
			docs += x.docs
		case *idHack:
			keys += x.keys
			docs += x.docs
		}
	})
	nRet = s.common().advanced
	return bsoncore.NewDocumentBuilder().
		AppendInt32("nReturned", int32(nRet)).
		AppendInt32("executionTimeMillisEstimate", 0).
		AppendInt32("totalKeysExamined", int32(keys)).
		AppendInt32("totalDocsExamined", int32(docs)).
		AppendDocument("executionStages", renderPlan(s, true)).Build()
}

func walk(s stage, f func(stage)) {
	f(s)
	for _, c := range s.children() {
		walk(c, f)
	}
}

// renderPlan renders a stage tree; with stats, the execution counters too.
func renderPlan(s stage, stats bool) bsoncore.Document {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = s.describe(b)
	if stats {
		cs := s.common()
		b = bsoncore.AppendInt32Element(b, "nReturned", int32(cs.advanced))
		b = bsoncore.AppendInt32Element(b, "executionTimeMillisEstimate", int32(cs.elapsed.Milliseconds()))
		b = bsoncore.AppendInt32Element(b, "works", int32(cs.works))
		b = bsoncore.AppendInt32Element(b, "advanced", int32(cs.advanced))
		b = bsoncore.AppendInt32Element(b, "needTime", int32(cs.needTime))
		b = bsoncore.AppendInt32Element(b, "needYield", 0)
		b = bsoncore.AppendInt32Element(b, "saveState", int32(cs.saveState))
		b = bsoncore.AppendInt32Element(b, "restoreState", int32(cs.restoreState))
		b = bsoncore.AppendBooleanElement(b, "isEOF", cs.eof)
		b = s.stats(b)
	}
	if ch := s.children(); len(ch) == 1 {
		b = bsoncore.AppendDocumentElement(b, "inputStage", renderPlan(ch[0], stats))
	} else if len(ch) > 1 {
		ai, bb := bsoncore.AppendArrayElementStart(b, "inputStages")
		for i, c := range ch {
			bb = bsoncore.AppendDocumentElement(bb, itoa(i), renderPlan(c, stats))
		}
		b, _ = bsoncore.AppendArrayEnd(bb, ai)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}
