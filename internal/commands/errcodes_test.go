package commands_test

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// errCase is one command whose error must be MongoDB's: code, codeName and, when msg is set,
// the exact errmsg. Codes and messages were looked up in MongoDB's source (mongodb/mongo).
type errCase struct {
	name  string
	setup []bson.D // commands run first on db "t" (must succeed)
	cmd   bson.D   // run on db "t"
	code  int32
	cname string
	msg   string
	db    string // run on this database instead of a fresh one (e.g. "admin")
	ok    bool   // MongoDB accepts the command: it must succeed
	write bool   // the error is the reply's first write error (codeName is not checked)
}

func runErrCases(t *testing.T, cases []errCase) {
	t.Helper()
	ts := startTestServer(t)
	ctx := context.Background()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := ts.cl.Database("ec" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
			if c.db != "" {
				db = ts.cl.Database(c.db)
			} else {
				t.Cleanup(func() { _ = db.Drop(ctx) })
			}
			for _, s := range c.setup {
				if err := db.RunCommand(ctx, s).Err(); err != nil {
					t.Fatalf("setup %v: %v", s, err)
				}
			}
			if c.write {
				// The driver reports write errors as an error but still hands over the reply.
				r, err := db.RunCommand(ctx, c.cmd).Raw()
				if r == nil {
					t.Fatalf("%v: %v", c.cmd, err)
				}
				we, err := r.LookupErr("writeErrors", "0")
				if err != nil {
					t.Fatalf("%v: no write error in %v", c.cmd, r)
				}
				code, _ := we.Document().Lookup("code").Int32OK()
				msg := we.Document().Lookup("errmsg").StringValue()
				if code != c.code || (c.msg != "" && msg != c.msg) {
					t.Errorf("got %d %q\nwant %d %q", code, msg, c.code, c.msg)
				}
				return
			}
			err := db.RunCommand(ctx, c.cmd).Err()
			if c.ok {
				if err != nil {
					t.Errorf("%v: %v, want success", c.cmd, err)
				}
				return
			}
			var ce mongo.CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("%v: got %v, want code %d (%s)", c.cmd, err, c.code, c.cname)
			}
			if ce.Code != c.code || ce.Name != c.cname || (c.msg != "" && ce.Message != c.msg) {
				t.Errorf("got %d (%s) %q\nwant %d (%s) %q", ce.Code, ce.Name, ce.Message, c.code, c.cname, c.msg)
			}
		})
	}
}

func ins(docs ...bson.D) bson.D {
	a := bson.A{}
	for _, d := range docs {
		a = append(a, d)
	}
	return bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: a}}
}

func agg(stages ...bson.D) bson.D {
	a := bson.A{}
	for _, s := range stages {
		a = append(a, s)
	}
	return bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: a}, {Key: "cursor", Value: bson.D{}}}
}

func find(extra ...bson.E) bson.D {
	return append(bson.D{{Key: "find", Value: "c"}}, extra...)
}

func TestErrorCodesFieldPath(t *testing.T) {
	one := []bson.D{ins(bson.D{{Key: "a", Value: 1}})}
	runErrCases(t, []errCase{
		{name: "projection empty component", setup: one, cmd: find(bson.E{Key: "projection", Value: bson.D{{Key: "a..b", Value: 1}}}),
			code: 15998, cname: "Location15998", msg: "FieldPath field names may not be empty strings."},
		{name: "projection trailing dot", setup: one, cmd: find(bson.E{Key: "projection", Value: bson.D{{Key: "a.", Value: 1}}}),
			code: 40353, cname: "Location40353", msg: "FieldPath must not end with a '.'."},
		{name: "projection empty", setup: one, cmd: find(bson.E{Key: "projection", Value: bson.D{{Key: "", Value: 1}}}),
			code: 40352, cname: "Location40352", msg: "FieldPath cannot be constructed with empty string"},
		{name: "sort empty component", setup: one, cmd: find(bson.E{Key: "sort", Value: bson.D{{Key: "a..b", Value: 1}}}),
			code: 15998, cname: "Location15998", msg: "FieldPath field names may not be empty strings."},
		{name: "project empty component", setup: one, cmd: agg(bson.D{{Key: "$project", Value: bson.D{{Key: "a..b", Value: 1}}}}),
			code: 15998, cname: "Location15998"},
		{name: "unset trailing dot", setup: one, cmd: agg(bson.D{{Key: "$unset", Value: "a."}}),
			code: 40353, cname: "Location40353"},
		{name: "group field path trailing dot", setup: one, cmd: agg(bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$a."}}}}),
			code: 40353, cname: "Location40353"},
		{name: "group field path empty component", setup: one, cmd: agg(bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$a..b"}}}}),
			code: 15998, cname: "Location15998"},
		{name: "addFields empty component", setup: one, cmd: agg(bson.D{{Key: "$addFields", Value: bson.D{{Key: "a..b", Value: 1}}}}),
			code: 15998, cname: "Location15998"},
	})
}

func TestErrorCodesProjection(t *testing.T) {
	arr := []bson.D{ins(bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{1, 2, 3}}, {Key: "b", Value: 1}})}
	proj := func(filter, p bson.D) bson.D {
		return find(bson.E{Key: "filter", Value: filter}, bson.E{Key: "projection", Value: p})
	}
	runErrCases(t, []errCase{
		{name: "collision remaining portion", setup: arr, cmd: proj(bson.D{}, bson.D{{Key: "a", Value: 1}, {Key: "a.b", Value: 1}}),
			code: 31249, cname: "Location31249", msg: "Path collision at a.b remaining portion b"},
		{name: "unset collision remaining portion", setup: arr, cmd: agg(bson.D{{Key: "$unset", Value: bson.A{"a", "a.b"}}}),
			code: 31249, cname: "Location31249"},
		{name: "agg positional", setup: arr, cmd: agg(bson.D{{Key: "$project", Value: bson.D{{Key: "a.$", Value: 1}}}}),
			code: 31324, cname: "Location31324", msg: "Invalid $project :: caused by :: Cannot use positional projection in aggregation projection"},
		{name: "positional in the middle", setup: arr, cmd: proj(bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a.$.b", Value: 1}}),
			code: 31394, cname: "Location31394"},
		{name: "positional exclusion", setup: arr, cmd: proj(bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a.$", Value: 0}}),
			code: 31395, cname: "Location31395", msg: "positional projection cannot be used with exclusion"},
		{name: "positional literal", setup: arr, cmd: proj(bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a.$", Value: "x"}}),
			code: 31308, cname: "Location31308", msg: "positional projection cannot be used with a literal"},
		{name: "positional not matching the query", setup: arr, cmd: proj(bson.D{{Key: "b", Value: 1}}, bson.D{{Key: "a.$", Value: 1}}),
			code: 51246, cname: "Location51246", msg: "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array"},
		{name: "positional element mismatch", setup: []bson.D{ins(bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{1, 2, 3}}, {Key: "b", Value: bson.A{1, 2, 3, 4, 5}}})},
			cmd:  proj(bson.D{{Key: "b", Value: 5}}, bson.D{{Key: "a.$", Value: 1}}),
			code: 51247, cname: "Location51247", msg: "Executor error during find command :: caused by :: positional operator '.$' element mismatch"},
	})
}

func TestErrorCodesVariables(t *testing.T) {
	one := []bson.D{ins(bson.D{{Key: "a", Value: 1}})}
	project := func(v any) bson.D { return agg(bson.D{{Key: "$project", Value: bson.D{{Key: "x", Value: v}}}}) }
	runErrCases(t, []errCase{
		{name: "empty variable reference", setup: one, cmd: project("$$"),
			code: 9, cname: "FailedToParse", msg: "Invalid $project :: caused by :: empty variable names are not allowed"},
		{name: "variable starting with a digit", setup: one, cmd: project("$$1a"),
			code: 9, cname: "FailedToParse", msg: "Invalid $project :: caused by :: '1a' starts with an invalid character for a user variable name"},
		{name: "variable with a bad character", setup: one, cmd: project("$$a-b"),
			code: 9, cname: "FailedToParse", msg: "Invalid $project :: caused by :: 'a-b' contains an invalid character for a variable name: '-'"},
		{name: "group _id with a duplicate field", setup: one,
			cmd:  agg(bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "a", Value: "$a"}, {Key: "a", Value: 1}}}}}}),
			code: 16406, cname: "Location16406", msg: "duplicate field name specified in object literal: { a: \"$a\", a: 1 }"},
		{name: "group accumulator empty object", setup: one, cmd: agg(bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "x", Value: bson.D{}}}}}),
			code: 40234, cname: "Location40234", msg: "The field 'x' must be an accumulator object"},
		{name: "group accumulator not an operator", setup: one, cmd: agg(bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "x", Value: bson.D{{Key: "a", Value: 1}, {Key: "$sum", Value: 1}}}}}}),
			code: 40234, cname: "Location40234", msg: "The field 'x' must be an accumulator object"},
	})
}

func TestErrorCodesCommandParsing(t *testing.T) {
	one := []bson.D{ins(bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})}
	del := func(limit any) bson.D {
		return bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: limit}}}}}
	}
	runErrCases(t, []errCase{
		{name: "getLog null", db: "admin", cmd: bson.D{{Key: "getLog", Value: nil}},
			code: 40414, cname: "Location40414", msg: "BSON field 'getLog.getLog' is missing but a required field"},
		{name: "getLog wrong type", db: "admin", cmd: bson.D{{Key: "getLog", Value: bson.A{}}},
			code: 14, cname: "TypeMismatch", msg: "BSON field 'getLog.getLog' is the wrong type 'array', expected type 'string'"},
		{name: "getLog unknown log", db: "admin", cmd: bson.D{{Key: "getLog", Value: "nosuch"}},
			code: 96, cname: "OperationFailed", msg: "No log named 'nosuch'"},
		{name: "$lt with a regex", setup: one, cmd: find(bson.E{Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$lt", Value: bson.Regex{Pattern: "x"}}}}}}),
			code: 2, cname: "BadValue", msg: "Can't have RegEx as arg to predicate over field 'a'."},
		{name: "find on a non-string collection name", cmd: bson.D{{Key: "find", Value: 1}},
			code: 2, cname: "BadValue", msg: "collection name has invalid type int"},
		{name: "insert into a non-string collection name", cmd: bson.D{{Key: "insert", Value: 1}, {Key: "documents", Value: bson.A{bson.D{}}}},
			code: 2, cname: "BadValue", msg: "collection name has invalid type int"},
		{name: "duplicate field", setup: one, cmd: find(bson.E{Key: "filter", Value: bson.D{}}, bson.E{Key: "filter", Value: bson.D{}}),
			code: 40413, cname: "Location40413", msg: "BSON field 'FindCommandRequest.filter' is a duplicate field"},
		{name: "showRecordId as a number", setup: one, cmd: find(bson.E{Key: "showRecordId", Value: 1}),
			code: 14, cname: "TypeMismatch", msg: "Field 'showRecordId' should be a boolean value, but found: int"},
		{name: "singleBatch null", setup: one, cmd: find(bson.E{Key: "singleBatch", Value: nil}),
			code: 14, cname: "TypeMismatch", msg: "Field 'singleBatch' should be a boolean value, but found: null"},
		{name: "delete limit fractional", setup: one, cmd: del(0.5),
			code: 9, cname: "FailedToParse", msg: "The limit field in delete objects must be 0 or 1. Got 0.5"},
		{name: "delete limit not a number is multi", setup: one, cmd: del("x"), ok: true},
		{name: "find batchSize fractional", setup: one, cmd: find(bson.E{Key: "batchSize", Value: 1.5}), ok: true},
		{name: "aggregate batchSize fractional", setup: one, ok: true,
			cmd: bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 1.5}}}}},
		{name: "maxTimeMS negative", setup: one, cmd: find(bson.E{Key: "maxTimeMS", Value: -1}),
			code: 2, cname: "BadValue", msg: "-1 value for maxTimeMS is out of range [0, 2147483647]"},
		{name: "maxTimeMS fractional", setup: one, cmd: find(bson.E{Key: "maxTimeMS", Value: 1.5}),
			code: 2, cname: "BadValue", msg: "maxTimeMS has non-integral value"},
	})
}

func TestErrorCodesGetMore(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	db := ts.cl.Database("gm")
	if err := db.RunCommand(ctx, ins(bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}})).Err(); err != nil {
		t.Fatal(err)
	}
	open := func(t *testing.T) int64 {
		var r struct {
			Cursor struct{ ID int64 } `bson:"cursor"`
		}
		if err := db.RunCommand(ctx, find(bson.E{Key: "batchSize", Value: 1})).Decode(&r); err != nil || r.Cursor.ID == 0 {
			t.Fatalf("find: %v (cursor %d)", err, r.Cursor.ID)
		}
		return r.Cursor.ID
	}
	check := func(t *testing.T, cmd bson.D, code int32, name, msg string) {
		t.Helper()
		err := db.RunCommand(ctx, cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("%v: got %v, want code %d", cmd, err, code)
		}
		if ce.Code != code || ce.Name != name || (msg != "" && ce.Message != msg) {
			t.Errorf("got %d (%s) %q\nwant %d (%s) %q", ce.Code, ce.Name, ce.Message, code, name, msg)
		}
	}
	t.Run("empty collection name", func(t *testing.T) {
		id := open(t)
		check(t, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: ""}},
			73, "InvalidNamespace", "Invalid namespace for getMore: gm.")
	})
	t.Run("maxTimeMS on a non-awaitData cursor", func(t *testing.T) {
		id := open(t)
		check(t, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "maxTimeMS", Value: 100}},
			2, "BadValue", "cannot set maxTimeMS on getMore command for a non-awaitData cursor")
		// The cursor survives the refusal.
		if err := db.RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}).Err(); err != nil {
			t.Errorf("getMore after the refusal: %v", err)
		}
	})
	t.Run("cursor of a dropped database", func(t *testing.T) {
		id := open(t)
		if err := db.Drop(ctx); err != nil {
			t.Fatal(err)
		}
		check(t, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}, 175, "QueryPlanKilled", "")
	})
}

func TestErrorCodesWrites(t *testing.T) {
	runErrCases(t, []errCase{
		{name: "array _id", write: true, cmd: ins(bson.D{{Key: "_id", Value: bson.A{1}}}),
			code: 53, msg: "The '_id' value cannot be of type array"},
		{name: "regex _id", write: true, cmd: ins(bson.D{{Key: "_id", Value: bson.Regex{Pattern: "a"}}}),
			code: 53, msg: "The '_id' value cannot be of type regex"},
	})
}

func TestErrorCodesIndexes(t *testing.T) {
	one := []bson.D{ins(bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})}
	ci := func(specs ...bson.D) bson.D {
		a := bson.A{}
		for _, s := range specs {
			a = append(a, s)
		}
		return bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: a}}
	}
	spec := func(key bson.D, name string, extra ...bson.E) bson.D {
		return append(bson.D{{Key: "key", Value: key}, {Key: "name", Value: name}}, extra...)
	}
	runErrCases(t, []errCase{
		{name: "indexes null", setup: one, cmd: bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: nil}},
			code: 10065, cname: "Location10065", msg: "invalid parameter: expected an object (indexes)"},
		{name: "_id index unique", setup: one, cmd: ci(spec(bson.D{{Key: "_id", Value: 1}}, "_id_", bson.E{Key: "unique", Value: true})),
			code: 197, cname: "InvalidIndexSpecificationOption"},
	})
}
