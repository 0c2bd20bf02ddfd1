package commands

// Pipeline-style updates (issue 3 item 4; MongoDB's PipelineExecutor): `u: [stage, ...]` in
// update and findAndModify runs a restricted aggregation pipeline over the matched document
// (or the upsert's seed) and replaces the document with the result, as a replacement update
// would: `_id` may not change (66 ImmutableField), a result without `_id` keeps the old one,
// and a result equal byte for byte to the old document is a no-op (nModified 0). The
// command's `let` and the statement's `c` constants are pipeline variables; $$NOW is fixed
// once per command.

import (
	"bytes"
	"context"
	"maps"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/bsonutil"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
	"humongo/internal/query/update"
)

// writeModifier is the modification of one update statement: an operator or replacement
// update (upd), or a pipeline (pipe, run with ac).
type writeModifier struct {
	upd  *update.Update
	pipe *agg.Pipeline
	ac   *agg.Context
}

// isReplacement reports a replacement-style update (not allowed with multi).
func (m *writeModifier) isReplacement() bool { return m.upd != nil && m.upd.IsReplacement() }

// kind is how the oplog logs the update (index.UpdateKind): a replacement as the new
// document, an operator update along its paths, a pipeline update as a plain diff.
func (m *writeModifier) kind() index.UpdateKind {
	switch {
	case m.upd == nil:
		return index.UpdateKind{}
	case m.upd.IsReplacement():
		return index.UpdateKind{Replacement: true}
	}
	return index.UpdateKind{Paths: m.upd.Paths()}
}

// apply computes the new version of d. matchedIdx resolves the positional operator; isInsert
// is set for an upsert's seed document. changed is false when the result equals d.
func (m *writeModifier) apply(ctx context.Context, d bsoncore.Document, matchedIdx string, isInsert bool) (bsoncore.Document, bool, error) {
	if m.upd != nil {
		return m.upd.Apply(d, update.ApplyContext{MatchedArrayIndex: matchedIdx, IsInsert: isInsert, Validate: true})
	}
	return validApplyPipeline(ctx, m.pipe, m.ac, d)
}

// validUpdateStages are the stages MongoDB allows in an update pipeline
// (isAllowedWithinUpdatePipeline).
var validUpdateStages = map[string]bool{
	"$addFields": true, "$set": true, "$project": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true,
}

// validParsePipelineUpdate parses a pipeline-style update u (an array). let is the command's
// `let`, c the statement's constants (nil when absent; c wins over let for a name in both);
// now is the command's $$NOW.
func validParsePipelineUpdate(u bsoncore.Value, let, c bsoncore.Document, now time.Time) (*writeModifier, error) {
	vals, err := u.Array().Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid update pipeline: %v", err)
	}
	stages := make([]bsoncore.Document, 0, len(vals))
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		stages = append(stages, d)
	}
	vars := map[string]bsoncore.Value{}
	var names []string
	if len(let) > 5 {
		vs, ns, err := agg.EvalLet(let, now)
		if err != nil {
			return nil, err
		}
		names = ns
		maps.Copy(vars, vs)
	}
	// The statement's constants are values, not expressions: {c: {x: "$a"}} binds the string
	// "$a" (pipeline_executor.cpp: setConstantValue(Value(constElem)), the name checked as a
	// variable reference).
	if len(c) > 5 {
		els, err := c.Elements()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid c: %v", err)
		}
		for _, el := range els {
			if err := expr.CheckVarNameRead(el.Key()); err != nil {
				return nil, err
			}
			if _, dup := vars[el.Key()]; !dup {
				names = append(names, el.Key())
			}
			vars[el.Key()] = el.Value()
		}
	}
	pc := agg.ParseContext{Vars: names}
	for _, s := range stages {
		name := ""
		if e, err := s.IndexErr(0); err == nil {
			name = e.Key()
		}
		if validUpdateStages[name] {
			continue
		}
		// Malformed or unknown stages get the aggregation parser's error (40323, 40324);
		// known stages that cannot run in an update are InvalidOptions.
		if _, err := agg.Parse([]bsoncore.Document{s}, pc); err != nil {
			if c := mongoerr.CodeOf(err); c == mongoerr.Location40324 || c == mongoerr.Location40323 || c == mongoerr.InvalidBSON {
				return nil, err
			}
		}
		return nil, mongoerr.Newf(mongoerr.InvalidOptions, "%s is not allowed to be used within an update", name)
	}
	pl, err := agg.Parse(stages, pc)
	if err != nil {
		return nil, err
	}
	return &writeModifier{pipe: pl, ac: &agg.Context{Now: now, Vars: vars}}, nil
}

// validApplyPipeline runs pl over old and turns the result into the stored document.
func validApplyPipeline(ctx context.Context, pl *agg.Pipeline, ac *agg.Context, old bsoncore.Document) (bsoncore.Document, bool, error) {
	src, err := pl.Run(ctx, agg.SliceSource([]bsoncore.Document{old}), ac)
	if err != nil {
		return nil, false, err
	}
	defer src.Close()
	out, ok, err := src.Next(ctx)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		// Unreachable with the allowed stages, each of which maps one document to one.
		return nil, false, mongoerr.New(mongoerr.InternalError, "update pipeline produced no document")
	}
	newDoc, err := validReplacementResult(old, out)
	if err != nil {
		return nil, false, err
	}
	if bytes.Equal(newDoc, old) {
		return old, false, nil
	}
	return newDoc, true, nil
}

// validReplacementResult is ObjectReplaceExecutor::applyReplacementUpdate for a pipeline's
// output: _id first (the output's, which must equal the old one, else the old one), then the
// output's other fields in order; plus the storage checks of an updated document (_id type,
// nesting; an upsert's _id is checked again by writeFixForInsert).
func validReplacementResult(old, out bsoncore.Document) (bsoncore.Document, error) {
	oldID, oldErr := old.LookupErr("_id")
	newID, newErr := out.LookupErr("_id")
	if oldErr == nil && newErr == nil && (oldID.Type != newID.Type || !bytes.Equal(oldID.Data, newID.Data)) {
		return nil, mongoerr.Newf(mongoerr.ImmutableField,
			"After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", newID)
	}
	elems, err := out.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid update pipeline result: %v", err)
	}
	res := make([]byte, 0, len(out)+len(oldID.Data)+8)
	idx, res := bsoncore.AppendDocumentStart(res)
	switch {
	case newErr == nil:
		res = bsoncore.AppendValueElement(res, "_id", newID)
	case oldErr == nil:
		res = bsoncore.AppendValueElement(res, "_id", oldID)
	}
	for _, e := range elems {
		k := e.Key()
		if k == "_id" {
			continue
		}
		// Top-level '$'-prefixed names ({$setField: {field: {$literal: "$a"}, ...}}) are stored:
		// since 5.0 only replacement- and operator-style updates refuse them, a pipeline's
		// result may hold any field name (MongoDB's jstests/core/field_name_validation.js).
		res = append(res, e...)
	}
	res, _ = bsoncore.AppendDocumentEnd(res, idx)
	if id, err := bsoncore.Document(res).LookupErr("_id"); err == nil {
		switch id.Type {
		case bsoncore.TypeArray, bsoncore.TypeRegex, bsoncore.TypeUndefined:
			return nil, mongoerr.Newf(mongoerr.InvalidIdField, "The '_id' value cannot be of type %s", bsonutil.TypeName(id.Type))
		}
	}
	if writeDepthExceeds(res, 1) {
		return nil, mongoerr.Newf(mongoerr.Overflow, "Document exceeds maximum nesting depth of %d", writeMaxUserDepth)
	}
	return res, nil
}
