package commands

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
	"humongo/internal/storage"
)

func addApplyOps(r *service.Registry) {
	add(r, &service.Command{
		Name:    "applyOps",
		Auth:    authApplyOps,
		Handler: runApplyOps,
		Help: "internal (sharding, tools): apply a list of oplog operations atomically\n" +
			"{applyOps: [{op: 'i'|'u'|'d'|'n', ns, ui?, o, o2?}, ...], alwaysUpsert?: true}",
		Writes: true,
	})
}

// applyOp is one validated operation of an applyOps command.
type applyOp struct {
	op, ns string
	ui     *catalog.UUID
	o, o2  bsoncore.Document
	upsert bool // an update may become an insert of its replacement document
}

// runApplyOps is MongoDB's applyOps in its atomic mode: the CRUD operations are applied
// all-or-nothing in one storage unit and, on a replica set, logged as ONE oplog entry
// {op: "c", ns: "admin.$cmd", o: {applyOps: [...]}} whose timestamp the writes take, so
// secondaries apply them atomically at the same timestamp (repl/oplog txn_apply.go). On a
// standalone the operations are applied without logging. Command operations (MongoDB
// applies those non-atomically, under the global lock) are refused, as are preCondition,
// operations on `local`, and the transaction-only fields prepare, partialTxn and count.
//
// Reply: {applied: N, results: [true, ...]}; no-op ('n') operations are skipped and not
// counted, as in MongoDB; a delete whose collection does not exist succeeds. A failing
// operation fails the whole command with its error, nothing applied (applied/results
// report the operations before it as MongoDB's error reply does).
func runApplyOps(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	ops, alwaysUpsert, err := parseApplyOpsCmd(cmd)
	if err != nil {
		return nil, err
	}
	parsed := make([]applyOp, 0, len(ops))
	var namespaces []string
	for i, raw := range ops {
		op, err := parseApplyOpsOp(i, raw, alwaysUpsert)
		if err != nil {
			return nil, err
		}
		if op.op == "n" {
			continue
		}
		parsed = append(parsed, op)
		if !slices.Contains(namespaces, op.ns) {
			namespaces = append(namespaces, op.ns)
		}
	}
	if len(parsed) == 0 {
		return applyOpsReply(0, true), nil
	}
	// Like every write, applyOps logs when the node's observer is the oplog writer (a
	// replica-set member; the writer refuses unless it is a writable primary).
	w, replicated := db.Observer().(*oplog.Writer)
	var applier *oplog.Applier
	if replicated {
		applier = w.Applier()
	} else {
		applier = oplog.NewApplier(oplog.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls, TempDir: db.TempDir})
	}

	o := db.NewOp(ctx)
	defer o.Close()
	scope, err := o.Locker.LockCollections(ctx, lock.ModeIX, namespaces...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = scope.Release() }()
	failedAt := -1 // the operation whose check failed, for the error reply
	err = o.InUnit(ctx, func() error {
		failedAt = -1
		final := make([]bsoncore.Document, 0, len(parsed))
		for i := range parsed {
			d, err := resolveApplyOp(o, &parsed[i])
			if err != nil {
				failedAt = i
				return err
			}
			if d != nil {
				final = append(final, d)
			}
		}
		if len(final) == 0 {
			return nil // nothing to write (no-ops, deletes from missing collections): no entry
		}
		var ts optime.Timestamp
		if replicated {
			ot, err := w.LogApplyOps(o.RU, final)
			if err != nil {
				return err
			}
			ts = ot.TS
		}
		return applyOpsInUnit(ctx, applier, o.RU, final, ts)
	})
	if err != nil {
		if me, ok := mongoerr.As(err); ok && failedAt >= 0 && me.Info == nil {
			// MongoDB's error reply says which operation failed: applied counts it,
			// results end with its false.
			return nil, me.WithInfo(applyOpsReply(failedAt+1, false))
		}
		return nil, err
	}
	return applyOpsReply(len(parsed), true), nil
}

// applyOpsInUnit applies the resolved operations at ts (0: a standalone's untimestamped
// writes).
func applyOpsInUnit(ctx context.Context, a *oplog.Applier, ru *storage.RecoveryUnit, ops []bsoncore.Document, ts optime.Timestamp) error {
	if len(ops) == 0 {
		return nil
	}
	return a.ApplyOpsInUnit(ctx, ru, ops, ts, oplog.ModeSecondary)
}

// applyOpsReply is {applied: n, results: [true × n]}, the last false when failed.
func applyOpsReply(n int, ok bool) bsoncore.Document {
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendInt32Element(b, "applied", int32(n))
		start, b := bsoncore.AppendArrayElementStart(b, "results")
		for i := range n {
			b = bsoncore.AppendBooleanElement(b, strconv.Itoa(i), ok || i < n-1)
		}
		b, _ = bsoncore.AppendArrayEnd(b, start)
		return b
	})
}

// parseApplyOpsCmd checks the command's own fields and returns its operations.
func parseApplyOpsCmd(cmd bsoncore.Document) ([]bsoncore.Value, bool, error) {
	first, err := cmd.IndexErr(0)
	if err != nil {
		return nil, false, mongoerr.New(mongoerr.FailedToParse, "ops has to be an array")
	}
	arr, ok := first.Value().ArrayOK()
	if !ok {
		return nil, false, mongoerr.New(mongoerr.FailedToParse, "ops has to be an array")
	}
	ops, err := arr.Values()
	if err != nil {
		return nil, false, mongoerr.Newf(mongoerr.InvalidBSON, "applyOps: %v", err)
	}
	if v := lookup(cmd, "prepare"); v.Type != 0 {
		return nil, false, mongoerr.New(mongoerr.BadValue, "applyOps command can't have 'prepare' field")
	}
	if v := lookup(cmd, "partialTxn"); v.Type != 0 {
		return nil, false, mongoerr.New(mongoerr.Location31056, "applyOps command can't have 'partialTxn' field.")
	}
	if v := lookup(cmd, "count"); v.Type != 0 {
		return nil, false, mongoerr.New(mongoerr.Location31240, "applyOps command can't have 'count' field.")
	}
	if v := lookup(cmd, "preCondition"); v.Type != 0 {
		return nil, false, mongoerr.New(mongoerr.InvalidOptions, "applyOps: preCondition is not supported")
	}
	alwaysUpsert := true
	if v := lookup(cmd, "alwaysUpsert"); v.Type != 0 {
		b, ok := v.BooleanOK()
		if !ok {
			return nil, false, mongoerr.Newf(mongoerr.TypeMismatch,
				"BSON field 'applyOps.alwaysUpsert' is the wrong type '%s', expected type 'bool'", bsonutil.TypeName(v.Type))
		}
		alwaysUpsert = b
	}
	return ops, alwaysUpsert, nil
}

// parseApplyOpsOp validates operation i (MongoDB's OplogApplicationChecks::checkOperation,
// then what the atomic mode supports).
func parseApplyOpsOp(i int, v bsoncore.Value, alwaysUpsert bool) (applyOp, error) {
	name := strconv.Itoa(i)
	d, ok := v.DocumentOK()
	if !ok {
		return applyOp{}, mongoerr.Newf(mongoerr.FailedToParse, "op not an object: %s", name)
	}
	var op applyOp
	ov, err := d.LookupErr("op")
	if err != nil {
		return applyOp{}, mongoerr.Newf(mongoerr.IllegalOperation, "op does not contain required \"op\" field: %s", name)
	}
	if op.op, ok = ov.StringValueOK(); !ok {
		return applyOp{}, mongoerr.Newf(mongoerr.IllegalOperation, "\"op\" field is not a string: %s", name)
	}
	if op.op == "" {
		return applyOp{}, mongoerr.Newf(mongoerr.IllegalOperation, "\"op\" field value cannot be empty: %s", name)
	}
	nv, err := d.LookupErr("ns")
	if err != nil {
		return applyOp{}, mongoerr.Newf(mongoerr.IllegalOperation, "op does not contain required \"ns\" field: %s", name)
	}
	if op.ns, ok = nv.StringValueOK(); !ok {
		return applyOp{}, mongoerr.Newf(mongoerr.IllegalOperation, "\"ns\" field is not a string: %s", name)
	}
	if strings.ContainsRune(op.ns, 0) {
		return applyOp{}, mongoerr.New(mongoerr.IllegalOperation, "namespaces cannot have embedded null characters")
	}
	if op.op != "n" && op.ns == "" {
		return applyOp{}, mongoerr.Newf(mongoerr.IllegalOperation, "\"ns\" field value cannot be empty when op type is not 'n': %s", name)
	}
	switch op.op {
	case "n":
		return op, nil
	case "i", "u", "d":
	case "c":
		return applyOp{}, mongoerr.New(mongoerr.CommandNotSupported,
			"applyOps with command operations is not supported: only insert, update, delete and no-op operations are applied (atomically)")
	default:
		return applyOp{}, mongoerr.Newf(mongoerr.BadValue, "Unknown oplog operation type '%s' in applyOps operation %s", op.op, name)
	}
	if err := catalog.ValidateNS(op.ns); err != nil {
		return applyOp{}, mongoerr.Newf(mongoerr.InvalidNamespace, "invalid ns: %s", op.ns)
	}
	if db, _ := catalog.SplitNS(op.ns); db == "local" {
		return applyOp{}, mongoerr.Newf(mongoerr.IllegalOperation,
			"applyOps cannot write to %s: the local database is not replicated", op.ns)
	}
	if uv, err := d.LookupErr("ui"); err == nil {
		st, b, ok := uv.BinaryOK()
		if !ok || st != 4 || len(b) != 16 {
			return applyOp{}, mongoerr.New(mongoerr.InvalidUUID, "applyOps operation ui is not a UUID")
		}
		var u catalog.UUID
		copy(u[:], b)
		op.ui = &u
	}
	if op.o, ok = d.Lookup("o").DocumentOK(); !ok {
		return applyOp{}, mongoerr.Newf(mongoerr.FailedToParse, "applyOps operation %s: o must be an object", name)
	}
	if _, err := op.o.LookupErr("_id"); err != nil && op.op != "u" {
		return applyOp{}, mongoerr.Newf(mongoerr.FailedToParse, "applyOps operation %s: o has no _id", name)
	}
	if op.op == "u" {
		if op.o2, ok = d.Lookup("o2").DocumentOK(); !ok {
			return applyOp{}, mongoerr.Newf(mongoerr.FailedToParse, "applyOps operation %s: an update needs o2: {_id: ...}", name)
		}
		if _, err := op.o2.LookupErr("_id"); err != nil {
			return applyOp{}, mongoerr.Newf(mongoerr.FailedToParse, "applyOps operation %s: o2 has no _id", name)
		}
		if _, err := op.o.LookupErr("$v"); err != nil {
			// A replacement; the older {$set: ...} modifier form needs the update language.
			if els, _ := op.o.Elements(); len(els) > 0 && strings.HasPrefix(els[0].Key(), "$") {
				return applyOp{}, mongoerr.Newf(mongoerr.FailedToParse,
					"applyOps operation %s: modifier updates (%s) are not supported; use a replacement or {$v: 2, diff: ...}", name, els[0].Key())
			}
			if id, err := op.o.LookupErr("_id"); err == nil && !id.Equal(op.o2.Lookup("_id")) {
				return applyOp{}, mongoerr.Newf(mongoerr.ImmutableField,
					"After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", id)
			}
			op.upsert = alwaysUpsert
			if b, ok := d.Lookup("b").BooleanOK(); ok {
				op.upsert = op.upsert || b
			}
		}
	}
	return op, nil
}

// resolveApplyOp checks op against the catalog and returns the inner operation to log and
// apply ({op, ns, ui, o, o2}), nil for a delete on a missing collection (which succeeds).
// An upsertable replacement of a missing document becomes its insert.
func resolveApplyOp(o *operation.Context, op *applyOp) (bsoncore.Document, error) {
	latest := o.DB.Catalog.Latest()
	meta, ok := latest.ByNS(op.ns)
	if op.ui != nil {
		byUUID, found := latest.ByUUID(*op.ui)
		if !found || !ok || byUUID.UUID != meta.UUID {
			return nil, mongoerr.Newf(mongoerr.Location3318200,
				"Namespace '%s' and UUID '%s' point to different collections", op.ns, op.ui)
		}
	}
	if !ok {
		if op.op == "d" {
			return nil, nil
		}
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound,
			"cannot apply insert or update operation on a non-existent namespace %s", op.ns)
	}
	kind, obj := op.op, op.o
	if op.op == "u" {
		coll, err := o.DB.Colls.ByUUID(meta.UUID)
		if err != nil {
			return nil, err
		}
		id := op.o2.Lookup("_id")
		_, _, found, err := coll.FindByID(o.RU, id)
		if err != nil {
			return nil, err
		}
		if !found {
			if !op.upsert {
				return nil, mongoerr.Newf(mongoerr.UpdateOperationFailed,
					"Failed to apply update due to missing _id: %s %s", op.ns, op.o2)
			}
			kind, obj = "i", withID(op.o, id)
		}
	}
	b := bsoncore.NewDocumentBuilder().AppendString("op", kind).AppendString("ns", op.ns).
		AppendBinary("ui", 4, meta.UUID[:]).AppendDocument("o", obj)
	if kind == "u" {
		b.AppendDocument("o2", op.o2)
	}
	return b.Build(), nil
}

// withID returns d with _id id first (a replacement's own _id, if any, is dropped).
func withID(d bsoncore.Document, id bsoncore.Value) bsoncore.Document {
	start, out := bsoncore.AppendDocumentStart(nil)
	out = bsoncore.AppendValueElement(out, "_id", id)
	els, _ := d.Elements()
	for _, e := range els {
		if e.Key() != "_id" {
			out = append(out, e...)
		}
	}
	out, _ = bsoncore.AppendDocumentEnd(out, start)
	return out
}
