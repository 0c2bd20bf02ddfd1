package commands_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Error codes of issue 10's remaining points, looked up in MongoDB's source (mongodb/mongo):
// DocumentSourceCollStats::LiteParsed and its IDL, create/collMod IDL validators,
// GetParameterOptions, ServiceEntryPointCommon's database-name check.

func TestErrorCodesCollStatsStage(t *testing.T) {
	one := []bson.D{ins(bson.D{{Key: "a", Value: 1}})}
	cs := func(spec any) bson.D { return agg(bson.D{{Key: "$collStats", Value: spec}}) }
	runErrCases(t, []errCase{
		{name: "not an object", setup: one, cmd: cs(1),
			code: 5447000, cname: "Location5447000", msg: "$collStats must take a nested object but found: $collStats: 1"},
		{name: "not an object later in the pipeline", setup: one,
			cmd:  agg(bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$collStats", Value: "x"}}),
			code: 5447000, cname: "Location5447000", msg: "$collStats must take a nested object but found: $collStats: \"x\""},
		{name: "unknown option", setup: one, cmd: cs(bson.D{{Key: "foo", Value: 1}}),
			code: 40415, cname: "Location40415", msg: "BSON field '$collStats.foo' is an unknown field."},
		{name: "storageStats not an object", setup: one, cmd: cs(bson.D{{Key: "storageStats", Value: 1}}),
			code: 14, cname: "TypeMismatch", msg: "BSON field '$collStats.storageStats' is the wrong type 'int', expected type 'object'"},
		{name: "scale below 1", setup: one, cmd: cs(bson.D{{Key: "storageStats", Value: bson.D{{Key: "scale", Value: -1}}}}),
			code: 51024, cname: "Location51024", msg: "BSON field 'scale' value must be >= 1, actual value '-1'"},
		{name: "scale not a number on a missing collection", cmd: cs(bson.D{{Key: "storageStats", Value: bson.D{{Key: "scale", Value: "x"}}}}),
			code: 14, cname: "TypeMismatch"},
		{name: "count not empty", setup: one, cmd: cs(bson.D{{Key: "count", Value: bson.D{{Key: "a", Value: 1}}}}),
			code: 31170, cname: "Location31170", msg: "expected an empty object, but got { a: 1 }"},
		{name: "storageStats of a missing collection", cmd: cs(bson.D{{Key: "storageStats", Value: bson.D{}}}),
			code: 26, cname: "NamespaceNotFound"},
		{name: "valid", setup: one, ok: true, cmd: cs(bson.D{{Key: "storageStats", Value: bson.D{{Key: "scale", Value: 2}}}, {Key: "count", Value: bson.D{}}})},
	})
}

func TestErrorCodesCappedSize(t *testing.T) {
	capped := func(size any) bson.D {
		return bson.D{{Key: "create", Value: "c"}, {Key: "capped", Value: true}, {Key: "size", Value: size}}
	}
	runErrCases(t, []errCase{
		{name: "negative", cmd: capped(-1),
			code: 51024, cname: "Location51024", msg: "BSON field 'size' value must be >= 1, actual value '-1'"},
		{name: "zero", cmd: capped(0),
			code: 51024, cname: "Location51024", msg: "BSON field 'size' value must be >= 1, actual value '0'"},
		{name: "missing", cmd: bson.D{{Key: "create", Value: "c"}, {Key: "capped", Value: true}},
			code: 72, cname: "InvalidOptions", msg: "the 'size' field is required when 'capped' is true"},
		{name: "collMod cappedSize below 1", setup: []bson.D{capped(4096)},
			cmd:  bson.D{{Key: "collMod", Value: "c"}, {Key: "cappedSize", Value: 0}},
			code: 51024, cname: "Location51024", msg: "BSON field 'cappedSize' value must be >= 1, actual value '0'"},
		{name: "fractional is truncated", cmd: capped(4096.5), ok: true},
	})
}

func TestErrorCodesGetParameterOptions(t *testing.T) {
	runErrCases(t, []errCase{
		{name: "allParameters string", db: "admin", cmd: bson.D{{Key: "getParameter", Value: bson.D{{Key: "allParameters", Value: "x"}}}},
			code: 14, cname: "TypeMismatch", msg: "BSON field 'getParameter.allParameters' is the wrong type 'string', expected type 'bool'"},
		{name: "showDetails number", db: "admin", cmd: bson.D{{Key: "getParameter", Value: bson.D{{Key: "showDetails", Value: 1}}}, {Key: "logLevel", Value: 1}},
			code: 14, cname: "TypeMismatch", msg: "BSON field 'getParameter.showDetails' is the wrong type 'int', expected type 'bool'"},
		{name: "allParameters true", db: "admin", ok: true, cmd: bson.D{{Key: "getParameter", Value: bson.D{{Key: "allParameters", Value: true}}}}},
	})
}

func TestErrorCodesDatabaseNames(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	for _, c := range []bson.D{
		{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}},
		{{Key: "create", Value: "c"}},
		{{Key: "find", Value: "c"}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}},
		{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a"}}}}},
		{{Key: "ping", Value: 1}},
	} {
		// mongod builds a DatabaseName from $db before anything else (its constructor's
		// messages, pinned by FerretDB's compatibility tests against MongoDB).
		err := ts.cl.Database("a.b").RunCommand(ctx, c).Err()
		wantCode(t, err, 73, "InvalidNamespace", "'.' is an invalid character in a db name: a.b")
		long := strings.Repeat("d", 64)
		err = ts.cl.Database(long).RunCommand(ctx, c).Err()
		wantCode(t, err, 73, "InvalidNamespace", "db name must be at most 63 characters, found: 64")
	}
	// A space is the namespace checks' business.
	err := ts.cl.Database("a b").RunCommand(ctx, bson.D{{Key: "create", Value: "c"}}).Err()
	wantCode(t, err, 73, "InvalidNamespace", "Invalid namespace specified 'a b.c'")
	// Nor can a pipeline write into one.
	target := bson.D{{Key: "db", Value: "a.b"}, {Key: "coll", Value: "c"}}
	for _, st := range []bson.D{{{Key: "$out", Value: target}}, {{Key: "$merge", Value: bson.D{{Key: "into", Value: target}}}}} {
		cmd := bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{st}}, {Key: "cursor", Value: bson.D{}}}
		wantCode(t, ts.cl.Database("t").RunCommand(ctx, cmd).Err(), 73, "InvalidNamespace", "")
	}
	// The database with the dotted name was never created.
	names, err := ts.cl.ListDatabaseNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "a" || n == "a.b" {
			t.Errorf("listDatabases shows %q", n)
		}
	}
}

// TestErrorCodesInvalidUTF8CommandName: an unknown command named with invalid UTF-8 is refused
// with a reply that is valid UTF-8 (drivers fail to decode the reply otherwise).
func TestErrorCodesInvalidUTF8CommandName(t *testing.T) {
	ts := startTestServer(t)
	r, err := ts.cl.Database("t").RunCommand(context.Background(), bson.D{{Key: "a\xff\xfeb", Value: 1}}).Raw()
	if err == nil {
		t.Fatalf("accepted: %v", r)
	}
	if !utf8.ValidString(err.Error()) {
		t.Errorf("error is not valid UTF-8: %q", err.Error())
	}
	wantCode(t, err, 59, "CommandNotFound", "no such command: 'a\ufffdb'")
}

// wantCode checks that err is a command error with code, codeName and (when set) message.
func wantCode(t *testing.T, err error, code int32, name, msg string) {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		t.Errorf("got %v, want code %d (%s)", err, code, name)
		return
	}
	if ce.Code != code || ce.Name != name || (msg != "" && ce.Message != msg) {
		t.Errorf("got %d (%s) %q\nwant %d (%s) %q", ce.Code, ce.Name, ce.Message, code, name, msg)
	}
}

// TestErrorCodesMessages: the common paths' wording. $project/$addFields/$set parse errors
// carry "Invalid <stage> :: caused by ::" (DocumentSource*::create adds that context); find's
// fields are named under FindCommandRequest, its IDL struct; several expected types are
// listed the way IDLParserContext::throwBadType prints them.
func TestErrorCodesMessages(t *testing.T) {
	one := []bson.D{ins(bson.D{{Key: "a", Value: 1}})}
	unknownExpr := bson.D{{Key: "x", Value: bson.D{{Key: "$foo", Value: 1}}}}
	runErrCases(t, []errCase{
		{name: "addFields unknown expression", setup: one, cmd: agg(bson.D{{Key: "$addFields", Value: unknownExpr}}),
			code: 168, cname: "InvalidPipelineOperator", msg: "Invalid $addFields :: caused by :: Unrecognized expression '$foo'"},
		{name: "set unknown expression", setup: one, cmd: agg(bson.D{{Key: "$set", Value: unknownExpr}}),
			code: 168, cname: "InvalidPipelineOperator", msg: "Invalid $set :: caused by :: Unrecognized expression '$foo'"},
		{name: "project unknown expression", setup: one, cmd: agg(bson.D{{Key: "$project", Value: unknownExpr}}),
			code: 168, cname: "InvalidPipelineOperator", msg: "Invalid $project :: caused by :: Unrecognized expression '$foo'"},
		{name: "addFields dollar field", setup: one, cmd: agg(bson.D{{Key: "$addFields", Value: bson.D{{Key: "$a", Value: 1}}}}),
			code: 16410, cname: "Location16410", msg: "Invalid $addFields :: caused by :: FieldPath field names may not start with '$'. Consider using $getField or $setField."},
		{name: "addFields not an object", setup: one, cmd: agg(bson.D{{Key: "$addFields", Value: 1}}),
			code: 40272, cname: "Location40272", msg: "$addFields specification stage must be an object, got int"},
		{name: "set not an object", setup: one, cmd: agg(bson.D{{Key: "$set", Value: "x"}}),
			code: 40272, cname: "Location40272", msg: "$set specification stage must be an object, got string"},
		{name: "project not an object", setup: one, cmd: agg(bson.D{{Key: "$project", Value: "x"}}),
			code: 15969, cname: "Location15969", msg: "$project specification must be an object"},
		{name: "find filter wrong type", setup: one, cmd: find(bson.E{Key: "filter", Value: 1}),
			code: 14, cname: "TypeMismatch", msg: "BSON field 'FindCommandRequest.filter' is the wrong type 'int', expected type 'object'"},
		{name: "find unknown field", setup: one, cmd: find(bson.E{Key: "foo", Value: 1}),
			code: 40415, cname: "Location40415", msg: "BSON field 'FindCommandRequest.foo' is an unknown field."},
		{name: "find limit wrong type", setup: one, cmd: find(bson.E{Key: "limit", Value: "x"}),
			code: 14, cname: "TypeMismatch", msg: "BSON field 'FindCommandRequest.limit' is the wrong type 'string', expected types '[long, int, decimal, double']"},
		{name: "find batchSize double accepted", setup: one, cmd: find(bson.E{Key: "batchSize", Value: 1.0}), ok: true},
		{name: "aggregate batchSize double accepted", setup: one, ok: true,
			cmd: bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 1.0}}}}},
		{name: "bit position below 0", setup: one, cmd: find(bson.E{Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$bitsAllSet", Value: bson.A{1, -1}}}}}}),
			code: 2, cname: "BadValue", msg: "bit positions must be >= 0 but got: 1: -1"},
		{name: "bit position not a number", setup: one, cmd: find(bson.E{Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$bitsAnySet", Value: bson.A{"x"}}}}}}),
			code: 2, cname: "BadValue", msg: "bit positions must be an integer but got: 0: \"x\""},
		{name: "index conflict prints specs as { k: v }", setup: []bson.D{{{Key: "createIndexes", Value: "c"},
			{Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a"}}}}}},
			cmd: bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
				bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a"}, {Key: "unique", Value: true}}}}},
			code: 85, cname: "IndexOptionsConflict",
			msg: "An equivalent index already exists with the same name but different options. Requested index: { v: 2, key: { a: 1 }, name: \"a\", unique: true }, existing index: { v: 2, key: { a: 1 }, name: \"a\" }"},
		{name: "group duplicate field prints { k: v }", setup: one,
			cmd:  agg(bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "a", Value: 1}, {Key: "a", Value: 2}}}}}}),
			code: 16406, cname: "Location16406", msg: "duplicate field name specified in object literal: { a: 1, a: 2 }"},
	})
}

// TestErrorCodesPathNotViable: creating a field under a scalar is PathNotViable (28) on every
// update path (modifiers, upsert seeding, findAndModify).
func TestErrorCodesPathNotViable(t *testing.T) {
	one := []bson.D{ins(bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "arr", Value: bson.A{1, 2}}})}
	up := func(q, u bson.D, upsert bool) bson.D {
		return bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: q}, {Key: "u", Value: u}, {Key: "upsert", Value: upsert}}}}}
	}
	set := func(path string) bson.D { return bson.D{{Key: "$set", Value: bson.D{{Key: path, Value: 1}}}} }
	id1 := bson.D{{Key: "_id", Value: 1}}
	runErrCases(t, []errCase{
		{name: "set under a scalar", setup: one, write: true, cmd: up(id1, set("a.b"), false),
			code: 28, msg: "Cannot create field 'b' in element {a: 1}"},
		{name: "set a name under an array", setup: one, write: true, cmd: up(id1, set("arr.x"), false),
			code: 28, msg: "Cannot create field 'x' in element {arr: [ 1, 2 ]}"},
		{name: "inc under a scalar", setup: one, write: true, cmd: up(id1, bson.D{{Key: "$inc", Value: bson.D{{Key: "a.b", Value: 1}}}}, false),
			code: 28, msg: "Cannot create field 'b' in element {a: 1}"},
		{name: "upsert seeded from the query", write: true, cmd: up(bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 1}}, set("a.b"), true),
			code: 28, msg: "Cannot create field 'b' in element {a: 1}"},
		{name: "findAndModify", setup: one,
			cmd:  bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: id1}, {Key: "update", Value: set("a.b")}},
			code: 28, cname: "PathNotViable", msg: "Cannot create field 'b' in element {a: 1}"},
	})
}

// TestErrorCodesIndexOptionsConflict: the same key and options under another name is
// IndexOptionsConflict (85), whatever the numeric types of the key pattern.
func TestErrorCodesIndexOptionsConflict(t *testing.T) {
	spec := func(name string, dir any, extra ...bson.E) bson.D {
		return append(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: dir}}}, {Key: "name", Value: name}}, extra...)
	}
	ci := func(s bson.D) bson.D {
		return bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{s}}}
	}
	first := []bson.D{ci(spec("a1", 1, bson.E{Key: "unique", Value: true}))}
	runErrCases(t, []errCase{
		{name: "same spec new name", setup: first, cmd: ci(spec("a2", 1, bson.E{Key: "unique", Value: true})),
			code: 85, cname: "IndexOptionsConflict", msg: "Index already exists with a different name: a1"},
		{name: "double key direction", setup: first, cmd: ci(spec("a2", 1.0, bson.E{Key: "unique", Value: true})),
			code: 85, cname: "IndexOptionsConflict", msg: "Index already exists with a different name: a1"},
		{name: "same spec same name", setup: first, ok: true, cmd: ci(spec("a1", 1, bson.E{Key: "unique", Value: true}))},
	})
}
