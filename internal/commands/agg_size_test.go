package commands_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestAggregateResultTooLarge: a pipeline result larger than BSONObjMaxInternalSize
// (16 MiB + 16 KiB) fails with 10334 BSONObjectTooLarge and MongoDB's BSONObj message, in the
// first batch and in a getMore; a result just over 16 MiB is still returned (MongoDB's
// jstests/core/query/bson_size_limit.js).
func TestAggregateResultTooLarge(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	coll := ts.cl.Database("app").Collection("big")
	const maxUser = 16 * 1024 * 1024
	// Exactly 16 MiB, and a small one: their $addToSet is just over 16 MiB.
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: strings.Repeat("a", maxUser-26)}},
		bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: strings.Repeat("b", 1023)}},
	}); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Aggregate(ctx, bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil},
		{Key: "xl", Value: bson.D{{Key: "$addToSet", Value: "$x"}}}}}}})
	if err != nil {
		t.Fatalf("a result just over 16 MiB: %v", err)
	}
	if !cur.Next(ctx) || len(cur.Current) <= maxUser {
		t.Fatalf("a result just over 16 MiB: %v (%d bytes)", cur.Err(), len(cur.Current))
	}
	_ = cur.Close(ctx)

	msg := regexp.MustCompile(`^BSONObj size: (\d+) \(0x[0-9A-F]+\) is invalid\. Size must be between 0 and 16793600\(16MB\) First element: _id: null$`)
	check := func(what string, err error) {
		t.Helper()
		var ce mongo.CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: got %v, want 10334", what, err)
		}
		if ce.Code != 10334 || ce.Name != "BSONObjectTooLarge" || !msg.MatchString(ce.Message) {
			t.Fatalf("%s: got %d (%s) %q, want 10334 (BSONObjectTooLarge) matching %s", what, ce.Code, ce.Name, ce.Message, msg)
		}
	}
	// Two copies of the 16 MiB string: about 32 MiB.
	double := bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: 1}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: nil}, {Key: "a", Value: "$x"}, {Key: "b", Value: "$x"}}}}}
	_, err = coll.Aggregate(ctx, double)
	check("first batch", err)

	// A find whose projection builds such a document fails the same way.
	err = ts.cl.Database("app").RunCommand(ctx, bson.D{{Key: "find", Value: "big"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "projection", Value: bson.D{{Key: "_id", Value: nil}, {Key: "a", Value: "$x"}, {Key: "b", Value: "$x"}}}}).Err()
	check("find", err)

	// In a getMore: the first batch (batchSize 0) is empty.
	cur, err = coll.Aggregate(ctx, double, optsBatch0())
	if err != nil {
		t.Fatalf("aggregate with batchSize 0: %v", err)
	}
	defer cur.Close(ctx)
	if cur.Next(ctx) {
		t.Fatalf("getMore returned a %d-byte document", len(cur.Current))
	}
	check("getMore", cur.Err())
}

func optsBatch0() options.Lister[options.AggregateOptions] {
	return options.Aggregate().SetBatchSize(0)
}
