package commands_test

import (
	"context"
	"errors"
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
		for _, db := range []string{"a.b", "a b", "a/b"} {
			err := ts.cl.Database(db).RunCommand(ctx, c).Err()
			wantCode(t, err, 73, "InvalidNamespace", "Invalid database name: '"+db+"'")
		}
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
