package agg

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/query/expr"
)

func explainOf(t *testing.T, pipeline string) string {
	t.Helper()
	p, err := Parse(parseDocs(t, pipeline), ParseContext{DB: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return render(p.Explain())
}

func TestOptimize(t *testing.T) {
	cases := []struct{ in, want string }{
		// $sort + $limit → top-k.
		{`[{"$sort": {"a": 1}}, {"$limit": 5}]`, `{"pipeline":[{"$sort":{"sortKey":{"a":1},"limit":5}}]}`},
		// $match moves ahead of $addFields that does not produce its field, and of $sort.
		{`[{"$addFields": {"b": 1}}, {"$sort": {"a": 1}}, {"$match": {"a": 5}}]`,
			`{"pipeline":[{"$match":{"a":5}},{"$addFields":{"b":1}},{"$sort":{"sortKey":{"a":1}}}]}`},
		// ... but not ahead of a stage computing it.
		{`[{"$addFields": {"a": 1}}, {"$match": {"a": 5}}]`, `{"pipeline":[{"$addFields":{"a":1}},{"$match":{"a":5}}]}`},
		// Inclusion projections: only plainly included fields.
		{`[{"$project": {"a": 1, "c": {"$add": [1, 2]}}}, {"$match": {"a": 5}}]`,
			`{"pipeline":[{"$match":{"a":5}},{"$project":{"a":1,"c":{"$add":[1,2]}}}]}`},
		{`[{"$project": {"a": 1}}, {"$match": {"b": 5}}]`, `{"pipeline":[{"$project":{"a":1}},{"$match":{"b":5}}]}`},
		// $expr is never moved.
		{`[{"$set": {"b": 1}}, {"$match": {"$expr": {"$eq": ["$a", 1]}}}]`, `{"pipeline":[{"$set":{"b":1}},{"$match":{"$expr":{"$eq":["$a",1]}}}]}`},
		// A $match after a top-k sort stays after it.
		{`[{"$sort": {"a": 1}}, {"$limit": 2}, {"$match": {"b": 1}}]`, `{"pipeline":[{"$sort":{"sortKey":{"a":1},"limit":2}},{"$match":{"b":1}}]}`},
		// Adjacent $match stages merge.
		{`[{"$match": {"a": 1}}, {"$match": {"b": 2}}]`, `{"pipeline":[{"$match":{"$and":[{"a":1},{"b":2}]}}]}`},
	}
	for _, c := range cases {
		if got := explainOf(t, c.in); got != c.want {
			t.Errorf("%s\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

func TestLeadingMatch(t *testing.T) {
	p, err := Parse(parseDocs(t, `[{"$match": {"a": {"$gt": 1}}}, {"$sort": {"b": -1}}, {"$limit": 3}, {"$project": {"a": 1}}]`), ParseContext{})
	if err != nil {
		t.Fatal(err)
	}
	f, s, l := p.LeadingMatch()
	if render(f) != `{"a":{"$gt":1}}` || render(s) != `{"b":-1}` || l != 3 {
		t.Fatalf("LeadingMatch = %s %s %d", render(f), render(s), l)
	}
	if got := render(p.Trimmed().Explain()); got != `{"pipeline":[{"$limit":3},{"$project":{"a":1}}]}` {
		t.Fatalf("Trimmed = %s", got)
	}
	// A $match that uses let variables is not pushed down.
	p, err = Parse(parseDocs(t, `[{"$match": {"$expr": {"$eq": ["$a", "$$x"]}}}]`), ParseContext{Vars: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if f, _, _ := p.LeadingMatch(); f != nil {
		t.Fatalf("pushed down a filter using variables: %s", render(f))
	}
	out, err := p.Run(context.Background(), SliceSource(parseDocs(t, `[{"a": 1}, {"a": 2}]`)), &Context{Vars: map[string]bsoncore.Value{"x": expr.Int32(2)}})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Drain(context.Background(), out)
	if err != nil || renderAll(docs) != `[{"a":2}]` {
		t.Fatalf("let $match: %s %v", renderAll(docs), err)
	}
}

func TestEvalLet(t *testing.T) {
	vars, names, err := EvalLet(parseDocs(t, `[{"lim": {"$add": [1, 2]}}]`)[0], testNow)
	if err != nil || len(names) != 1 || vars["lim"].Int32() != 3 {
		t.Fatalf("EvalLet = %v %v %v", vars, names, err)
	}
	if _, _, err := EvalLet(parseDocs(t, `[{"Bad": 1}]`)[0], testNow); err == nil {
		t.Fatal("uppercase variable name accepted")
	}
}

// groupInput builds n small documents with a key of cardinality card.
func groupInput(n, card int) []bsoncore.Document {
	docs := make([]bsoncore.Document, n)
	for i := range docs {
		docs[i] = expr.DocOf("_id", expr.Int32(int32(i)), "k", expr.String(fmt.Sprintf("key%d", i%card)), "v", expr.Int32(int32(i%100)), "f", expr.Double(float64(i)/3))
	}
	return docs
}

const groupBenchPipeline = `[{"$group": {"_id": "$k", "n": {"$sum": 1}, "total": {"$sum": "$v"}, "avg": {"$avg": "$f"}, "mx": {"$max": "$v"}}}]`

func runGroup(tb testing.TB, p *Pipeline, docs []bsoncore.Document) []bsoncore.Document {
	out, err := p.Run(context.Background(), SliceSource(docs), &Context{})
	if err != nil {
		tb.Fatal(err)
	}
	res, err := Drain(context.Background(), out)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// TestGroupMillion is the performance target: $group of 1,000,000 small documents
// by a low-cardinality key in at most 2 s (checked loosely under -race, which is ~10x slower).
func TestGroupMillion(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	docs := groupInput(n, 10)
	p, err := Parse(parseDocs(t, groupBenchPipeline), ParseContext{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := runGroup(t, p, docs)
	el := time.Since(start)
	t.Logf("$group of %d docs: %v", n, el)
	if len(res) != 10 {
		t.Fatalf("%d groups", len(res))
	}
	var total int64
	for _, d := range res {
		total += int64(expr.Field(d, "n").Int32())
	}
	if total != int64(n) {
		t.Fatalf("counted %d", total)
	}
	limit := 2 * time.Second
	if raceEnabled {
		limit = 40 * time.Second
	}
	if el > limit {
		t.Fatalf("$group took %v, target %v", el, limit)
	}
}

func BenchmarkGroup1M(b *testing.B) {
	docs := groupInput(1_000_000, 10)
	p, err := Parse(parseDocs(b, groupBenchPipeline), ParseContext{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		runGroup(b, p, docs)
	}
}

func BenchmarkLookup(b *testing.B) {
	var foreign []bsoncore.Document
	for i := 0; i < 10_000; i++ {
		foreign = append(foreign, expr.DocOf("_id", expr.Int32(int32(i)), "x", expr.String("y")))
	}
	local := make([]bsoncore.Document, 10_000)
	for i := range local {
		local[i] = expr.DocOf("_id", expr.Int32(int32(i)), "ref", expr.Int32(int32(i*7%10_000)))
	}
	res := &memResolver{colls: map[string][]bsoncore.Document{"test.f": foreign}}
	p, err := Parse(parseDocs(b, `[{"$lookup": {"from": "f", "localField": "ref", "foreignField": "_id", "as": "j"}}]`), ParseContext{DB: "test"})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		out, _ := p.Run(context.Background(), SliceSource(local), &Context{Resolver: res})
		if _, err := Drain(context.Background(), out); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSkipLimitTopK(t *testing.T) {
	got := explainOf(t, `[{"$sort": {"a": 1}}, {"$skip": 2}, {"$limit": 3}]`)
	if want := `{"pipeline":[{"$sort":{"sortKey":{"a":1},"limit":5}},{"$skip":2}]}`; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	if _, err := Parse(parseDocs(t, `[{"$match": {}}]`), ParseContext{Collectionless: true}); codeOf(err) != 73 {
		t.Fatalf("collectionless $match: %v", err)
	}
}

// TestConcurrentRuns runs one parsed pipeline from several goroutines (run with -race).
func TestConcurrentRuns(t *testing.T) {
	p, err := Parse(parseDocs(t, `[{"$sort": {"v": -1}}, {"$group": {"_id": "$k", "top": {"$topN": {"n": 2, "sortBy": {"v": -1}, "output": "$v"}},
		"s": {"$first": {"$sortArray": {"input": ["$v", 3, 1], "sortBy": 1}}}}}, {"$sort": {"_id": 1}}]`), ParseContext{})
	if err != nil {
		t.Fatal(err)
	}
	docs := groupInput(2000, 5)
	want := renderAll(runGroup(t, p, docs))
	done := make(chan string, 4)
	for i := 0; i < 4; i++ {
		go func() {
			out, err := p.Run(context.Background(), SliceSource(docs), &Context{})
			if err != nil {
				done <- err.Error()
				return
			}
			res, err := Drain(context.Background(), out)
			if err != nil {
				done <- err.Error()
				return
			}
			done <- renderAll(res)
		}()
	}
	for i := 0; i < 4; i++ {
		if got := <-done; got != want {
			t.Fatalf("concurrent run differs")
		}
	}
}

func TestNamespaces(t *testing.T) {
	p, err := Parse(parseDocs(t, `[{"$lookup": {"from": "a", "pipeline": [{"$unionWith": "b"}], "as": "x"}},
		{"$facet": {"f": [{"$graphLookup": {"from": {"db": "other", "coll": "c"}, "startWith": "$x", "connectFromField": "x", "connectToField": "y", "as": "g"}}]}},
		{"$merge": {"into": "out"}}]`), ParseContext{DB: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(p.ForeignNamespaces()); got != "[test.a test.b other.c]" {
		t.Fatalf("ForeignNamespaces = %s", got)
	}
	if db, coll, ok := p.OutputNamespace(); !ok || db != "test" || coll != "out" {
		t.Fatalf("OutputNamespace = %s %s %v", db, coll, ok)
	}
}
