package commands

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query"
	"humongo/internal/query/update"
	"humongo/internal/recordid"
	"humongo/internal/service"
	"humongo/internal/txn/retryable"
)

func addUpdate(r *service.Registry) {
	add(r, &service.Command{
		Name:    "update",
		Auth:    service.AuthUpdate,
		Handler: runUpdate,
		Help:    "update documents",
		Writes:  true,
		Counter: "update",
	})
}

var writeUpdateFields = []string{"updates", "ordered", "bypassDocumentValidation", "let", "isTimeseriesNamespace", "collectionUUID", "stmtIds"}

// writeUpdateStmt is one parsed entry of update.updates (UpdateOpEntry).
type writeUpdateStmt struct {
	q            bsoncore.Document
	u            bsoncore.Value
	multi        bool
	upsert       bool
	arrayFilters []bsoncore.Document
	hint         bsoncore.Value
	c            bsoncore.Document // pipeline constants; nil when absent
	coll         writeCollation

	// Set from the command, not the statement.
	let    bsoncore.Document // the command's let; nil when absent
	now    time.Time         // the command's $$NOW
	bypass bool              // bypassDocumentValidation
	retry  *retryable.Stmt   // the retryable write's statement; nil when not one
}

// writeUpdateResult is the outcome of one update statement.
type writeUpdateResult struct {
	n, nModified int
	upserted     bsoncore.Value // the upserted _id, Type 0 when none
	// value and valueAfter are findAndModify's pre- and post-image of the one document.
	before, after bsoncore.Document
}

// writeParseUpdateStmt parses one UpdateOpEntry (IDL errors are command errors).
func writeParseUpdateStmt(cmdName string, v bsoncore.Value, i int) (*writeUpdateStmt, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, typeMismatch(cmdName, "updates."+itoa(int64(i)), v.Type, "object")
	}
	elems, err := d.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid update statement: %v", err)
	}
	st := &writeUpdateStmt{}
	haveQ, haveU, haveAF := false, false, false
	for _, e := range elems {
		ev := e.Value()
		switch e.Key() {
		case "q":
			if st.q, err = writeDocArg(cmdName, "updates.q", ev); err != nil {
				return nil, err
			}
			haveQ = true
		case "u":
			if ev.Type != bsoncore.TypeEmbeddedDocument && ev.Type != bsoncore.TypeArray {
				return nil, typeMismatch(cmdName, "updates.u", ev.Type, "object", "array")
			}
			st.u, haveU = ev, true
		case "multi":
			if st.multi, err = writeSafeBool(cmdName, "updates.multi", ev); err != nil {
				return nil, err
			}
		case "upsert":
			if st.upsert, err = writeSafeBool(cmdName, "updates.upsert", ev); err != nil {
				return nil, err
			}
		case "arrayFilters":
			if st.arrayFilters, err = writeParseArrayFilters(cmdName+".updates", ev); err != nil {
				return nil, err
			}
			haveAF = true
		case "hint":
			if err := writeCheckHint(cmdName+".updates", ev); err != nil {
				return nil, err
			}
			st.hint = ev
		case "collation":
			if st.coll, err = writeParseCollation(cmdName+".updates", ev); err != nil {
				return nil, err
			}
		case "c":
			if st.c, err = writeDocArg(cmdName, "updates.c", ev); err != nil {
				return nil, err
			}
		case "upsertSupplied":
			if _, err := writeSafeBool(cmdName, "updates.upsertSupplied", ev); err != nil {
				return nil, err
			}
		case "sampleId":
		default:
			return nil, mongoerr.Newf(codeUnknownField, "BSON field '%s.updates.%s' is an unknown field.", cmdName, e.Key())
		}
	}
	if !haveQ {
		return nil, writeMissing(cmdName + ".updates.q")
	}
	if !haveU {
		return nil, writeMissing(cmdName + ".updates.u")
	}
	if st.u.Type == bsoncore.TypeArray && haveAF {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify arrayFilters and a pipeline update")
	}
	if st.c != nil && st.u.Type != bsoncore.TypeArray {
		return nil, mongoerr.New(mongoerr.Location51198, "Constant values may only be specified for pipeline updates")
	}
	st.hint = writeNormalizeHint(st.hint)
	return st, nil
}

// runUpdate is the update command: {update: coll, updates: [{q, u, ...}], ordered} →
// {n, writeErrors?, upserted?, nModified}.
func runUpdate(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, ns, ordered, err := writeCommandPrologue(env, cmd, "update", writeUpdateFields)
	if err != nil {
		return nil, err
	}
	bypass := false
	if v := lookup(cmd, "bypassDocumentValidation"); v.Type != 0 {
		if bypass, err = writeSafeBool("update", "bypassDocumentValidation", v); err != nil {
			return nil, err
		}
	}
	var let bsoncore.Document
	if v := lookup(cmd, "let"); v.Type != 0 {
		if let, err = writeDocArg("update", "let", v); err != nil {
			return nil, err
		}
	}
	wc, err := writeParseConcern(env, cmd)
	if err != nil {
		return nil, err
	}
	uv := lookup(cmd, "updates")
	if uv.Type == 0 {
		return nil, writeMissing("update.updates")
	}
	arr, ok := uv.ArrayOK()
	if !ok {
		return nil, typeMismatch("update", "updates", uv.Type, "array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid updates array: %v", err)
	}
	if len(vals) < 1 || len(vals) > writeMaxBatch {
		return nil, mongoerr.Newf(mongoerr.InvalidLength,
			"Write batch sizes must be between 1 and %d. Got %d operations.", writeMaxBatch, len(vals))
	}
	stmts := make([]*writeUpdateStmt, len(vals))
	now := time.Now()
	for i, v := range vals {
		if stmts[i], err = writeParseUpdateStmt("update", v, i); err != nil {
			return nil, err
		}
		stmts[i].let, stmts[i].now, stmts[i].bypass = let, now, bypass
	}
	if err := writeRejectView(ctx, env, ns); err != nil {
		return nil, err
	}

	rc, err := retryBegin(ctx, env, cmd)
	if err != nil {
		return nil, err
	}
	defer retryEnd(env, rc)

	op := db.NewOp(ctx)
	defer op.Close()
	var (
		n, nModified, attempted, wrote int
		errs                           []writeStmtError
		upserted                       []writeStmtError // index + _id (err unused)
		upsertedIDs                    []bsoncore.Value
	)
	for i, st := range stmts {
		attempted++
		st.retry = rc.Stmt(i, st.multi)
		res, retried, err := retryReplayUpdate(ctx, st.retry)
		if !retried && err == nil {
			res, err = writeExecUpdate(ctx, op, ns, st, false)
		}
		if err != nil {
			if writeIsFatal(ctx, err) {
				writeCountOps(env, "update", attempted)
				return nil, err
			}
			errs = append(errs, writeStmtError{index: i, err: err})
			if ordered {
				break
			}
			continue
		}
		if res.nModified > 0 || res.upserted.Type != 0 {
			autoSplitNoteUpdate(env.State, op, ns, st.q, st.u)
		}
		n += res.n
		nModified += res.nModified
		wrote += res.nModified
		if res.upserted.Type != 0 {
			upserted = append(upserted, writeStmtError{index: i})
			upsertedIDs = append(upsertedIDs, res.upserted)
			wrote++
		}
	}
	writeCountOps(env, "update", attempted)
	env.State.Counters.DocsUpdated.Add(int64(nModified))
	env.State.Counters.DocsInserted.Add(int64(len(upserted)))
	// The write concern waits for the client's last op even when nothing was written.
	return writeFinish(ctx, env, wc, doc(func(b []byte) []byte {
		b = bsoncore.AppendInt32Element(b, "n", int32(n))
		b = writeAppendErrors(b, errs)
		if len(upserted) > 0 {
			ai, b2 := bsoncore.AppendArrayElementStart(b, "upserted")
			for k, u := range upserted {
				di, b3 := bsoncore.AppendDocumentElementStart(b2, itoa(int64(k)))
				b3 = bsoncore.AppendInt32Element(b3, "index", int32(u.index))
				b3 = bsoncore.AppendValueElement(b3, "_id", upsertedIDs[k])
				b2, _ = bsoncore.AppendDocumentEnd(b3, di)
			}
			b, _ = bsoncore.AppendArrayEnd(b2, ai)
		}
		return bsoncore.AppendInt32Element(b, "nModified", int32(nModified))
	}))
}

// writeUpdateChunk is how many documents of a multi-update share one WriteUnitOfWork.
const writeUpdateChunk = 64

// writeExecUpdate runs one update statement. A single-document update finds and modifies
// its document in one unit (a WriteConflict re-runs both). A multi-update first collects
// the RecordIds of every match, then updates them in chunks, re-reading and re-matching
// each document: a document is visited once even when the update moves it in an index the
// scan would use (the Halloween problem), and documents changed concurrently so that they no
// longer match are skipped. keepImages asks for the pre/post images (findAndModify).
func writeExecUpdate(ctx context.Context, op *operation.Context, ns string, st *writeUpdateStmt, keepImages bool) (writeUpdateResult, error) {
	return writeExecUpdateSorted(ctx, op, ns, st, nil, keepImages)
}

func writeExecUpdateSorted(ctx context.Context, op *operation.Context, ns string, st *writeUpdateStmt, sortSpec bsoncore.Document, keepImages bool) (writeUpdateResult, error) {
	var res writeUpdateResult
	vars, err := evalCommandLet(st.let, st.now)
	if err != nil {
		return res, err
	}
	matcher, err := writeParseFilterCollated(op, ns, st.q, st.coll, vars)
	if err != nil {
		return res, err
	}
	upd, err := writeParseUpdate(st)
	if err != nil {
		return res, err
	}
	if st.multi && upd.isReplacement() {
		return res, mongoerr.New(mongoerr.FailedToParse, "multi update is not supported for replacement-style update")
	}
	spec := &writeScan{filter: st.q, matcher: matcher, sort: sortSpec, hint: st.hint, limit: 1, coll: st.coll, vars: vars}
	if st.multi {
		spec.limit = 0
	}

	if !st.multi {
		images := func() (bsoncore.Document, bsoncore.Document) {
			if res.upserted.Type != 0 {
				return nil, nil // a retried upsert rebuilds its document from the insert entry
			}
			return res.before, res.after
		}
		err := op.WriteCollection(ctx, ns, st.upsert, st.retry.Wrap(op, func(coll *index.Collection) error {
			res = writeUpdateResult{}
			ts, err := writeFindTargets(ctx, op, ns, coll, spec)
			if err != nil {
				return err
			}
			if len(ts) == 0 {
				if st.upsert && coll != nil {
					return writeDoUpsert(ctx, op, coll, st, upd, &res, keepImages)
				}
				return nil
			}
			return writeApplyOne(ctx, op, coll, matcher, upd, st.bypass, ts[0].rid, ts[0].doc, &res, keepImages)
		}, images))
		return res, err
	}

	var rids []recordid.ID
	err = op.WriteCollection(ctx, ns, st.upsert, func(coll *index.Collection) error {
		var err error
		rids, err = writeFindRIDs(ctx, op, ns, coll, spec)
		return err
	})
	if err != nil {
		return res, err
	}
	if len(rids) == 0 {
		if !st.upsert {
			return res, nil
		}
		err := op.WriteCollection(ctx, ns, true, func(coll *index.Collection) error {
			res = writeUpdateResult{}
			return writeDoUpsert(ctx, op, coll, st, upd, &res, false)
		})
		return res, err
	}
	for start := 0; start < len(rids); start += writeUpdateChunk {
		chunk := rids[start:min(start+writeUpdateChunk, len(rids))]
		var part writeUpdateResult
		err := op.WriteCollection(ctx, ns, false, func(coll *index.Collection) error {
			part = writeUpdateResult{}
			if coll == nil {
				return nil // dropped meanwhile
			}
			for _, rid := range chunk {
				cur, found, err := coll.RecordStore().Get(op.RU, rid)
				if err != nil {
					return err
				}
				if !found {
					continue
				}
				ok, err := matcher.Matches(cur)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				if err := writeApplyOne(ctx, op, coll, matcher, upd, st.bypass, rid, append(bsoncore.Document(nil), cur...), &part, false); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		res.n += part.n
		res.nModified += part.nModified
		if err := ctx.Err(); err != nil {
			return res, context.Cause(ctx)
		}
	}
	return res, nil
}

// writeApplyOne applies upd to the document rid (cur is a private copy) and stores the result
// when it differs (no-op updates write nothing, are not validated and do not count in
// nModified). A changed document is checked against the collection's validator unless bypass.
func writeApplyOne(ctx context.Context, op *operation.Context, coll *index.Collection, matcher *query.Matcher, upd *writeModifier,
	bypass bool, rid recordid.ID, cur bsoncore.Document, res *writeUpdateResult, keepImages bool) error {
	var details query.MatchDetails
	if _, err := matcher.MatchesWithDetails(cur, &details); err != nil {
		return err
	}
	newDoc, changed, err := upd.apply(ctx, cur, details.ElemMatchKey, false)
	if err != nil {
		return err
	}
	res.n++
	if keepImages {
		res.before, res.after = cur, newDoc
	}
	if !changed {
		return nil
	}
	if len(newDoc) > index.MaxDocumentSize {
		return mongoerr.Newf(mongoerr.BSONObjectTooLarge,
			"Resulting document after update is larger than %d", index.MaxDocumentSize)
	}
	if err := validCheckDoc(op, coll, newDoc, cur, bypass); err != nil {
		return err
	}
	if err := coll.UpdateDocumentAs(op.RU, rid, cur, newDoc, upd.kind()); err != nil {
		return err
	}
	res.nModified++
	return nil
}

// writeDoUpsert inserts the document an upsert creates: the query's equality fields (only
// _id for a replacement) with the update applied as an insert ($setOnInsert applies). The
// new document is validated as an insert.
func writeDoUpsert(ctx context.Context, op *operation.Context, coll *index.Collection, st *writeUpdateStmt, upd *writeModifier,
	res *writeUpdateResult, keepImages bool) error {
	newDoc, err := writeUpsertDoc(ctx, op.DB, st.q, upd)
	if err != nil {
		return err
	}
	if err := validCheckDoc(op, coll, newDoc, nil, st.bypass); err != nil {
		return err
	}
	if _, err := coll.InsertDocument(op.RU, newDoc); err != nil {
		return err
	}
	id, _ := newDoc.LookupErr("_id")
	res.n = 1
	res.upserted = id
	if keepImages {
		res.after = newDoc
	}
	return nil
}

// writeUpsertDoc builds the document an upsert inserts.
func writeUpsertDoc(ctx context.Context, db *operation.DB, q bsoncore.Document, upd *writeModifier) (bsoncore.Document, error) {
	seed, err := update.UpsertSeed(q)
	if err != nil {
		return nil, err
	}
	if upd.isReplacement() {
		// Only the query's _id carries over into a replacement.
		if id, err := seed.LookupErr("_id"); err == nil {
			seed = bsoncore.NewDocumentBuilder().AppendValue("_id", id).Build()
		} else {
			seed = bsoncore.Document{5, 0, 0, 0, 0}
		}
	}
	newDoc, _, err := upd.apply(ctx, seed, "", true)
	if err != nil {
		return nil, err
	}
	return writeFixForInsert(db, newDoc)
}
