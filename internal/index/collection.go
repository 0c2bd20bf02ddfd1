package index

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/query"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// MaxDocumentSize is BSONObjMaxUserSize: documents larger than 16 MiB are rejected.
const MaxDocumentSize = 16 * 1024 * 1024

// Collection is the write path of one collection (spec: "Collection and Index Writes"): it
// writes the record store and every index in the caller's WriteUnitOfWork, and routes the keys
// of indexes being built to their side-writes tables.
//
// There must be one Collection per collection per process (the record store allocates
// RecordIds in memory); Collections caches them. The index set is re-read from the catalog's
// latest snapshot whenever it changes, so callers must hold the collection's IX lock (or the
// default gate, see Write) from before a write starts until its unit ends: index builds rely
// on that to know which writes may have missed their side table.
type Collection struct {
	e    *storage.Engine
	cat  *catalog.Catalog
	uuid catalog.UUID
	rs   *storage.RecordStore
	// owner supplies the op observer (nil for handles opened with OpenCollection: no-op).
	owner *Collections

	// gate is the default stand-in for the collection lock: writers hold it shared (Write),
	// index builds take it exclusively to install interceptors and for the final drain.
	gate sync.RWMutex

	mu     sync.Mutex
	builds map[string]*interceptor // by index ident; guarded by mu
	state  atomic.Pointer[collState]
	// view, when set, is the catalog this handle resolves its metadata in: the unit's view
	// of a multi-document transaction that created the collection (Collections.ForUnit),
	// cleared when that transaction commits. nil: the catalog's latest instance.
	view atomic.Pointer[func() *catalog.Snapshot]
}

// snapshot is the catalog instance c's metadata is read from.
func (c *Collection) snapshot() *catalog.Snapshot {
	if f := c.view.Load(); f != nil {
		return (*f)()
	}
	return c.cat.Latest()
}

// collState is an immutable view of the collection's indexes for one catalog metadata value.
type collState struct {
	meta     *catalog.CollectionMeta
	buildGen uint64
	ready    []*Index
	building []*interceptor
	id       *Index
}

var buildGen atomic.Uint64

// OpenCollection returns the write path for the collection with the given UUID. Prefer
// Collections.Get, which keeps one handle per collection.
func OpenCollection(e *storage.Engine, cat *catalog.Catalog, uuid catalog.UUID) (*Collection, error) {
	meta, ok := cat.Latest().ByUUID(uuid)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "collection %s not found", uuid)
	}
	rs, err := storage.OpenRecordStore(e, meta.Ident)
	if err != nil {
		return nil, err
	}
	return &Collection{e: e, cat: cat, uuid: uuid, rs: rs, builds: map[string]*interceptor{}}, nil
}

// RecordStore returns the collection's record store.
func (c *Collection) RecordStore() *storage.RecordStore { return c.rs }

// UUID returns the collection's UUID.
func (c *Collection) UUID() catalog.UUID { return c.uuid }

// Engine returns the storage engine.
func (c *Collection) Engine() *storage.Engine { return c.e }

// Catalog returns the catalog.
func (c *Collection) Catalog() *catalog.Catalog { return c.cat }

// current returns the index view for the catalog's latest metadata, rebuilding it when the
// metadata or the set of running builds changed.
func (c *Collection) current() (*collState, error) {
	meta, ok := c.snapshot().ByUUID(c.uuid)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "collection %s was dropped", c.uuid)
	}
	st := c.state.Load()
	if st != nil && st.meta == meta && st.buildGen == buildGen.Load() {
		return st, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	gen := buildGen.Load()
	old := c.state.Load()
	byIdent := map[string]*Index{}
	if old != nil {
		for _, ix := range old.ready {
			byIdent[ix.ident] = ix
		}
	}
	ns := &collState{meta: meta, buildGen: gen}
	for i := range meta.Indexes {
		im := &meta.Indexes[i]
		if !im.Ready {
			if it, ok := c.builds[im.Ident]; ok {
				ns.building = append(ns.building, it)
			}
			// A not-ready index without a running build (a build interrupted by a restart)
			// receives no writes; it must be rebuilt before it is marked ready.
			continue
		}
		ix := byIdent[im.Ident]
		if ix == nil || !sameSpec(&ix.meta, im) {
			var err error
			prev := ix
			if ix, err = c.newIndex(meta.NS, im); err != nil {
				return nil, err
			}
			if prev != nil {
				ix.usage = prev.usage // same ident, options changed (collMod): keep counting
			}
		} else if ix.ns != meta.NS || ix.meta.Multikey != im.Multikey {
			// Renamed, or multikey state changed: refresh the metadata copy.
			cp := *ix
			cp.ns, cp.meta = meta.NS, *im
			ix = &cp
		}
		ns.ready = append(ns.ready, ix)
		if ix.isID {
			ns.id = ix
		}
	}
	c.state.Store(ns)
	return ns, nil
}

func sameSpec(a, b *catalog.IndexMeta) bool {
	return a.Ident == b.Ident && slices.Equal(a.Spec, b.Spec)
}

func (c *Collection) newIndex(ns string, im *catalog.IndexMeta) (*Index, error) {
	var f Filter
	if len(im.PartialFilterExpression) > 0 {
		m, err := query.ParsePartialFilter(im.PartialFilterExpression)
		if err != nil {
			return nil, err
		}
		f = m
	}
	return NewIndex(ns, im, f)
}

// Indexes returns the access methods of the ready indexes.
func (c *Collection) Indexes() ([]*Index, error) {
	st, err := c.current()
	if err != nil {
		return nil, err
	}
	return st.ready, nil
}

// Index returns the ready index named name.
func (c *Collection) Index(name string) (*Index, bool, error) {
	st, err := c.current()
	if err != nil {
		return nil, false, err
	}
	for _, ix := range st.ready {
		if ix.name == name {
			return ix, true, nil
		}
	}
	return nil, false, nil
}

// IDIndex returns the _id index, or nil when the collection has none.
func (c *Collection) IDIndex() (*Index, error) {
	st, err := c.current()
	if err != nil {
		return nil, err
	}
	return st.id, nil
}

// Write runs f in a WriteUnitOfWork on ru, retrying on WriteConflict and, after a prepare
// conflict, once the prepared transaction committed or aborted (the attempt rolled back and
// released its snapshot first), while holding the default write gate shared. It is the
// write-path entry point for callers that do not use the lock manager (tests, the TTL monitor
// in a standalone setup).
func (c *Collection) Write(ctx context.Context, ru *storage.RecoveryUnit, f func() error) error {
	c.gate.RLock()
	defer c.gate.RUnlock()
	return storage.WriteConflictRetry(ctx, "write", func() error {
		return c.e.PrepareConflictRetry(ctx, func() error {
			defer ru.AbandonSnapshot()
			w := ru.BeginUnitOfWork()
			defer w.End()
			if err := f(); err != nil {
				return err
			}
			return w.Commit()
		})
	})
}

// BlockWrites is the default BuildOptions.BlockWrites: it waits for writers using Write to
// finish and holds new ones back until unblock is called.
func (c *Collection) BlockWrites() (unblock func(), err error) {
	c.gate.Lock()
	return c.gate.Unlock, nil
}

func checkSize(doc bsoncore.Document) error {
	if len(doc) > MaxDocumentSize {
		return mongoerr.Newf(mongoerr.BSONObjectTooLarge,
			"object to insert too large. size in bytes: %d, max size: %d", len(doc), MaxDocumentSize)
	}
	return nil
}

// InsertDocuments inserts docs (vectored insert) in ru's open unit and returns their RecordIds.
// Documents must be valid BSON with an _id already added by the caller.
func (c *Collection) InsertDocuments(ru *storage.RecoveryUnit, docs []bsoncore.Document) ([]recordid.ID, error) {
	st, err := c.current()
	if err != nil {
		return nil, err
	}
	s := getScratch()
	defer putScratch(s)
	rids := make([]recordid.ID, 0, len(docs))
	obs := c.observer()
	for i, doc := range docs {
		if err := checkSize(doc); err != nil {
			return nil, err
		}
		// One observer call per document, before its writes: each document and its oplog
		// entry carry their own timestamp (opobserver: "Call order and timestamps").
		if err := obs.OnInserts(ru, st.meta.NS, c.uuid, docs[i:i+1], false); err != nil {
			return nil, err
		}
		rid, err := c.rs.Insert(ru, doc)
		if err != nil {
			return nil, err
		}
		if err := c.indexRecord(ru, st, s, doc, rid); err != nil {
			return nil, err
		}
		rids = append(rids, rid)
	}
	if len(rids) > 0 {
		c.noteCappedInsert(ru, st)
	}
	return rids, nil
}

// InsertDocument inserts one document; see InsertDocuments.
func (c *Collection) InsertDocument(ru *storage.RecoveryUnit, doc bsoncore.Document) (recordid.ID, error) {
	st, err := c.current()
	if err != nil {
		return recordid.ID{}, err
	}
	if err := checkSize(doc); err != nil {
		return recordid.ID{}, err
	}
	if err := c.observer().OnInserts(ru, st.meta.NS, c.uuid, []bsoncore.Document{doc}, false); err != nil {
		return recordid.ID{}, err
	}
	s := getScratch()
	defer putScratch(s)
	rid, err := c.rs.Insert(ru, doc)
	if err != nil {
		return recordid.ID{}, err
	}
	if err := c.indexRecord(ru, st, s, doc, rid); err != nil {
		return recordid.ID{}, err
	}
	c.noteCappedInsert(ru, st)
	return rid, nil
}

func (c *Collection) indexRecord(ru *storage.RecoveryUnit, st *collState, s *scratch, doc bsoncore.Document, rid recordid.ID) error {
	for _, ix := range st.ready {
		k := &s.k[0]
		if err := ix.genKeys(s, doc, rid, k); err != nil {
			return err
		}
		if err := ix.insertKeys(ru, s, k, rid, writeOpts{}); err != nil {
			return err
		}
		if k.multikey {
			if err := c.noteMultikey(ru, st.meta.NS, ix, k.paths); err != nil {
				return err
			}
		}
	}
	for _, it := range st.building {
		if err := it.onInsert(ru, s, doc, rid); err != nil {
			return err
		}
		if k := &s.k[0]; k.multikey {
			if err := c.noteMultikey(ru, st.meta.NS, it.ix, k.paths); err != nil {
				return err
			}
		}
	}
	return nil
}

// noteMultikey persists the multikey flag and paths the first time they are needed. The
// catalog's copy-on-write metadata is the in-memory record: once it covers the paths, writers
// skip the call entirely (spec: multikey state "only persisted when it changes to true").
func (c *Collection) noteMultikey(ru *storage.RecoveryUnit, ns string, ix *Index, masks []uint64) error {
	if meta, ok := c.snapshot().ByUUID(c.uuid); ok {
		if im, ok := meta.Index(ix.name); ok && im.Ident == ix.ident && covers(im, masks) {
			return nil
		}
	}
	return c.cat.SetMultikey(ru, ns, ix.name, ix.MultikeyPathsBool(masks))
}

// covers reports whether im's multikey state already includes masks.
func covers(im *catalog.IndexMeta, masks []uint64) bool {
	if !im.Multikey {
		return false
	}
	if im.MultikeyPaths == nil {
		return true
	}
	for i, m := range masks {
		if i >= len(im.MultikeyPaths) {
			return false
		}
		for c := 0; m != 0; c++ {
			if m&1 != 0 && (c >= len(im.MultikeyPaths[i]) || !im.MultikeyPaths[i][c]) {
				return false
			}
			m >>= 1
		}
	}
	return true
}

// UpdateDocument replaces the document stored under rid (oldDoc) with newDoc, updating only
// the index keys that changed.
func (c *Collection) UpdateDocument(ru *storage.RecoveryUnit, rid recordid.ID, oldDoc, newDoc bsoncore.Document) error {
	return c.UpdateDocumentAs(ru, rid, oldDoc, newDoc, UpdateKind{})
}

// UpdateKind says how a user's update is logged (opobserver.OnUpdateArgs): a replacement,
// or an operator update with the paths its operators named. The zero value is an internal
// write.
type UpdateKind struct {
	Replacement bool
	Paths       []string
}

// UpdateDocumentAs is UpdateDocument for an update of kind k.
func (c *Collection) UpdateDocumentAs(ru *storage.RecoveryUnit, rid recordid.ID, oldDoc, newDoc bsoncore.Document, k UpdateKind) error {
	st, err := c.current()
	if err != nil {
		return err
	}
	if err := checkSize(newDoc); err != nil {
		return err
	}
	if obs := c.observer(); !isNoOp(obs) {
		args := opobserver.OnUpdateArgs{Pre: oldDoc, Post: newDoc, ID: newDoc.Lookup("_id"), PreImage: st.meta.PreAndPostImages,
			Replacement: k.Replacement, Paths: k.Paths}
		if err := obs.OnUpdate(ru, st.meta.NS, c.uuid, &args); err != nil {
			return err
		}
	}
	if err := c.rs.Update(ru, rid, newDoc); err != nil {
		return err
	}
	s := getScratch()
	defer putScratch(s)
	for _, ix := range st.ready {
		mk, err := ix.update(ru, s, oldDoc, newDoc, rid)
		if err != nil {
			return err
		}
		if mk {
			if err := c.noteMultikey(ru, st.meta.NS, ix, s.k[1].paths); err != nil {
				return err
			}
		}
	}
	for _, it := range st.building {
		mk, err := it.onUpdate(ru, s, oldDoc, newDoc, rid)
		if err != nil {
			return err
		}
		if mk {
			if err := c.noteMultikey(ru, st.meta.NS, it.ix, s.k[1].paths); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteDocument deletes the record rid whose current document is doc.
func (c *Collection) DeleteDocument(ru *storage.RecoveryUnit, rid recordid.ID, doc bsoncore.Document) error {
	return c.deleteDocument(ru, rid, doc, false)
}

// DeleteDocumentFromMigrate is DeleteDocument for sharding's own data movement (the range
// deleter removing orphans, a migration's cleanup): the oplog entry carries fromMigrate, so
// change streams and migration cloners do not take it for a user's delete.
func (c *Collection) DeleteDocumentFromMigrate(ru *storage.RecoveryUnit, rid recordid.ID, doc bsoncore.Document) error {
	return c.deleteDocument(ru, rid, doc, true)
}

func (c *Collection) deleteDocument(ru *storage.RecoveryUnit, rid recordid.ID, doc bsoncore.Document, fromMigrate bool) error {
	st, err := c.current()
	if err != nil {
		return err
	}
	if obs := c.observer(); !isNoOp(obs) {
		args := opobserver.OnDeleteArgs{ID: doc.Lookup("_id"), Pre: doc, FromMigrate: fromMigrate,
			PreImage: st.meta.PreAndPostImages && !fromMigrate}
		if err := obs.OnDelete(ru, st.meta.NS, c.uuid, &args); err != nil {
			return err
		}
	}
	if err := c.rs.Delete(ru, rid); err != nil {
		return err
	}
	s := getScratch()
	defer putScratch(s)
	for _, ix := range st.ready {
		k := &s.k[0]
		if err := ix.genKeys(s, doc, rid, k); err != nil {
			return fmt.Errorf("unindex %s: %w", ix.name, err)
		}
		if err := ix.removeKeys(ru, k); err != nil {
			return err
		}
	}
	for _, it := range st.building {
		if err := it.onDelete(ru, s, doc, rid); err != nil {
			return err
		}
	}
	return nil
}

// FindByID returns the RecordId and document with the given _id (point read through the _id
// index and the record store).
func (c *Collection) FindByID(ru *storage.RecoveryUnit, id bsoncore.Value) (recordid.ID, bsoncore.Document, bool, error) {
	st, err := c.current()
	if err != nil {
		return recordid.ID{}, nil, false, err
	}
	if st.id == nil {
		return recordid.ID{}, nil, false, mongoerr.New(mongoerr.IndexNotFound, "collection has no _id index")
	}
	vals := [1]bsoncore.Value{id}
	rid, found, err := st.id.FindRecordID(ru, vals[:])
	if err != nil || !found {
		return recordid.ID{}, nil, false, err
	}
	doc, found, err := c.rs.Get(ru, rid)
	if err != nil || !found {
		return recordid.ID{}, nil, false, err
	}
	return rid, doc, true, nil
}

// Collections keeps one Collection per collection UUID.
type Collections struct {
	e   *storage.Engine
	cat *catalog.Catalog
	mu  sync.Mutex
	m   map[catalog.UUID]*Collection
	obs atomic.Pointer[observerBox]
	// listener is told of every document write after the op observer (doclistener.go).
	listener atomic.Pointer[listenerBox]
	// builds is the registry of running two-phase index builds (twophase.go).
	buildsOnce sync.Once
	builds     *IndexBuilds
	// ttl is the TTL monitor running over these collections (ttl.go), nil when none runs.
	ttl atomic.Pointer[TTLMonitor]
	// cappedInsert is told the namespace of every committed insert into a capped collection
	// (SetCappedInsertHook), nil when nobody listens.
	cappedInsert atomic.Pointer[func(ns string)]
}

// SetCappedInsertHook installs f, called (from an OnCommit hook, after the unit's writes are
// visible) with the namespace of each committed unit that inserted into a capped collection:
// the server's cursor manager wakes its awaitData getMores with it (MongoDB's
// CappedInsertNotifier). Every insert goes through here, whoever writes: a standalone's or a
// primary's commands, and a secondary's oplog applier. nil removes it.
func (cs *Collections) SetCappedInsertHook(f func(ns string)) {
	if f == nil {
		cs.cappedInsert.Store(nil)
		return
	}
	cs.cappedInsert.Store(&f)
}

// noteCappedInsert makes ru's commit call the capped-insert hook for st's collection.
func (c *Collection) noteCappedInsert(ru *storage.RecoveryUnit, st *collState) {
	if c.owner == nil || !st.meta.Capped {
		return
	}
	f := c.owner.cappedInsert.Load()
	if f == nil {
		return
	}
	ns := st.meta.NS
	ru.OnCommit(func(optime.Timestamp) { (*f)(ns) })
}

type observerBox struct{ o opobserver.Observer }

// SetObserver installs the op observer every handle calls on writes (the oplog writer on a
// replica-set member; nil restores the standalone no-op). Set it before serving writes.
func (cs *Collections) SetObserver(o opobserver.Observer) {
	if o == nil {
		o = opobserver.NoOp{}
	}
	cs.obs.Store(&observerBox{o})
}

// Observer returns the installed op observer (opobserver.NoOp when none).
func (cs *Collections) Observer() opobserver.Observer {
	if b := cs.obs.Load(); b != nil {
		return b.o
	}
	return opobserver.NoOp{}
}

// observer returns the op observer the write path calls.
func (c *Collection) observer() opobserver.Observer {
	if c.owner == nil {
		return opobserver.NoOp{}
	}
	if b := c.owner.listener.Load(); b != nil {
		return teeObserver{Observer: c.owner.Observer(), l: b.l}
	}
	return c.owner.Observer()
}

func isNoOp(o opobserver.Observer) bool { _, ok := o.(opobserver.NoOp); return ok }

// NewCollections returns an empty handle cache.
func NewCollections(e *storage.Engine, cat *catalog.Catalog) *Collections {
	return &Collections{e: e, cat: cat, m: map[catalog.UUID]*Collection{}}
}

// Get returns the handle of the collection named ns in the latest catalog.
func (cs *Collections) Get(ns string) (*Collection, error) {
	meta, ok := cs.cat.Latest().ByNS(ns)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "ns %s does not exist", ns)
	}
	return cs.ByUUID(meta.UUID)
}

// ByUUID returns the handle of the collection with uuid.
func (cs *Collections) ByUUID(uuid catalog.UUID) (*Collection, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.m[uuid]; ok {
		return c, nil
	}
	c, err := OpenCollection(cs.e, cs.cat, uuid)
	if err != nil {
		return nil, err
	}
	c.owner = cs
	cs.m[uuid] = c
	return c, nil
}

// ForUnit returns the handle of the collection with uuid as ru sees it: the shared handle of
// a committed collection, or, for one that ru's multi-document transaction created
// (catalog.LatestFor), a handle resolving its metadata in the transaction's view. That handle
// is registered under uuid at once (nobody else can name the uuid before the commit
// publishes it), so it stays the collection's one handle after the commit, which clears its
// view; a rollback forgets it.
func (cs *Collections) ForUnit(ru *storage.RecoveryUnit, uuid catalog.UUID) (*Collection, error) {
	if _, ok := cs.cat.Latest().ByUUID(uuid); ok {
		return cs.ByUUID(uuid)
	}
	meta, ok := cs.cat.LatestFor(ru).ByUUID(uuid)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "collection %s not found", uuid)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.m[uuid]; ok {
		return c, nil
	}
	rs, err := storage.OpenRecordStore(cs.e, meta.Ident)
	if err != nil {
		return nil, err
	}
	c := &Collection{e: cs.e, cat: cs.cat, uuid: uuid, rs: rs, builds: map[string]*interceptor{}, owner: cs}
	view := func() *catalog.Snapshot { return cs.cat.LatestFor(ru) }
	c.view.Store(&view)
	cs.m[uuid] = c
	ru.OnCommit(func(optime.Timestamp) { c.view.Store(nil) })
	ru.OnRollback(func() { cs.Forget(uuid) })
	return c, nil
}

// Forget drops the handle of a dropped collection.
func (cs *Collections) Forget(uuid catalog.UUID) {
	cs.mu.Lock()
	delete(cs.m, uuid)
	cs.mu.Unlock()
}
