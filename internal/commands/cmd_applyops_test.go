package commands_test

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

func op(kind, ns string, o bson.D, more ...bson.E) bson.D {
	return append(bson.D{{Key: "op", Value: kind}, {Key: "ns", Value: ns}, {Key: "o", Value: o}}, more...)
}

// TestApplyOpsStandalone: on a standalone applyOps applies inserts, replacements (upserting
// a missing document), $v:2 diffs and deletes atomically and answers {applied, results};
// every bad input fails with MongoDB's code and changes nothing.
func TestApplyOpsStandalone(t *testing.T) {
	ctx := context.Background()
	ts := startTestServer(t)
	admin := ts.cl.Database("admin")
	coll := ts.cl.Database("ao").Collection("c")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	var res bson.Raw
	err := admin.RunCommand(ctx, bson.D{{Key: "applyOps", Value: bson.A{
		op("i", "ao.c", bson.D{{Key: "_id", Value: 3}}),
		op("u", "ao.c", bson.D{{Key: "$v", Value: 2}, {Key: "diff", Value: bson.D{{Key: "u", Value: bson.D{{Key: "a", Value: 5}}}}}},
			bson.E{Key: "o2", Value: bson.D{{Key: "_id", Value: 1}}}),
		op("u", "ao.c", bson.D{{Key: "b", Value: 1}}, bson.E{Key: "o2", Value: bson.D{{Key: "_id", Value: 4}}}), // upsert
		op("d", "ao.c", bson.D{{Key: "_id", Value: 2}}),
		op("d", "ao.nothere", bson.D{{Key: "_id", Value: 2}}), // missing collection: succeeds
		op("n", "", bson.D{{Key: "msg", Value: "x"}}),         // skipped
	}}}).Decode(&res)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Lookup("applied").Int32(); got != 5 {
		t.Fatalf("applied %d, want 5: %v", got, res)
	}
	if vals, _ := res.Lookup("results").Array().Values(); len(vals) != 5 || !vals[4].Boolean() {
		t.Fatalf("results: %v", res)
	}
	state := func() string {
		t.Helper()
		cur, err := coll.Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		s := ""
		for _, d := range docs {
			s += d.String()
		}
		return s
	}
	want := `{"_id": {"$numberInt":"1"},"a": {"$numberInt":"5"}}{"_id": {"$numberInt":"3"}}{"_id": {"$numberInt":"4"},"b": {"$numberInt":"1"}}`
	if got := state(); got != want {
		t.Fatalf("after applyOps: %s, want %s", got, want)
	}

	ins := op("i", "ao.c", bson.D{{Key: "_id", Value: 100}})
	for _, c := range []struct {
		name string
		cmd  bson.D
		code int32
	}{
		{"not an array", bson.D{{Key: "applyOps", Value: 1}}, 9},
		{"op not an object", bson.D{{Key: "applyOps", Value: bson.A{ins, 5}}}, 9},
		{"no op field", bson.D{{Key: "applyOps", Value: bson.A{ins, bson.D{{Key: "ns", Value: "ao.c"}}}}}, 20},
		{"empty ns", bson.D{{Key: "applyOps", Value: bson.A{ins, op("i", "", bson.D{{Key: "_id", Value: 1}})}}}, 20},
		{"prepare", bson.D{{Key: "applyOps", Value: bson.A{ins}}, {Key: "prepare", Value: true}}, 2},
		{"partialTxn", bson.D{{Key: "applyOps", Value: bson.A{ins}}, {Key: "partialTxn", Value: true}}, 31056},
		{"count", bson.D{{Key: "applyOps", Value: bson.A{ins}}, {Key: "count", Value: 1}}, 31240},
		{"local", bson.D{{Key: "applyOps", Value: bson.A{ins, op("i", "local.x", bson.D{{Key: "_id", Value: 1}})}}}, 20},
		{"command op", bson.D{{Key: "applyOps", Value: bson.A{ins, op("c", "ao.$cmd", bson.D{{Key: "create", Value: "x"}})}}}, 115},
		{"nested applyOps", bson.D{{Key: "applyOps", Value: bson.A{ins, op("c", "admin.$cmd", bson.D{{Key: "applyOps", Value: bson.A{}}})}}}, 115},
		{"unknown collection", bson.D{{Key: "applyOps", Value: bson.A{ins, op("i", "ao.nothere", bson.D{{Key: "_id", Value: 1}})}}}, 26},
		{"invalid ns", bson.D{{Key: "applyOps", Value: bson.A{ins, op("i", "ao.", bson.D{{Key: "_id", Value: 1}})}}}, 73},
		{"ns and ui differ", bson.D{{Key: "applyOps", Value: bson.A{ins, op("i", "ao.c", bson.D{{Key: "_id", Value: 1}},
			bson.E{Key: "ui", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}})}}}, 3318200},
		{"modifier update", bson.D{{Key: "applyOps", Value: bson.A{ins, op("u", "ao.c", bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}},
			bson.E{Key: "o2", Value: bson.D{{Key: "_id", Value: 1}}})}}}, 9},
		{"missing document, no upsert", bson.D{{Key: "applyOps", Value: bson.A{ins, op("u", "ao.c", bson.D{{Key: "z", Value: 1}},
			bson.E{Key: "o2", Value: bson.D{{Key: "_id", Value: 99}}})}}, {Key: "alwaysUpsert", Value: false}}, 218},
		{"replacement changes _id", bson.D{{Key: "applyOps", Value: bson.A{ins, op("u", "ao.c", bson.D{{Key: "_id", Value: 3}, {Key: "x", Value: 1}},
			bson.E{Key: "o2", Value: bson.D{{Key: "_id", Value: 1}}})}}}, 66},
	} {
		err := admin.RunCommand(ctx, c.cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || (c.code != 0 && ce.Code != c.code) {
			t.Errorf("%s: %v, want code %d", c.name, err, c.code)
		}
		if got := state(); got != want {
			t.Fatalf("%s changed data: %s", c.name, got)
		}
	}
	// The error reply says which operation failed.
	raw, err := admin.RunCommand(ctx, bson.D{{Key: "applyOps", Value: bson.A{ins, op("i", "ao.nothere", bson.D{{Key: "_id", Value: 1}})}}}).Raw()
	if err == nil || raw.Lookup("applied").Int32() != 2 {
		t.Fatalf("error reply %v (%v), want applied: 2", raw, err)
	}
}

// TestApplyOpsOnlyNoops: an applyOps of no-ops only applies nothing and succeeds.
func TestApplyOpsOnlyNoops(t *testing.T) {
	ctx := context.Background()
	ts := startTestServer(t)
	var res bson.Raw
	if err := ts.cl.Database("admin").RunCommand(ctx, bson.D{{Key: "applyOps", Value: bson.A{op("n", "", bson.D{{Key: "msg", Value: "x"}})}}}).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if res.Lookup("applied").Int32() != 0 {
		t.Fatalf("reply %v", res)
	}
}
