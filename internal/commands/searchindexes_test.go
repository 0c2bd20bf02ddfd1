package commands_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestSearchIndexCommands: the search index commands and $listSearchIndexes answer as a
// mongod without an Atlas search index management host: 31082 SearchNotEnabled (the driver's
// index-management spec tests expect an error mentioning Atlas); IDL errors come first.
func TestSearchIndexCommands(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	db := ts.cl.Database("si")
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	def := bson.D{{Key: "mappings", Value: bson.D{{Key: "dynamic", Value: true}}}}
	for _, cmd := range []bson.D{
		{{Key: "createSearchIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "definition", Value: def}}}}},
		{{Key: "updateSearchIndex", Value: "c"}, {Key: "name", Value: "x"}, {Key: "definition", Value: def}},
		{{Key: "dropSearchIndex", Value: "c"}, {Key: "name", Value: "x"}},
		{{Key: "listSearchIndexes", Value: "c"}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$listSearchIndexes", Value: bson.D{}}}}}, {Key: "cursor", Value: bson.D{}}},
	} {
		err := db.RunCommand(ctx, cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 31082 || ce.Name != "SearchNotEnabled" || !strings.Contains(ce.Message, "Atlas") {
			t.Errorf("%v: got %v, want 31082 SearchNotEnabled", cmd, err)
		}
	}
	err := db.RunCommand(ctx, bson.D{{Key: "createSearchIndexes", Value: "c"}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 40414 {
		t.Errorf("createSearchIndexes without indexes: %v, want 40414", err)
	}
}
