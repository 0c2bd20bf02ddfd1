package oplog

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/storage"
)

// Entry is a parsed oplog entry; its documents alias the raw entry.
type Entry struct {
	OpTime optime.OpTime
	Op     string
	NS     string
	UI     catalog.UUID
	HasUI  bool
	O, O2  bsoncore.Document
	Raw    bsoncore.Document
	// ApplyOpsIndex and ApplyOpsTS place an operation of an applyOps entry (its index in the
	// entry's array, the entry's timestamp; 0 and OpTime.TS for other entries), and Wall is
	// the entry's wall clock in milliseconds (0: read it from Raw): where a change stream
	// pre-image of the operation is recorded (preimages.go).
	ApplyOpsIndex int64
	ApplyOpsTS    optime.Timestamp
	Wall          int64
}

// EntryOpTime reads an entry's ts and t.
func EntryOpTime(raw bsoncore.Document) (optime.OpTime, error) {
	v, err := raw.LookupErr("ts")
	if err != nil {
		return optime.OpTime{}, mongoerr.New(mongoerr.BadValue, "oplog entry has no ts")
	}
	s, i, ok := v.TimestampOK()
	if !ok || (s == 0 && i == 0) {
		return optime.OpTime{}, mongoerr.New(mongoerr.BadValue, "oplog entry ts is not a non-null timestamp")
	}
	ot := optime.OpTime{TS: optime.MakeTimestamp(s, i), Term: optime.UninitializedTerm}
	if tv, err := raw.LookupErr("t"); err == nil {
		if t, ok := tv.AsInt64OK(); ok {
			ot.Term = t
		}
	}
	return ot, nil
}

// ParseEntry validates and parses raw.
func ParseEntry(raw bsoncore.Document) (*Entry, error) {
	if err := raw.Validate(); err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid oplog entry: %v", err)
	}
	ot, err := EntryOpTime(raw)
	if err != nil {
		return nil, err
	}
	e := &Entry{OpTime: ot, Raw: raw}
	var ok bool
	if e.Op, ok = raw.Lookup("op").StringValueOK(); !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "oplog entry has no op")
	}
	e.NS, _ = raw.Lookup("ns").StringValueOK()
	if v, err := raw.LookupErr("ui"); err == nil {
		st, b, ok := v.BinaryOK()
		if !ok || st != 4 || len(b) != 16 {
			return nil, mongoerr.New(mongoerr.BadValue, "oplog entry ui is not a UUID")
		}
		copy(e.UI[:], b)
		e.HasUI = true
	}
	if e.O, ok = raw.Lookup("o").DocumentOK(); !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "oplog entry has no o")
	}
	if v, err := raw.LookupErr("o2"); err == nil {
		if e.O2, ok = v.DocumentOK(); !ok {
			return nil, mongoerr.New(mongoerr.BadValue, "oplog entry o2 is not an object")
		}
	}
	switch e.Op {
	case "i", "u", "d", "c", "n":
	default:
		return nil, mongoerr.Newf(mongoerr.BadValue, "unknown oplog op %q", e.Op)
	}
	return e, nil
}

// Mode is the oplog application mode (MongoDB's OplogApplication::Mode).
type Mode int

const (
	// ModeSecondary is steady-state application: a missing document or collection is an
	// error (the replica diverged; the caller treats it as fatal).
	ModeSecondary Mode = iota
	// ModeInitialSync tolerates what the clone may already reflect or what a later entry
	// fixes: DuplicateKey, missing documents and collections, diffs that no longer fit.
	ModeInitialSync
	// ModeRecovering replays entries over data that may already contain them (startup
	// recovery); it tolerates the same as initial sync.
	ModeRecovering
)

func (m Mode) tolerant() bool { return m != ModeSecondary }

// Applier applies single oplog entries idempotently through the catalog and write path.
// Batching by document for parallel writers is a follow-up (ApplyBatch); the secondary's
// applier calls Apply per entry until then.
type Applier struct {
	e       *storage.Engine
	cat     *catalog.Catalog
	colls   *index.Collections
	tempDir string
	// batchSessions: the caller derives session records per batch (ApplySessionUpdates),
	// so Apply does not write one per entry (sessions.go).
	batchSessions bool
}

// WithBatchSessionUpdates returns a copy of a whose Apply leaves session records to the
// caller, which collects them per batch (SessionTracker) and writes them with
// ApplySessionUpdates: parallel writers updating one session's record per entry would
// conflict with each other and write it many times.
func (a *Applier) WithBatchSessionUpdates() *Applier {
	c := *a
	c.batchSessions = true
	return &c
}

// NewApplier returns an applier over cfg's catalog and collections.
func NewApplier(cfg Config) *Applier {
	return &Applier{e: cfg.Engine, cat: cfg.Catalog, colls: cfg.Colls, tempDir: cfg.TempDir}
}

// Applier returns an applier sharing the writer's configuration.
func (w *Writer) Applier() *Applier { return NewApplier(w.cfg) }

// Apply applies one entry at its own timestamp. Applying an entry twice leaves the same state
// as applying it once. If ru is in a unit, the writes join it (a WriteConflict is returned
// to the caller); otherwise Apply runs its own unit and retries WriteConflicts. Replay must
// start from data at or before the entry (startup recovery and rollback recover to the
// stable timestamp first): a write at the entry's timestamp under a newer version of the
// same key would be shadowed by it. The writes
// produce no oplog entries (the caller writes the received entry itself, AppendEntry).
// A retryable write's entry also updates its session's config.transactions record in the
// same unit (sessions.go), unless the applier was made WithBatchSessionUpdates.
//
// An applyOps entry (a committed transaction, or the applyOps command's) applies all its
// operations in one unit at its timestamp; a transaction chain's final entry finds the
// chain's earlier entries in the oplog (txn_apply.go).
func (a *Applier) Apply(ctx context.Context, ru *storage.RecoveryUnit, raw bsoncore.Document, mode Mode) error {
	return a.ApplyWith(ctx, ru, raw, mode, nil)
}

// ApplyWith is Apply for an entry whose transaction chain may have earlier entries that
// are not in the oplog yet: prevs finds them (it is consulted before the oplog).
func (a *Applier) ApplyWith(ctx context.Context, ru *storage.RecoveryUnit, raw bsoncore.Document, mode Mode, prevs PrevEntries) error {
	e, err := ParseEntry(raw)
	if err != nil {
		return err
	}
	release := opobserver.UnreplicatedWrites(ru)
	defer release()
	if !ru.InUnitOfWork() {
		// MongoDB's oplog application ignores prepare conflicts: the entries it applies
		// never depend on a prepared transaction's writes (the primary made them wait).
		_ = ru.SetPrepareConflictBehavior(storage.PrepareConflictIgnoreAllowWrites)
	}
	switch e.Op {
	case "n":
		// A session migration's entry records its session (sessions.go); other no-ops
		// change nothing.
		if _, ok := sessionOf(e); !ok || a.batchSessions {
			return nil
		}
		return a.inUnit(ctx, ru, e.OpTime.TS, func() error { return a.applyEntrySession(ru, e) })
	case "c":
		if IsApplyOps(e) {
			return a.applyApplyOps(ctx, ru, e, mode, prevs)
		}
		return a.applyCommand(ctx, ru, e, mode)
	}
	return a.inUnit(ctx, ru, e.OpTime.TS, func() error {
		if err := a.applyCRUD(ru, e, mode); err != nil {
			return err
		}
		if a.batchSessions {
			return nil
		}
		return a.applyEntrySession(ru, e)
	})
}

func (a *Applier) inUnit(ctx context.Context, ru *storage.RecoveryUnit, ts optime.Timestamp, f func() error) error {
	once := func() error {
		w := ru.BeginUnitOfWork()
		defer w.End()
		if err := ru.SetTimestamp(ts); err != nil {
			return err
		}
		if err := f(); err != nil {
			return err
		}
		return w.Commit()
	}
	if ru.InUnitOfWork() {
		return once()
	}
	return storage.WriteConflictRetry(ctx, "applyOplogEntry", func() error {
		defer ru.AbandonSnapshot()
		return once()
	})
}

// collection resolves the entry's collection by UUID (or namespace when it has none).
func (a *Applier) collection(e *Entry) (*catalog.CollectionMeta, bool) {
	if e.HasUI {
		return a.cat.Latest().ByUUID(e.UI)
	}
	return a.cat.Latest().ByNS(e.NS)
}

func (a *Applier) applyCRUD(ru *storage.RecoveryUnit, e *Entry, mode Mode) error {
	meta, ok := a.collection(e)
	if !ok {
		if mode.tolerant() {
			return nil
		}
		return mongoerr.Newf(mongoerr.NamespaceNotFound, "applying %s on %s: collection %s not found", e.Op, e.NS, e.UI)
	}
	coll, err := a.colls.ByUUID(meta.UUID)
	if err != nil {
		return err
	}
	idSrc := e.O
	if e.Op == "u" {
		idSrc = e.O2
	}
	id, err := idSrc.LookupErr("_id")
	if err != nil {
		return mongoerr.Newf(mongoerr.BadValue, "oplog %s entry without _id", e.Op)
	}
	rid, cur, found, err := coll.FindByID(ru, id)
	if err != nil {
		return err
	}
	switch e.Op {
	case "i":
		// Insert is an upsert by _id, so replaying it is harmless.
		if found {
			if bytes.Equal(cur, e.O) {
				return nil
			}
			return coll.UpdateDocument(ru, rid, cur, e.O)
		}
		_, err := coll.InsertDocuments(ru, []bsoncore.Document{e.O})
		if err != nil && mode.tolerant() && mongoerr.Is(err, mongoerr.DuplicateKey) {
			return nil
		}
		return err
	case "u":
		if !found {
			if mode.tolerant() {
				return nil
			}
			return mongoerr.Newf(mongoerr.NoSuchKey, "applying update on %s: document %v not found", e.NS, id)
		}
		next := e.O
		if v, err := e.O.LookupErr("$v"); err == nil {
			if n, _ := v.AsInt64OK(); n != 2 {
				return mongoerr.Newf(mongoerr.BadValue, "unsupported update entry version %v", v)
			}
			diff, ok := e.O.Lookup("diff").DocumentOK()
			if !ok {
				return mongoerr.New(mongoerr.BadValue, "$v:2 update entry without diff")
			}
			if next, err = ApplyDiff(cur, diff); err != nil {
				if mode.tolerant() && errors.Is(err, errDiffShape) {
					return nil
				}
				return fmt.Errorf("applying update on %s: %w", e.NS, err)
			}
		}
		if bytes.Equal(next, cur) {
			return nil
		}
		if meta.PreAndPostImages && !fromMigrate(e) {
			if err := a.recordPreImage(ru, meta, e, cur); err != nil {
				return err
			}
		}
		return coll.UpdateDocument(ru, rid, cur, next)
	case "d":
		if !found {
			return nil
		}
		if meta.PreAndPostImages && !fromMigrate(e) {
			if err := a.recordPreImage(ru, meta, e, cur); err != nil {
				return err
			}
		}
		return coll.DeleteDocument(ru, rid, cur)
	}
	return nil
}

// recordPreImage writes the change stream pre-image of e, which is about to change cur, at
// the unit's timestamp (the entry's): a secondary records what the primary recorded, from
// the document it read, since the oplog carries no pre-image. Replaying an entry whose
// pre-image exists (recovery, initial sync's overlap) keeps the one there.
func (a *Applier) recordPreImage(ru *storage.RecoveryUnit, meta *catalog.CollectionMeta, e *Entry, cur bsoncore.Document) error {
	ts := e.ApplyOpsTS
	if ts.IsNull() {
		ts = e.OpTime.TS
	}
	if ts.IsNull() {
		return nil // a standalone's applyOps command: no oplog, no pre-images
	}
	wall := e.Wall
	if wall == 0 {
		wall = wallOf(e.Raw, e.OpTime.TS)
	}
	err := writePreImage(ru, a.colls, meta.UUID, ts, e.ApplyOpsIndex, wall, cur)
	if mongoerr.Is(err, mongoerr.DuplicateKey) {
		return nil
	}
	return err
}

// fromMigrate reports whether e is a chunk migration's write (no pre-image: MongoDB records
// none for OperationSource::kFromMigrate).
func fromMigrate(e *Entry) bool {
	v, err := e.Raw.LookupErr("fromMigrate")
	return err == nil && v.Type == bsoncore.TypeBoolean && v.Boolean()
}

// firstKey returns the command name of a `c` entry's o.
func firstKey(o bsoncore.Document) (string, bsoncore.Value) {
	els, err := o.Elements()
	if err != nil || len(els) == 0 {
		return "", bsoncore.Value{}
	}
	return els[0].Key(), els[0].Value()
}

// without copies d without the named top-level fields.
func without(d bsoncore.Document, drop ...string) bsoncore.Document {
	start, out := bsoncore.AppendDocumentStart(nil)
	els, _ := d.Elements()
outer:
	for _, e := range els {
		for _, k := range drop {
			if e.Key() == k {
				continue outer
			}
		}
		out = append(out, e...)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, start)
	return out
}

func (a *Applier) forgetOnCommit(ru *storage.RecoveryUnit, uuids ...catalog.UUID) {
	ru.OnCommit(func(optime.Timestamp) {
		for _, u := range uuids {
			a.colls.Forget(u)
		}
	})
}

func (a *Applier) applyCommand(ctx context.Context, ru *storage.RecoveryUnit, e *Entry, mode Mode) error {
	name, first := firstKey(e.O)
	db, _ := catalog.SplitNS(e.NS)
	collNS := func() string { s, _ := first.StringValueOK(); return db + "." + s }
	ts := e.OpTime.TS
	switch name {
	case "create":
		ns := collNS()
		return a.inUnit(ctx, ru, ts, func() error {
			if e.HasUI {
				if _, ok := a.cat.Latest().ByUUID(e.UI); ok {
					return nil // already applied (possibly renamed since)
				}
			}
			if m, ok := a.cat.Latest().ByNS(ns); ok {
				if e.HasUI && m.UUID != e.UI && !mode.tolerant() {
					return mongoerr.Newf(mongoerr.NamespaceExists, "applying create: %s exists with another UUID", ns)
				}
				return nil
			}
			opts := without(e.O, "create", "idIndex")
			if e.HasUI {
				opts = bsoncore.Document(bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, e.UI[:]).Build())
				opts = concatDocs(opts, without(e.O, "create", "idIndex", "uuid"))
			}
			_, err := a.cat.CreateCollection(ru, ns, opts)
			return err
		})
	case "drop":
		return a.inUnit(ctx, ru, ts, func() error {
			m, ok := a.collection(&Entry{HasUI: e.HasUI, UI: e.UI, NS: collNS()})
			if !ok {
				return nil
			}
			if err := a.cat.DropCollection(ru, m.NS); err != nil {
				return err
			}
			a.forgetOnCommit(ru, m.UUID)
			return nil
		})
	case "renameCollection":
		from, _ := first.StringValueOK()
		to, _ := e.O.Lookup("to").StringValueOK()
		return a.inUnit(ctx, ru, ts, func() error {
			var src *catalog.CollectionMeta
			var ok bool
			if e.HasUI {
				src, ok = a.cat.Latest().ByUUID(e.UI)
			} else {
				src, ok = a.cat.Latest().ByNS(from)
			}
			if !ok {
				if tgt, ok := a.cat.Latest().ByNS(to); ok && e.HasUI && tgt.UUID == e.UI {
					return nil // already applied
				}
				return mongoerr.Newf(mongoerr.NamespaceNotFound, "applying renameCollection: source %s not found", from)
			}
			if src.NS == to {
				return nil
			}
			tgt, dropTarget := a.cat.Latest().ByNS(to)
			if err := a.cat.RenameCollection(ru, src.NS, to, dropTarget); err != nil {
				return err
			}
			if dropTarget {
				a.forgetOnCommit(ru, tgt.UUID)
			}
			return nil
		})
	case "createIndexes":
		spec := without(e.O, "createIndexes")
		iname, _ := spec.Lookup("name").StringValueOK()
		var build *index.Collection
		err := a.inUnit(ctx, ru, ts, func() error {
			build = nil
			m, ok := a.collection(&Entry{HasUI: e.HasUI, UI: e.UI, NS: collNS()})
			if !ok {
				if mode.tolerant() {
					return nil
				}
				return mongoerr.Newf(mongoerr.NamespaceNotFound, "applying createIndexes: collection %s not found", collNS())
			}
			if _, exists := m.Index(iname); exists {
				return nil
			}
			coll, err := a.colls.ByUUID(m.UUID)
			if err != nil {
				return err
			}
			if recs, _ := coll.RecordStore().Counts(); recs > 0 {
				build = coll
				return nil
			}
			_, err = a.cat.AddIndex(ru, m.NS, spec, true, nil)
			return err
		})
		if err != nil || build == nil {
			return err
		}
		if ru.InUnitOfWork() {
			return mongoerr.New(mongoerr.IllegalOperation, "applying createIndexes on a non-empty collection needs its own unit (index build)")
		}
		// A non-empty collection needs a real build, which commits in its own units at
		// engine-assigned timestamps. Primaries replicate such builds as startIndexBuild /
		// commitIndexBuild (indexbuild_apply.go); a createIndexes entry on a non-empty
		// collection comes from an older node or an internal single-phase creation.
		_, _, err = index.Build(ctx, build, spec, index.BuildOptions{TempDir: a.tempDir})
		if mongoerr.Is(err, mongoerr.IndexAlreadyExists) {
			return nil
		}
		return err
	case "startIndexBuild":
		return a.applyStartIndexBuild(ctx, ru, e, mode)
	case "commitIndexBuild":
		return a.applyCommitIndexBuild(ctx, ru, e, mode)
	case "abortIndexBuild":
		return a.applyAbortIndexBuild(ctx, ru, e)
	case "dropIndexes":
		iname, _ := e.O.Lookup("index").StringValueOK()
		return a.inUnit(ctx, ru, ts, func() error {
			m, ok := a.collection(&Entry{HasUI: e.HasUI, UI: e.UI, NS: collNS()})
			if !ok {
				return nil
			}
			if _, exists := m.Index(iname); !exists {
				return nil
			}
			return a.cat.DropIndex(ru, m.NS, iname)
		})
	case "collMod":
		return a.inUnit(ctx, ru, ts, func() error {
			m, ok := a.collection(&Entry{HasUI: e.HasUI, UI: e.UI, NS: collNS()})
			if !ok {
				if mode.tolerant() {
					return nil
				}
				return mongoerr.Newf(mongoerr.NamespaceNotFound, "applying collMod: collection %s not found", collNS())
			}
			return a.applyCollMod(ru, m, e.O)
		})
	case "commitTransaction", "abortTransaction":
		return a.applyDecision(ctx, ru, e, mode, name == "commitTransaction")
	case "dropDatabase":
		return a.inUnit(ctx, ru, ts, func() error {
			var uuids []catalog.UUID
			for _, m := range a.cat.Latest().Collections(db) {
				if err := a.cat.DropCollection(ru, m.NS); err != nil {
					return err
				}
				uuids = append(uuids, m.UUID)
			}
			a.forgetOnCommit(ru, uuids...)
			return nil
		})
	}
	return mongoerr.Newf(mongoerr.BadValue, "unsupported command in oplog entry: %q", name)
}

// applyCollMod merges the entry's option fields into the collection's options (a field
// replaces the same-named option in place or is appended) and applies an `index`
// modification ({name | keyPattern, hidden, expireAfterSeconds, ...}) to that index's spec.
func (a *Applier) applyCollMod(ru *storage.RecoveryUnit, m *catalog.CollectionMeta, o bsoncore.Document) error {
	els, err := o.Elements()
	if err != nil {
		return err
	}
	opts := without(m.Options, "uuid")
	changed := false
	for _, e := range els[1:] {
		if e.Key() == "index" {
			ix, ok := e.Value().DocumentOK()
			if !ok {
				return mongoerr.New(mongoerr.BadValue, "collMod index is not an object")
			}
			if err := a.applyIndexMod(ru, m, ix); err != nil {
				return err
			}
			continue
		}
		if e.Key() == "changeStreamPreAndPostImages" {
			// The option is stored only while enabled, as on the primary.
			if d, ok := e.Value().DocumentOK(); ok {
				if on, _ := d.Lookup("enabled").BooleanOK(); on {
					opts = setField(opts, e)
					changed = true
					continue
				}
				opts = without(opts, "changeStreamPreAndPostImages")
				changed = true
				continue
			}
		}
		opts = setField(opts, e)
		changed = true
	}
	if !changed || bytes.Equal(opts, without(m.Options, "uuid")) {
		return nil
	}
	return a.cat.UpdateOptions(ru, m.NS, opts)
}

func (a *Applier) applyIndexMod(ru *storage.RecoveryUnit, m *catalog.CollectionMeta, mod bsoncore.Document) error {
	var target *catalog.IndexMeta
	if n, ok := mod.Lookup("name").StringValueOK(); ok {
		target, _ = m.Index(n)
	} else if kp, ok := mod.Lookup("keyPattern").DocumentOK(); ok {
		for i := range m.Indexes {
			if bytes.Equal(m.Indexes[i].KeyPattern, kp) {
				target = &m.Indexes[i]
			}
		}
	}
	if target == nil {
		return nil
	}
	spec := target.Spec
	els, err := mod.Elements()
	if err != nil {
		return err
	}
	for _, e := range els {
		switch e.Key() {
		case "name", "keyPattern":
			continue
		}
		spec = setField(spec, e)
	}
	if bytes.Equal(spec, target.Spec) {
		return nil
	}
	return a.cat.ReplaceIndexSpec(ru, m.NS, target.Name, spec)
}

// setField returns d with element e replacing the same-named field, or appended.
func setField(d bsoncore.Document, e bsoncore.Element) bsoncore.Document {
	start, out := bsoncore.AppendDocumentStart(nil)
	els, _ := d.Elements()
	done := false
	for _, x := range els {
		if x.Key() == e.Key() {
			out = append(out, e...)
			done = true
			continue
		}
		out = append(out, x...)
	}
	if !done {
		out = append(out, e...)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, start)
	return out
}

// concatDocs returns a document with a's fields followed by b's.
func concatDocs(a, b bsoncore.Document) bsoncore.Document {
	start, out := bsoncore.AppendDocumentStart(nil)
	out = append(out, a[4:len(a)-1]...)
	out = append(out, b[4:len(b)-1]...)
	out, _ = bsoncore.AppendDocumentEnd(out, start)
	return out
}
