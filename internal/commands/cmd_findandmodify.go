package commands

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/service"
	"humongo/internal/txn/retryable"
)

func addFindAndModify(r *service.Registry) {
	add(r, &service.Command{
		Name:    "findAndModify",
		Auth:    service.AuthFindAndModify,
		Aliases: []string{"findandmodify"},
		Handler: runFindAndModify,
		Help: "{ findAndModify: \"collection\", query: {processed:false}, update: {$set: {processed:true}}, new: true}\n" +
			"{ findAndModify: \"collection\", query: {processed:false}, remove: true, sort: {priority:-1}}\n" +
			"Either update or remove is required, all other fields have default values.\n" +
			"Output is in the \"value\" field\n",
		Writes: true,
	})
}

var writeFamFields = []string{"query", "sort", "remove", "update", "new", "fields", "upsert",
	"bypassDocumentValidation", "arrayFilters", "hint", "collation", "let", "isTimeseriesNamespace",
	"collectionUUID", "sampleId", "encryptionInformation", "runtimeConstants"}

// writeFamRequest is a parsed findAndModify.
type writeFamRequest struct {
	query, sort, fields bsoncore.Document
	update              bsoncore.Value // Type 0 when absent
	remove, returnNew   bool
	upsert              bool
	arrayFilters        []bsoncore.Document
	hasArrayFilters     bool
	hint                bsoncore.Value
	bypass              bool              // bypassDocumentValidation
	let                 bsoncore.Document // nil when absent
	coll                writeCollation
}

// updateStmt is the update statement of an update-form findAndModify, with now as $$NOW.
func (r *writeFamRequest) updateStmt(now time.Time) *writeUpdateStmt {
	return &writeUpdateStmt{q: r.query, u: r.update, upsert: r.upsert, arrayFilters: r.arrayFilters,
		hint: r.hint, let: r.let, now: now, bypass: r.bypass, coll: r.coll}
}

// writeParseFam parses and validates a findAndModify command (IDL plus validate()).
func writeParseFam(cmd bsoncore.Document) (*writeFamRequest, error) {
	const name = "findAndModify"
	if err := checkStrict(cmd, name, writeFamFields...); err != nil {
		return nil, err
	}
	r := &writeFamRequest{query: bsoncore.Document{5, 0, 0, 0, 0}}
	var err error
	for _, f := range []struct {
		key string
		dst *bsoncore.Document
	}{{"query", &r.query}, {"sort", &r.sort}, {"fields", &r.fields}} {
		if v := lookup(cmd, f.key); v.Type != 0 && v.Type != bsoncore.TypeNull {
			if *f.dst, err = writeDocArg(name, f.key, v); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{"remove", &r.remove}, {"new", &r.returnNew}, {"upsert", &r.upsert}, {"bypassDocumentValidation", &r.bypass}} {
		if v := lookup(cmd, f.key); v.Type != 0 {
			if *f.dst, err = writeSafeBool(name, f.key, v); err != nil {
				return nil, err
			}
		}
	}
	if v := lookup(cmd, "update"); v.Type != 0 {
		if v.Type != bsoncore.TypeEmbeddedDocument && v.Type != bsoncore.TypeArray {
			return nil, mongoerr.Newf(mongoerr.FailedToParse,
				"Update argument must be either an object or an array")
		}
		r.update = v
	}
	if v := lookup(cmd, "arrayFilters"); v.Type != 0 {
		if r.arrayFilters, err = writeParseArrayFilters(name, v); err != nil {
			return nil, err
		}
		r.hasArrayFilters = true
	}
	if v := lookup(cmd, "hint"); v.Type != 0 {
		if err := writeCheckHint(name, v); err != nil {
			return nil, err
		}
		if s, ok := v.StringValueOK(); !ok || s != "" {
			if d, ok := v.DocumentOK(); !ok || len(d) > 5 {
				r.hint = v
			}
		}
	}
	if v := lookup(cmd, "collation"); v.Type != 0 {
		if r.coll, err = writeParseCollation(name, v); err != nil {
			return nil, err
		}
	}
	if v := lookup(cmd, "let"); v.Type != 0 {
		if r.let, err = writeDocArg(name, "let", v); err != nil {
			return nil, err
		}
	}
	if !r.remove && r.update.Type == 0 {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Either an update or remove=true must be specified")
	}
	if r.remove {
		switch {
		case r.update.Type != 0:
			return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both an update and remove=true")
		case r.upsert:
			return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both upsert=true and remove=true ")
		case r.returnNew:
			return nil, mongoerr.New(mongoerr.FailedToParse,
				"Cannot specify both new=true and remove=true; 'remove' always returns the deleted document")
		case r.hasArrayFilters:
			return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify arrayFilters and remove=true")
		}
	}
	if r.update.Type == bsoncore.TypeArray && r.hasArrayFilters {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify arrayFilters and a pipeline update")
	}
	return r, nil
}

// runFindAndModify modifies or removes one document (the first in sort order) and returns it:
// {lastErrorObject: {n, updatedExisting?, upserted?}, value}.
func runFindAndModify(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := writeRequireDB(env)
	if err != nil {
		return nil, err
	}
	ns, err := writeNamespace(env, cmd)
	if err != nil {
		return nil, err
	}
	r, err := writeParseFam(cmd)
	if err != nil {
		return nil, err
	}
	wc, err := writeParseConcern(env, cmd)
	if err != nil {
		return nil, err
	}
	if err := writeRejectView(ctx, env, ns); err != nil {
		return nil, err
	}
	now := time.Now()
	var proj *query.Projection
	var matcher *query.Matcher
	if len(r.fields) > 5 {
		vars, err := evalCommandLet(r.let, now)
		if err != nil {
			return nil, err
		}
		if matcher, err = writeParseFilter(r.query, vars); err != nil {
			return nil, err
		}
		if proj, err = query.ParseProjection(r.fields, matcher); err != nil {
			return nil, err
		}
	}

	rc, err := retryBegin(ctx, env, cmd)
	if err != nil {
		return nil, err
	}
	defer retryEnd(env, rc)
	rs := rc.Stmt(0, false)
	rs.SetImageKind(retryable.ImageKindFor(r.remove, r.returnNew))
	replay, err := retryReplayFam(ctx, rs, r.remove, r.returnNew)
	if err != nil {
		return nil, err
	}

	op := db.NewOp(ctx)
	defer op.Close()
	var (
		value    bsoncore.Document
		n        int
		existed  bool
		upserted bsoncore.Value
		wrote    bool
	)
	if replay != nil {
		// A retry of a findAndModify that already ran returns what the first one did.
		n, value, existed, upserted, wrote = replay.n, replay.value, replay.existed, replay.upserted, true
	} else if r.remove {
		res, err := writeExecDelete(ctx, op, ns, &writeDeleteStmt{q: r.query, hint: r.hint, coll: r.coll, retry: rs, let: r.let, now: now}, r.sort, true)
		if err != nil {
			return nil, err
		}
		n, value, wrote = res.n, res.deleted, res.n > 0
		env.State.Counters.DocsDeleted.Add(int64(res.n))
	} else {
		st := r.updateStmt(now)
		st.retry = rs
		res, err := writeExecUpdateSorted(ctx, op, ns, st, r.sort, true)
		if err != nil {
			return nil, err
		}
		upserted = res.upserted
		existed = res.n > 0 && upserted.Type == 0
		n = res.n
		if r.returnNew {
			value = res.after
		} else if existed {
			value = res.before
		}
		wrote = res.nModified > 0 || upserted.Type != 0
		env.State.Counters.DocsUpdated.Add(int64(res.nModified))
		if upserted.Type != 0 {
			env.State.Counters.DocsInserted.Add(1)
		}
	}
	if value != nil && proj != nil {
		var details query.MatchDetails
		if _, err := matcher.MatchesWithDetails(value, &details); err != nil {
			return nil, err
		}
		if value, err = proj.Apply(value, &details, nil); err != nil {
			return nil, err
		}
	}
	// The write concern waits for the client's last op even when nothing was written.
	_ = wrote
	return writeFinish(ctx, env, wc, doc(func(b []byte) []byte {
		li, b2 := bsoncore.AppendDocumentElementStart(b, "lastErrorObject")
		b2 = bsoncore.AppendInt32Element(b2, "n", int32(n))
		if !r.remove {
			b2 = bsoncore.AppendBooleanElement(b2, "updatedExisting", existed)
			if upserted.Type != 0 {
				b2 = bsoncore.AppendValueElement(b2, "upserted", upserted)
			}
		}
		b, _ = bsoncore.AppendDocumentEnd(b2, li)
		if value == nil {
			return bsoncore.AppendNullElement(b, "value")
		}
		return bsoncore.AppendDocumentElement(b, "value", value)
	}))
}
