package catalog

import (
	"errors"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// maxIndexesPerCollection is MongoDB's limit (64 including _id).
const maxIndexesPerCollection = 64

// unitState is the catalog's view of one open WriteUnitOfWork that touched the catalog.
// Only the goroutine owning ru uses it (a RecoveryUnit is single-threaded), except that
// commit/rollback hooks run on that same goroutine.
type unitState struct {
	ru *storage.RecoveryUnit
	// ddl is set once the unit made a DDL change (for an ordinary unit: once it holds
	// Catalog.ddlMu, until it ends).
	ddl bool
	// txn marks a multi-document transaction's unit (MarkTransaction): it holds ddlMu only
	// during each DDL call and reserves the namespaces it creates instead (see doc.go).
	txn bool
	// locked is set while the unit holds ddlMu.
	locked bool
	// reserved are the namespaces a transaction's unit created (Catalog.reserved).
	reserved []string
	// changes are applied to the Latest instance at commit.
	changes []change
	// view caches Latest-at-viewBase with changes applied, for lookups inside the unit.
	view, viewBase *Snapshot
	// created idents are dropped if the unit rolls back (ident creation is not transactional).
	created []string
	// dropped idents are handed to the reaper with the commit timestamp.
	dropped []pendingIdent
	// cleaned are drop-pending records this unit deletes (requeued on rollback).
	cleaned []string
}

// unit returns ru's state, creating it (and registering the commit/rollback hooks) on
// first use. ru must be in a WriteUnitOfWork.
func (c *Catalog) unit(ru *storage.RecoveryUnit) (*unitState, error) {
	if !ru.InUnitOfWork() {
		return nil, storage.ErrNotInUnit
	}
	c.mu.Lock()
	st := c.units[ru]
	c.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st = &unitState{ru: ru}
	c.mu.Lock()
	c.units[ru] = st
	c.mu.Unlock()
	ru.OnCommit(func(ts optime.Timestamp) { c.commitUnit(st, ts) })
	ru.OnRollback(func() { c.rollbackUnit(st) })
	return st, nil
}

// beginDDL returns ru's state holding ddlMu, and the function the DDL call defers. An
// ordinary unit keeps the mutex until it ends, so a DDL decides against a catalog no other
// DDL can change underneath it (namespace uniqueness, catalog id allocation), and two DDL
// units never lose each other's entries. A transaction's unit holds it for the call only
// (done releases it): between its statements other DDL runs, and the namespaces it created
// stay its own through Catalog.reserved.
func (c *Catalog) beginDDL(ru *storage.RecoveryUnit) (st *unitState, done func(), err error) {
	st, err = c.unit(ru)
	if err != nil {
		return nil, nil, err
	}
	if !st.locked {
		c.ddlMu.Lock()
		st.locked = true
		st.view = nil // Latest may have moved while we waited
		if !st.ddl {
			st.ddl = true
			c.ddlActive.Add(1)
			if st.txn {
				c.txnDDL.Add(1)
			} else {
				c.cleanupStaleRecords(st)
			}
		}
	}
	if !st.txn {
		return st, func() {}, nil
	}
	return st, func() {
		st.locked = false
		c.ddlMu.Unlock()
	}, nil
}

// MarkTransaction declares ru the unit of a multi-document transaction, which lives across
// statements: its DDL calls hold the DDL mutex only while they run, and the collections it
// creates are visible only through LatestFor(ru) until it commits. Call it before the unit's
// first catalog call.
func (c *Catalog) MarkTransaction(ru *storage.RecoveryUnit) error {
	st, err := c.unit(ru)
	if err != nil {
		return err
	}
	if st.ddl && !st.txn {
		return errors.New("catalog: MarkTransaction after the unit's first DDL")
	}
	st.txn = true
	return nil
}

// LatestFor returns the catalog ru sees: Latest, plus the uncommitted changes of ru's unit
// when ru is a transaction's unit that made DDL changes (the collections and indexes it
// created). Only ru's owner may call it.
func (c *Catalog) LatestFor(ru *storage.RecoveryUnit) *Snapshot {
	if c.txnDDL.Load() == 0 {
		return c.latest.Load()
	}
	c.mu.Lock()
	st := c.units[ru]
	c.mu.Unlock()
	if st == nil || !st.txn || !st.ddl {
		return c.latest.Load()
	}
	return c.viewOf(st)
}

// reserve claims ns for st until its unit ends, or fails with WriteConflict when another
// transaction's unit holds it (that unit created ns and has not committed: the caller's
// retry, or the client's retry of its transaction, finds it committed or gone). Every unit
// checks; only transactions' units reserve (an ordinary unit holds ddlMu until it ends).
func (c *Catalog) reserve(st *unitState, ns string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.reserved[ns]; o != nil && o != st {
		return mongoerr.Newf(mongoerr.WriteConflict,
			"WriteConflict: namespace %s is being created by a multi-document transaction", ns)
	}
	if st.txn && c.reserved[ns] == nil {
		c.reserved[ns] = st
		st.reserved = append(st.reserved, ns)
	}
	return nil
}

// endUnit releases what st holds when its unit ends (c.mu held).
func (c *Catalog) endUnitLocked(st *unitState) {
	delete(c.units, st.ru)
	for _, ns := range st.reserved {
		if c.reserved[ns] == st {
			delete(c.reserved, ns)
		}
	}
	st.reserved = nil
}

func (c *Catalog) releaseDDL(st *unitState) {
	if st.ddl {
		c.ddlActive.Add(-1)
		if st.txn {
			c.txnDDL.Add(-1)
		}
	}
	if st.locked {
		st.locked = false
		c.ddlMu.Unlock()
	}
}

// viewOf returns the catalog as seen inside the unit: Latest plus the unit's changes.
func (c *Catalog) viewOf(st *unitState) *Snapshot {
	base := c.latest.Load()
	if st.view == nil || st.viewBase != base {
		st.view = base.with(st.changes, 0)
		st.viewBase = base
	}
	return st.view
}

func (st *unitState) record(ch change) {
	st.changes = append(st.changes, ch)
	st.view = nil
}

func (c *Catalog) commitUnit(st *unitState, ts optime.Timestamp) {
	c.mu.Lock()
	if len(st.changes) > 0 {
		c.latest.Store(c.latest.Load().with(st.changes, ts))
	}
	c.endUnitLocked(st)
	c.mu.Unlock()
	if len(st.dropped) > 0 {
		c.reaper.add(st.dropped, ts)
	}
	c.releaseDDL(st)
}

func (c *Catalog) rollbackUnit(st *unitState) {
	for i := len(st.created) - 1; i >= 0; i-- {
		if err := c.e.DropIdent(st.created[i]); err != nil && !errors.Is(err, storage.ErrNoSuchIdent) {
			// Startup reconciliation drops it later (no catalog entry references it).
			c.log.Warn("dropping ident of rolled-back DDL failed", "ident", st.created[i], "err", err)
		}
	}
	c.reaper.requeueStale(st.cleaned)
	c.mu.Lock()
	c.endUnitLocked(st)
	c.mu.Unlock()
	c.releaseDDL(st)
}

// storeFor returns the durable catalog table holding ns's entry.
func (c *Catalog) storeFor(ns string) *storage.RecordStore {
	if isLocalNS(ns) {
		return c.localRS
	}
	return c.rs
}

// readEntry reads m's durable entry through ru. The durable entry, not the in-memory one, is
// the base of every modification: a concurrent multikey update committed before ru's snapshot
// is in it, and one committed after makes our write a WriteConflict (first updater wins).
func (c *Catalog) readEntry(ru *storage.RecoveryUnit, m *CollectionMeta) (*CollectionMeta, error) {
	raw, found, err := c.storeFor(m.NS).Get(ru, recordid.Long(m.CatalogID))
	if err != nil {
		return nil, err
	}
	if !found {
		// The entry was created after ru's snapshot opened: retry with a new snapshot.
		return nil, mongoerr.Newf(mongoerr.WriteConflict,
			"WriteConflict: catalog entry of %s changed after the snapshot was opened", m.NS)
	}
	d, err := decodeEntry(m.CatalogID, raw)
	if err != nil {
		return nil, err
	}
	if d.NS != m.NS || d.UUID != m.UUID {
		return nil, mongoerr.Newf(mongoerr.WriteConflict,
			"WriteConflict: catalog entry of %s changed after the snapshot was opened", m.NS)
	}
	return d, nil
}

func (c *Catalog) writeEntry(ru *storage.RecoveryUnit, m *CollectionMeta) error {
	return c.storeFor(m.NS).Update(ru, recordid.Long(m.CatalogID), encodeEntry(m))
}

func (c *Catalog) createIdent(st *unitState, kind, ns string) (string, error) {
	name := c.e.NewIdentName(kind)
	if err := c.e.CreateIdent(name, identOptionsFor(ns, kind == "collection")); err != nil {
		return "", err
	}
	st.created = append(st.created, name)
	return name, nil
}

// lookup finds ns in the unit's view or returns NamespaceNotFound.
func (c *Catalog) lookup(st *unitState, ns string) (*CollectionMeta, error) {
	m, ok := c.viewOf(st).ByNS(ns)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "Collection %s does not exist.", ns)
	}
	return m, nil
}

// needsIDIndex reports whether a new collection gets an _id index: not clustered
// collections (the cluster key is the RecordId), not oplogs, not `autoIndexId: false`.
func needsIDIndex(ns string, opts bsoncore.Document) bool {
	if isOplogNS(ns) {
		return false
	}
	if len(opts) > 0 {
		if v, err := opts.LookupErr("clusteredIndex"); err == nil {
			if _, isDoc := v.DocumentOK(); isDoc || truthy(v) {
				return false
			}
		}
		if v, err := opts.LookupErr("autoIndexId"); err == nil && !truthy(v) {
			return false
		}
	}
	return true
}

// appendSpecElement returns a copy of spec with key: v appended.
func appendSpecElement(spec bsoncore.Document, key string, v bsoncore.Value) bsoncore.Document {
	out := bsoncore.AppendValueElement(append([]byte(nil), spec[:len(spec)-1]...), key, v)
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}

var idIndexSpec = func() bsoncore.Document {
	idx, dst := bsoncore.AppendDocumentStart(nil)
	dst = bsoncore.AppendInt32Element(dst, "v", 2)
	var k int32
	k, dst = bsoncore.AppendDocumentElementStart(dst, "key")
	dst = bsoncore.AppendInt32Element(dst, "_id", 1)
	dst, _ = bsoncore.AppendDocumentEnd(dst, k)
	dst = bsoncore.AppendStringElement(dst, "name", IDIndexName)
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}()

// CreateCollection creates ns with the given create options (which may carry uuid; otherwise
// a new one is generated) and, unless the collection is clustered, an oplog or has
// autoIndexId:false, its ready _id index. Runs inside ru's open WriteUnitOfWork.
func (c *Catalog) CreateCollection(ru *storage.RecoveryUnit, ns string, options bsoncore.Document) (*CollectionMeta, error) {
	if err := ValidateNS(ns); err != nil {
		return nil, err
	}
	if len(options) > 0 {
		if err := options.Validate(); err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid collection options: %v", err)
		}
	}
	st, done, err := c.beginDDL(ru)
	if err != nil {
		return nil, err
	}
	defer done()
	view := c.viewOf(st)
	if _, ok := view.ByNS(ns); ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceExists, "Collection %s already exists.", ns)
	}
	if err := c.reserve(st, ns); err != nil {
		return nil, err
	}
	u, found, err := uuidFromOptions(options)
	if err != nil {
		return nil, mongoerr.New(mongoerr.InvalidOptions, err.Error())
	}
	if !found {
		u = NewUUID()
	} else if other, ok := view.ByUUID(u); ok {
		return nil, mongoerr.Newf(mongoerr.InvalidOptions,
			"Cannot create collection %s with UUID %s: already in use by %s", ns, u, other.NS)
	}
	opts, err := buildOptions(u, options)
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid collection options: %v", err)
	}
	m := &CollectionMeta{NS: ns, UUID: u, Options: opts}
	decodeCollOptions(m)
	if m.Ident, err = c.createIdent(st, "collection", ns); err != nil {
		return nil, err
	}
	// A clustered collection's record store is keyed by RecordId, so it too gets a unique _id
	// index, which enforces the cluster key and serves _id lookups (listIndexes shows it as
	// the clustered index). It is made here, with the collection, so that every member
	// applying the create entry builds the same catalog as the primary.
	if needsIDIndex(ns, options) || m.Clustered {
		ix := IndexMeta{Ready: true}
		spec := idIndexSpec
		if coll, err := options.LookupErr("collation"); err == nil && coll.Type == bsoncore.TypeEmbeddedDocument {
			// The _id index inherits the collection's default collation, as in MongoDB.
			spec = appendSpecElement(spec, "collation", coll)
		}
		if exp, err := options.LookupErr("expireAfterSeconds"); err == nil && m.Clustered {
			// A clustered collection's TTL expires documents by their _id date: the index
			// package's TTL monitor reads it from the _id index.
			spec = appendSpecElement(spec, "expireAfterSeconds", exp)
		}
		if err := decodeIndexSpec(&ix, spec); err != nil {
			return nil, err
		}
		ix.MultikeyPaths = emptyMultikeyPaths(ix.KeyPattern)
		if ix.Ident, err = c.createIdent(st, "index", ns); err != nil {
			return nil, err
		}
		m.Indexes = append(m.Indexes, ix)
	}
	if isLocalNS(ns) {
		// The local catalog is untimestamped, so ids of deleted entries are not in any
		// history; negative ids keep them apart from `_mdb_catalog`'s.
		c.mu.Lock()
		m.CatalogID = c.nextLocalID
		c.nextLocalID--
		c.mu.Unlock()
		if err := c.localRS.InsertWithID(ru, recordid.Long(m.CatalogID), encodeEntry(m)); err != nil {
			return nil, err
		}
	} else {
		// The record store never reuses an id that has any version in history, so a
		// point-in-time catalog never confuses two incarnations.
		id, err := c.rs.Insert(ru, encodeEntry(m))
		if err != nil {
			return nil, err
		}
		m.CatalogID = id.Int64()
	}
	st.record(change{id: m.CatalogID, meta: m})
	return m, nil
}

// DropCollection removes ns's catalog entry (phase one of the two-phase drop); its tables
// are dropped by the reaper once no read can need them (phase two).
func (c *Catalog) DropCollection(ru *storage.RecoveryUnit, ns string) error {
	if err := ValidateNS(ns); err != nil {
		return err
	}
	st, done, err := c.beginDDL(ru)
	if err != nil {
		return err
	}
	defer done()
	m, ok := c.viewOf(st).ByNS(ns)
	if !ok {
		return mongoerr.New(mongoerr.NamespaceNotFound, "ns not found")
	}
	return c.dropLocked(st, m)
}

// dropLocked is DropCollection's body; st holds ddlMu.
func (c *Catalog) dropLocked(st *unitState, m *CollectionMeta) error {
	if err := c.storeFor(m.NS).Delete(st.ru, recordid.Long(m.CatalogID)); err != nil {
		return err
	}
	idents := []pendingIdent{{ident: m.Ident, ns: m.NS, untimestamped: isLocalNS(m.NS)}}
	for i := range m.Indexes {
		idents = append(idents, pendingIdent{ident: m.Indexes[i].Ident, ns: m.NS, index: m.Indexes[i].Name,
			untimestamped: isLocalNS(m.NS)})
	}
	if err := c.persistDropPending(st.ru, idents); err != nil {
		return err
	}
	st.dropped = append(st.dropped, idents...)
	st.record(change{id: m.CatalogID})
	return nil
}

// RenameCollection renames from to to, keeping the UUID, idents and indexes. With
// dropTarget an existing target is dropped (two-phase) in the same unit.
func (c *Catalog) RenameCollection(ru *storage.RecoveryUnit, from, to string, dropTarget bool) error {
	if err := ValidateNS(from); err != nil {
		return err
	}
	if err := ValidateNS(to); err != nil {
		return err
	}
	if isLocalNS(from) != isLocalNS(to) {
		return mongoerr.New(mongoerr.IllegalOperation,
			"Cannot rename collections between a replicated and an unreplicated database")
	}
	st, done, err := c.beginDDL(ru)
	if err != nil {
		return err
	}
	defer done()
	view := c.viewOf(st)
	src, ok := view.ByNS(from)
	if !ok {
		return mongoerr.Newf(mongoerr.NamespaceNotFound, "Source collection %s does not exist", from)
	}
	if from == to {
		return mongoerr.New(mongoerr.IllegalOperation, "Can't rename a collection to itself")
	}
	if err := c.reserve(st, to); err != nil {
		return err
	}
	if tgt, ok := view.ByNS(to); ok {
		if !dropTarget {
			return mongoerr.New(mongoerr.NamespaceExists, "target namespace exists")
		}
		if err := c.dropLocked(st, tgt); err != nil {
			return err
		}
	}
	d, err := c.readEntry(ru, src)
	if err != nil {
		return err
	}
	d.NS = to
	if err := c.writeEntry(ru, d); err != nil {
		return err
	}
	st.record(change{id: d.CatalogID, meta: d})
	return nil
}

// UpdateOptions replaces ns's collection options (collMod). The uuid is kept whatever
// options says; every other option is taken from options (callers merge).
func (c *Catalog) UpdateOptions(ru *storage.RecoveryUnit, ns string, options bsoncore.Document) error {
	if len(options) > 0 {
		if err := options.Validate(); err != nil {
			return mongoerr.Newf(mongoerr.InvalidBSON, "invalid collection options: %v", err)
		}
	}
	st, done, err := c.beginDDL(ru)
	if err != nil {
		return err
	}
	defer done()
	m, err := c.lookup(st, ns)
	if err != nil {
		return err
	}
	d, err := c.readEntry(ru, m)
	if err != nil {
		return err
	}
	if d.Options, err = buildOptions(d.UUID, options); err != nil {
		return mongoerr.Newf(mongoerr.InvalidBSON, "invalid collection options: %v", err)
	}
	decodeCollOptions(d)
	if err := c.writeEntry(ru, d); err != nil {
		return err
	}
	st.record(change{id: d.CatalogID, meta: d})
	return nil
}

// identifyingIndexOptions distinguish indexes with the same key pattern: two indexes whose
// keys and identifying options are equal are "equivalent" and cannot coexist.
var identifyingIndexOptions = []string{"collation", "partialFilterExpression", "wildcardProjection"}

// ignoredIndexOptions do not take part in comparing specs.
var ignoredIndexOptions = map[string]bool{"v": true, "name": true, "key": true, "ns": true, "background": true}

func valuesEqual(a, b bsoncore.Document, key string) bool {
	va, ea := a.LookupErr(key)
	vb, eb := b.LookupErr(key)
	if (ea == nil) != (eb == nil) {
		return false
	}
	return ea != nil || va.Equal(vb)
}

// optionsIdentical reports whether two specs have the same options, ignoring order and the
// fields in ignoredIndexOptions.
func optionsIdentical(a, b bsoncore.Document) bool {
	keys := map[string]bool{}
	for _, d := range []bsoncore.Document{a, b} {
		elems, _ := d.Elements()
		for _, e := range elems {
			if !ignoredIndexOptions[e.Key()] {
				keys[e.Key()] = true
			}
		}
	}
	for k := range keys {
		if !valuesEqual(a, b, k) {
			return false
		}
	}
	return true
}

// checkIndexConflict applies MongoDB's rules for a new index against an existing one.
func checkIndexConflict(ns string, req *IndexMeta, ex *IndexMeta) error {
	// Key patterns compare as BSON (SimpleBSONObjComparator): field names and order, numbers
	// by value, so {a: 1} and {a: 1.0} are the same key.
	sameKey := bsonutil.CompareDocuments(bsoncore.Document(req.KeyPattern), bsoncore.Document(ex.KeyPattern)) == 0
	equivalent := sameKey
	for _, k := range identifyingIndexOptions {
		if !valuesEqual(req.Spec, ex.Spec, k) {
			equivalent = false
		}
	}
	if req.Name == ex.Name {
		switch {
		case equivalent && optionsIdentical(req.Spec, ex.Spec):
			return mongoerr.Newf(mongoerr.IndexAlreadyExists, "Identical index already exists: %s", ex.Name)
		case equivalent:
			return mongoerr.Newf(mongoerr.IndexOptionsConflict,
				"An equivalent index already exists with the same name but different options. Requested index: %s, existing index: %s",
				bsonutil.FormatDoc(req.Spec), bsonutil.FormatDoc(ex.Spec))
		default:
			return mongoerr.Newf(mongoerr.IndexKeySpecsConflict,
				"An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: %s, existing index: %s",
				bsonutil.FormatDoc(req.Spec), bsonutil.FormatDoc(ex.Spec))
		}
	}
	if equivalent {
		return mongoerr.Newf(mongoerr.IndexOptionsConflict, "Index already exists with a different name: %s", ex.Name)
	}
	return nil
}

// AddIndex adds an index to ns's metadata and creates its table. A ready index is only
// correct on an empty collection (or when the caller has built it in the same unit); index
// builds add it not ready with their buildUUID and call SetIndexReady when done.
// An identical existing index returns IndexAlreadyExists (68), which createIndexes treats as
// success; conflicting ones return IndexOptionsConflict (85) / IndexKeySpecsConflict (86).
func (c *Catalog) AddIndex(ru *storage.RecoveryUnit, ns string, spec bsoncore.Document, ready bool, buildUUID *UUID) (*IndexMeta, error) {
	norm, err := normalizeIndexSpec(spec)
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.FailedToParse, "invalid index specification: %v", err)
	}
	req := IndexMeta{Ready: ready}
	if err := decodeIndexSpec(&req, norm); err != nil {
		return nil, mongoerr.Newf(mongoerr.FailedToParse, "invalid index specification: %v", err)
	}
	if len(req.KeyPattern) <= 5 {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "Index keys cannot be empty.")
	}
	if buildUUID != nil {
		u := *buildUUID
		req.BuildUUID = &u
	}
	req.MultikeyPaths = emptyMultikeyPaths(req.KeyPattern)
	st, done, err := c.beginDDL(ru)
	if err != nil {
		return nil, err
	}
	defer done()
	m, err := c.lookup(st, ns)
	if err != nil {
		return nil, err
	}
	for i := range m.Indexes {
		if err := checkIndexConflict(ns, &req, &m.Indexes[i]); err != nil {
			return nil, err
		}
	}
	if len(m.Indexes) >= maxIndexesPerCollection {
		return nil, mongoerr.Newf(mongoerr.CannotCreateIndex,
			"add index fails, too many indexes for %s key:%s", ns, req.KeyPattern)
	}
	d, err := c.readEntry(ru, m)
	if err != nil {
		return nil, err
	}
	if req.Ident, err = c.createIdent(st, "index", ns); err != nil {
		return nil, err
	}
	d.Indexes = append(d.Indexes, req)
	if err := c.writeEntry(ru, d); err != nil {
		return nil, err
	}
	st.record(change{id: d.CatalogID, meta: d})
	out := d.Indexes[len(d.Indexes)-1]
	return &out, nil
}

// IndexExists reports whether m already has an index identical to spec (what AddIndex
// answers with IndexAlreadyExists), without changing anything; a conflicting index is the
// error AddIndex would return. A transaction uses it on a collection it may not add indexes
// to.
func IndexExists(m *CollectionMeta, spec bsoncore.Document) (bool, error) {
	norm, err := normalizeIndexSpec(spec)
	if err != nil {
		return false, mongoerr.Newf(mongoerr.FailedToParse, "invalid index specification: %v", err)
	}
	var req IndexMeta
	if err := decodeIndexSpec(&req, norm); err != nil {
		return false, mongoerr.Newf(mongoerr.FailedToParse, "invalid index specification: %v", err)
	}
	for i := range m.Indexes {
		err := checkIndexConflict(m.NS, &req, &m.Indexes[i])
		if mongoerr.Is(err, mongoerr.IndexAlreadyExists) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// modifyIndex reads ns's entry, applies f to the named index and writes it back.
func (c *Catalog) modifyIndex(ru *storage.RecoveryUnit, ns, name string, f func(d *CollectionMeta, i int) error) error {
	st, done, err := c.beginDDL(ru)
	if err != nil {
		return err
	}
	defer done()
	m, err := c.lookup(st, ns)
	if err != nil {
		return err
	}
	if _, ok := m.Index(name); !ok {
		return mongoerr.Newf(mongoerr.IndexNotFound, "index not found with name [%s]", name)
	}
	d, err := c.readEntry(ru, m)
	if err != nil {
		return err
	}
	pos := -1
	for i := range d.Indexes {
		if d.Indexes[i].Name == name {
			pos = i
		}
	}
	if pos < 0 {
		return mongoerr.Newf(mongoerr.WriteConflict, "WriteConflict: index %s of %s changed concurrently", name, ns)
	}
	if err := f(d, pos); err != nil {
		return err
	}
	if err := c.writeEntry(ru, d); err != nil {
		return err
	}
	st.record(change{id: d.CatalogID, meta: d})
	return nil
}

// SetIndexReady marks an index built: ready, and no longer carrying a buildUUID.
func (c *Catalog) SetIndexReady(ru *storage.RecoveryUnit, ns, name string) error {
	return c.modifyIndex(ru, ns, name, func(d *CollectionMeta, i int) error {
		d.Indexes[i].Ready = true
		d.Indexes[i].BuildUUID = nil
		return nil
	})
}

// ReplaceIndexSpec replaces an index's spec (collMod of hidden, expireAfterSeconds, unique,
// prepareUnique). The key pattern and name cannot change.
func (c *Catalog) ReplaceIndexSpec(ru *storage.RecoveryUnit, ns, name string, spec bsoncore.Document) error {
	norm, err := normalizeIndexSpec(spec)
	if err != nil {
		return mongoerr.Newf(mongoerr.FailedToParse, "invalid index specification: %v", err)
	}
	return c.modifyIndex(ru, ns, name, func(d *CollectionMeta, i int) error {
		ix := d.Indexes[i]
		n := ix
		if err := decodeIndexSpec(&n, norm); err != nil {
			return mongoerr.Newf(mongoerr.FailedToParse, "invalid index specification: %v", err)
		}
		if n.Name != ix.Name || n.KeyPattern.String() != ix.KeyPattern.String() {
			return mongoerr.New(mongoerr.InvalidOptions, "cannot change the name or key pattern of an index")
		}
		d.Indexes[i] = n
		return nil
	})
}

// DropIndex removes an index from ns's metadata (two-phase: its table is reaped later).
// Dropping _id_ is InvalidOptions (72) as in MongoDB.
func (c *Catalog) DropIndex(ru *storage.RecoveryUnit, ns, name string) error {
	if name == IDIndexName {
		return mongoerr.New(mongoerr.InvalidOptions, "cannot drop _id index")
	}
	var dropped pendingIdent
	err := c.modifyIndex(ru, ns, name, func(d *CollectionMeta, i int) error {
		dropped = pendingIdent{ident: d.Indexes[i].Ident, ns: ns, index: name, untimestamped: isLocalNS(ns)}
		d.Indexes = append(d.Indexes[:i:i], d.Indexes[i+1:]...)
		return nil
	})
	if err != nil {
		return err
	}
	if err := c.persistDropPending(ru, []pendingIdent{dropped}); err != nil {
		return err
	}
	c.mu.Lock()
	st := c.units[ru]
	c.mu.Unlock()
	st.dropped = append(st.dropped, dropped)
	return nil
}

// SetMultikey records that index name of ns is multikey with (at least) the given paths —
// one []bool per key field, true where that path component was an array. The flag only
// grows: paths are unioned with the existing ones. When they are already covered this is a
// cheap in-memory check with no write. It does not take the DDL mutex (it runs inside
// ordinary inserts); concurrent updates of the same entry conflict in storage instead.
func (c *Catalog) SetMultikey(ru *storage.RecoveryUnit, ns, name string, paths [][]bool) error {
	st, err := c.unit(ru)
	if err != nil {
		return err
	}
	m, err := c.lookup(st, ns)
	if err != nil {
		return err
	}
	ix, ok := m.Index(name)
	if !ok {
		return mongoerr.Newf(mongoerr.IndexNotFound, "index not found with name [%s]", name)
	}
	if coversMultikey(ix, true, paths) {
		return nil
	}
	d, err := c.readEntry(ru, m)
	if err != nil {
		return err
	}
	found := false
	for i := range d.Indexes {
		if d.Indexes[i].Ident == ix.Ident {
			found = true
			unionMultikey(&d.Indexes[i], true, paths)
		}
	}
	if !found {
		return mongoerr.Newf(mongoerr.WriteConflict, "WriteConflict: index %s of %s changed concurrently", name, ns)
	}
	if err := c.writeEntry(ru, d); err != nil {
		return err
	}
	// A transaction's unit merges multikey state even after DDL: it only ever changed
	// collections it created, whose full changes come first in st.changes.
	st.record(change{id: d.CatalogID, meta: d, multikeyOnly: !st.ddl || st.txn})
	return nil
}
