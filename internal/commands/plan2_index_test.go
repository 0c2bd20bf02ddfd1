package commands_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
)

// Planner follow-ups: hashed and partial indexes, top-k sorts and $or plans (explain shape
// and results).

func p2d(kv ...any) bson.D {
	var d bson.D
	for i := 0; i+1 < len(kv); i += 2 {
		d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return d
}

func (e *findEnv) createIndex(coll string, specs ...bson.D) {
	e.t.Helper()
	var a bson.A
	for _, s := range specs {
		a = append(a, s)
	}
	e.must(p2d("createIndexes", coll, "indexes", a))
}

// findIDs runs find (batchSize large enough for one batch) and returns the _id values in
// result order, formatted with %v.
func (e *findEnv) findIDs(cmd bson.D) []string {
	e.t.Helper()
	cmd = append(cmd, bson.E{Key: "batchSize", Value: 10000})
	r := e.must(cmd)
	vals, _ := r.Lookup("cursor", "firstBatch").Array().Values()
	out := []string{}
	for _, v := range vals {
		out = append(out, v.Document().Lookup("_id").String())
	}
	return out
}

func wantIDs(t *testing.T, what string, got []string, want ...any) {
	t.Helper()
	w := []string{}
	for _, x := range want {
		v := bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, int32(x.(int)))}
		w = append(w, v.String())
	}
	if !slices.Equal(got, w) {
		t.Errorf("%s: got ids %v, want %v", what, got, w)
	}
}

// winning returns the winning plan's stages from the root down (first input only) and the
// deepest stage document.
func winning(r bson.Raw) ([]string, bson.Raw) {
	plan := r.Lookup("queryPlanner", "winningPlan").Document()
	var names []string
	for {
		names = append(names, plan.Lookup("stage").StringValue())
		in, err := plan.LookupErr("inputStage")
		if err != nil {
			return names, plan
		}
		plan = in.Document()
	}
}

func boundsOf(t *testing.T, ixscan bson.Raw, field string) []string {
	t.Helper()
	v, err := ixscan.LookupErr("indexBounds", field)
	if err != nil {
		t.Fatalf("no bounds for %s in %s", field, ixscan)
	}
	vals, _ := v.Array().Values()
	var out []string
	for _, x := range vals {
		out = append(out, x.StringValue())
	}
	return out
}

func hashBound(t *testing.T, v any) string {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	if err != nil {
		t.Fatal(err)
	}
	h, err := index.Hash64(bsoncore.Value{Type: bsoncore.Type(typ), Data: data}, index.DefaultHashSeed)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("[%d, %d]", h, h)
}

func TestPlan2HashedIndex(t *testing.T) {
	e := findStart(t)
	e.insert("test.h",
		p2d("_id", 1, "h", 3, "a", 1),
		p2d("_id", 2, "h", 3.5, "a", 1), // hashes like 3: a collision the FETCH filter removes
		p2d("_id", 3, "h", "x", "a", 2),
		p2d("_id", 4, "a", 2), // missing h: keyed as hash(null)
		p2d("_id", 5, "h", int64(3), "a", 2),
		p2d("_id", 6, "h", p2d("k", 1), "a", 2),
	)
	e.createIndex("h", p2d("key", p2d("h", "hashed"), "name", "h_hashed"))

	find := func(filter bson.D) bson.D { return p2d("find", "h", "filter", filter, "sort", p2d("_id", 1)) }
	r := e.explain(p2d("find", "h", "filter", p2d("h", 3)), "executionStats")
	names, ix := winning(r)
	if strings.Join(names, ",") != "FETCH,IXSCAN" || ix.Lookup("indexName").StringValue() != "h_hashed" {
		t.Fatalf("plan %v: %s", names, r.Lookup("queryPlanner", "winningPlan"))
	}
	if got := boundsOf(t, ix, "h"); len(got) != 1 || got[0] != hashBound(t, 3) {
		t.Errorf("bounds %v, want [%s]", got, hashBound(t, 3))
	}
	es := r.Lookup("executionStats").Document()
	// 3, 3.5 and NumberLong(3) share the hash: three keys, the filter keeps two documents.
	if es.Lookup("nReturned").Int32() != 2 || es.Lookup("totalKeysExamined").Int32() != 3 || es.Lookup("totalDocsExamined").Int32() != 3 {
		t.Errorf("stats %s", es)
	}
	wantIDs(t, "h: 3", e.findIDs(find(p2d("h", 3))), 1, 5)
	wantIDs(t, "h: 3.5", e.findIDs(find(p2d("h", 3.5))), 2)
	wantIDs(t, "h: null", e.findIDs(find(p2d("h", nil))), 4)
	wantIDs(t, "h: {k: 1}", e.findIDs(find(p2d("h", p2d("k", 1)))), 6)
	wantIDs(t, "h $in", e.findIDs(find(p2d("h", p2d("$in", bson.A{"x", 3.5})))), 2, 3)

	// $in: one point per value, in hash order.
	r = e.explain(p2d("find", "h", "filter", p2d("h", p2d("$in", bson.A{"x", 3.5}))), "queryPlanner")
	_, ix = winning(r)
	got := boundsOf(t, ix, "h")
	want := []string{hashBound(t, "x"), hashBound(t, 3.5)}
	hx, _ := index.Hash64(bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "x")}, 0)
	h3, _ := index.Hash64(bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, 3.5)}, 0)
	if h3 < hx {
		want[0], want[1] = want[1], want[0]
	}
	if !slices.Equal(got, want) {
		t.Errorf("$in bounds %v, want %v", got, want)
	}

	// Ranges cannot use a hashed index.
	r = e.explain(p2d("find", "h", "filter", p2d("h", p2d("$gt", 1))), "queryPlanner")
	if names, _ := winning(r); names[len(names)-1] != "COLLSCAN" {
		t.Errorf("range on hashed field: plan %v", names)
	}
	wantIDs(t, "h > 1", e.findIDs(find(p2d("h", p2d("$gt", 1)))), 1, 2, 5)

	// Compound hashed index: the equality on a bounds the scan, the hashed field becomes a
	// point on its hash.
	e.createIndex("h", p2d("key", p2d("a", 1, "h", "hashed"), "name", "a_1_h_hashed"))
	r = e.explain(p2d("find", "h", "filter", p2d("a", 2, "h", "x"), "hint", "a_1_h_hashed"), "executionStats")
	names, ix = winning(r)
	if strings.Join(names, ",") != "FETCH,IXSCAN" || ix.Lookup("indexName").StringValue() != "a_1_h_hashed" {
		t.Fatalf("compound plan %v", names)
	}
	if a := boundsOf(t, ix, "a"); len(a) != 1 || a[0] != "[2, 2]" {
		t.Errorf("a bounds %v", a)
	}
	if h := boundsOf(t, ix, "h"); len(h) != 1 || h[0] != hashBound(t, "x") {
		t.Errorf("h bounds %v", h)
	}
	if n := r.Lookup("executionStats", "totalKeysExamined").Int32(); n != 1 {
		t.Errorf("compound keysExamined %d", n)
	}
	wantIDs(t, "a: 2, h: x", e.findIDs(find(p2d("a", 2, "h", "x"))), 3)
	// A range on the hashed field leaves it unbounded; the leading field still bounds.
	r = e.explain(p2d("find", "h", "filter", p2d("a", 2, "h", p2d("$gte", 3)), "hint", "a_1_h_hashed"), "queryPlanner")
	_, ix = winning(r)
	if h := boundsOf(t, ix, "h"); len(h) != 1 || h[0] != "[MinKey, MaxKey]" {
		t.Errorf("range on hashed suffix: bounds %v", h)
	}
	wantIDs(t, "a: 2, h >= 3", e.findIDs(find(p2d("a", 2, "h", p2d("$gte", 3)))), 5)
	// A hashed index never provides a sort or covers a projection.
	r = e.explain(p2d("find", "h", "filter", p2d("h", 3), "projection", p2d("_id", 0, "h", 1), "sort", p2d("h", 1)), "queryPlanner")
	if names, _ := winning(r); !slices.Contains(names, "FETCH") || !slices.Contains(names, "SORT") {
		t.Errorf("hashed sort/projection plan %v", names)
	}
	// Count and delete use it too.
	r = e.explain(p2d("count", "h", "query", p2d("h", "x")), "executionStats")
	if names, _ := winning(r); strings.Join(names, ",") != "COUNT,FETCH,IXSCAN" {
		t.Errorf("count plan %v", names)
	}
	if n := e.must(p2d("count", "h", "query", p2d("h", 3))).Lookup("n").AsInt64(); n != 2 {
		t.Errorf("count %d", n)
	}
	if n := e.must(p2d("delete", "h", "deletes", bson.A{p2d("q", p2d("h", 3.5), "limit", 0)})).Lookup("n").AsInt64(); n != 1 {
		t.Errorf("delete n %d", n)
	}
	wantIDs(t, "after delete", e.findIDs(find(p2d("h", 3))), 1, 5)
}

func TestPlan2PartialIndex(t *testing.T) {
	e := findStart(t)
	var docs []bson.D
	for i := 0; i < 40; i++ {
		d := p2d("_id", i, "email", fmt.Sprintf("u%d", i%4), "active", i%2 == 0, "score", i)
		if i%5 == 0 {
			d = append(d, bson.E{Key: "sku", Value: fmt.Sprintf("s%d", i)})
		}
		docs = append(docs, d)
	}
	e.insert("test.p", docs...)
	e.createIndex("p",
		p2d("key", p2d("email", 1), "name", "email_1", "partialFilterExpression", p2d("active", true)),
		p2d("key", p2d("score", 1), "name", "score_1", "partialFilterExpression", p2d("score", p2d("$gt", 5))),
		p2d("key", p2d("sku", 1), "name", "sku_1", "partialFilterExpression", p2d("sku", p2d("$exists", true))),
	)
	for _, c := range []struct {
		filter bson.D
		index  string // "" for a collection scan
		ids    []any
	}{
		{p2d("email", "u0", "active", true), "email_1", []any{0, 4, 8, 12, 16, 20, 24, 28, 32, 36}},
		{p2d("active", true, "email", "u2"), "email_1", []any{2, 6, 10, 14, 18, 22, 26, 30, 34, 38}},
		{p2d("email", "u0"), "", []any{0, 4, 8, 12, 16, 20, 24, 28, 32, 36}},
		{p2d("email", "u1", "active", false), "", []any{1, 5, 9, 13, 17, 21, 25, 29, 33, 37}},
		{p2d("score", p2d("$gt", 35)), "score_1", []any{36, 37, 38, 39}},
		{p2d("score", p2d("$gte", 37.5)), "score_1", []any{38, 39}},
		{p2d("score", p2d("$gt", 5)), "score_1", nil},
		{p2d("score", p2d("$gte", 5, "$lt", 7)), "", []any{5, 6}},
		{p2d("score", 7), "score_1", []any{7}},
		{p2d("score", 5), "", []any{5}},
		{p2d("score", p2d("$in", bson.A{8, 9})), "score_1", []any{8, 9}},
		{p2d("score", p2d("$in", bson.A{5, 9})), "", []any{5, 9}},
		{p2d("score", "7"), "", []any{}},
		{p2d("$and", bson.A{p2d("score", p2d("$gt", 30)), p2d("score", p2d("$lt", 33))}), "score_1", []any{31, 32}},
		{p2d("sku", "s10"), "sku_1", []any{10}},
		{p2d("sku", p2d("$gt", "s3")), "sku_1", []any{5, 30, 35}},
		{p2d("sku", nil), "", []any{1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 16, 17, 18, 19, 21, 22, 23, 24, 26, 27, 28, 29, 31, 32, 33, 34, 36, 37, 38, 39}},
	} {
		r := e.explain(p2d("find", "p", "filter", c.filter), "queryPlanner")
		names, leaf := winning(r)
		got := ""
		if names[len(names)-1] == "IXSCAN" {
			got = leaf.Lookup("indexName").StringValue()
			if !leaf.Lookup("isPartial").Boolean() {
				t.Errorf("%v: isPartial false", c.filter)
			}
		}
		if got != c.index {
			t.Errorf("%v: plan uses %q, want %q (%v)", c.filter, got, c.index, names)
		}
		if c.ids != nil {
			wantIDs(t, fmt.Sprint(c.filter), e.findIDs(p2d("find", "p", "filter", c.filter, "sort", p2d("_id", 1))), c.ids...)
		}
	}
	// Hinting a partial index the query does not imply would miss documents: rejected.
	_, err := e.run(p2d("find", "p", "filter", p2d("email", "u0"), "hint", "email_1"))
	findCode(t, err, 2)
	wantIDs(t, "hinted partial", e.findIDs(p2d("find", "p", "filter", p2d("email", "u0", "active", true, "_id", p2d("$lt", 10)), "hint", "email_1")), 0, 4, 8)
	// Writes use it as well and keep it consistent.
	r := e.explain(p2d("update", "p", "updates", bson.A{p2d("q", p2d("score", p2d("$gt", 38)), "u", p2d("$set", p2d("score", 1)))}), "queryPlanner")
	if names, leaf := winning(r); names[len(names)-1] != "IXSCAN" || leaf.Lookup("indexName").StringValue() != "score_1" {
		t.Errorf("update plan %v", names)
	}
	e.must(p2d("update", "p", "updates", bson.A{p2d("q", p2d("score", p2d("$gt", 38)), "u", p2d("$set", p2d("score", 1)))}))
	wantIDs(t, "after update", e.findIDs(p2d("find", "p", "filter", p2d("score", p2d("$gt", 36)), "sort", p2d("_id", 1))), 37, 38)
}

func TestPlan2TopKSort(t *testing.T) {
	e := findStart(t)
	const n = 3000
	pad := strings.Repeat("p", 1000)
	docs := make([]bson.D, n)
	for i := range docs {
		docs[i] = p2d("_id", i, "k", (i*7919)%n, "g", i%3, "pad", pad)
	}
	e.insert("test.big", docs...)
	// 3 MB of documents against a 200 kB sort limit.
	if _, err := e.cl.Database("admin").RunCommand(context.Background(),
		p2d("setParameter", 1, "internalQueryMaxBlockingSortMemoryUsageBytes", 200000)).Raw(); err != nil {
		t.Fatal(err)
	}

	_, err := e.run(p2d("find", "big", "sort", p2d("k", 1), "allowDiskUse", false))
	findCode(t, err, 292)

	find := func(extra ...any) []string {
		cmd := append(p2d("find", "big", "sort", p2d("k", -1), "projection", p2d("pad", 0)), p2d(extra...)...)
		r := e.must(cmd)
		vals, _ := r.Lookup("cursor", "firstBatch").Array().Values()
		var ks []string
		for _, v := range vals {
			ks = append(ks, v.Document().Lookup("k").String())
		}
		return ks
	}
	num := func(xs ...int) []string {
		var out []string
		for _, x := range xs {
			v := bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, int32(x))}
			out = append(out, v.String())
		}
		return out
	}
	if got := find("limit", 5); !slices.Equal(got, num(2999, 2998, 2997, 2996, 2995)) {
		t.Errorf("top 5: %v", got)
	}
	if got := find("skip", 2, "limit", 3); !slices.Equal(got, num(2997, 2996, 2995)) {
		t.Errorf("skip 2 limit 3: %v", got)
	}
	if got := find("filter", p2d("g", 1), "limit", 2); len(got) != 2 {
		t.Errorf("filtered top 2: %v", got)
	}

	r := e.explain(p2d("find", "big", "sort", p2d("k", -1), "skip", 2, "limit", 3), "executionStats")
	names, _ := winning(r)
	if strings.Join(names, ",") != "LIMIT,SKIP,SORT,COLLSCAN" {
		t.Fatalf("plan %v", names)
	}
	srt := r.Lookup("queryPlanner", "winningPlan", "inputStage", "inputStage").Document()
	if srt.Lookup("limitAmount").AsInt64() != 5 {
		t.Errorf("SORT limitAmount: %s", srt)
	}
	if r.Lookup("executionStats", "nReturned").Int32() != 3 {
		t.Errorf("nReturned %s", r.Lookup("executionStats"))
	}

	// Equal sort keys keep scan order within the top k.
	if got := e.findIDs(p2d("find", "big", "sort", p2d("g", 1), "limit", 4, "projection", p2d("pad", 0))); !slices.Equal(got, num(0, 3, 6, 9)) {
		t.Errorf("stable top-k: %v", got)
	}
	// k documents that exceed the limit themselves: error without allowDiskUse, an
	// external sort with it.
	_, err = e.run(p2d("find", "big", "sort", p2d("k", 1), "limit", 1000, "allowDiskUse", false))
	findCode(t, err, 292)
	got := find("limit", 1000, "allowDiskUse", true, "batchSize", 1000)
	if len(got) != 1000 || got[0] != num(2999)[0] || got[999] != num(2000)[0] {
		t.Errorf("spilled top-k: %d results, first %v", len(got), got[:min(3, len(got))])
	}
}

func TestPlan2OrPlans(t *testing.T) {
	e := findStart(t)
	e.seq("test.c", 200) // {_id: i, a: i%10, b: i, s: "k%04d"}
	e.createIndex("c", p2d("key", p2d("a", 1), "name", "a_1"), p2d("key", p2d("b", 1), "name", "b_1"))

	or := p2d("$or", bson.A{p2d("a", 3), p2d("b", p2d("$lt", 5))})
	r := e.explain(p2d("find", "c", "filter", or), "executionStats")
	names, orStage := winning(r)
	if strings.Join(names, ",") != "FETCH,OR" {
		t.Fatalf("plan %v: %s", names, r.Lookup("queryPlanner", "winningPlan"))
	}
	ins, _ := orStage.Lookup("inputStages").Array().Values()
	if len(ins) != 2 || ins[0].Document().Lookup("indexName").StringValue() != "a_1" ||
		ins[1].Document().Lookup("indexName").StringValue() != "b_1" {
		t.Fatalf("OR inputs %v", ins)
	}
	if b := boundsOf(t, ins[1].Document(), "b"); len(b) != 1 || b[0] != "[-inf.0, 5)" {
		t.Errorf("branch bounds %v", b)
	}
	es := r.Lookup("executionStats").Document()
	// a=3: 20 documents; b<5: 5; _id 3 is in both.
	if es.Lookup("nReturned").Int32() != 24 || es.Lookup("totalKeysExamined").Int32() != 25 || es.Lookup("totalDocsExamined").Int32() != 24 {
		t.Errorf("stats %s", es)
	}
	if d := es.Lookup("executionStages", "inputStage", "dupsDropped").AsInt64(); d != 1 {
		t.Errorf("dupsDropped %d", d)
	}
	var want []any
	for i := 0; i < 200; i++ {
		if i%10 == 3 || i < 5 {
			want = append(want, i)
		}
	}
	wantIDs(t, "$or", e.findIDs(p2d("find", "c", "filter", or, "sort", p2d("_id", 1))), want...)
	if n := e.must(p2d("count", "c", "query", or)).Lookup("n").AsInt64(); n != 24 {
		t.Errorf("count %d", n)
	}

	// Sort and limit over the OR: a top-k SORT (s has no index to provide the order).
	r = e.explain(p2d("find", "c", "filter", or, "sort", p2d("s", -1), "limit", 2), "queryPlanner")
	if names, _ := winning(r); strings.Join(names, ",") != "LIMIT,SORT,FETCH,OR" {
		t.Errorf("sorted $or plan %v", names)
	}
	wantIDs(t, "sorted $or", e.findIDs(p2d("find", "c", "filter", or, "sort", p2d("s", -1), "limit", 2)), 193, 183)

	// A branch no index bounds: collection scan.
	bad := p2d("$or", bson.A{p2d("a", 3), p2d("s", "k0001")})
	r = e.explain(p2d("find", "c", "filter", bad), "queryPlanner")
	if names, _ := winning(r); strings.Join(names, ",") != "COLLSCAN" {
		t.Errorf("unindexed branch: plan %v", names)
	}
	want = want[:0]
	for i := 0; i < 200; i++ {
		if i%10 == 3 || i == 1 {
			want = append(want, i)
		}
	}
	wantIDs(t, "unindexed $or", e.findIDs(p2d("find", "c", "filter", bad, "sort", p2d("_id", 1))), want...)

	// Predicates beside the $or are pushed into each branch and re-applied by FETCH.
	mixed := p2d("s", p2d("$gte", "k0100"), "$or", bson.A{p2d("a", 3), p2d("b", p2d("$lt", 105))})
	r = e.explain(p2d("find", "c", "filter", mixed), "queryPlanner")
	if names, _ := winning(r); strings.Join(names, ",") != "FETCH,OR" {
		t.Errorf("mixed plan %v", names)
	}
	wantIDs(t, "mixed $or", e.findIDs(p2d("find", "c", "filter", mixed, "sort", p2d("_id", 1))),
		100, 101, 102, 103, 104, 113, 123, 133, 143, 153, 163, 173, 183, 193)

	// A one-branch $or is its branch.
	r = e.explain(p2d("find", "c", "filter", p2d("$or", bson.A{p2d("b", 7)})), "queryPlanner")
	if names, leaf := winning(r); strings.Join(names, ",") != "FETCH,IXSCAN" || leaf.Lookup("indexName").StringValue() != "b_1" {
		t.Errorf("one-branch $or plan %v", names)
	}
	// Branches with $in and ranges on the same index; overlapping ranges are de-duplicated.
	overlap := p2d("$or", bson.A{p2d("b", p2d("$gte", 10, "$lt", 20)), p2d("b", p2d("$in", bson.A{15, 25}))})
	wantIDs(t, "overlapping $or", e.findIDs(p2d("find", "c", "filter", overlap, "sort", p2d("_id", 1))),
		10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 25)

	// Writes through an OR plan act on each document once.
	n := e.must(p2d("update", "c", "updates", bson.A{p2d("q", or, "u", p2d("$inc", p2d("n", 1)), "multi", true)}))
	if n.Lookup("nModified").AsInt64() != 24 {
		t.Errorf("update %s", n)
	}
	if c := e.must(p2d("count", "c", "query", p2d("n", 1))).Lookup("n").AsInt64(); c != 24 {
		t.Errorf("updated once each: %d", c)
	}
	d := e.must(p2d("delete", "c", "deletes", bson.A{p2d("q", or, "limit", 0)}))
	if d.Lookup("n").AsInt64() != 24 {
		t.Errorf("delete %s", d)
	}
	if c := e.must(p2d("count", "c")).Lookup("n").AsInt64(); c != 176 {
		t.Errorf("remaining %d", c)
	}
}
