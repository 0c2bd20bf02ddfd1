package router

// insert, update and delete through the router (MongoDB's ClusterWriteCmd): the command is
// parsed only as far as routing needs (the statements, ordered), each statement is targeted
// and the batch executed (write_batch.go); the shards validate the rest of each statement.

import (
	"context"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// writeMaxBatch is MongoDB's write_ops::kMaxWriteBatchSize.
const writeMaxBatch = 100000

func writeCommands() []*service.Command {
	return []*service.Command{
		{Name: "insert", Auth: service.AuthInsert, Handler: txnStatement(writeHandler(kindInsert)), Writes: true, Secondary: service.SecondaryNever, Counter: "insert",
			Help: "insert documents"},
		{Name: "update", Auth: service.AuthUpdate, Handler: txnStatement(writeHandler(kindUpdate)), Writes: true, Secondary: service.SecondaryNever, Counter: "update",
			Help: "update documents"},
		{Name: "delete", Auth: service.AuthDelete, Handler: txnStatement(writeHandler(kindDelete)), Writes: true, Secondary: service.SecondaryNever, Counter: "delete",
			Help: "delete documents"},
	}
}

func writeHandler(kind writeKind) service.Handler {
	return func(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
		c, err := cluster(env)
		if err != nil {
			return nil, err
		}
		b, err := parseWrite(kind, env, cmd)
		if err != nil {
			return nil, err
		}
		b.c = c
		// opcounters count statements, as on mongod (the dispatcher counted one).
		if n := len(b.stmts); n > 1 && env.State != nil {
			env.State.Counters.OpCounter(kind.name()).Add(int64(n - 1))
		}
		return b.run(ctx)
	}
}

// parseWrite reads what routing needs of a write command.
func parseWrite(kind writeKind, env *service.Env, cmd bsoncore.Document) (*writeBatch, error) {
	ns, coll, err := collectionNS(env, cmd)
	if err != nil {
		return nil, err
	}
	b := &writeBatch{kind: kind, ns: ns, db: env.DB, coll: coll, cmd: cmd, ordered: true}
	if v := cmd.Lookup("ordered"); v.Type != 0 {
		o, ok := v.BooleanOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.ordered' is the wrong type '%s', expected type 'bool'",
				kind.name(), bsonutil.TypeName(v.Type))
		}
		b.ordered = o
	}
	_, b.retry = cmd.Lookup("txnNumber").Int64OK()
	key := kind.arrayKey()
	av := cmd.Lookup(key)
	if av.Type == 0 {
		return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.%s' is missing but a required field", kind.name(), key)
	}
	arr, ok := av.ArrayOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'",
			kind.name(), key, bsonutil.TypeName(av.Type))
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s array: %v", key, err)
	}
	if len(vals) < 1 || len(vals) > writeMaxBatch {
		return nil, mongoerr.Newf(mongoerr.InvalidLength,
			"Write batch sizes must be between 1 and %d. Got %d operations.", writeMaxBatch, len(vals))
	}
	if b.retry {
		if b.stmtIDs, err = stmtIDsOf(cmd, len(vals)); err != nil {
			return nil, err
		}
	}
	b.stmts = make([]bsoncore.Document, len(vals))
	for i, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s.%d' is the wrong type '%s', expected type 'object'",
				kind.name(), key, i, bsonutil.TypeName(v.Type))
		}
		if kind == kindInsert {
			d = ensureID(d)
		} else if err := checkStmt(kind, d); err != nil {
			return nil, err
		}
		b.stmts[i] = d
	}
	return b, nil
}

// ensureID gives a document without _id a new ObjectId first, as mongos does before
// targeting (so a statement sent again after a stale answer inserts the same document).
func ensureID(d bsoncore.Document) bsoncore.Document {
	if _, err := d.LookupErr("_id"); err == nil {
		return d
	}
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(d)+17))
	out = bsoncore.AppendObjectIDElement(out, "_id", bson.NewObjectID())
	out = append(out, d[4:len(d)-1]...)
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// stmtIDsOf returns the statement ids of a retryable write's n statements: the client's
// stmtIds, else stmtId+i (stmtId defaults to 0), as MongoDB's getStmtIdForWriteAt. The router
// sends each shard its statements' ids, so a retry through any routing finds them.
func stmtIDsOf(cmd bsoncore.Document, n int) ([]int32, error) {
	ids := make([]int32, n)
	var base int32
	if v := cmd.Lookup("stmtId"); v.Type != 0 {
		x, ok := v.AsInt64OK()
		if !ok || x != int64(int32(x)) {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'stmtId' is the wrong type '%s', expected type 'int'", bsonutil.TypeName(v.Type))
		}
		base = int32(x)
	}
	v := cmd.Lookup("stmtIds")
	if v.Type == 0 {
		for i := range ids {
			ids[i] = base + int32(i)
		}
		return ids, nil
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'stmtIds' is the wrong type '%s', expected type 'array'", bsonutil.TypeName(v.Type))
	}
	if cmd.Lookup("stmtId").Type != 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "May not specify both stmtId and stmtIds in write command")
	}
	vals, _ := arr.Values()
	if len(vals) != n {
		return nil, mongoerr.Newf(mongoerr.InvalidLength,
			"Number of statement ids must match the number of batch entries. Got %d statement ids but %d operations. Statement ids: %s",
			len(vals), n, bsonutil.FormatDoc(bsoncore.NewDocumentBuilder().AppendArray("stmtIds", arr).Build()))
	}
	for i, x := range vals {
		id, ok := x.AsInt64OK()
		if !ok || id != int64(int32(id)) {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'stmtIds.%d' is the wrong type '%s', expected type 'int'", i, bsonutil.TypeName(x.Type))
		}
		ids[i] = int32(id)
	}
	return ids, nil
}

// checkStmt checks what targeting reads of an update or delete statement, failing the
// command as mongos's request parsing does (the shards check the rest).
func checkStmt(kind writeKind, d bsoncore.Document) error {
	name, arr := kind.name(), kind.arrayKey()
	missing := func(f string) error {
		return mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.%s.%s' is missing but a required field", name, arr, f)
	}
	q := d.Lookup("q")
	if q.Type == 0 {
		return missing("q")
	}
	if q.Type != bsoncore.TypeEmbeddedDocument {
		return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s.q' is the wrong type '%s', expected type 'object'", name, arr, bsonutil.TypeName(q.Type))
	}
	if kind == kindUpdate {
		u := d.Lookup("u")
		if u.Type == 0 {
			return missing("u")
		}
		if u.Type != bsoncore.TypeEmbeddedDocument && u.Type != bsoncore.TypeArray {
			return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s.u' is the wrong type '%s', expected types '[object, array']", name, arr, bsonutil.TypeName(u.Type))
		}
		return nil
	}
	limit := d.Lookup("limit")
	if limit.Type == 0 {
		return missing("limit")
	}
	// As write_ops.cpp's readMultiDeleteProperty: read as a number (non-numbers are 0).
	var n float64
	switch limit.Type {
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble:
		n = limit.AsFloat64()
	}
	if n != 0 && n != 1 {
		return mongoerr.Newf(mongoerr.FailedToParse, "The limit field in delete objects must be 0 or 1. Got %s", strconv.FormatFloat(n, 'g', -1, 64))
	}
	return nil
}
