package commands

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/collation"
	"humongo/internal/mongoerr"
	"humongo/internal/query/plan"
	"humongo/internal/service"
)

// findCollName validates the collection-name argument of a query command ({find: "c"}) and
// returns the namespace.
func findCollName(env *service.Env, cmdName string, v bsoncore.Value) (string, error) {
	if v.Type != bsoncore.TypeString {
		// IDL-parsed commands (find, killCursors) answer BadValue (IDLParserContext::
		// checkAndAssertCollectionName); the others parse their namespace first with
		// CommandHelpers::parseNsCollectionRequired, which answers InvalidNamespace.
		code := mongoerr.InvalidNamespace
		if cmdName == "find" || cmdName == "killCursors" {
			code = mongoerr.BadValue
		}
		return "", mongoerr.Newf(code, "collection name has invalid type %s", bsonutil.TypeName(v.Type))
	}
	c := v.StringValue()
	if c == "" {
		return "", mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s.'", env.DB)
	}
	return env.DB + "." + c, nil
}

// findDocArg returns an optional object field (nil when absent).
func findDocArg(cmdName, field string, v bsoncore.Value) (bsoncore.Document, error) {
	switch v.Type {
	case 0:
		return nil, nil
	case bsoncore.TypeEmbeddedDocument:
		return v.Document(), nil
	}
	return nil, typeMismatch(cmdName, field, v.Type, "object")
}

// findBoolArg parses an IDL "optionalBool" field: absent is false and only a boolean is
// accepted, not a number nor null (OptionalBool::parseFromBSON).
func findBoolArg(cmdName, field string, v bsoncore.Value) (bool, error) {
	switch v.Type {
	case 0:
		return false, nil
	case bsoncore.TypeBoolean:
		return v.Boolean(), nil
	}
	return false, mongoerr.Newf(mongoerr.TypeMismatch, "Field '%s' should be a boolean value, but found: %s", field, bsonutil.TypeName(v.Type))
}

// allowDiskUse is the command's allowDiskUse (given) when it says it, else the
// allowDiskUseByDefault parameter, as mongod 6.0+ decides whether blocking stages may spill.
func allowDiskUse(env *service.Env, cmd bsoncore.Document, given bool) bool {
	if lookup(cmd, "allowDiskUse").Type != 0 {
		return given
	}
	return env.State.Params.Bool("allowDiskUseByDefault")
}

// findNonNegative parses a safeInt64 field with a >= 0 validator.
func findNonNegative(cmdName, field string, v bsoncore.Value) (int64, bool, error) {
	if v.Type == 0 {
		return 0, false, nil
	}
	n, err := intArg(cmdName, field, v)
	if err != nil {
		return 0, false, err
	}
	if n < 0 {
		return 0, false, mongoerr.Newf(mongoerr.Location51024, "BSON field '%s' value must be >= 0, actual value '%d'", field, n)
	}
	return n, true, nil
}

// findHintArg validates hint's type (string or object).
func findHintArg(cmdName string, v bsoncore.Value) (bsoncore.Value, error) {
	switch v.Type {
	case 0, bsoncore.TypeString, bsoncore.TypeEmbeddedDocument:
		return v, nil
	}
	return bsoncore.Value{}, mongoerr.Newf(mongoerr.FailedToParse, "hint must be a string or an object, not %s", bsonutil.TypeName(v.Type))
}

// findParseCollation parses a read command's collation into req (find, count, distinct).
// Absent or {} leaves the collection default to the planner; {locale: "simple"} sets binary.
func findParseCollation(cmdName string, v bsoncore.Value, req *plan.Request) error {
	if v.Type == 0 {
		return nil
	}
	if v.Type != bsoncore.TypeEmbeddedDocument {
		return typeMismatch(cmdName, "collation", v.Type, "object")
	}
	d := v.Document()
	if len(d) <= 5 {
		return nil // MongoDB treats an empty collation as none
	}
	c, err := collation.Parse(d)
	if err != nil {
		return err
	}
	req.Collation, req.CollationSet = c, true
	return nil
}

// findOptions are find's fields that are not part of the plan.
type findOptions struct {
	ns                  string
	batchSize           int64
	hasBatchSize        bool
	singleBatch         bool
	tailable, awaitData bool
	noCursorTimeout     bool
	allowPartialResults bool
}

// findLetArg validates and evaluates a read command's "let" (find, count, distinct): its
// variables are the request's Vars, seen by the filter's $expr and the projection.
func findLetArg(cmdName string, cmd bsoncore.Document) (map[string]bsoncore.Value, error) {
	let, err := findDocArg(cmdName, "let", lookup(cmd, "let"))
	if err != nil {
		return nil, err
	}
	return evalCommandLet(let, time.Now())
}

// findParse validates a find command into a plan request and cursor options.
func findParse(env *service.Env, cmd bsoncore.Document) (plan.Request, findOptions, error) {
	const name = "find"
	// find's fields are parsed by IDL under the FindCommandRequest struct's context, which
	// names them in its messages ("BSON field 'FindCommandRequest.filter' is the wrong type").
	const idl = "FindCommandRequest"
	var o findOptions
	var req plan.Request
	if err := checkStrict(cmd, idl, "filter", "projection", "sort", "hint", "skip", "limit",
		"batchSize", "singleBatch", "max", "min", "returnKey", "showRecordId", "tailable",
		"oplogReplay", "noCursorTimeout", "awaitData", "allowPartialResults", "collation",
		"allowDiskUse", "let", "readOnce", "term", "isTimeseriesNamespace", "includeQueryStatsMetrics"); err != nil {
		return req, o, err
	}
	ns, err := findCollName(env, name, commandArg(cmd))
	if err != nil {
		return req, o, err
	}
	o.ns, req.NS = ns, ns
	if req.Filter, err = findDocArg(idl, "filter", lookup(cmd, "filter")); err != nil {
		return req, o, err
	}
	if req.Projection, err = findDocArg(idl, "projection", lookup(cmd, "projection")); err != nil {
		return req, o, err
	}
	if req.Sort, err = findDocArg(idl, "sort", lookup(cmd, "sort")); err != nil {
		return req, o, err
	}
	if req.Min, err = findDocArg(idl, "min", lookup(cmd, "min")); err != nil {
		return req, o, err
	}
	if req.Max, err = findDocArg(idl, "max", lookup(cmd, "max")); err != nil {
		return req, o, err
	}
	if req.Vars, err = findLetArg(name, cmd); err != nil {
		return req, o, err
	}
	if req.Hint, err = findHintArg(name, lookup(cmd, "hint")); err != nil {
		return req, o, err
	}
	if req.Skip, _, err = findNonNegative(idl, "skip", lookup(cmd, "skip")); err != nil {
		return req, o, err
	}
	if req.Limit, _, err = findNonNegative(idl, "limit", lookup(cmd, "limit")); err != nil {
		return req, o, err
	}
	if o.batchSize, o.hasBatchSize, err = findNonNegative(idl, "batchSize", lookup(cmd, "batchSize")); err != nil {
		return req, o, err
	}
	bools := []struct {
		f   string
		dst *bool
	}{
		{"singleBatch", &o.singleBatch}, {"returnKey", &req.ReturnKey}, {"showRecordId", &req.ShowRecordID},
		{"tailable", &o.tailable}, {"awaitData", &o.awaitData}, {"noCursorTimeout", &o.noCursorTimeout},
		{"allowPartialResults", &o.allowPartialResults}, {"allowDiskUse", &req.AllowDiskUse},
		{"oplogReplay", new(bool)}, {"readOnce", new(bool)},
	}
	for _, b := range bools {
		if *b.dst, err = findBoolArg(name, b.f, lookup(cmd, b.f)); err != nil {
			return req, o, err
		}
	}
	req.AllowDiskUse = allowDiskUse(env, cmd, req.AllowDiskUse)
	if err := findParseCollation(idl, lookup(cmd, "collation"), &req); err != nil {
		return req, o, err
	}
	if o.awaitData && !o.tailable {
		return req, o, mongoerr.New(mongoerr.FailedToParse, "Cannot set 'awaitData' without also setting 'tailable'")
	}
	if o.tailable {
		if o.singleBatch {
			return req, o, mongoerr.New(mongoerr.BadValue, "cannot use tailable option with the 'singleBatch' option")
		}
		if len(req.Sort) > 5 {
			s := req.Sort
			elems, _ := s.Elements()
			if len(elems) != 1 || elems[0].Key() != "$natural" {
				return req, o, mongoerr.New(mongoerr.BadValue, "cannot use tailable option with a sort other than {$natural: 1}")
			}
		}
	}
	req.Tailable = o.tailable
	findFillRequestDefaults(env, &req)
	return req, o, nil
}
