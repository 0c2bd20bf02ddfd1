package commands_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestAggIndexStatsAccesses: every executed plan that reads an index counts one access of
// it in $indexStats (find, aggregate, count, distinct, update, delete, findAndModify; the
// _id fast path counts for _id_), collection scans count nothing, and dropping and
// recreating an index restarts its counter.
func TestAggIndexStatsAccesses(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	c := db.Collection("ixs")
	for i := range 50 {
		aggInsert(t, c, D("_id", i, "x", i, "y", i))
	}
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: D("x", 1)}); err != nil {
		t.Fatal(err)
	}
	stats := func() (map[string]int64, map[string]time.Time) {
		t.Helper()
		cur, err := c.Aggregate(ctx, bson.A{D("$indexStats", bson.D{})})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		ops, since := map[string]int64{}, map[string]time.Time{}
		for _, d := range docs {
			name := d.Lookup("name").StringValue()
			ops[name] = d.Lookup("accesses", "ops").AsInt64()
			since[name] = d.Lookup("accesses", "since").Time()
		}
		return ops, since
	}
	ops0, since0 := stats()
	if ops0["x_1"] != 0 || ops0["_id_"] != 0 {
		t.Fatalf("fresh counters: %v", ops0)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	drain := func(cur *mongo.Cursor, err error) {
		t.Helper()
		must(err)
		var out []bson.Raw
		must(cur.All(ctx, &out))
	}
	drain(c.Find(ctx, D("x", 3)))                                     // x_1
	drain(c.Find(ctx, D("x", D("$gte", 10, "$lt", 20))))              // x_1
	drain(c.Find(ctx, D("_id", 7)))                                   // IDHACK: _id_
	drain(c.Find(ctx, D("y", 7)))                                     // COLLSCAN
	drain(c.Aggregate(ctx, bson.A{D("$match", D("x", D("$lt", 5)))})) // x_1
	must(db.RunCommand(ctx, D("count", "ixs", "query", D("x", 4))).Err())
	must(db.RunCommand(ctx, D("distinct", "ixs", "key", "y", "query", D("x", 4))).Err())
	_, err := c.UpdateOne(ctx, D("x", 5), D("$set", D("z", 1)))
	must(err)
	_, err = c.DeleteOne(ctx, D("x", 6))
	must(err)
	must(c.FindOneAndUpdate(ctx, D("x", 8), D("$set", D("z", 2))).Err())
	ops, since := stats()
	if ops["x_1"] != 8 || ops["_id_"] != 1 {
		t.Errorf("after 8 queries on x and one on _id: %v", ops)
	}
	if !since["x_1"].Equal(since0["x_1"]) {
		t.Errorf("since moved without a rebuild: %v -> %v", since0["x_1"], since["x_1"])
	}

	// Explain in queryPlanner mode plans without executing: no access.
	must(db.RunCommand(ctx, D("explain", D("find", "ixs", "filter", D("x", 1)), "verbosity", "queryPlanner")).Err())
	if ops, _ := stats(); ops["x_1"] != 8 {
		t.Errorf("queryPlanner explain counted an access: %v", ops)
	}

	// Drop and recreate: a new counter.
	must(c.Indexes().DropOne(ctx, "x_1"))
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: D("x", 1)}); err != nil {
		t.Fatal(err)
	}
	ops, since = stats()
	if ops["x_1"] != 0 || ops["_id_"] != 1 {
		t.Errorf("after recreating x_1: %v", ops)
	}
	if since["x_1"].Before(since0["x_1"]) {
		t.Errorf("since of the recreated index %v is before the first one's %v", since["x_1"], since0["x_1"])
	}
	drain(c.Find(ctx, D("x", 3)))
	if ops, _ := stats(); ops["x_1"] != 1 {
		t.Errorf("after one query on the recreated index: %v", ops)
	}
}
