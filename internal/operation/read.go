package operation

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/query/plan"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// The read seam: every read of user data opens its collection snapshot here (OpenRead, or
// ReadLocked when the caller already holds the collection lock) and builds its plan through
// the returned Read, which carries the ownership filter resolved for the namespace when the
// snapshot was opened (MongoDB's AutoGetCollectionForRead + ScopedCollectionFilter).
// Users: find, count, distinct, explain, the aggregation input and its $lookup/$graphLookup/
// $unionWith foreign reads and $merge targets, update/delete/findAndModify targeting
// (including the _id point lookup), and the raw scans of dbHash, dataSize and createIndexes.
// This file is the only caller of plan.Prepare, plan.Targets and plan.Count outside
// query/plan (commands' TestReadSeamIsTheOnlyPlanner checks it). The seam hangs off the
// operation Context so that the shard version the request carries (Context.ShardVersion)
// selects the filter here: DB.ShardCheck resolves it when the collection is locked.

// ReadScope says which documents a read sees.
type ReadScope int

const (
	// ReadOwned is every user read: queries, aggregation sources, write targeting. Documents
	// this node does not own (orphans of a sharded collection) are invisible.
	ReadOwned ReadScope = iota
	// ReadAllRecords is a scan of every record, orphans included, as mongod's
	// InternalPlanner scans without a shard filter: dbHash (replica-set consistency of the
	// physical data), dataSize (the splitter's and balancer's view of the data in a range)
	// and index builds (orphans are indexed, so a migration back or the range deleter finds
	// them through the indexes).
	ReadAllRecords
)

// Read is one read's collection snapshot. Meta and Coll are nil when the collection does
// not exist (plans over it are EOF).
type Read struct {
	ns    string
	meta  *catalog.CollectionMeta
	coll  *index.Collection
	scope ReadScope
	// owner is the ownership filter of a ReadOwned snapshot; nil on unsharded data.
	owner plan.OwnershipFilter
	// inTxn: the read is a statement of a multi-document transaction (plan.Request's
	// InTransaction: how its plans treat prepare conflicts).
	inTxn bool
}

// OpenRead locks ns for reading in op (see ReadCollection) and returns its snapshot with the
// ownership filter for the namespace. release drops the locks and abandons op's storage
// snapshot.
func (op *Context) OpenRead(ctx context.Context, ns string, scope ReadScope) (Read, func(), error) {
	meta, coll, release, err := op.ReadCollection(ctx, ns)
	if err != nil {
		return Read{}, nil, err
	}
	r := newRead(op, ns, meta, coll, scope)
	r.inTxn = op.InTxn()
	return r, release, nil
}

// ReadLocked is OpenRead for a caller that already holds a lock on the collection (write
// targeting inside its unit of work, dbHash under its database lock). Whichever of meta and
// coll is nil is looked up from the other (the latest catalog for meta, the write paths for
// coll); ns is meta's when empty.
func (op *Context) ReadLocked(ns string, meta *catalog.CollectionMeta, coll *index.Collection, scope ReadScope) (Read, error) {
	switch {
	case meta == nil && coll != nil:
		m, ok := op.Catalog().ByUUID(coll.UUID())
		if !ok {
			coll = nil // dropped: reads as a missing collection
		}
		meta = m
	case meta != nil && coll == nil:
		c, err := op.Collection(meta.UUID)
		if err != nil {
			return Read{}, err
		}
		coll = c
	}
	if ns == "" && meta != nil {
		ns = meta.NS
	}
	r := newRead(op, ns, meta, coll, scope)
	r.inTxn = op.InTxn()
	return r, nil
}

func newRead(op *Context, ns string, meta *catalog.CollectionMeta, coll *index.Collection, scope ReadScope) Read {
	r := Read{ns: ns, meta: meta, coll: coll, scope: scope}
	if meta == nil || coll == nil {
		r.meta, r.coll = nil, nil
		return r
	}
	switch {
	case scope != ReadOwned:
	case op.DB.OwnershipFilterFor != nil:
		r.owner = op.DB.OwnershipFilterFor(ns)
	default:
		// A versioned request's filter, resolved by DB.ShardCheck under the collection
		// lock; an unversioned read (a direct connection) sees every document.
		r.owner = op.owners[ns]
	}
	return r
}

// Meta is the snapshot's collection metadata; nil when the collection does not exist.
func (r Read) Meta() *catalog.CollectionMeta { return r.meta }

// Coll is the snapshot's collection; nil when the collection does not exist. Reading its
// records directly bypasses the ownership filter: use Plan, FindByID or Records.
func (r Read) Coll() *index.Collection { return r.coll }

// Plan builds req's plan over the snapshot, read through ru (op's, or a cursor's own).
func (r Read) Plan(ctx context.Context, ru *storage.RecoveryUnit, req plan.Request) (*plan.Executor, error) {
	req.Ownership, req.InTransaction = r.owner, r.inTxn
	ex, err := plan.Prepare(ctx, ru, r.meta, r.coll, req)
	if p, ok := r.owner.(PinnedFilter); ok && err == nil {
		// The plan may outlive the operation (a cursor): it keeps the filter's metadata in
		// use until it is closed, so the range deleter leaves the documents it may still read.
		ex.OnClose(p.Pin())
	}
	return ex, err
}

// PinnedFilter is an ownership filter whose metadata must stay in use while a read may
// still apply it (the shard's in-flight query tracking, sharding/filtering's preserver):
// Release gives back the use the operation got with it (Context.Close calls it), Pin takes
// one for a plan (Executor.Close gives it back).
type PinnedFilter interface {
	plan.OwnershipFilter
	Release()
	Pin() (unpin func())
}

// Targets collects the records a write statement acts on (plan.Targets).
func (r Read) Targets(ctx context.Context, ru *storage.RecoveryUnit, req plan.Request) ([]plan.Target, *plan.Executor, error) {
	req.Ownership, req.InTransaction = r.owner, r.inTxn
	return plan.Targets(ctx, ru, r.meta, r.coll, req)
}

// Count counts req's matches (plan.Count: no fast count under an ownership filter).
func (r Read) Count(ctx context.Context, ru *storage.RecoveryUnit, req plan.Request) (int64, error) {
	req.Ownership, req.InTransaction = r.owner, r.inTxn
	return plan.Count(ctx, ru, r.meta, r.coll, req)
}

// FindByID is the _id point lookup that skips the planner (MongoDB's IDHACK). A document
// this node does not own reads as not found, as SHARDING_FILTER over IDHACK does. err is
// IndexNotFound when the collection has no _id index.
func (r Read) FindByID(ru *storage.RecoveryUnit, id bsoncore.Value) (recordid.ID, bsoncore.Document, bool, error) {
	if r.coll == nil {
		return recordid.ID{}, nil, false, nil
	}
	rid, doc, found, err := r.coll.FindByID(ru, id)
	if err != nil || !found {
		return rid, doc, found, err
	}
	if r.owner != nil && !r.owner.KeyBelongs(doc) {
		return recordid.ID{}, nil, false, nil
	}
	return rid, doc, true, nil
}

// Records opens a cursor over every record in storage order, orphans included: only for
// ReadAllRecords snapshots of an existing collection (an owned read must go through a plan).
func (r Read) Records(ru *storage.RecoveryUnit) (*storage.RecordCursor, error) {
	if r.scope != ReadAllRecords {
		return nil, mongoerr.Newf(mongoerr.InternalError, "raw record scan of %s outside a ReadAllRecords snapshot", r.ns)
	}
	if r.coll == nil {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "collection %s does not exist", r.ns)
	}
	return r.coll.RecordStore().NewCursor(ru, false)
}
