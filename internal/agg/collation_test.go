package agg

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/collation"
	"humongo/internal/mongoerr"
)

// runColl runs pipeline over input under collation spec (extended JSON; "" = simple).
func runColl(t *testing.T, res *memResolver, spec, input, pipeline string) ([]bsoncore.Document, error) {
	t.Helper()
	var c *collation.Collator
	if spec != "" {
		var err error
		if c, err = collation.Parse(parseDocs(t, "["+spec+"]")[0]); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Parse(parseDocs(t, pipeline), ParseContext{DB: "test", Collator: c})
	if err != nil {
		return nil, err
	}
	out, err := p.Run(context.Background(), SliceSource(parseDocs(t, input)), &Context{Now: testNow, Resolver: res})
	if err != nil {
		return nil, err
	}
	return Drain(context.Background(), out)
}

const ci = `{"locale": "en", "strength": 2}` // case-insensitive

func TestCollationStages(t *testing.T) {
	res := &memResolver{colls: map[string][]bsoncore.Document{
		"test.f": parseDocs(t, `[{"_id": 10, "k": "APPLE"}, {"_id": 11, "k": "pear"}]`),
		"test.g": parseDocs(t, `[{"_id": 20, "name": "ROOT"}, {"_id": 21, "name": "child", "up": "root"}]`),
	}}
	input := `[{"_id": 1, "s": "a"}, {"_id": 2, "s": "B"}, {"_id": 3, "s": "A"}, {"_id": 4, "s": "b"}, {"_id": 5, "s": "c"}]`
	cases := []struct {
		name, coll, input, pipeline, want string
	}{
		{"match eq ci", ci, input, `[{"$match": {"s": "a"}}]`, `[{"_id": 1, "s": "a"}, {"_id": 3, "s": "A"}]`},
		{"match eq simple", "", input, `[{"$match": {"s": "a"}}]`, `[{"_id": 1, "s": "a"}]`},
		{"match in ci", ci, input, `[{"$match": {"s": {"$in": ["C", "x"]}}}]`, `[{"_id": 5, "s": "c"}]`},
		{"match range ci", ci, input, `[{"$match": {"s": {"$gt": "A"}}}, {"$project": {"_id": 1}}]`, `[{"_id": 2}, {"_id": 4}, {"_id": 5}]`},
		{"merged matches ci", ci, input, `[{"$match": {"s": {"$gte": "a"}}}, {"$match": {"s": {"$lte": "a"}}}, {"$project": {"_id": 1}}]`, `[{"_id": 1}, {"_id": 3}]`},
		{"sort ci", ci, input, `[{"$sort": {"s": 1, "_id": 1}}, {"$project": {"_id": 1}}]`,
			`[{"_id": 1}, {"_id": 3}, {"_id": 2}, {"_id": 4}, {"_id": 5}]`},
		{"sort simple", "", input, `[{"$sort": {"s": 1, "_id": 1}}, {"$project": {"_id": 1}}]`,
			`[{"_id": 3}, {"_id": 2}, {"_id": 1}, {"_id": 4}, {"_id": 5}]`},
		{"topk ci", ci, input, `[{"$sort": {"s": -1, "_id": 1}}, {"$limit": 3}, {"$project": {"_id": 1}}]`,
			`[{"_id": 5}, {"_id": 2}, {"_id": 4}]`},
		{"numericOrdering", `{"locale": "en", "numericOrdering": true}`, `[{"_id": 1, "v": "10"}, {"_id": 2, "v": "9"}]`,
			`[{"$sort": {"v": 1}}, {"$project": {"_id": 1}}]`, `[{"_id": 2}, {"_id": 1}]`},
		{"group ci keeps first id", ci, input, `[{"$group": {"_id": "$s", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]`,
			`[{"_id": "a", "n": 2}, {"_id": "B", "n": 2}, {"_id": "c", "n": 1}]`},
		{"group simple", "", input, `[{"$group": {"_id": "$s", "n": {"$sum": 1}}}, {"$count": "groups"}]`, `[{"groups": 5}]`},
		{"group nested key ci", ci, `[{"_id": 1, "s": "x"}, {"_id": 2, "s": "X"}]`,
			`[{"$group": {"_id": {"k": ["$s"]}, "n": {"$sum": 1}}}]`, `[{"_id": {"k": ["x"]}, "n": 2}]`},
		{"sortByCount ci", ci, input, `[{"$sortByCount": "$s"}, {"$limit": 1}, {"$project": {"_id": 0, "count": 1}}]`, `[{"count": 2}]`},
		{"addToSet ci", ci, input, `[{"$group": {"_id": null, "v": {"$addToSet": "$s"}}}, {"$project": {"_id": 0, "n": {"$size": "$v"}}}]`, `[{"n": 3}]`},
		{"max ci", ci, `[{"_id": 1, "s": "b"}, {"_id": 2, "s": "C"}]`, `[{"$group": {"_id": null, "m": {"$max": "$s"}}}]`, `[{"_id": null, "m": "C"}]`},
		{"max simple", "", `[{"_id": 1, "s": "b"}, {"_id": 2, "s": "C"}]`, `[{"$group": {"_id": null, "m": {"$max": "$s"}}}]`, `[{"_id": null, "m": "b"}]`},
		{"eq expr ci", ci, `[{"_id": 1, "s": "Hello"}]`,
			`[{"$project": {"eq": {"$eq": ["$s", "hello"]}, "ne": {"$ne": ["$s", "HELLO"]}, "cmp": {"$cmp": ["$s", "hellp"]}, "lt": {"$lt": ["$s", "HELLP"]}, "in": {"$in": ["HELLO", ["x", "$s"]]}}}]`,
			`[{"_id": 1, "eq": true, "ne": false, "cmp": -1, "lt": true, "in": true}]`},
		{"eq expr simple", "", `[{"_id": 1, "s": "Hello"}]`, `[{"$project": {"eq": {"$eq": ["$s", "hello"]}}}]`, `[{"_id": 1, "eq": false}]`},
		{"match expr ci", ci, input, `[{"$match": {"$expr": {"$eq": ["$s", "C"]}}}]`, `[{"_id": 5, "s": "c"}]`},
		{"set ops ci", ci, `[{"_id": 1}]`,
			`[{"$project": {"_id": 0, "u": {"$size": {"$setUnion": [["a", "A"], ["b"]]}}, "e": {"$setEquals": [["a", "B"], ["A", "b"]]}, "i": {"$indexOfArray": [["x", "Y"], "y"]}}}]`,
			`[{"u": 2, "e": true, "i": 1}]`},
		{"sortArray ci", ci, `[{"_id": 1, "a": ["b", "C", "a"]}]`, `[{"$project": {"_id": 0, "s": {"$sortArray": {"input": "$a", "sortBy": 1}}}}]`,
			`[{"s": ["a", "b", "C"]}]`},
		{"lookup equality ci", ci, `[{"_id": 1, "k": "apple"}, {"_id": 2, "k": "PEAR"}]`,
			`[{"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "as": "j"}}, {"$project": {"ids": "$j._id"}}]`,
			`[{"_id": 1, "ids": [10]}, {"_id": 2, "ids": [11]}]`},
		{"lookup equality simple", "", `[{"_id": 1, "k": "apple"}]`,
			`[{"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "as": "j"}}, {"$project": {"ids": "$j._id"}}]`,
			`[{"_id": 1, "ids": []}]`},
		{"lookup pipeline ci", ci, `[{"_id": 1, "k": "apple"}]`,
			`[{"$lookup": {"from": "f", "let": {"k": "$k"}, "pipeline": [{"$match": {"$expr": {"$eq": ["$k", "$$k"]}}}, {"$match": {"k": {"$ne": "pear"}}}], "as": "j"}}, {"$project": {"ids": "$j._id"}}]`,
			`[{"_id": 1, "ids": [10]}]`},
		{"graphLookup ci", ci, `[{"_id": 1, "start": "CHILD"}]`,
			`[{"$graphLookup": {"from": "g", "startWith": "$start", "connectFromField": "up", "connectToField": "name", "as": "c"}}, {"$project": {"n": {"$size": "$c"}}}]`,
			`[{"_id": 1, "n": 2}]`},
		{"facet ci", ci, input, `[{"$facet": {"a": [{"$match": {"s": "B"}}, {"$count": "n"}]}}]`, `[{"a": [{"n": 2}]}]`},
		{"window partition ci", ci, `[{"_id": 1, "p": "x", "v": 1}, {"_id": 2, "p": "X", "v": 2}]`,
			`[{"$setWindowFields": {"partitionBy": "$p", "sortBy": {"_id": 1}, "output": {"t": {"$sum": "$v"}}}}, {"$project": {"t": 1}}]`,
			`[{"_id": 1, "t": 3}, {"_id": 2, "t": 3}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := runColl(t, res, c.coll, c.input, c.pipeline)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if g, w := renderAll(got), renderAll(parseDocs(t, c.want)); g != w {
				t.Fatalf("pipeline %s\n got: %s\nwant: %s", c.pipeline, g, w)
			}
		})
	}
}

// TestCollationContextOverride: Context.Collator governs run-time comparisons.
func TestCollationContextOverride(t *testing.T) {
	c, err := collation.Parse(parseDocs(t, "["+ci+"]")[0])
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(parseDocs(t, `[{"$group": {"_id": "$s"}}, {"$count": "n"}]`), ParseContext{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(context.Background(), SliceSource(parseDocs(t, `[{"s": "a"}, {"s": "A"}]`)), &Context{Collator: c})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Drain(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	if g := renderAll(got); g != renderAll(parseDocs(t, `[{"n": 1}]`)) {
		t.Fatalf("got %s", g)
	}
}

func TestPipelineLimits(t *testing.T) {
	stage := `{"$match": {}}`
	long := "[" + strings.TrimSuffix(strings.Repeat(stage+",", maxStages+1), ",") + "]"
	ok := "[" + strings.TrimSuffix(strings.Repeat(stage+",", maxStages), ",") + "]"
	if _, err := Parse(parseDocs(t, ok), ParseContext{DB: "test"}); err != nil {
		t.Fatalf("%d stages: %v", maxStages, err)
	}
	_, err := Parse(parseDocs(t, long), ParseContext{DB: "test"})
	if mongoerr.CodeOf(err) != 7749501 || !strings.Contains(err.Error(), "Pipeline length must be no longer than 1000 stages") {
		t.Fatalf("long pipeline: %v", err)
	}

	// Sub-pipelines nest up to 20 deep.
	nest := func(n int) string {
		s := `[{"$match": {}}]`
		for range n {
			s = `[{"$facet": {"f": [{"$lookup": {"from": "c", "pipeline": ` + s + `, "as": "x"}}]}}]`
		}
		return s
	}
	// Each level above is two sub-pipelines ($facet, then $lookup).
	if _, err := Parse(parseDocs(t, nest(10)), ParseContext{DB: "test"}); err != nil {
		t.Fatalf("depth 20: %v", err)
	}
	_, err = Parse(parseDocs(t, nest(11)), ParseContext{DB: "test"})
	if mongoerr.CodeOf(err) != mongoerr.MaxSubPipelineDepthExceeded {
		t.Fatalf("depth 22: %v", err)
	}
	unions := `[{"$match": {}}]`
	for range 21 {
		unions = `[{"$unionWith": {"coll": "c", "pipeline": ` + unions + `}}]`
	}
	if _, err = Parse(parseDocs(t, unions), ParseContext{DB: "test"}); mongoerr.CodeOf(err) != mongoerr.MaxSubPipelineDepthExceeded {
		t.Fatalf("unionWith depth 21: %v", err)
	}

	// Deep expressions are refused with a clear error, not by exhausting the stack.
	deep := func(n int) bsoncore.Document {
		x := bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 1)}
		for range n {
			arr := bsoncore.BuildArray(nil, x)
			x = bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: bsoncore.NewDocumentBuilder().AppendArray("$abs", arr).Build()}
		}
		proj := bsoncore.NewDocumentBuilder().AppendValue("v", x).Build()
		return bsoncore.NewDocumentBuilder().AppendDocument("$project", proj).Build()
	}
	if _, err := Parse([]bsoncore.Document{deep(50)}, ParseContext{}); err != nil {
		t.Fatalf("50 nested operators: %v", err)
	}
	for _, n := range []int{150, 5000} {
		_, err := Parse([]bsoncore.Document{deep(n)}, ParseContext{})
		if mongoerr.CodeOf(err) != mongoerr.Overflow {
			t.Fatalf("%d nested operators: %v", n, err)
		}
	}
}

func TestFacetMemoryBounded(t *testing.T) {
	docs := make([]bsoncore.Document, 200)
	for i := range docs {
		docs[i] = bsoncore.NewDocumentBuilder().AppendInt32("_id", int32(i)).
			AppendString("pad", strings.Repeat("x", 1000)).Build()
	}
	p, err := Parse(parseDocs(t, `[{"$facet": {"a": [{"$count": "n"}]}}]`), ParseContext{})
	if err != nil {
		t.Fatal(err)
	}
	for _, allow := range []bool{false, true} {
		out, err := p.Run(context.Background(), SliceSource(docs), &Context{MaxMemoryBytes: 50_000, AllowDiskUse: allow})
		if err == nil {
			_, err = Drain(context.Background(), out)
		}
		want := mongoerr.OK
		if !allow {
			want = mongoerr.QueryExceededMemoryLimitNoDiskUseAllowed
		}
		if mongoerr.CodeOf(err) != want {
			t.Fatalf("allowDiskUse=%v: %v", allow, fmt.Sprint(err))
		}
	}
}
