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
}

func runErrCases(t *testing.T, cases []errCase) {
	t.Helper()
	ts := startTestServer(t)
	ctx := context.Background()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := ts.cl.Database("ec" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
			t.Cleanup(func() { _ = db.Drop(ctx) })
			for _, s := range c.setup {
				if err := db.RunCommand(ctx, s).Err(); err != nil {
					t.Fatalf("setup %v: %v", s, err)
				}
			}
			err := db.RunCommand(ctx, c.cmd).Err()
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
		{name: "collision leaf", setup: arr, cmd: proj(bson.D{}, bson.D{{Key: "a.b", Value: 1}, {Key: "a", Value: 1}}),
			code: 31250, cname: "Location31250", msg: "Path collision at a"},
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
			code: 9, cname: "FailedToParse", msg: "empty variable names are not allowed"},
		{name: "variable starting with a digit", setup: one, cmd: project("$$1a"),
			code: 9, cname: "FailedToParse", msg: "'1a' starts with an invalid character for a user variable name"},
		{name: "variable with a bad character", setup: one, cmd: project("$$a-b"),
			code: 9, cname: "FailedToParse", msg: "'a-b' contains an invalid character for a variable name: '-'"},
		{name: "undefined variable", setup: one, cmd: project("$$nosuch"),
			code: 17276, cname: "Location17276", msg: "Use of undefined variable: nosuch"},
		{name: "group accumulator empty object", setup: one, cmd: agg(bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "x", Value: bson.D{}}}}}),
			code: 40234, cname: "Location40234", msg: "The field 'x' must be an accumulator object"},
		{name: "group accumulator not an operator", setup: one, cmd: agg(bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "x", Value: bson.D{{Key: "a", Value: 1}, {Key: "$sum", Value: 1}}}}}}),
			code: 40234, cname: "Location40234", msg: "The field 'x' must be an accumulator object"},
	})
}
