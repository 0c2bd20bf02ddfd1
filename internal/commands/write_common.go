package commands

// Shared machinery of the write commands (insert, update, delete, findAndModify): namespace
// and write-concern checks, per-statement write errors and the reply shapes of MongoDB 7.0's
// write_commands.cpp / write_ops.idl, and document checks done before storage
// (fixDocumentForInsert). Behaviour follows MongoDB 7.0 mongod; there is no spec section for
// the command layer.

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query"
	"humongo/internal/query/update"
	"humongo/internal/repl/concern"
	"humongo/internal/service"
)

// writeMaxBatch is write_ops::kMaxWriteBatchSize (hello.maxWriteBatchSize).
const writeMaxBatch = 100000

// writeMaxUserDepth is BSONDepth::getMaxDepthForUserStorage.
const writeMaxUserDepth = 100

// writeStmtError is one failed statement of a write command.
type writeStmtError struct {
	index int
	err   error
}

// writeAppendErrors appends `writeErrors` as WriteError::serialize does in 7.0:
// {index, code, <extra info fields: keyPattern/keyValue, errInfo>, errmsg}.
func writeAppendErrors(b []byte, errs []writeStmtError) []byte {
	if len(errs) == 0 {
		return b
	}
	ai, b := bsoncore.AppendArrayElementStart(b, "writeErrors")
	for i, we := range errs {
		me := writeToMongoErr(we.err)
		di, b2 := bsoncore.AppendDocumentElementStart(b, itoa(int64(i)))
		b2 = bsoncore.AppendInt32Element(b2, "index", int32(we.index))
		b2 = bsoncore.AppendInt32Element(b2, "code", int32(me.Code))
		b2 = writeAppendInfo(b2, me.Info)
		msg := me.Msg
		if msg == "" && me.Err != nil {
			msg = me.Err.Error()
		}
		b2 = bsoncore.AppendStringElement(b2, "errmsg", msg)
		b, _ = bsoncore.AppendDocumentEnd(b2, di)
	}
	b, _ = bsoncore.AppendArrayEnd(b, ai)
	return b
}

// writeToMongoErr converts any error into the *mongoerr.Error a write error reports.
func writeToMongoErr(err error) *mongoerr.Error {
	if me, ok := mongoerr.As(err); ok {
		return me
	}
	switch {
	case err == context.DeadlineExceeded:
		return mongoerr.New(mongoerr.MaxTimeMSExpired, "operation exceeded time limit")
	case err == context.Canceled:
		return mongoerr.New(mongoerr.Interrupted, "operation was interrupted")
	}
	return &mongoerr.Error{Code: mongoerr.InternalError, Msg: err.Error()}
}

// writeAppendInfo appends an error's extra info fields (a raw document, or anything the BSON
// marshaler turns into one).
func writeAppendInfo(b []byte, info any) []byte {
	if info == nil {
		return b
	}
	var d bsoncore.Document
	switch x := info.(type) {
	case bsoncore.Document:
		d = x
	case bson.Raw:
		d = bsoncore.Document(x)
	default:
		raw, err := bson.Marshal(x)
		if err != nil {
			return b
		}
		d = bsoncore.Document(raw)
	}
	elems, err := d.Elements()
	if err != nil {
		return b
	}
	for _, e := range elems {
		switch e.Key() {
		case "index", "code", "errmsg":
			continue
		}
		b = append(b, e...)
	}
	return b
}

// writeIsFatal reports errors that end a whole write command even when it is unordered
// (interruption, shutdown): MongoDB stops the batch on them.
func writeIsFatal(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	if txnStmtOf(ctx) != nil {
		// Inside a transaction the first error fails the whole batch and the transaction
		// (mongod's handleError in a multi-document transaction): the client retries or
		// gives up the transaction as a whole.
		return true
	}
	c := mongoerr.CodeOf(err)
	return c == mongoerr.Interrupted || c == mongoerr.MaxTimeMSExpired || mongoerr.IsShutdownError(c)
}

// writeNamespace parses the collection name of a write command (its first element) and
// checks that clients may write to it (userAllowedWriteNS).
func writeNamespace(env *service.Env, cmd bsoncore.Document) (string, error) {
	v := commandArg(cmd)
	coll, ok := v.StringValueOK()
	if !ok {
		// The write commands are IDL-parsed: IDLParserContext::checkAndAssertCollectionName.
		return "", mongoerr.Newf(mongoerr.BadValue, "collection name has invalid type %s", bsonutil.TypeName(v.Type))
	}
	ns := env.DB + "." + coll
	if coll == "" {
		return "", mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	if err := catalog.ValidateNS(ns); err != nil {
		return "", err
	}
	if err := writeAllowedNS(env.DB, coll); err != nil {
		return "", err
	}
	return ns, nil
}

// writeAllowedNS is userAllowedWriteNS: system.profile and system.views are never written by
// clients, other system collections only when they are the legal client ones.
func writeAllowedNS(db, coll string) error {
	ns := db + "." + coll
	if coll == "system.profile" || coll == "system.views" {
		return mongoerr.Newf(mongoerr.InvalidNamespace, "cannot write to %s", ns)
	}
	if strings.HasPrefix(coll, "system.") && !writeLegalClientSystemNS(db, coll) {
		return mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid system namespace: %s", ns)
	}
	if strings.Contains(coll, ".system.") && !strings.Contains(coll, ".system.sessions") {
		return mongoerr.Newf(mongoerr.BadValue, "Invalid namespace: %s", ns)
	}
	return nil
}

// writeLegalClientSystemNS is NamespaceString::isLegalClientSystemNS.
func writeLegalClientSystemNS(db, coll string) bool {
	switch {
	case coll == "system.js", strings.HasPrefix(coll, "system.buckets."):
		return true
	case db == "admin":
		switch coll {
		case "system.roles", "system.users", "system.version", "system.new_users", "system.backup_users":
			return true
		}
	case db == "config":
		switch coll {
		case "system.sessions", "system.indexBuilds", "system.sharding_ddl_coordinators", "system.configsvrCoordinators":
			return true
		}
		return strings.Contains(coll, ".system.resharding.")
	}
	return false
}

// writeParseConcern and writeFinish (concern.go) call repl/concern.

// writeBoolArg parses an IDL `bool` field (booleans only).
func writeBoolArg(cmdName, field string, v bsoncore.Value) (bool, error) {
	if v.Type != bsoncore.TypeBoolean {
		return false, typeMismatch(cmdName, field, v.Type, "bool")
	}
	return v.Boolean(), nil
}

// writeSafeBool parses an IDL `safeBool` field (booleans and numbers).
func writeSafeBool(cmdName, field string, v bsoncore.Value) (bool, error) {
	switch v.Type {
	case bsoncore.TypeBoolean, bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		return truthy(v), nil
	}
	return false, typeMismatch(cmdName, field, v.Type, "bool", "long", "int", "decimal", "double")
}

// writeDocArg returns v as a document or a TypeMismatch naming field.
func writeDocArg(cmdName, field string, v bsoncore.Value) (bsoncore.Document, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, typeMismatch(cmdName, field, v.Type, "object")
	}
	return d, nil
}

// writeMissing is the IDL error for a missing required field.
func writeMissing(path string) error {
	return mongoerr.Newf(codeMissingField, "BSON field '%s' is missing but a required field", path)
}

// writeCheckHint validates a hint's type: an index name or a key pattern.
func writeCheckHint(cmdName string, v bsoncore.Value) error {
	switch v.Type {
	case bsoncore.TypeString, bsoncore.TypeEmbeddedDocument:
		return nil
	}
	return typeMismatch(cmdName, "hint", v.Type, "string", "object")
}

// writeParseFilter parses a q/query filter the way writes do ($expr allowed, with the
// command's let variables vars).
func writeParseFilter(q bsoncore.Document, vars map[string]bsoncore.Value) (*query.Matcher, error) {
	return query.Parse(q, query.ParseOptions{AllowExpr: true, AllowJSONSchema: true, Vars: vars})
}

// evalCommandLet evaluates a command's "let" (nil or empty: no variables) into the values its
// filter's $expr and its projection see as $$name. The expressions are constants evaluated
// once, before any document is read (MongoDB's seedVariablesWithLetParameters); now is the
// command's $$NOW.
func evalCommandLet(let bsoncore.Document, now time.Time) (map[string]bsoncore.Value, error) {
	if len(let) <= 5 {
		return nil, nil
	}
	vars, _, err := agg.EvalLet(let, now)
	return vars, err
}

// writeParseUpdate parses an update statement's `u` with its arrayFilters; a pipeline
// (an array) is parsed for the aggregation engine with the command's `let`, the statement's
// `c` and the command's $$NOW (valid_pipeline.go).
func writeParseUpdate(st *writeUpdateStmt) (*writeModifier, error) {
	if st.u.Type == bsoncore.TypeArray {
		return validParsePipelineUpdate(st.u, st.let, st.c, st.now)
	}
	upd, err := update.ParseValue(st.u, update.ParseOptions{ArrayFilters: st.arrayFilters})
	if err != nil {
		return nil, err
	}
	return &writeModifier{upd: upd}, nil
}

// writeParseArrayFilters parses an arrayFilters field.
func writeParseArrayFilters(cmdName string, v bsoncore.Value) ([]bsoncore.Document, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, typeMismatch(cmdName, "arrayFilters", v.Type, "array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid arrayFilters: %v", err)
	}
	out := make([]bsoncore.Document, 0, len(vals))
	for i, x := range vals {
		d, ok := x.DocumentOK()
		if !ok {
			return nil, typeMismatch(cmdName, "arrayFilters."+itoa(int64(i)), x.Type, "object")
		}
		out = append(out, d)
	}
	return out, nil
}

// writeFixForInsert is fixDocumentForInsert: it checks size, nesting, `_id` and returns the
// document to store, with `_id` first (an ObjectId generated when missing) and top-level
// Timestamp(0, 0) values replaced by the current time (concern.FillZeroTimestamp on db's
// node). It returns doc itself when it needs no change.
func writeFixForInsert(db *operation.DB, doc bsoncore.Document) (bsoncore.Document, error) {
	if len(doc) > index.MaxDocumentSize {
		return nil, mongoerr.Newf(mongoerr.BadValue, "object to insert too large. size in bytes: %d, max size: %d",
			len(doc), index.MaxDocumentSize)
	}
	if writeDepthExceeds(doc, 1) {
		return nil, mongoerr.Newf(mongoerr.Overflow,
			"cannot insert document because it exceeds %d levels of nesting", writeMaxUserDepth)
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid document: %v", err)
	}
	firstIsID, hadID, fixTS := false, false, false
	for i, e := range elems {
		v := e.Value()
		if v.Type == bsoncore.TypeTimestamp {
			if t, inc := v.Timestamp(); t == 0 && inc == 0 {
				fixTS = true
			}
		}
		if e.Key() != "_id" {
			continue
		}
		// fixDocumentForInsert checks _id with storage_validation's storageValidIdField.
		switch v.Type {
		case bsoncore.TypeRegex, bsoncore.TypeUndefined, bsoncore.TypeArray:
			return nil, mongoerr.Newf(mongoerr.InvalidIdField, "The '_id' value cannot be of type %s", bsonutil.TypeName(v.Type))
		case bsoncore.TypeEmbeddedDocument:
			if err := writeStorageValidEmbedded(v.Document()); err != nil {
				return nil, err
			}
		}
		if hadID {
			return nil, mongoerr.New(mongoerr.BadValue, "can't have multiple _id fields in one document")
		}
		hadID, firstIsID = true, i == 0
	}
	if firstIsID && !fixTS {
		return doc, nil
	}
	out := make([]byte, 0, len(doc)+17)
	idx, out := bsoncore.AppendDocumentStart(out)
	if hadID {
		for _, e := range elems {
			if e.Key() == "_id" {
				out = append(out, e...)
				break
			}
		}
	} else {
		out = bsoncore.AppendObjectIDElement(out, "_id", bson.NewObjectID())
	}
	for _, e := range elems {
		if e.Key() == "_id" {
			continue
		}
		v := e.Value()
		if v.Type == bsoncore.TypeTimestamp {
			if t, inc := v.Timestamp(); t == 0 && inc == 0 {
				t, i := concern.FillZeroTimestamp(db)
				out = bsoncore.AppendTimestampElement(out, e.Key(), t, i)
				continue
			}
		}
		out = append(out, e...)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out, nil
}

// writeStorageValidEmbedded is BSONObj::storageValidEmbedded for an `_id` document: no
// '$'-prefixed field names at any level except DBRef fields.
func writeStorageValidEmbedded(d bsoncore.Document) error {
	elems, err := d.Elements()
	if err != nil {
		return mongoerr.Newf(mongoerr.InvalidBSON, "invalid document: %v", err)
	}
	for _, e := range elems {
		k := e.Key()
		if strings.HasPrefix(k, "$") {
			switch k {
			case "$ref", "$id", "$db":
			default:
				return mongoerr.Newf(mongoerr.DollarPrefixedFieldName,
					"_id fields may not contain '$'-prefixed fields: %s is not valid for storage.", k)
			}
		}
		v := e.Value()
		if sub, ok := v.DocumentOK(); ok {
			if err := writeStorageValidEmbedded(sub); err != nil {
				return err
			}
		} else if arr, ok := v.ArrayOK(); ok {
			if err := writeStorageValidEmbedded(bsoncore.Document(arr)); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeDepthExceeds reports whether doc, at nesting level depth (the top document is 1), has
// an object or array nested deeper than writeMaxUserDepth.
func writeDepthExceeds(doc []byte, depth int) bool {
	elems, err := bsoncore.Document(doc).Elements()
	if err != nil {
		return false
	}
	for _, e := range elems {
		v := e.Value()
		if v.Type == bsoncore.TypeEmbeddedDocument || v.Type == bsoncore.TypeArray {
			if depth >= writeMaxUserDepth {
				return true
			}
			if writeDepthExceeds(v.Data, depth+1) {
				return true
			}
		}
	}
	return false
}

// writeCountOps adds n operations of kind (insert/update/delete) to opcounters. The
// dispatcher already counted one for the command itself (Command.Counter), so n-1 more.
func writeCountOps(env *service.Env, kind string, n int) {
	if n > 1 {
		env.State.Counters.OpCounter(kind).Add(int64(n - 1))
	}
}

// writeRequireDB returns the storage side or an error for servers started without one.
func writeRequireDB(env *service.Env) (*operation.DB, error) {
	if env.State == nil || env.State.DB == nil {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "this server has no storage engine")
	}
	return env.State.DB, nil
}

// writeCommandPrologue does what every write command does first: require storage, resolve
// the namespace, reject unknown fields and read `ordered` (default true).
func writeCommandPrologue(env *service.Env, cmd bsoncore.Document, name string, fields []string) (*operation.DB, string, bool, error) {
	db, err := writeRequireDB(env)
	if err != nil {
		return nil, "", false, err
	}
	ns, err := writeNamespace(env, cmd)
	if err != nil {
		return nil, "", false, err
	}
	if err := checkStrict(cmd, name, fields...); err != nil {
		return nil, "", false, err
	}
	ordered := true
	if v := lookup(cmd, "ordered"); v.Type != 0 {
		if ordered, err = writeBoolArg(name, "ordered", v); err != nil {
			return nil, "", false, err
		}
	}
	return db, ns, ordered, nil
}

// writeNormalizeHint drops a hint that names no index: "" or {} mean no hint, as in MongoDB.
func writeNormalizeHint(h bsoncore.Value) bsoncore.Value {
	if s, ok := h.StringValueOK(); ok && s == "" {
		return bsoncore.Value{}
	}
	if d, ok := h.DocumentOK(); ok && len(d) <= 5 {
		return bsoncore.Value{}
	}
	return h
}
