package commands_test

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestCommandLet: a command's "let" variables are visible as $$name in the filter's $expr
// (also nested under $and/$or), in find's projection, and in pipeline updates, for find,
// count, distinct, update, delete and findAndModify (MongoDB 5.0+; the driver's CRUD spec
// tests *-let.json).
func TestCommandLet(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	coll := ts.cl.Database("let").Collection("c")
	seed := func(t *testing.T) {
		t.Helper()
		_ = coll.Drop(ctx)
		if _, err := coll.InsertMany(ctx, []any{
			bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "a"}},
			bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "b"}},
			bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "b"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	byID := bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$_id", "$$id"}}}}}
	byName := bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "_id", Value: 99}},
		bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$name", "$$name"}}}}},
	}}}
	idLet := bson.D{{Key: "id", Value: 2}}
	nameLet := bson.D{{Key: "name", Value: "b"}}

	t.Run("find", func(t *testing.T) {
		seed(t)
		cur, err := coll.Find(ctx, byID, options.Find().SetLet(bson.D{{Key: "id", Value: 2}, {Key: "x", Value: "foo"}}).
			SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: "$$x"}}))
		if err != nil {
			t.Fatal(err)
		}
		var got []bson.D
		if err := cur.All(ctx, &got); err != nil {
			t.Fatal(err)
		}
		want := []bson.D{{{Key: "_id", Value: int32(2)}, {Key: "x", Value: "foo"}}}
		if !equalDocs(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("count and distinct", func(t *testing.T) {
		seed(t)
		r := ts.cl.Database("let").RunCommand(ctx, bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: byName}, {Key: "let", Value: nameLet}})
		var cr struct{ N int32 }
		if err := r.Decode(&cr); err != nil {
			t.Fatal(err)
		}
		if cr.N != 2 {
			t.Errorf("count: n = %d, want 2", cr.N)
		}
		r = ts.cl.Database("let").RunCommand(ctx, bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: "_id"}, {Key: "query", Value: byName}, {Key: "let", Value: nameLet}})
		var dr struct{ Values []int32 }
		if err := r.Decode(&dr); err != nil {
			t.Fatal(err)
		}
		if len(dr.Values) != 2 {
			t.Errorf("distinct: %v, want [2 3]", dr.Values)
		}
	})
	t.Run("update", func(t *testing.T) {
		seed(t)
		res, err := coll.UpdateMany(ctx, byName, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "x", Value: "$$x"}}}}},
			options.UpdateMany().SetLet(bson.D{{Key: "name", Value: "b"}, {Key: "x", Value: "foo"}}))
		if err != nil {
			t.Fatal(err)
		}
		if res.ModifiedCount != 2 {
			t.Errorf("modified %d, want 2", res.ModifiedCount)
		}
		if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "x", Value: "foo"}}); n != 2 {
			t.Errorf("%d documents have x: foo, want 2", n)
		}
		// A replacement with a let filter.
		res, err = coll.ReplaceOne(ctx, byID, bson.D{{Key: "x", Value: "r"}}, options.Replace().SetLet(idLet))
		if err != nil {
			t.Fatal(err)
		}
		if res.ModifiedCount != 1 {
			t.Errorf("replace: modified %d, want 1", res.ModifiedCount)
		}
	})
	t.Run("update constants", func(t *testing.T) {
		seed(t)
		// An update's c binds values, not expressions (pipeline_executor.cpp), and its names
		// follow the rule for variable references (validateNameForUserRead: "Up" is fine).
		c := bson.D{{Key: "f", Value: "$name"}, {Key: "e", Value: bson.D{{Key: "$add", Value: bson.A{1, 2}}}}, {Key: "Up", Value: 1}}
		r, err := ts.cl.Database("let").RunCommand(ctx, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{
			{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}},
			{Key: "u", Value: bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "f", Value: "$$f"}, {Key: "e", Value: "$$e"}, {Key: "u", Value: "$$Up"}}}}}},
			{Key: "c", Value: c}}}}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := r.Lookup("nModified").AsInt64OK(); n != 1 {
			t.Fatalf("update: %v", r)
		}
		var got bson.D
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got); err != nil {
			t.Fatal(err)
		}
		want := bson.D{{Key: "_id", Value: int32(1)}, {Key: "name", Value: "a"}, {Key: "f", Value: "$name"},
			{Key: "e", Value: bson.D{{Key: "$add", Value: bson.A{int32(1), int32(2)}}}}, {Key: "u", Value: int32(1)}}
		if !equalDocs([]bson.D{got}, []bson.D{want}) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("delete", func(t *testing.T) {
		seed(t)
		res, err := coll.DeleteMany(ctx, byName, options.DeleteMany().SetLet(nameLet))
		if err != nil {
			t.Fatal(err)
		}
		if res.DeletedCount != 2 {
			t.Errorf("deleted %d, want 2", res.DeletedCount)
		}
		res, err = coll.DeleteOne(ctx, byID, options.DeleteOne().SetLet(bson.D{{Key: "id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		if res.DeletedCount != 1 {
			t.Errorf("deleteOne: deleted %d, want 1", res.DeletedCount)
		}
	})
	t.Run("findAndModify", func(t *testing.T) {
		seed(t)
		var got bson.D
		err := coll.FindOneAndUpdate(ctx, byID, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "x", Value: "$$x"}}}}},
			options.FindOneAndUpdate().SetLet(bson.D{{Key: "id", Value: 2}, {Key: "x", Value: "foo"}}).
				SetReturnDocument(options.After).SetProjection(bson.D{{Key: "x", Value: 1}, {Key: "y", Value: "$$x"}})).Decode(&got)
		if err != nil {
			t.Fatal(err)
		}
		want := bson.D{{Key: "_id", Value: int32(2)}, {Key: "x", Value: "foo"}, {Key: "y", Value: "foo"}}
		if !equalDocs([]bson.D{got}, []bson.D{want}) {
			t.Errorf("got %v, want %v", got, want)
		}
		if err := coll.FindOneAndDelete(ctx, byID, options.FindOneAndDelete().SetLet(bson.D{{Key: "id", Value: 3}})).Err(); err != nil {
			t.Fatal(err)
		}
		if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 2 {
			t.Errorf("%d documents left, want 2", n)
		}
	})
	t.Run("aggregate", func(t *testing.T) {
		seed(t)
		// $expr under $or sees the command's let; a $lookup let of the same name hides it.
		pipe := bson.A{
			bson.D{{Key: "$match", Value: byName}},
			bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "c"}, {Key: "let", Value: bson.D{{Key: "name", Value: "a"}}},
				{Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: byName}}}}, {Key: "as", Value: "j"}}}},
			bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 1}, {Key: "j", Value: "$j._id"}}}},
		}
		cur, err := coll.Aggregate(ctx, pipe, options.Aggregate().SetLet(nameLet))
		if err != nil {
			t.Fatal(err)
		}
		var got []bson.D
		if err := cur.All(ctx, &got); err != nil {
			t.Fatal(err)
		}
		want := []bson.D{
			{{Key: "_id", Value: int32(2)}, {Key: "j", Value: bson.A{int32(1)}}},
			{{Key: "_id", Value: int32(3)}, {Key: "j", Value: bson.A{int32(1)}}},
		}
		if !equalDocs(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("bad let", func(t *testing.T) {
		seed(t)
		// variables.cpp seedVariablesWithLetParameters / validateVariable.
		for _, c := range []struct {
			let  bson.D
			code int32
			msg  string
		}{
			{bson.D{{Key: "x", Value: "$name"}}, 4890500, "Command let Expression tried to access a field, but this is not allowed becauseCommand let Expressions run before the query examines any documents."},
			{bson.D{{Key: "x", Value: bson.D{{Key: "$concat", Value: bson.A{"a", "$$ROOT.name"}}}}}, 4890500, ""},
			{bson.D{{Key: "x", Value: bson.D{{Key: "$getField", Value: "name"}}}}, 4890500, ""},
			{bson.D{{Key: "NOW", Value: 1}}, 4738901, "Attempt to set internal constant: NOW"},
			{bson.D{{Key: "Foo", Value: 1}}, 9, "Invalid 'let' parameter :: caused by :: 'Foo' starts with an invalid character for a user variable name"},
		} {
			for _, cmd := range []bson.D{
				{{Key: "find", Value: "c"}, {Key: "let", Value: c.let}},
				{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}, {Key: "let", Value: c.let}},
			} {
				err := ts.cl.Database("let").RunCommand(ctx, cmd).Err()
				var ce mongo.CommandError
				if !errors.As(err, &ce) || ce.Code != c.code || (c.msg != "" && ce.Message != c.msg) {
					t.Errorf("%v: got %v, want %d %q", cmd, err, c.code, c.msg)
				}
			}
		}
		// Constant expressions are fine: $literal, $$NOW, $rand.
		let := bson.D{{Key: "a", Value: bson.D{{Key: "$literal", Value: "$name"}}}, {Key: "b", Value: "$$NOW"}, {Key: "c", Value: bson.D{{Key: "$rand", Value: bson.D{}}}}}
		if err := ts.cl.Database("let").RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "let", Value: let}}).Err(); err != nil {
			t.Errorf("constant let: %v", err)
		}
	})
	t.Run("undefined variable", func(t *testing.T) {
		seed(t)
		_, err := coll.Find(ctx, byID, options.Find().SetLet(bson.D{{Key: "other", Value: 1}}))
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 17276 {
			t.Errorf("got %v, want 17276 Use of undefined variable", err)
		}
	})
}

// equalDocs compares documents byte for byte (field order and types included).
func equalDocs(a, b []bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, _ := bson.Marshal(a[i])
		y, _ := bson.Marshal(b[i])
		if string(x) != string(y) {
			return false
		}
	}
	return true
}
