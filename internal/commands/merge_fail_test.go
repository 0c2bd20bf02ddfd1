package commands_test

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/repl/applier/repltest"
)

// TestMergeWhenMatchedFail: $merge {whenMatched: "fail"} inserts, so a match is the insert's
// E11000 with the conflicting index's keyPattern and keyValue in the reply (the driver's spec
// test aggregate-merge-errorResponse.json); unsupported mode pairs are 51181.
func TestMergeWhenMatchedFail(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	db := ts.cl.Database("mf")
	if _, err := db.Collection("t").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 10}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 20}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "t"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "unique", Value: true}}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	agg := func(docs bson.A, merge bson.D) error {
		return db.RunCommand(ctx, bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{
			bson.D{{Key: "$documents", Value: docs}}, bson.D{{Key: "$merge", Value: merge}}}},
			{Key: "cursor", Value: bson.D{}}}).Err()
	}
	check := func(err error, pattern, value bson.D) {
		t.Helper()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 11000 {
			t.Fatalf("got %v, want 11000", err)
		}
		kp, _ := bson.Marshal(pattern)
		kv, _ := bson.Marshal(value)
		if got := ce.Raw.Lookup("keyPattern"); string(got.Value) != string(kp) {
			t.Errorf("keyPattern %v, want %v (reply %v)", got, pattern, ce.Raw)
		}
		if got := ce.Raw.Lookup("keyValue"); string(got.Value) != string(kv) {
			t.Errorf("keyValue %v, want %v", got, value)
		}
	}
	err := agg(bson.A{bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 99}}}, bson.D{{Key: "into", Value: "t"}, {Key: "whenMatched", Value: "fail"}})
	check(err, bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: int32(2)}})
	err = agg(bson.A{bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 10}}}, bson.D{{Key: "into", Value: "t"}, {Key: "on", Value: "a"}, {Key: "whenMatched", Value: "fail"}})
	check(err, bson.D{{Key: "a", Value: int32(1)}}, bson.D{{Key: "a", Value: int32(10)}})
	// No match: the document is inserted.
	if err := agg(bson.A{bson.D{{Key: "_id", Value: 4}, {Key: "a", Value: 40}}}, bson.D{{Key: "into", Value: "t"}, {Key: "whenMatched", Value: "fail"}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.Collection("t").CountDocuments(ctx, bson.D{}); n != 3 {
		t.Errorf("%d documents, want 3", n)
	}

	err = agg(bson.A{}, bson.D{{Key: "into", Value: "t"}, {Key: "whenMatched", Value: "fail"}, {Key: "whenNotMatched", Value: "discard"}})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 51181 ||
		ce.Message != "Combination of $merge modes 'whenMatched: fail' and 'whenNotMatched: discard' is not supported" {
		t.Errorf("fail/discard: %v, want 51181", err)
	}
}

// TestOutMergeRefuseLinearizable: $out and $merge refuse a linearizable read concern with
// InvalidOptions (their supportsReadConcern, wrapped as mongod's read concern check does:
// repl/concern); a plain aggregate may use it. A one-member
// replica set, as a standalone refuses linearizable reads altogether.
func TestOutMergeRefuseLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a replica set")
	}
	ns := repltest.StartReplSet(t, repltest.ReplSetOptions{Members: 1})
	ctx := context.Background()
	db := ns[0].Client.Database("lin")
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	lin := bson.D{{Key: "level", Value: "linearizable"}}
	for _, c := range []struct {
		stage bson.D
		msg   string
	}{
		{bson.D{{Key: "$out", Value: "o"}}, "$out cannot be used with a 'linearizable' read concern level"},
		{bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: "o"}}}}, "$merge cannot be used with a 'linearizable' read concern level"},
	} {
		err := db.RunCommand(ctx, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{c.stage}},
			{Key: "cursor", Value: bson.D{}}, {Key: "readConcern", Value: lin}}).Err()
		var ce mongo.CommandError
		want := `Command aggregate does not support { readConcern: { level: "linearizable", provenance: "clientSupplied" } } :: caused by :: ` + c.msg
		if !errors.As(err, &ce) || ce.Code != 72 || ce.Message != want {
			t.Errorf("%v: got %v, want 72 %q", c.stage, err, want)
		}
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}},
		{Key: "cursor", Value: bson.D{}}, {Key: "readConcern", Value: lin}}).Err(); err != nil {
		t.Errorf("linearizable aggregate without $out: %v", err)
	}
	if n, _ := db.Collection("o").CountDocuments(ctx, bson.D{}); n != 0 {
		t.Errorf("the refused $out/$merge wrote %d documents", n)
	}
}
