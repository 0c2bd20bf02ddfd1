package agg

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func newRes(t *testing.T) *memResolver {
	return &memResolver{colls: map[string][]bsoncore.Document{
		"test.inventory": parseDocs(t, `[
			{"_id": 1, "sku": "almonds", "instock": 120},
			{"_id": 2, "sku": "bread", "instock": 80},
			{"_id": 3, "sku": "cashews", "instock": 60},
			{"_id": 4, "sku": "pecans", "instock": 70},
			{"_id": 5, "sku": null},
			{"_id": 6}]`),
		"test.employees": parseDocs(t, `[
			{"_id": 1, "name": "Dev"},
			{"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
			{"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
			{"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
			{"_id": 5, "name": "Asya", "reportsTo": "Ron"}]`),
		"test.other": parseDocs(t, `[{"_id": 100, "x": 1}]`),
	}}
}

func TestJoins(t *testing.T) {
	orders := `[{"_id": 1, "item": "almonds", "qty": 2}, {"_id": 2, "item": "pecans", "qty": 1}, {"_id": 3}, {"_id": 4, "item": ["bread", "cashews"]}]`
	runCases(t, newRes(t), []pcase{
		{name: "lookup equality", input: orders,
			pipeline: `[{"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "as": "inv"}}, {"$project": {"ids": "$inv._id"}}]`,
			// A missing localField matches null and missing foreign fields.
			want: `[{"_id": 1, "ids": [1]}, {"_id": 2, "ids": [4]}, {"_id": 3, "ids": [5, 6]}, {"_id": 4, "ids": [2, 3]}]`},
		{name: "lookup pipeline let", input: orders,
			pipeline: `[{"$match": {"_id": {"$lte": 2}}}, {"$lookup": {"from": "inventory", "let": {"it": "$item", "q": "$qty"},
				"pipeline": [{"$match": {"$expr": {"$and": [{"$eq": ["$sku", "$$it"]}, {"$gte": ["$instock", {"$multiply": ["$$q", 50]}]}]}}}, {"$project": {"_id": 1}}],
				"as": "inv"}}]`,
			want: `[{"_id": 1, "item": "almonds", "qty": 2, "inv": [{"_id": 1}]}, {"_id": 2, "item": "pecans", "qty": 1, "inv": [{"_id": 4}]}]`},
		{name: "lookup both forms", input: orders,
			pipeline: `[{"$match": {"_id": 1}}, {"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "let": {"q": "$qty"},
				"pipeline": [{"$project": {"_id": 0, "enough": {"$gte": ["$instock", "$$q"]}}}], "as": "inv"}}]`,
			want: `[{"_id": 1, "item": "almonds", "qty": 2, "inv": [{"enough": true}]}]`},
		{name: "lookup no match", input: `[{"_id": 1, "item": "zzz"}]`,
			pipeline: `[{"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "as": "inv"}}]`,
			want:     `[{"_id": 1, "item": "zzz", "inv": []}]`},
		{name: "lookup missing as", input: orders, pipeline: `[{"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku"}}]`, code: 9},
		{name: "graphLookup", input: `[{"_id": 5, "name": "Asya", "reportsTo": "Ron"}]`,
			pipeline: `[{"$graphLookup": {"from": "employees", "startWith": "$reportsTo", "connectFromField": "reportsTo", "connectToField": "name", "as": "chain", "depthField": "d"}},
				{"$project": {"chain": {"$map": {"input": "$chain", "in": ["$$this.name", "$$this.d"]}}}}]`,
			want: `[{"_id": 5, "chain": [["Ron", 0], ["Eliot", 1], ["Dev", 2]]}]`},
		{name: "graphLookup maxDepth", input: `[{"_id": 5, "name": "Asya", "reportsTo": "Ron"}]`,
			pipeline: `[{"$graphLookup": {"from": "employees", "startWith": "$reportsTo", "connectFromField": "reportsTo", "connectToField": "name", "as": "chain", "maxDepth": 0}},
				{"$project": {"n": {"$size": "$chain"}}}]`,
			want: `[{"_id": 5, "n": 1}]`},
		{name: "unionWith", input: `[{"_id": 1}]`,
			pipeline: `[{"$unionWith": {"coll": "other", "pipeline": [{"$project": {"x": 0}}]}}]`, want: `[{"_id": 1}, {"_id": 100}]`},
		{name: "unionWith string", input: `[{"_id": 1}]`, pipeline: `[{"$unionWith": "other"}]`, want: `[{"_id": 1}, {"_id": 100, "x": 1}]`},
		{name: "lookup bad namespace", input: orders, pipeline: `[{"$lookup": {"from": "", "localField": "a", "foreignField": "b", "as": "x"}}]`, code: 73},
	})
}

func TestOutMerge(t *testing.T) {
	res := newRes(t)
	if _, err := runPipeline(t, res, `[{"_id": 1, "a": 1}, {"_id": 2, "a": 2}]`, `[{"$out": "target"}]`); err != nil {
		t.Fatal(err)
	}
	if got := renderAll(res.colls["test.target"]); got != `[{"_id":1,"a":1},{"_id":2,"a":2}]` {
		t.Fatalf("$out wrote %s", got)
	}
	// $out replaces the whole collection.
	if _, err := runPipeline(t, res, `[{"_id": 3}]`, `[{"$out": "target"}]`); err != nil {
		t.Fatal(err)
	}
	if got := renderAll(res.colls["test.target"]); got != `[{"_id":3}]` {
		t.Fatalf("$out wrote %s", got)
	}
	cases := []struct {
		spec, want string
		code       int
	}{
		{`{"into": "target"}`, `[{"_id":3,"b":1},{"_id":4,"b":2}]`, 0},
		{`{"into": "target", "whenMatched": "replace"}`, `[{"_id":3,"b":1},{"_id":4,"b":2}]`, 0},
		{`{"into": "target", "whenMatched": "keepExisting"}`, `[{"_id":3},{"_id":4,"b":2}]`, 0},
		// MongoDB has no strategy for this pair (document_source_merge.cpp).
		{`{"into": "target", "whenMatched": "keepExisting", "whenNotMatched": "discard"}`, ``, 51181},
		{`{"into": "target", "whenMatched": "fail", "whenNotMatched": "fail"}`, ``, 51181},
		{`{"into": "target", "whenMatched": "fail"}`, ``, 11000},
		{`{"into": "target", "whenNotMatched": "fail"}`, ``, 13113},
		{`{"into": "target", "whenMatched": [{"$set": {"c": {"$add": ["$$new.b", 10]}}}]}`, `[{"_id":3,"c":11},{"_id":4,"b":2}]`, 0},
	}
	for _, c := range cases {
		res.colls["test.target"] = parseDocs(t, `[{"_id": 3}]`)
		_, err := runPipeline(t, res, `[{"_id": 3, "b": 1}, {"_id": 4, "b": 2}]`, `[{"$merge": `+c.spec+`}]`)
		if c.code != 0 {
			if err == nil || !strings.Contains(err.Error(), "") || codeOf(err) != c.code {
				t.Fatalf("%s: want code %d, got %v", c.spec, c.code, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		if got := renderAll(res.colls["test.target"]); got != c.want {
			t.Fatalf("%s: got %s want %s", c.spec, got, c.want)
		}
	}
	if _, err := runPipeline(t, res, `[{"_id": 1}]`, `[{"$out": "system.x"}]`); codeOf(err) != 73 {
		t.Fatalf("invalid $out namespace: %v", err)
	}
}
