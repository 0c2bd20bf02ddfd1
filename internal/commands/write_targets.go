package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query"
	"humongo/internal/query/plan"
	"humongo/internal/recordid"
)

// writeTarget is one document a write statement applies to: its RecordId and a private copy
// of the document as read in the statement's snapshot.
type writeTarget struct {
	rid recordid.ID
	doc bsoncore.Document
}

// writeScan describes which documents a write statement targets (MongoDB's
// UpdateRequest/DeleteRequest query part).
type writeScan struct {
	filter  bsoncore.Document
	matcher *query.Matcher
	sort    bsoncore.Document         // findAndModify only
	hint    bsoncore.Value            // Type 0 when absent
	limit   int                       // 0: every match; n: at most n (after sorting)
	coll    writeCollation            // the statement's collation (else the collection default)
	vars    map[string]bsoncore.Value // the command's let variables (the matcher has them too)
}

// writeFindTargets returns the documents spec targets, read through ru's snapshot (the caller
// holds the collection lock and, for single-document writes, the unit the write happens in, so
// a concurrent change surfaces as WriteConflict and the statement is retried).
//
// An `_id` equality without sort or hint is a point lookup through the _id index (MongoDB's
// IDHACK); anything else goes through the planner (index selection, hint, sort), in write
// mode so that each RecordId is returned once even if the write moves it in the scanned index.
// Both go through the read seam, so documents this node does not own are never targeted.
func writeFindTargets(ctx context.Context, op *operation.Context, ns string, coll *index.Collection, spec *writeScan) ([]writeTarget, error) {
	if coll == nil {
		return nil, nil
	}
	ru := op.RU
	rd, err := op.ReadLocked(ns, nil, coll, operation.ReadOwned) // the read seam (operation/read.go)
	if err != nil {
		return nil, err
	}
	if rd.Coll() == nil {
		return nil, nil
	}
	if id, ok := writeIDEquality(spec.filter); ok && spec.hint.Type == 0 && len(spec.sort) <= 5 {
		rid, doc, found, err := rd.FindByID(ru, id)
		switch {
		case err == nil && !found:
			return nil, nil
		case err == nil:
			ok, err := spec.matcher.Matches(doc)
			if err != nil || !ok {
				return nil, err
			}
			return []writeTarget{{rid: rid, doc: append(bsoncore.Document(nil), doc...)}}, nil
		case !mongoerr.Is(err, mongoerr.IndexNotFound):
			return nil, err
		}
	}
	ts, ex, err := rd.Targets(ctx, ru, plan.Request{
		NS: ns, Filter: spec.filter, Matcher: spec.matcher, Sort: spec.sort, Hint: spec.hint,
		Limit: int64(spec.limit), TempDir: op.DB.TempDir,
		Collation: spec.coll.c, CollationSet: spec.coll.set, Vars: spec.vars,
	})
	if err != nil {
		return nil, err
	}
	ex.Close()
	out := make([]writeTarget, len(ts))
	for i, t := range ts {
		out[i] = writeTarget{rid: t.RID, doc: t.Doc}
	}
	return out, nil
}

// writeFindRIDs returns the RecordIds of every document spec targets (multi-updates and
// multi-deletes), without keeping copies of the documents: they are re-read one chunk at a
// time when written.
func writeFindRIDs(ctx context.Context, op *operation.Context, ns string, coll *index.Collection, spec *writeScan) ([]recordid.ID, error) {
	if coll == nil {
		return nil, nil
	}
	rd, err := op.ReadLocked(ns, nil, coll, operation.ReadOwned) // the read seam (operation/read.go)
	if err != nil || rd.Coll() == nil {
		return nil, err
	}
	ex, err := rd.Plan(ctx, op.RU, plan.Request{
		NS: ns, Filter: spec.filter, Matcher: spec.matcher, Sort: spec.sort, Hint: spec.hint,
		Limit: int64(spec.limit), TempDir: op.DB.TempDir, ForWrite: true,
		Collation: spec.coll.c, CollationSet: spec.coll.set, Vars: spec.vars,
	})
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	var rids []recordid.ID
	for {
		rid, _, ok, err := ex.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			return rids, nil
		}
		rids = append(rids, rid)
	}
}

// writeIDEquality recognises {_id: v} with v a plain value (not an operator document, regex
// or array, whose matching is not a point lookup).
func writeIDEquality(filter bsoncore.Document) (bsoncore.Value, bool) {
	elems, err := filter.Elements()
	if err != nil || len(elems) != 1 || elems[0].Key() != "_id" {
		return bsoncore.Value{}, false
	}
	v := elems[0].Value()
	switch v.Type {
	case bsoncore.TypeRegex, bsoncore.TypeArray, bsoncore.TypeEmbeddedDocument, bsoncore.TypeUndefined,
		bsoncore.TypeMinKey, bsoncore.TypeMaxKey:
		return bsoncore.Value{}, false
	}
	return v, true
}
