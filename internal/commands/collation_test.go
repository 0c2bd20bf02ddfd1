package commands_test

import (
	"slices"
	"strings"
	"testing"

	"humongo/internal/mongoerr"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Collation through the driver: find/count/distinct with collation, sort, a unique collated
// index, index choice by collation in explain, and a collection default collation.

func collStrength2() bson.D { return p2d("locale", "en", "strength", 2) }

// names returns field f of the first batch of a find.
func (e *findEnv) names(cmd bson.D, f string) []string {
	e.t.Helper()
	cmd = append(cmd, bson.E{Key: "batchSize", Value: 1000})
	vals, _ := e.must(cmd).Lookup("cursor", "firstBatch").Array().Values()
	out := []string{}
	for _, v := range vals {
		out = append(out, v.Document().Lookup(f).StringValue())
	}
	return out
}

func TestCollationFindSortCountDistinct(t *testing.T) {
	e := findStart(t)
	e.insert("test.c", p2d("_id", 1, "s", "apple"), p2d("_id", 2, "s", "Apple"), p2d("_id", 3, "s", "banana"),
		p2d("_id", 4, "s", "APPLE"), p2d("_id", 5, "s", "Banana"), p2d("_id", 6, "s", "cherry"))

	// Binary by default, case-insensitive under strength 2.
	if got := e.findIDs(p2d("find", "c", "filter", p2d("s", "apple"))); len(got) != 1 {
		t.Fatalf("simple find: %v", got)
	}
	wantIDs(t, "strength 2", e.findIDs(p2d("find", "c", "filter", p2d("s", "apple"), "collation", collStrength2(), "sort", p2d("_id", 1))), 1, 2, 4)
	wantIDs(t, "$in strength 2", e.findIDs(p2d("find", "c", "filter", p2d("s", p2d("$in", bson.A{"BANANA"})), "collation", collStrength2(), "sort", p2d("_id", 1))), 3, 5)
	wantIDs(t, "$gt strength 2", e.findIDs(p2d("find", "c", "filter", p2d("s", p2d("$gt", "BANANA")), "collation", collStrength2())), 6)

	// Sort: binary puts capitals first; en sorts alphabetically, lower case first at strength 3.
	got := e.names(p2d("find", "c", "sort", p2d("s", 1, "_id", 1)), "s")
	if want := []string{"APPLE", "Apple", "Banana", "apple", "banana", "cherry"}; !slices.Equal(got, want) {
		t.Errorf("binary sort %v, want %v", got, want)
	}
	got = e.names(p2d("find", "c", "sort", p2d("s", 1, "_id", 1), "collation", p2d("locale", "en")), "s")
	if want := []string{"apple", "Apple", "APPLE", "banana", "Banana", "cherry"}; !slices.Equal(got, want) {
		t.Errorf("collated sort %v, want %v", got, want)
	}

	r := e.must(p2d("count", "c", "query", p2d("s", "APPLE"), "collation", collStrength2()))
	if n := r.Lookup("n").AsInt64(); n != 3 {
		t.Errorf("count = %d, want 3", n)
	}
	r = e.must(p2d("distinct", "c", "key", "s", "collation", collStrength2()))
	if vals, _ := r.Lookup("values").Array().Values(); len(vals) != 3 {
		t.Errorf("distinct under strength 2 = %v, want 3 values", r.Lookup("values"))
	}
	// numericOrdering.
	e.insert("test.n", p2d("_id", 1, "v", "10"), p2d("_id", 2, "v", "9"), p2d("_id", 3, "v", "100"))
	wantIDs(t, "numericOrdering", e.findIDs(p2d("find", "n", "sort", p2d("v", 1), "collation", p2d("locale", "en", "numericOrdering", true))), 2, 1, 3)

	// Bad collations are rejected with MongoDB's codes.
	_, err := e.run(p2d("find", "c", "collation", p2d("locale", "xx_nope")))
	findCode(t, err, 2)
	_, err = e.run(p2d("find", "c", "collation", p2d("locale", "en", "strength", 9)))
	findCode(t, err, 9)
	_, err = e.run(p2d("find", "c", "collation", "en"))
	findCode(t, err, 14)
}

func TestCollationUniqueIndexAndExplain(t *testing.T) {
	e := findStart(t)
	e.must(p2d("create", "u"))
	e.createIndex("u", p2d("key", p2d("s", 1), "name", "s_ci", "unique", true, "collation", collStrength2()))
	e.must(p2d("insert", "u", "documents", bson.A{p2d("_id", 1, "s", "ABC")}))
	_, err := e.run(p2d("insert", "u", "documents", bson.A{p2d("_id", 2, "s", "abc")}))
	findCode(t, err, 11000)
	e.must(p2d("insert", "u", "documents", bson.A{p2d("_id", 3, "s", "abd"), p2d("_id", 4, "s", "x")}))

	// listIndexes echoes the normalised collation.
	r := e.must(p2d("listIndexes", "u"))
	if !strings.Contains(r.String(), `"version": "57.1"`) || !strings.Contains(r.String(), `"strength": {"$numberInt":"2"}`) {
		t.Errorf("listIndexes lacks the normalised collation: %s", r)
	}

	// The collated index serves a query with the same collation (and fetches: no covering).
	q := p2d("find", "u", "filter", p2d("s", "abc"), "collation", collStrength2(), "projection", p2d("s", 1, "_id", 0))
	stages, ixs := winning(e.explain(q, "queryPlanner"))
	if !slices.Contains(stages, "IXSCAN") || !slices.Contains(stages, "FETCH") {
		t.Errorf("same collation: stages %v, want FETCH over IXSCAN", stages)
	} else if name := ixs.Lookup("indexName").StringValue(); name != "s_ci" {
		t.Errorf("index %s", name)
	}
	got := e.names(q, "s")
	if !slices.Equal(got, []string{"ABC"}) {
		t.Errorf("collated index lookup: %v", got)
	}
	wantIDs(t, "range over collated index", e.findIDs(p2d("find", "u", "filter", p2d("s", p2d("$gte", "ABC", "$lt", "ABZ")), "collation", collStrength2(), "sort", p2d("s", 1))), 1, 3)
	// A query without collation must not use it for a string predicate.
	stages, _ = winning(e.explain(p2d("find", "u", "filter", p2d("s", "abc")), "queryPlanner"))
	if slices.Contains(stages, "IXSCAN") {
		t.Errorf("simple collation used the collated index: %v", stages)
	}
	if got := e.findIDs(p2d("find", "u", "filter", p2d("s", "abc"))); len(got) != 0 {
		t.Errorf("simple find matched %v", got)
	}
	// Nor may a different collation.
	stages, _ = winning(e.explain(p2d("find", "u", "filter", p2d("s", "abc"), "collation", p2d("locale", "fr", "strength", 2)), "queryPlanner"))
	if slices.Contains(stages, "IXSCAN") {
		t.Errorf("other collation used the collated index: %v", stages)
	}
}

func TestCollationCollectionDefault(t *testing.T) {
	e := findStart(t)
	e.must(p2d("create", "d", "collation", collStrength2()))
	r := e.must(p2d("listCollections", 1, "filter", p2d("name", "d")))
	if !strings.Contains(r.String(), `"locale": "en"`) || !strings.Contains(r.String(), `"version": "57.1"`) {
		t.Errorf("listCollections lacks the collation: %s", r)
	}
	e.must(p2d("insert", "d", "documents", bson.A{p2d("_id", "Key", "s", "Hello"), p2d("_id", 2, "s", "world")}))
	// The default applies when the command has none; {locale: "simple"} overrides it.
	if got := e.findIDs(p2d("find", "d", "filter", p2d("s", "HELLO"))); len(got) != 1 {
		t.Errorf("default collation find: %v", got)
	}
	if got := e.findIDs(p2d("find", "d", "filter", p2d("s", "HELLO"), "collation", p2d("locale", "simple"))); len(got) != 0 {
		t.Errorf("simple override: %v", got)
	}
	// The _id index inherits the default: "key" duplicates "Key".
	_, err := e.run(p2d("insert", "d", "documents", bson.A{p2d("_id", "key")}))
	findCode(t, err, 11000)
	// Indexes without a collation take the default and serve default-collation queries.
	e.createIndex("d", p2d("key", p2d("s", 1), "name", "s_1"))
	r = e.must(p2d("listIndexes", "d"))
	if strings.Count(r.String(), `"version": "57.1"`) != 2 {
		t.Errorf("indexes did not inherit the default: %s", r)
	}
	stages, _ := winning(e.explain(p2d("find", "d", "filter", p2d("s", "WORLD")), "queryPlanner"))
	if !slices.Contains(stages, "IXSCAN") {
		t.Errorf("default-collation query did not use the inherited index: %v", stages)
	}
	// Writes use the default collation too.
	r = e.must(p2d("update", "d", "updates", bson.A{p2d("q", p2d("s", "WORLD"), "u", p2d("$set", p2d("n", 1)))}))
	if n := r.Lookup("nModified").AsInt64(); n != 1 {
		t.Errorf("update under default collation modified %d", n)
	}
	r = e.must(p2d("delete", "d", "deletes", bson.A{p2d("q", p2d("s", "hello"), "limit", 0)}))
	if n := r.Lookup("n").AsInt64(); n != 1 {
		t.Errorf("delete under default collation removed %d", n)
	}
}

// Explicit collations on writes: the statement's collation decides which documents match, both
// for the planner's targets and for the re-match before each write.
func TestCollationWrites(t *testing.T) {
	e := findStart(t)
	e.insert("test.w", p2d("_id", 1, "s", "apple"), p2d("_id", 2, "s", "APPLE"), p2d("_id", 3, "s", "pear"))
	r := e.must(p2d("update", "w", "updates", bson.A{p2d("q", p2d("s", "Apple"), "u", p2d("$set", p2d("hit", true)), "multi", true, "collation", collStrength2())}))
	if n, _ := r.Lookup("nModified").AsInt64OK(); n != 2 {
		t.Fatalf("collated multi-update modified %d documents, want 2: %v", n, r)
	}
	r = e.must(p2d("update", "w", "updates", bson.A{p2d("q", p2d("s", "Apple"), "u", p2d("$set", p2d("miss", true)), "multi", true)}))
	if n, _ := r.Lookup("n").AsInt64OK(); n != 0 {
		t.Fatalf("binary comparison matched %d documents, want 0", n)
	}
	r = e.must(p2d("findAndModify", "w", "query", p2d("s", "PEAR"), "update", p2d("$set", p2d("f", 1)), "new", true, "collation", collStrength2()))
	if id, _ := r.Lookup("value", "_id").AsInt64OK(); id != 3 {
		t.Fatalf("collated findAndModify returned %v", r)
	}
	r = e.must(p2d("delete", "w", "deletes", bson.A{p2d("q", p2d("s", "aPPle"), "limit", 0, "collation", collStrength2())}))
	if n, _ := r.Lookup("n").AsInt64OK(); n != 2 {
		t.Fatalf("collated delete removed %d documents, want 2: %v", n, r)
	}
	_, err := e.run(p2d("delete", "w", "deletes", bson.A{p2d("q", bson.D{}, "limit", 0, "collation", p2d("locale", "en", "strength", 9))}))
	findCode(t, err, int32(mongoerr.FailedToParse))
	wantIDs(t, "after delete", e.findIDs(p2d("find", "w", "sort", p2d("_id", 1))), 3)
}
