package commands_test

import (
	"context"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// aggRunColl is aggRun with a collation option.
func aggRunColl(t *testing.T, c *mongo.Collection, pipeline any, coll *options.Collation) []string {
	t.Helper()
	cur, err := c.Aggregate(context.Background(), pipeline, options.Aggregate().SetCollation(coll))
	if err != nil {
		t.Fatalf("aggregate %v: %v", pipeline, err)
	}
	var out []bson.Raw
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatalf("aggregate %v: %v", pipeline, err)
	}
	return aggJSON(out)
}

var ciColl = &options.Collation{Locale: "en", Strength: 2}

func TestAggCollationExplicit(t *testing.T) {
	db := aggServer(t)
	c := db.Collection("words")
	aggInsert(t, c, D("_id", 1, "s", "a"), D("_id", 2, "s", "B"), D("_id", 3, "s", "A"), D("_id", 4, "s", "b"), D("_id", 5, "s", "c"))
	if _, err := c.Indexes().CreateOne(context.Background(), mongo.IndexModel{Keys: D("s", 1)}); err != nil {
		t.Fatal(err)
	}

	aggWant(t, "group ci", aggRunColl(t, c, bson.A{D("$group", D("_id", "$s", "n", D("$sum", 1))), D("$sort", D("_id", 1))}, ciColl),
		`{"_id":"a","n":2}`, `{"_id":"B","n":2}`, `{"_id":"c","n":1}`)
	aggWant(t, "group simple", aggRun(t, c, bson.A{D("$group", D("_id", "$s")), D("$count", "n")}), `{"n":5}`)
	// Leading $match and $sort are pushed down to the planner: the simple-collation index on
	// s must not be used for string bounds under another collation.
	aggWant(t, "match ci", aggRunColl(t, c, bson.A{D("$match", D("s", "A")), D("$project", D("_id", 1))}, ciColl),
		`{"_id":1}`, `{"_id":3}`)
	aggWant(t, "sort ci", aggRunColl(t, c, bson.A{D("$sort", D("s", 1, "_id", 1)), D("$project", D("_id", 1))}, ciColl),
		`{"_id":1}`, `{"_id":3}`, `{"_id":2}`, `{"_id":4}`, `{"_id":5}`)
	aggWant(t, "sort simple", aggRun(t, c, bson.A{D("$sort", D("s", 1, "_id", 1)), D("$project", D("_id", 1))}),
		`{"_id":3}`, `{"_id":2}`, `{"_id":1}`, `{"_id":4}`, `{"_id":5}`)
	aggWant(t, "eq expr ci", aggRunColl(t, c, bson.A{D("$match", D("_id", 1)), D("$project", D("_id", 0, "eq", D("$eq", bson.A{"$s", "A"})))}, ciColl),
		`{"eq":true}`)
	// {locale: "simple"} is explicit binary comparison.
	aggWant(t, "explicit simple", aggRunColl(t, c, bson.A{D("$match", D("s", "A")), D("$project", D("_id", 1))}, &options.Collation{Locale: "simple"}),
		`{"_id":3}`)

	// Bad collations are rejected before running.
	_, err := c.Aggregate(context.Background(), bson.A{}, options.Aggregate().SetCollation(&options.Collation{Locale: "xx_nope"}))
	if aggCode(err) != 2 {
		t.Errorf("bad locale: %v", err)
	}
}

func TestAggCollationLookup(t *testing.T) {
	db := aggServer(t)
	orders, inv := db.Collection("orders"), db.Collection("inv")
	aggInsert(t, orders, D("_id", 1, "item", "ALMONDS"))
	aggInsert(t, inv, D("_id", 10, "sku", "almonds"), D("_id", 11, "sku", "pecans"))
	p := bson.A{D("$lookup", D("from", "inv", "localField", "item", "foreignField", "sku", "as", "j")), D("$project", D("ids", "$j._id"))}
	aggWant(t, "lookup ci", aggRunColl(t, orders, p, ciColl), `{"_id":1,"ids":[10]}`)
	aggWant(t, "lookup simple", aggRun(t, orders, p), `{"_id":1,"ids":[]}`)
}

func TestAggCollationCollectionDefault(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	if err := db.CreateCollection(ctx, "ci", options.CreateCollection().SetCollation(ciColl)); err != nil {
		t.Fatal(err)
	}
	c := db.Collection("ci")
	aggInsert(t, c, D("_id", 1, "s", "x"), D("_id", 2, "s", "X"), D("_id", 3, "s", "y"))
	// No collation: the collection's default applies.
	aggWant(t, "default group", aggRun(t, c, bson.A{D("$group", D("_id", "$s", "n", D("$sum", 1))), D("$sort", D("_id", 1))}),
		`{"_id":"x","n":2}`, `{"_id":"y","n":1}`)
	aggWant(t, "default match", aggRun(t, c, bson.A{D("$match", D("s", "X")), D("$count", "n")}), `{"n":2}`)
	// An explicit simple collation overrides the default.
	aggWant(t, "override", aggRunColl(t, c, bson.A{D("$match", D("s", "X")), D("$count", "n")}, &options.Collation{Locale: "simple"}), `{"n":1}`)
}

func TestAggCollationViews(t *testing.T) {
	db := aggServer(t)
	ctx := context.Background()
	base := db.Collection("base")
	aggInsert(t, base, D("_id", 1, "s", "a"), D("_id", 2, "s", "A"), D("_id", 3, "s", "b"))
	if err := db.CreateView(ctx, "vci", "base", bson.A{}, options.CreateView().SetCollation(ciColl)); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateView(ctx, "vsimple", "base", bson.A{D("$match", D("_id", D("$gte", 1)))}); err != nil {
		t.Fatal(err)
	}
	v := db.Collection("vci")
	// The view's default collation applies to the query on it.
	aggWant(t, "view match", aggRun(t, v, bson.A{D("$match", D("s", "A")), D("$count", "n")}), `{"n":2}`)
	// The same collation given explicitly is fine; a different one is refused.
	aggWant(t, "same explicit", aggRunColl(t, v, bson.A{D("$match", D("s", "A")), D("$count", "n")}, ciColl), `{"n":2}`)
	_, err := v.Aggregate(ctx, bson.A{}, options.Aggregate().SetCollation(&options.Collation{Locale: "fr"}))
	if aggCode(err) != 167 || !strings.Contains(err.Error(), "Cannot override a view's default collation") {
		t.Errorf("override view collation: %v", err)
	}
	// A view without a collation is simple: an explicit non-simple one is refused too.
	_, err = db.Collection("vsimple").Aggregate(ctx, bson.A{}, options.Aggregate().SetCollation(ciColl))
	if aggCode(err) != 167 {
		t.Errorf("override simple view collation: %v", err)
	}
	// count and find on the view use its collation.
	n, err := v.CountDocuments(ctx, D("s", "a"))
	if err != nil || n != 2 {
		t.Errorf("count on view: %d %v", n, err)
	}
	cnt := db.RunCommand(ctx, D("count", "vci", "query", D("s", "B")))
	var res struct{ N int }
	if err := cnt.Decode(&res); err != nil || res.N != 1 {
		t.Errorf("count command on view: %+v %v", res, err)
	}
	cur, err := v.Find(ctx, D("s", "a"))
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil || len(docs) != 2 {
		t.Errorf("find on view: %d %v", len(docs), err)
	}
	// listCollections shows the view's collation.
	specs, err := db.ListCollectionSpecifications(ctx, D("name", "vci"))
	if err != nil || len(specs) != 1 || !strings.Contains(specs[0].Options.String(), `"strength": {"$numberInt":"2"}`) {
		t.Errorf("listCollections: %v %v", specs, err)
	}
	// A view on a view must have the same collation.
	err = db.CreateView(ctx, "vbad", "vci", bson.A{})
	if aggCode(err) != 167 {
		t.Errorf("view on view with another collation: %v", err)
	}
	if err := db.CreateView(ctx, "vgood", "vci", bson.A{}, options.CreateView().SetCollation(ciColl)); err != nil {
		t.Errorf("view on view with the same collation: %v", err)
	}
}

func TestAggPipelineLimits(t *testing.T) {
	db := aggServer(t)
	c := db.Collection("lim")
	aggInsert(t, c, D("_id", 1))
	long := make(bson.A, 1001)
	for i := range long {
		long[i] = D("$match", D())
	}
	_, err := c.Aggregate(context.Background(), long)
	if aggCode(err) != 7749501 {
		t.Errorf("1001 stages: %v", err)
	}
	aggWant(t, "1000 stages", aggRun(t, c, long[:1000]), `{"_id":1}`)
	var nested bson.A = bson.A{D("$match", D())}
	for range 21 {
		nested = bson.A{D("$lookup", D("from", "lim", "pipeline", nested, "as", "x"))}
	}
	_, err = c.Aggregate(context.Background(), nested)
	if aggCode(err) != 232 {
		t.Errorf("21 nested sub-pipelines: %v", err)
	}
}
