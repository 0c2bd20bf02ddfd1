package commands_test

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestPipelineUpdateDollarFields: a pipeline update may store top-level '$'-prefixed and
// dotted field names (built with $setField or $literal), in an update, an upsert and a
// findAndModify; replacement-style updates still refuse a top-level '$' name (FailedToParse),
// and an _id may not hold '$'-prefixed names. MongoDB 5.0+, jstests/core/field_name_validation.js
// and the driver's CRUD spec tests *-dots_and_dollars.json.
func TestPipelineUpdateDollarFields(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	coll := ts.cl.Database("dd").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "foo", Value: bson.D{}}}); err != nil {
		t.Fatal(err)
	}
	setField := func(name string) mongo.Pipeline {
		return mongo.Pipeline{{{Key: "$replaceWith", Value: bson.D{{Key: "$setField", Value: bson.D{
			{Key: "field", Value: bson.D{{Key: "$literal", Value: name}}}, {Key: "value", Value: 1}, {Key: "input", Value: "$$ROOT"}}}}}}}
	}
	for _, name := range []string{"$a", "a.b", "$ref"} {
		res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, setField(name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.ModifiedCount != 1 {
			t.Errorf("%s: modified %d", name, res.ModifiedCount)
		}
	}
	var got bson.D
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := bson.D{{Key: "_id", Value: int32(1)}, {Key: "foo", Value: bson.D{}}, {Key: "$a", Value: int32(1)},
		{Key: "a.b", Value: int32(1)}, {Key: "$ref", Value: int32(1)}}
	if !equalDocs([]bson.D{got}, []bson.D{want}) {
		t.Errorf("got %v, want %v", got, want)
	}

	// Upsert and findAndModify through a pipeline.
	lit := mongo.Pipeline{{{Key: "$replaceWith", Value: bson.D{{Key: "$literal", Value: bson.D{{Key: "$in", Value: 2}, {Key: "x", Value: 3}}}}}}}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, lit, options.UpdateOne().SetUpsert(true)); err != nil {
		t.Fatalf("upsert: %v", err)
	}
	if err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, lit).Err(); err != nil {
		t.Fatalf("findAndModify: %v", err)
	}
	for _, id := range []int{1, 2} {
		if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}, {Key: "x", Value: 3}}); n != 1 {
			t.Errorf("_id %d not replaced", id)
		}
	}

	// Still refused: a top-level '$' name in a replacement; '$' names inside _id.
	_, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$c", Value: 1}})
	if err == nil {
		// (The driver itself refuses a top-level "$" key in a replacement.)
		t.Fatal("replacement with $c accepted")
	}
	r, _ := ts.cl.Database("dd").RunCommand(ctx, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$c", Value: 1}, {Key: "d", Value: 1}}}}}}}).Raw()
	if code, _ := r.Lookup("writeErrors", "0", "code").Int32OK(); code != 9 {
		t.Errorf("replacement {$c: 1, d: 1}: %v, want write error 9 FailedToParse", r)
	}
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "k", Value: 99}}, mongo.Pipeline{{{Key: "$replaceWith", Value: bson.D{{Key: "$literal",
		Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$bad", Value: 1}}}}}}}}}, options.UpdateOne().SetUpsert(true))
	var we mongo.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != 52 {
		t.Errorf("upsert of _id {$bad: 1}: %v, want 52 DollarPrefixedFieldName", err)
	}
}
