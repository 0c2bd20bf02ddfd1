package commands

import (
	"context"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query"
	"humongo/internal/recordid"
	"humongo/internal/service"
	"humongo/internal/txn/retryable"
)

func addDelete(r *service.Registry) {
	add(r, &service.Command{
		Name:    "delete",
		Auth:    service.AuthDelete,
		Handler: runDelete,
		Help:    "delete documents",
		Writes:  true,
		Counter: "delete",
	})
}

var writeDeleteFields = []string{"deletes", "ordered", "let", "isTimeseriesNamespace", "collectionUUID", "stmtIds"}

// writeDeleteStmt is one parsed entry of delete.deletes (DeleteOpEntry).
type writeDeleteStmt struct {
	q     bsoncore.Document
	multi bool // limit 0
	hint  bsoncore.Value
	coll  writeCollation
	retry *retryable.Stmt // the retryable write's statement; nil when not one

	// Set from the command, not the statement.
	let bsoncore.Document // the command's let; nil when absent
	now time.Time         // the command's $$NOW
}

func writeParseDeleteStmt(v bsoncore.Value, i int) (*writeDeleteStmt, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, typeMismatch("delete", "deletes."+itoa(int64(i)), v.Type, "object")
	}
	elems, err := d.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid delete statement: %v", err)
	}
	st := &writeDeleteStmt{}
	haveQ, haveLimit := false, false
	for _, e := range elems {
		ev := e.Value()
		switch e.Key() {
		case "q":
			if st.q, err = writeDocArg("delete", "deletes.q", ev); err != nil {
				return nil, err
			}
			haveQ = true
		case "limit":
			// write_ops.cpp's readMultiDeleteProperty: any type, read as a double (so a
			// non-number is 0, a multi-delete), and only 0 or 1 allowed.
			n, _ := bsonutil.ToFloat64(ev)
			if n != 0 && n != 1 {
				return nil, mongoerr.Newf(mongoerr.FailedToParse,
					"The limit field in delete objects must be 0 or 1. Got %s", strconv.FormatFloat(n, 'g', -1, 64))
			}
			st.multi, haveLimit = n == 0, true
		case "hint":
			if err := writeCheckHint("delete.deletes", ev); err != nil {
				return nil, err
			}
			st.hint = ev
		case "collation":
			if st.coll, err = writeParseCollation("delete.deletes", ev); err != nil {
				return nil, err
			}
		case "sampleId":
		default:
			return nil, mongoerr.Newf(codeUnknownField, "BSON field 'delete.deletes.%s' is an unknown field.", e.Key())
		}
	}
	if !haveQ {
		return nil, writeMissing("delete.deletes.q")
	}
	if !haveLimit {
		return nil, writeMissing("delete.deletes.limit")
	}
	st.hint = writeNormalizeHint(st.hint)
	return st, nil
}

// runDelete is the delete command: {delete: coll, deletes: [{q, limit}], ordered} →
// {n, writeErrors?}.
func runDelete(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, ns, ordered, err := writeCommandPrologue(env, cmd, "delete", writeDeleteFields)
	if err != nil {
		return nil, err
	}
	var let bsoncore.Document
	if v := lookup(cmd, "let"); v.Type != 0 {
		if let, err = writeDocArg("delete", "let", v); err != nil {
			return nil, err
		}
	}
	wc, err := writeParseConcern(env, cmd)
	if err != nil {
		return nil, err
	}
	dv := lookup(cmd, "deletes")
	if dv.Type == 0 {
		return nil, writeMissing("delete.deletes")
	}
	arr, ok := dv.ArrayOK()
	if !ok {
		return nil, typeMismatch("delete", "deletes", dv.Type, "array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid deletes array: %v", err)
	}
	if len(vals) < 1 || len(vals) > writeMaxBatch {
		return nil, mongoerr.Newf(mongoerr.InvalidLength,
			"Write batch sizes must be between 1 and %d. Got %d operations.", writeMaxBatch, len(vals))
	}
	stmts := make([]*writeDeleteStmt, len(vals))
	now := time.Now()
	for i, v := range vals {
		if stmts[i], err = writeParseDeleteStmt(v, i); err != nil {
			return nil, err
		}
		stmts[i].let, stmts[i].now = let, now
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
	n, deleted, attempted := 0, 0, 0
	var errs []writeStmtError
	for i, st := range stmts {
		attempted++
		st.retry = rc.Stmt(i, st.multi)
		res, retried, err := retryReplayDelete(ctx, st.retry)
		if !retried && err == nil {
			res, err = writeExecDelete(ctx, op, ns, st, nil, false)
		}
		// A failed statement's partial deletes stay done but are not reported in n, as in
		// MongoDB's performDeletes.
		deleted += res.n
		if err == nil {
			n += res.n
		} else {
			if writeIsFatal(ctx, err) {
				writeCountOps(env, "delete", attempted)
				env.State.Counters.DocsDeleted.Add(int64(deleted))
				return nil, err
			}
			errs = append(errs, writeStmtError{index: i, err: err})
			if ordered {
				break
			}
		}
	}
	writeCountOps(env, "delete", attempted)
	env.State.Counters.DocsDeleted.Add(int64(deleted))
	// The write concern waits for the client's last op even when nothing was written.
	return writeFinish(ctx, env, wc, doc(func(b []byte) []byte {
		b = bsoncore.AppendInt32Element(b, "n", int32(n))
		return writeAppendErrors(b, errs)
	}))
}

// writeDeleteResult is the outcome of one delete statement.
type writeDeleteResult struct {
	n       int
	deleted bsoncore.Document // the deleted document when a single one was asked for
}

// writeExecDelete runs one delete statement: a single delete finds and removes in one unit;
// a multi-delete collects RecordIds first and deletes them in chunks, re-matching each.
func writeExecDelete(ctx context.Context, op *operation.Context, ns string, st *writeDeleteStmt, sortSpec bsoncore.Document, keepImage bool) (writeDeleteResult, error) {
	var res writeDeleteResult
	vars, err := evalCommandLet(st.let, st.now)
	if err != nil {
		return res, err
	}
	matcher, err := writeParseFilterCollated(op, ns, st.q, st.coll, vars)
	if err != nil {
		return res, err
	}
	spec := &writeScan{filter: st.q, matcher: matcher, sort: sortSpec, hint: st.hint, limit: 1, coll: st.coll, vars: vars}
	if !st.multi {
		err := op.WriteCollection(ctx, ns, false, st.retry.Wrap(op, func(coll *index.Collection) error {
			res = writeDeleteResult{}
			ts, err := writeFindTargets(ctx, op, ns, coll, spec)
			if err != nil || len(ts) == 0 {
				return err
			}
			if err := coll.DeleteDocument(op.RU, ts[0].rid, ts[0].doc); err != nil {
				return err
			}
			res.n = 1
			if keepImage {
				res.deleted = ts[0].doc
			}
			return nil
		}, func() (bsoncore.Document, bsoncore.Document) { return res.deleted, nil }))
		return res, err
	}
	spec.limit = 0
	var rids []recordid.ID
	err = op.WriteCollection(ctx, ns, false, func(coll *index.Collection) error {
		var err error
		rids, err = writeFindRIDs(ctx, op, ns, coll, spec)
		return err
	})
	if err != nil {
		return res, err
	}
	for start := 0; start < len(rids); start += writeUpdateChunk {
		chunk := rids[start:min(start+writeUpdateChunk, len(rids))]
		part := 0
		err := op.WriteCollection(ctx, ns, false, func(coll *index.Collection) error {
			part = 0
			if coll == nil {
				return nil
			}
			return writeDeleteChunk(op, coll, matcher, chunk, &part)
		})
		if err != nil {
			return res, err
		}
		res.n += part
		if err := ctx.Err(); err != nil {
			return res, context.Cause(ctx)
		}
	}
	return res, nil
}

func writeDeleteChunk(op *operation.Context, coll *index.Collection, matcher *query.Matcher, chunk []recordid.ID, part *int) error {
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
		if err := coll.DeleteDocument(op.RU, rid, append(bsoncore.Document(nil), cur...)); err != nil {
			return err
		}
		*part++
	}
	return nil
}
