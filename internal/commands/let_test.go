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
