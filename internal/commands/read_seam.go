package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query/plan"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// The read seam: every read of user data opens its collection snapshot here (openRead, or
// readLocked when the caller already holds the collection lock) and builds its plan through
// the returned readColl, which carries the ownership filter resolved for the namespace when
// the snapshot was opened (MongoDB's AutoGetCollectionForRead + ScopedCollectionFilter).
// Users: find, count, distinct, explain, the aggregation input and its $lookup/$graphLookup/
// $unionWith foreign reads and $merge targets, update/delete/findAndModify targeting
// (including the _id point lookup), and the raw scans of dbHash, dataSize and createIndexes.
//
// The operation layer (internal/operation) will own this file's functions; they take the
// OpCtx so that the shard version the request carries can select the filter there.

// readScope says which documents a read sees.
type readScope int

const (
	// readOwned is every user read: queries, aggregation sources, write targeting. Documents
	// this node does not own (orphans of a sharded collection) are invisible.
	readOwned readScope = iota
	// readAllRecords is a scan of every record, orphans included, as mongod's
	// InternalPlanner scans without a shard filter: dbHash (replica-set consistency of the
	// physical data), dataSize (the splitter's and balancer's view of the data in a range)
	// and index builds (orphans are indexed, so a migration back or the range deleter finds
	// them through the indexes).
	readAllRecords
)

// readColl is one read's collection snapshot. meta and coll are nil when the collection does
// not exist (plans over it are EOF).
type readColl struct {
	ns    string
	meta  *catalog.CollectionMeta
	coll  *index.Collection
	scope readScope
	// owner is the ownership filter of a readOwned snapshot; nil on unsharded data.
	owner plan.OwnershipFilter
}

// openRead locks ns for reading in op (see OpCtx.ReadCollection) and returns its snapshot
// with the ownership filter for the namespace. release drops the locks and abandons op's
// storage snapshot.
func openRead(ctx context.Context, op *operation.Context, ns string, scope readScope) (readColl, func(), error) {
	meta, coll, release, err := op.ReadCollection(ctx, ns)
	if err != nil {
		return readColl{}, nil, err
	}
	return newReadColl(op.DB, ns, meta, coll, scope), release, nil
}

// readLocked is openRead for a caller that already holds a lock on the collection (write
// targeting inside its unit of work, dbHash under its database lock). Whichever of meta and
// coll is nil is looked up from the other (the latest catalog for meta, the write paths for
// coll); ns is meta's when empty.
func readLocked(op *operation.Context, ns string, meta *catalog.CollectionMeta, coll *index.Collection, scope readScope) (readColl, error) {
	switch {
	case meta == nil && coll != nil:
		m, ok := op.DB.Catalog.Latest().ByUUID(coll.UUID())
		if !ok {
			coll = nil // dropped: reads as a missing collection
		}
		meta = m
	case meta != nil && coll == nil:
		c, err := op.DB.Colls.ByUUID(meta.UUID)
		if err != nil {
			return readColl{}, err
		}
		coll = c
	}
	if ns == "" && meta != nil {
		ns = meta.NS
	}
	return newReadColl(op.DB, ns, meta, coll, scope), nil
}

func newReadColl(db *operation.DB, ns string, meta *catalog.CollectionMeta, coll *index.Collection, scope readScope) readColl {
	r := readColl{ns: ns, meta: meta, coll: coll, scope: scope}
	if meta == nil || coll == nil {
		r.meta, r.coll = nil, nil
		return r
	}
	if scope == readOwned && db.OwnershipFilterFor != nil {
		r.owner = db.OwnershipFilterFor(ns)
	}
	return r
}

// plan builds req's plan over the snapshot, read through ru (op's, or a cursor's own).
func (r readColl) plan(ctx context.Context, ru *storage.RecoveryUnit, req plan.Request) (*plan.Executor, error) {
	req.Ownership = r.owner
	return plan.Prepare(ctx, ru, r.meta, r.coll, req)
}

// targets collects the records a write statement acts on (plan.Targets).
func (r readColl) targets(ctx context.Context, ru *storage.RecoveryUnit, req plan.Request) ([]plan.Target, *plan.Executor, error) {
	req.Ownership = r.owner
	return plan.Targets(ctx, ru, r.meta, r.coll, req)
}

// count counts req's matches (plan.Count: no fast count under an ownership filter).
func (r readColl) count(ctx context.Context, ru *storage.RecoveryUnit, req plan.Request) (int64, error) {
	req.Ownership = r.owner
	return plan.Count(ctx, ru, r.meta, r.coll, req)
}

// findByID is the _id point lookup that skips the planner (MongoDB's IDHACK). A document
// this node does not own reads as not found, as SHARDING_FILTER over IDHACK does. err is
// IndexNotFound when the collection has no _id index.
func (r readColl) findByID(ru *storage.RecoveryUnit, id bsoncore.Value) (recordid.ID, bsoncore.Document, bool, error) {
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

// records opens a cursor over every record in storage order, orphans included: only for
// readAllRecords snapshots of an existing collection (an owned read must go through a plan).
func (r readColl) records(ru *storage.RecoveryUnit) (*storage.RecordCursor, error) {
	if r.scope != readAllRecords {
		return nil, mongoerr.Newf(mongoerr.InternalError, "raw record scan of %s outside a readAllRecords snapshot", r.ns)
	}
	if r.coll == nil {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "collection %s does not exist", r.ns)
	}
	return r.coll.RecordStore().NewCursor(ru, false)
}
