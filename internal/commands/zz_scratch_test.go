package commands_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestZZScratch(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	db := ts.cl.Database("s")
	db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	q := bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$_id", "$$x"}}}}}
	for _, cmd := range []bson.D{
		{{Key: "find", Value: "c"}, {Key: "filter", Value: q}, {Key: "let", Value: bson.D{{Key: "x", Value: "$a"}}}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: q}, {Key: "let", Value: bson.D{{Key: "$x", Value: 1}}}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: q}, {Key: "let", Value: bson.D{{Key: "x", Value: 1}, {Key: "NOW", Value: 1}}}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: q}, {Key: "let", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$add", Value: bson.A{0, 1}}}}}}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: q}, {Key: "let", Value: bson.D{{Key: "x", Value: "$$NOW"}}}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{q, bson.D{{Key: "_id", Value: 5}}}}}}}}}, {Key: "cursor", Value: bson.D{}}, {Key: "let", Value: bson.D{{Key: "x", Value: 1}}}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: q}}}}, {Key: "cursor", Value: bson.D{}}, {Key: "let", Value: bson.D{{Key: "x", Value: "$a"}}}},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: q}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}}}}}, {Key: "let", Value: bson.D{{Key: "x", Value: "$a"}}}},
		{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: q}, {Key: "limit", Value: 0}}}}, {Key: "let", Value: bson.D{{Key: "x", Value: 2}}}},
	} {
		r, err := db.RunCommand(ctx, cmd).Raw()
		t.Logf("%v\n   => %v %v", cmd, r, err)
	}
}
