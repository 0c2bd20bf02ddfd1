package agg

import (
	"testing"

	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
)

const sales = `[
 {"_id": 1, "item": "abc", "price": 10, "quantity": 2, "tags": ["a", "b"]},
 {"_id": 2, "item": "jkl", "price": 20, "quantity": 1, "tags": []},
 {"_id": 3, "item": "xyz", "price": 5, "quantity": 10, "tags": "c"},
 {"_id": 4, "item": "xyz", "price": 5, "quantity": 20},
 {"_id": 5, "item": "abc", "price": 10, "quantity": 10, "tags": null}
]`

func TestBasicStages(t *testing.T) {
	runCases(t, nil, []pcase{
		{name: "match", input: sales, pipeline: `[{"$match": {"item": "xyz"}}]`,
			want: `[{"_id": 3, "item": "xyz", "price": 5, "quantity": 10, "tags": "c"},{"_id": 4, "item": "xyz", "price": 5, "quantity": 20}]`},
		{name: "match expr", input: sales, pipeline: `[{"$match": {"$expr": {"$gt": ["$quantity", 10]}}}, {"$project": {"_id": 1}}]`,
			want: `[{"_id": 4}]`},
		{name: "project inclusion", input: sales, pipeline: `[{"$limit": 1}, {"$project": {"item": 1, "total": {"$multiply": ["$price", "$quantity"]}}}]`,
			want: `[{"_id": 1, "item": "abc", "total": 20}]`},
		{name: "project exclusion", input: sales, pipeline: `[{"$limit": 1}, {"$project": {"tags": 0, "_id": 0, "price": 0}}]`,
			want: `[{"item": "abc", "quantity": 2}]`},
		{name: "project no id", input: sales, pipeline: `[{"$limit": 1}, {"$project": {"_id": 0, "item": 1}}]`,
			want: `[{"item": "abc"}]`},
		{name: "project mixed error", input: sales, pipeline: `[{"$project": {"a": 1, "b": 0}}]`, code: 31254},
		{name: "project nested", input: `[{"_id": 1, "a": {"b": 1, "c": 2}, "d": [{"b": 3, "c": 4}, 5]}]`,
			pipeline: `[{"$project": {"a.b": 1, "d": {"c": 1}}}]`,
			want:     `[{"_id": 1, "a": {"b": 1}, "d": [{"c": 4}]}]`},
		{name: "project REMOVE", input: `[{"_id": 1, "a": 1}]`,
			pipeline: `[{"$project": {"a": 1, "b": {"$cond": [false, 1, "$$REMOVE"]}}}]`, want: `[{"_id": 1, "a": 1}]`},
		{name: "addFields", input: `[{"_id": 1, "a": 1, "b": {"c": 1}}]`,
			pipeline: `[{"$addFields": {"a": 5, "b.d": 2, "e": {"$add": ["$a", 1]}}}]`,
			want:     `[{"_id": 1, "a": 5, "b": {"c": 1, "d": 2}, "e": 2}]`},
		{name: "set through array", input: `[{"_id": 1, "a": [{"x": 1}, {"x": 2}]}]`,
			pipeline: `[{"$set": {"a.y": 7}}]`, want: `[{"_id": 1, "a": [{"x": 1, "y": 7}, {"x": 2, "y": 7}]}]`},
		{name: "unset", input: `[{"_id": 1, "a": 1, "b": {"c": 1, "d": 2}}]`,
			pipeline: `[{"$unset": ["a", "b.c"]}]`, want: `[{"_id": 1, "b": {"d": 2}}]`},
		{name: "limit skip", input: sales, pipeline: `[{"$skip": 1}, {"$limit": 2}, {"$project": {"_id": 1}}]`,
			want: `[{"_id": 2}, {"_id": 3}]`},
		{name: "limit zero", input: sales, pipeline: `[{"$limit": 0}]`, code: 15958},
		{name: "count", input: sales, pipeline: `[{"$match": {"price": {"$gte": 10}}}, {"$count": "n"}]`, want: `[{"n": 3}]`},
		{name: "count empty", input: sales, pipeline: `[{"$match": {"price": 99}}, {"$count": "n"}]`, want: `[]`},
		{name: "sort", input: sales, pipeline: `[{"$sort": {"price": -1, "quantity": 1}}, {"$project": {"_id": 1}}]`,
			want: `[{"_id": 2}, {"_id": 1}, {"_id": 5}, {"_id": 3}, {"_id": 4}]`},
		{name: "sort limit topk", input: sales, pipeline: `[{"$sort": {"quantity": -1}}, {"$limit": 2}, {"$project": {"_id": 1}}]`,
			want: `[{"_id": 4}, {"_id": 3}]`},
		{name: "sort missing null together", input: `[{"_id": 1, "a": 2}, {"_id": 2}, {"_id": 3, "a": null}, {"_id": 4, "a": 1}]`,
			pipeline: `[{"$sort": {"a": 1, "_id": 1}}]`, want: `[{"_id": 2}, {"_id": 3, "a": null}, {"_id": 4, "a": 1}, {"_id": 1, "a": 2}]`},
		{name: "sort array min", input: `[{"_id": 1, "a": [5, 1]}, {"_id": 2, "a": 3}]`,
			pipeline: `[{"$sort": {"a": 1}}, {"$project": {"_id": 1}}]`, want: `[{"_id": 1}, {"_id": 2}]`},
		{name: "unwind", input: sales, pipeline: `[{"$unwind": "$tags"}, {"$project": {"tags": 1}}]`,
			want: `[{"_id": 1, "tags": "a"}, {"_id": 1, "tags": "b"}, {"_id": 3, "tags": "c"}]`},
		{name: "unwind preserve", input: sales,
			pipeline: `[{"$unwind": {"path": "$tags", "preserveNullAndEmptyArrays": true, "includeArrayIndex": "i"}}, {"$project": {"tags": 1, "i": 1}}]`,
			want: `[{"_id": 1, "tags": "a", "i": 0}, {"_id": 1, "tags": "b", "i": 1}, {"_id": 2, "i": null}, {"_id": 3, "tags": "c", "i": null},
			        {"_id": 4, "i": null}, {"_id": 5, "tags": null, "i": null}]`},
		{name: "unwind bad path", input: sales, pipeline: `[{"$unwind": "tags"}]`, code: 28818},
		{name: "replaceRoot", input: `[{"_id": 1, "a": {"x": 1}}]`, pipeline: `[{"$replaceRoot": {"newRoot": "$a"}}]`, want: `[{"x": 1}]`},
		{name: "replaceWith merge", input: `[{"_id": 1, "a": {"x": 1}}]`,
			pipeline: `[{"$replaceWith": {"$mergeObjects": [{"y": 2}, "$a"]}}]`, want: `[{"y": 2, "x": 1}]`},
		{name: "replaceRoot non-doc", input: `[{"_id": 1, "a": 5}]`, pipeline: `[{"$replaceRoot": {"newRoot": "$a"}}]`, code: 40228},
		{name: "sortByCount", input: sales, pipeline: `[{"$sortByCount": "$item"}]`,
			want: `[{"_id": "abc", "count": 2}, {"_id": "xyz", "count": 2}, {"_id": "jkl", "count": 1}]`, unordered: true},
		{name: "documents", pipeline: `[{"$documents": [{"x": 1}, {"x": 2}]}, {"$match": {"x": 2}}]`, want: `[{"x": 2}]`},
		{name: "sample size", input: sales, pipeline: `[{"$sample": {"size": 3}}, {"$count": "n"}]`, want: `[{"n": 3}]`},
		{name: "sample more than input", input: sales, pipeline: `[{"$sample": {"size": 30}}, {"$count": "n"}]`, want: `[{"n": 5}]`},
		{name: "unknown stage", input: sales, pipeline: `[{"$foo": {}}]`, code: mongoerr.Location40324},
		{name: "unknown expression", input: sales, pipeline: `[{"$project": {"a": {"$foo": 1}}}]`, code: mongoerr.InvalidPipelineOperator},
		{name: "two fields in stage", input: sales, pipeline: `[{"$match": {}, "$limit": 1}]`, code: 40323},
		{name: "out not last", input: sales, pipeline: `[{"$out": "x"}, {"$limit": 1}]`, code: 40601},
		{name: "redact", input: `[{"_id": 1, "level": 1, "sub": {"level": 5, "x": 1}, "arr": [{"level": 1, "y": 1}, {"level": 9}]}]`,
			pipeline: `[{"$redact": {"$cond": [{"$lte": ["$level", 3]}, "$$DESCEND", "$$PRUNE"]}}]`,
			want:     `[{"_id": 1, "level": 1, "arr": [{"level": 1, "y": 1}]}]`},
		{name: "let vars", input: `[{"_id": 1, "a": 1}]`, pipeline: `[{"$project": {"x": {"$let": {"vars": {"v": {"$add": ["$a", 1]}}, "in": {"$multiply": ["$$v", 10]}}}}}]`,
			want: `[{"_id": 1, "x": 20}]`},
		{name: "undefined variable", input: `[{"_id": 1}]`, pipeline: `[{"$project": {"x": "$$nope"}}]`, code: 17276},
		{name: "NOW", input: `[{"_id": 1}]`, pipeline: `[{"$project": {"y": {"$year": "$$NOW"}}}]`, want: `[{"_id": 1, "y": 2024}]`},
		{name: "CLUSTER_TIME", input: `[{"_id": 1}]`, pipeline: `[{"$project": {"t": {"$type": "$$CLUSTER_TIME"}}}]`, want: `[{"_id": 1, "t": "timestamp"}]`},
	})
}

func TestGroup(t *testing.T) {
	runCases(t, nil, []pcase{
		{name: "sum avg", input: sales, pipeline: `[{"$group": {"_id": "$item", "total": {"$sum": {"$multiply": ["$price", "$quantity"]}}, "avgQ": {"$avg": "$quantity"}, "n": {"$count": {}}}}]`,
			want: `[{"_id": "abc", "total": 120, "avgQ": 6.0, "n": 2}, {"_id": "jkl", "total": 20, "avgQ": 1.0, "n": 1}, {"_id": "xyz", "total": 150, "avgQ": 15.0, "n": 2}]`, unordered: true},
		{name: "id null", input: sales, pipeline: `[{"$group": {"_id": null, "n": {"$sum": 1}, "mx": {"$max": "$quantity"}, "mn": {"$min": "$price"}}}]`,
			want: `[{"_id": null, "n": 5, "mx": 20, "mn": 5}]`},
		{name: "null and missing grouped", input: `[{"_id": 1, "k": null}, {"_id": 2}, {"_id": 3, "k": 1}, {"_id": 4, "k": 1.0}]`,
			pipeline: `[{"$group": {"_id": "$k", "ids": {"$push": "$_id"}}}]`,
			want:     `[{"_id": null, "ids": [1, 2]}, {"_id": 1, "ids": [3, 4]}]`},
		{name: "compound id missing field null", input: `[{"_id": 1, "a": 1}, {"_id": 2, "a": 1, "b": null}]`,
			pipeline: `[{"$group": {"_id": {"a": "$a", "b": "$b"}, "n": {"$sum": 1}}}]`, want: `[{"_id": {"a": 1, "b": null}, "n": 2}]`},
		{name: "sum non numeric", input: `[{"v": "x"}, {"v": null}, {}]`, pipeline: `[{"$group": {"_id": null, "s": {"$sum": "$v"}, "a": {"$avg": "$v"}}}]`,
			want: `[{"_id": null, "s": 0, "a": null}]`},
		{name: "sum widening", input: `[{"v": 2147483647}, {"v": 1}]`, pipeline: `[{"$group": {"_id": null, "s": {"$sum": "$v"}}}, {"$project": {"_id": 0, "t": {"$type": "$s"}, "s": 1}}]`,
			want: `[{"s": 2147483648, "t": "long"}]`},
		{name: "first last push addToSet", input: sales, pipeline: `[{"$sort": {"_id": 1}}, {"$group": {"_id": "$price", "f": {"$first": "$_id"}, "l": {"$last": "$_id"}, "items": {"$addToSet": "$item"}}}, {"$sort": {"_id": 1}}]`,
			want: `[{"_id": 5, "f": 3, "l": 4, "items": ["xyz"]}, {"_id": 10, "f": 1, "l": 5, "items": ["abc"]}, {"_id": 20, "f": 2, "l": 2, "items": ["jkl"]}]`},
		{name: "stddev", input: `[{"v": 1}, {"v": 2}, {"v": 3}, {"v": 4}]`, pipeline: `[{"$group": {"_id": null, "p": {"$stdDevPop": "$v"}, "s": {"$stdDevSamp": "$v"}}}, {"$project": {"_id": 0, "p": {"$round": ["$p", 4]}, "s": {"$round": ["$s", 4]}}}]`,
			want: `[{"p": 1.118, "s": 1.291}]`},
		{name: "mergeObjects", input: `[{"k": 1, "o": {"a": 1}}, {"k": 1, "o": {"b": 2, "a": 3}}, {"k": 1}]`,
			pipeline: `[{"$group": {"_id": "$k", "m": {"$mergeObjects": "$o"}}}]`, want: `[{"_id": 1, "m": {"a": 3, "b": 2}}]`},
		{name: "top bottom", input: sales, pipeline: `[{"$group": {"_id": null, "top": {"$top": {"sortBy": {"quantity": -1}, "output": "$_id"}}, "bot": {"$bottomN": {"n": 2, "sortBy": {"quantity": -1}, "output": "$_id"}}}}]`,
			want: `[{"_id": null, "top": 4, "bot": [1, 2]}]`},
		{name: "firstN maxN", input: sales, pipeline: `[{"$group": {"_id": null, "f": {"$firstN": {"n": 2, "input": "$_id"}}, "l": {"$lastN": {"n": 2, "input": "$_id"}}, "mx": {"$maxN": {"n": 2, "input": "$quantity"}}, "mn": {"$minN": {"n": 2, "input": "$quantity"}}}}]`,
			want: `[{"_id": null, "f": [1, 2], "l": [4, 5], "mx": [20, 10], "mn": [1, 2]}]`},
		{name: "median percentile", input: `[{"v": 1}, {"v": 2}, {"v": 3}, {"v": 4}, {"v": 5}]`,
			pipeline: `[{"$group": {"_id": null, "m": {"$median": {"input": "$v", "method": "approximate"}}, "p": {"$percentile": {"input": "$v", "p": [0.2, 0.9], "method": "approximate"}}}}]`,
			want:     `[{"_id": null, "m": 3.0, "p": [1.0, 5.0]}]`},
		{name: "no id", input: sales, pipeline: `[{"$group": {"n": {"$sum": 1}}}]`, code: 15955},
		{name: "bad accumulator", input: sales, pipeline: `[{"$group": {"_id": null, "n": {"$foo": 1}}}]`, code: 15952},
		{name: "bucket", input: sales, pipeline: `[{"$bucket": {"groupBy": "$quantity", "boundaries": [0, 5, 15], "default": "other", "output": {"n": {"$sum": 1}, "ids": {"$push": "$_id"}}}}]`,
			want: `[{"_id": 0, "n": 2, "ids": [1, 2]}, {"_id": 5, "n": 2, "ids": [3, 5]}, {"_id": "other", "n": 1, "ids": [4]}]`},
		{name: "bucket no default", input: sales, pipeline: `[{"$bucket": {"groupBy": "$quantity", "boundaries": [0, 5]}}]`, code: 40066},
		{name: "bucketAuto", input: `[{"v": 1}, {"v": 2}, {"v": 3}, {"v": 4}, {"v": 5}, {"v": 6}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 3}}]`,
			want:     `[{"_id": {"min": 1, "max": 3}, "count": 2}, {"_id": {"min": 3, "max": 5}, "count": 2}, {"_id": {"min": 5, "max": 6}, "count": 2}]`},
		{name: "facet", input: sales, pipeline: `[{"$facet": {"cnt": [{"$count": "n"}], "cheap": [{"$match": {"price": 5}}, {"$project": {"_id": 1}}]}}]`,
			want: `[{"cnt": [{"n": 5}], "cheap": [{"_id": 3}, {"_id": 4}]}]`},
	})
}

func TestMemoryLimit(t *testing.T) {
	p, err := Parse(parseDocs(t, `[{"$sort": {"a": 1}}]`), ParseContext{DB: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for i := 0; i < 2000; i++ {
		docs = append(docs, `{"a": `+itoa(2000-i)+`, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	}
	input := "[" + joinComma(docs) + "]"
	ctx := t.Context()
	out, err := p.Run(ctx, SliceSource(parseDocs(t, input)), &Context{MaxMemoryBytes: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Drain(ctx, out); mongoerr.CodeOf(err) != mongoerr.QueryExceededMemoryLimitNoDiskUseAllowed {
		t.Fatalf("want 292, got %v", err)
	}
	// With allowDiskUse the sort spills and stays correct.
	out, err = p.Run(ctx, SliceSource(parseDocs(t, input)), &Context{MaxMemoryBytes: 10_000, AllowDiskUse: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Drain(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2000 {
		t.Fatalf("got %d docs", len(res))
	}
	for i, d := range res {
		if v := expr.Field(d, "a").Int32(); int(v) != i+1 {
			t.Fatalf("doc %d: a=%d", i, v)
		}
	}
	// $group also honours the limit.
	g, _ := Parse(parseDocs(t, `[{"$group": {"_id": "$a", "p": {"$push": "$pad"}}}]`), ParseContext{})
	out, _ = g.Run(ctx, SliceSource(parseDocs(t, input)), &Context{MaxMemoryBytes: 10_000})
	if _, err := Drain(ctx, out); mongoerr.CodeOf(err) != mongoerr.QueryExceededMemoryLimitNoDiskUseAllowed {
		t.Fatalf("group: want 292, got %v", err)
	}
}

func itoa(i int) string {
	return string(appendInt(nil, i))
}

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// TestGroupSpill checks that $group with allowDiskUse spills above the memory limit and still
// produces every group with its accumulators in arrival order.
func TestGroupSpill(t *testing.T) {
	var docs []string
	for i := 0; i < 3000; i++ {
		docs = append(docs, `{"_id": `+itoa(i)+`, "k": `+itoa(i%37)+`, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	}
	input := parseDocs(t, "["+joinComma(docs)+"]")
	p, err := Parse(parseDocs(t, `[{"$group": {"_id": "$k", "ids": {"$push": "$_id"}, "n": {"$sum": 1}, "f": {"$first": "$_id"}}}, {"$sort": {"_id": 1}}]`), ParseContext{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Drain(t.Context(), must(p.Run(t.Context(), SliceSource(input), &Context{})))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Drain(t.Context(), must(p.Run(t.Context(), SliceSource(input), &Context{MaxMemoryBytes: 20_000, AllowDiskUse: true, TempDir: t.TempDir()})))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Drain(t.Context(), must(p.Run(t.Context(), SliceSource(input), &Context{MaxMemoryBytes: 20_000}))); codeOf(err) != 292 {
		t.Fatalf("without allowDiskUse: %v", err)
	}
	if len(got) != 37 || renderAll(got) != renderAll(want) {
		t.Fatalf("spilled $group differs:\n got %.300s\nwant %.300s", renderAll(got), renderAll(want))
	}
}

func must(s Source, err error) Source {
	if err != nil {
		panic(err)
	}
	return s
}
