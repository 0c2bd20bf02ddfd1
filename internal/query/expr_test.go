package query

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/mongoerr"
)

// TestExprFullLanguage checks that $expr in a filter and computed projection fields know the
// whole expression language with only this package linked. This test binary cannot link
// internal/agg (agg imports query), so while the operators beyond the core were registered
// by agg's init functions, every case below failed here with InvalidPipelineOperator.
func TestExprFullLanguage(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"$expr": {"$eq": [{"$concat": ["$a", "-", "$b"]}, "x-y"]}}`, `{"a": "x", "b": "y"}`, true},
		{`{"$expr": {"$eq": [{"$toUpper": "$s"}, "HI"]}}`, `{"s": "hi"}`, true},
		{`{"$expr": {"$eq": [{"$dateToString": {"date": "$d", "format": "%Y-%m-%d"}}, "2021-03-14"]}}`,
			`{"d": {"$date": "2021-03-14T15:09:26.535Z"}}`, true},
		{`{"$expr": {"$eq": [{"$map": {"input": "$a", "as": "x", "in": {"$multiply": ["$$x", 2]}}}, [2, 4, 6]]}}`,
			`{"a": [1, 2, 3]}`, true},
		{`{"$expr": {"$let": {"vars": {"t": {"$add": ["$a", "$b"]}}, "in": {"$gt": ["$$t", 10]}}}}`, `{"a": 4, "b": 5}`, false},
		{`{"$expr": {"$switch": {"branches": [{"case": {"$lt": ["$n", 0]}, "then": false}], "default": true}}}`, `{"n": 1}`, true},
		{`{"$expr": {"$eq": [{"$sum": "$a"}, 6]}}`, `{"a": [1, 2, 3]}`, true}, // an accumulator as an expression
	})

	// An unknown operator is still refused, with MongoDB's code.
	_, err := Parse(ej(t, `{"$expr": {"$noSuchOperator": 1}}`), ParseOptions{AllowExpr: true})
	if mongoerr.CodeOf(err) != mongoerr.InvalidPipelineOperator {
		t.Fatalf("unknown operator: got %v, want InvalidPipelineOperator", err)
	}

	// find's computed projection fields use the same language.
	p, err := ParseProjection(ej(t, `{"_id": 0, "s": {"$concat": ["$a", "$b"]}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(ej(t, `{"_id": 1, "a": "x", "b": "y"}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := bson.Raw(out).String(); got != `{"s": "xy"}` {
		t.Fatalf("projection: got %s", got)
	}
}
