package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/service"
	"humongo/internal/txn/retryable"
)

func addInsert(r *service.Registry) {
	add(r, &service.Command{
		Name:    "insert",
		Auth:    service.AuthInsert,
		Handler: runInsert,
		Help:    "insert documents",
		Writes:  true,
		Counter: "insert",
	})
}

// writeInsertGroupDocs and writeInsertGroupBytes bound how many documents of a batch share
// one WriteUnitOfWork (MongoDB's insertBatchAndHandleErrors groups up to internalInsertMaxBatchSize
// 64 documents and 256 KB). A failing group is retried one document per unit to find the
// failing index, so results are exactly those of one-by-one inserts.
const (
	writeInsertGroupDocs  = 64
	writeInsertGroupBytes = 256 << 10
)

var writeInsertFields = []string{"documents", "ordered", "bypassDocumentValidation", "let", "isTimeseriesNamespace", "collectionUUID", "stmtIds"}

// runInsert is the insert command: {insert: coll, documents: [...], ordered, ...} →
// {n, writeErrors?}.
func runInsert(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, ns, ordered, err := writeCommandPrologue(env, cmd, "insert", writeInsertFields)
	if err != nil {
		return nil, err
	}
	bypass := false
	if v := lookup(cmd, "bypassDocumentValidation"); v.Type != 0 {
		if bypass, err = writeSafeBool("insert", "bypassDocumentValidation", v); err != nil {
			return nil, err
		}
	}
	wc, err := writeParseConcern(env, cmd)
	if err != nil {
		return nil, err
	}
	dv := lookup(cmd, "documents")
	if dv.Type == 0 {
		return nil, writeMissing("insert.documents")
	}
	arr, ok := dv.ArrayOK()
	if !ok {
		return nil, typeMismatch("insert", "documents", dv.Type, "array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid documents array: %v", err)
	}
	if len(vals) < 1 || len(vals) > writeMaxBatch {
		return nil, mongoerr.Newf(mongoerr.InvalidLength,
			"Write batch sizes must be between 1 and %d. Got %d operations.", writeMaxBatch, len(vals))
	}
	docs := make([]bsoncore.Document, len(vals))
	for i, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, typeMismatch("insert", "documents."+itoa(int64(i)), v.Type, "object")
		}
		docs[i] = d
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
	w := &writeInserter{ctx: ctx, op: op, ns: ns, ordered: ordered, bypass: bypass, retry: rc,
		check: shardIdentityCheck(env.State, ns), written: autoSplitTracker(env.State, op, ns)}
	w.run(docs)
	if w.n > 0 {
		afterShardIdentityInsert(ctx, env, ns, docs)
	}
	writeCountOps(env, "insert", w.attempted)
	env.State.Counters.DocsInserted.Add(int64(w.n))
	if w.fatal != nil {
		// Interruptions fail the whole command, as in MongoDB's handleError.
		return nil, w.fatal
	}
	// The write concern waits for the client's last op even when nothing was written.
	return writeFinish(ctx, env, wc, doc(func(b []byte) []byte {
		b = bsoncore.AppendInt32Element(b, "n", int32(w.n))
		return writeAppendErrors(b, w.errs)
	}))
}

// writeInserter runs one insert command's batch.
type writeInserter struct {
	ctx     context.Context
	op      *operation.Context
	ns      string
	ordered bool
	bypass  bool           // bypassDocumentValidation
	retry   *retryable.Txn // the retryable write's session; nil when not one
	// check vets each document before it is inserted (a shard's shardIdentity document);
	// nil when none applies.
	check func(bsoncore.Document) error
	// written is told the documents of each successful insert (a routed write's chunk
	// tracking for auto-split); nil when none applies.
	written func([]bsoncore.Document)

	n         int // documents inserted
	attempted int // documents processed (opcounters.insert)
	errs      []writeStmtError
	fatal     error // the error that stopped the batch early, if any
}

// run inserts docs, grouping consecutive valid documents into one unit.
func (w *writeInserter) run(docs []bsoncore.Document) {
	group := make([]bsoncore.Document, 0, writeInsertGroupDocs)
	groupStart, groupBytes := 0, 0
	flush := func() bool {
		if len(group) == 0 {
			return true
		}
		ok := w.insertGroup(groupStart, group)
		group, groupBytes = group[:0], 0
		return ok
	}
	for i, d := range docs {
		// A statement a retried command already ran counts as inserted and is skipped
		// (flushing keeps each group's statement ids consecutive).
		if done, err := w.retry.Executed(i); done || err != nil {
			if !flush() {
				return
			}
			if err != nil {
				w.fatal = err
				return
			}
			w.n++
			w.attempted++
			continue
		}
		fixed, err := writeFixForInsert(w.op.DB, d)
		if err == nil && w.check != nil {
			err = w.check(fixed)
		}
		if err != nil {
			if !flush() {
				return
			}
			w.attempted++
			w.errs = append(w.errs, writeStmtError{index: i, err: err})
			if w.ordered {
				return
			}
			continue
		}
		if len(group) > 0 && !w.retry.FollowsStmt(i) {
			// A router's stmtIds need not be consecutive: one group logs consecutive ids.
			if !flush() {
				return
			}
		}
		if len(group) == 0 {
			groupStart = i
		}
		group = append(group, fixed)
		groupBytes += len(fixed)
		if len(group) >= writeInsertGroupDocs || groupBytes >= writeInsertGroupBytes {
			if !flush() {
				return
			}
		}
	}
	flush()
}

// insertGroup inserts docs (the batch's documents start..start+len-1, all valid) in one unit;
// on failure it inserts them one by one to report exactly which failed. It returns false
// when the batch must stop (ordered failure or fatal error).
func (w *writeInserter) insertGroup(start int, docs []bsoncore.Document) bool {
	if len(docs) > 1 {
		err := w.op.WriteCollection(w.ctx, w.ns, true, w.retry.Stmt(start, false).Wrap(w.op, func(coll *index.Collection) error {
			for _, d := range docs {
				if err := validCheckDoc(w.op, coll, d, nil, w.bypass); err != nil {
					return err
				}
			}
			if _, err := coll.InsertDocuments(w.op.RU, docs); err != nil {
				return err
			}
			return writeCappedTrim(w.op, coll, int64(len(docs)), writeDocsBytes(docs))
		}, nil))
		if err == nil {
			w.n += len(docs)
			w.attempted += len(docs)
			if w.written != nil {
				w.written(docs)
			}
			return true
		}
		if writeIsFatal(w.ctx, err) {
			w.fatal = err
			return false
		}
	}
	for i, d := range docs {
		w.attempted++
		err := w.op.WriteCollection(w.ctx, w.ns, true, w.retry.Stmt(start+i, false).Wrap(w.op, func(coll *index.Collection) error {
			if err := validCheckDoc(w.op, coll, d, nil, w.bypass); err != nil {
				return err
			}
			if _, err := coll.InsertDocument(w.op.RU, d); err != nil {
				return err
			}
			return writeCappedTrim(w.op, coll, 1, int64(len(d)))
		}, nil))
		if err == nil {
			w.n++
			if w.written != nil {
				w.written(docs[i : i+1])
			}
			continue
		}
		if writeIsFatal(w.ctx, err) {
			w.fatal = err
			return false
		}
		w.errs = append(w.errs, writeStmtError{index: start + i, err: err})
		if w.ordered {
			return false
		}
	}
	return true
}

func writeDocsBytes(docs []bsoncore.Document) int64 {
	var n int64
	for _, d := range docs {
		n += int64(len(d))
	}
	return n
}
