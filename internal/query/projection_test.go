package query

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

func TestProjection(t *testing.T) {
	doc := `{"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1, "g": 2}, {"f": 3}, 5, [{"f": 4}]], "h": [1, 2, 3, 4, 5]}`
	cases := []struct {
		filter, spec, doc, want string
	}{
		{``, `{}`, doc, doc},
		{``, `{"a": 1}`, doc, `{"_id": 1, "a": 1}`},
		{``, `{"a": true, "_id": 0}`, doc, `{"a": 1}`},
		{``, `{"_id": 0, "a": 5}`, doc, `{"a": 1}`},
		{``, `{"_id": 1}`, doc, `{"_id": 1}`},
		{``, `{"_id": 0}`, doc, `{"a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1, "g": 2}, {"f": 3}, 5, [{"f": 4}]], "h": [1, 2, 3, 4, 5]}`},
		{``, `{"a": 0, "e": 0, "h": 0}`, doc, `{"_id": 1, "b": {"c": 2, "d": 3}}`},
		{``, `{"a": 0, "_id": 1, "e": 0, "h": 0}`, doc, `{"_id": 1, "b": {"c": 2, "d": 3}}`},
		{``, `{"b.c": 1}`, doc, `{"_id": 1, "b": {"c": 2}}`},
		{``, `{"b": {"c": 1}}`, doc, `{"_id": 1, "b": {"c": 2}}`},
		{``, `{"b.c": 0, "e": 0, "h": 0}`, doc, `{"_id": 1, "a": 1, "b": {"d": 3}}`},
		{``, `{"e.f": 1, "_id": 0}`, doc, `{"e": [{"f": 1}, {"f": 3}, [{"f": 4}]]}`},
		{``, `{"e.f": 0, "_id": 0, "a": 0, "b": 0, "h": 0}`, doc, `{"e": [{"g": 2}, {}, 5, [{}]]}`},
		{``, `{"zz": 1}`, doc, `{"_id": 1}`},
		{``, `{"a.x": 1}`, doc, `{"_id": 1}`},
		{``, `{"x": "lit", "a": 1}`, doc, `{"_id": 1, "a": 1, "x": "lit"}`},
		{``, `{"a": "$b.c"}`, doc, `{"_id": 1, "a": 2}`},
		{``, `{"n.m": {"$literal": 1}, "_id": 0}`, doc, `{"n": {"m": 1}}`},
		{``, `{"s": {"$add": ["$a", 1]}, "_id": 0}`, doc, `{"s": 2}`},
		{``, `{"h": {"$slice": 2}, "_id": 0, "a": 0, "b": 0, "e": 0}`, doc, `{"h": [1, 2]}`},
		{``, `{"h": {"$slice": -2}, "a": 1}`, doc, `{"_id": 1, "a": 1, "h": [4, 5]}`},
		{``, `{"h": {"$slice": [1, 2]}, "_id": 0, "a": 1}`, doc, `{"a": 1, "h": [2, 3]}`},
		{``, `{"h": {"$slice": [-2, 5]}, "_id": 0, "a": 1}`, doc, `{"a": 1, "h": [4, 5]}`},
		{``, `{"h": {"$slice": [10, 5]}, "_id": 0, "a": 1}`, doc, `{"a": 1, "h": []}`},
		{``, `{"a": {"$slice": 1}, "_id": 0, "b": 0, "e": 0, "h": 0}`, doc, `{"a": 1}`},
		{``, `{"h": {"$slice": 1}}`, doc, `{"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1, "g": 2}, {"f": 3}, 5, [{"f": 4}]], "h": [1]}`},
		{``, `{"e": {"$elemMatch": {"f": {"$gt": 1}}}}`, doc, `{"_id": 1, "e": [{"f": 3}]}`},
		{``, `{"e": {"$elemMatch": {"f": 99}}}`, doc, `{"_id": 1}`},
		{``, `{"h": {"$elemMatch": {"$gt": 2}}, "_id": 0}`, doc, `{"h": [3]}`},
		{`{"h": {"$gt": 3}}`, `{"h.$": 1}`, doc, `{"_id": 1, "h": [4]}`},
		{`{"e.f": 3}`, `{"e.$": 1, "_id": 0}`, doc, `{"e": [{"f": 3}]}`},
		{`{"e.f": 3}`, `{"e.f.$": 1, "_id": 0}`, doc, `{"e": [{"f": 3}]}`},
		{`{"a": 1}`, `{"a.$": 1, "_id": 0}`, doc, `{"a": 1}`},
		{``, `{"r": {"$meta": "recordId"}, "a": 1}`, doc, `{"_id": 1, "a": 1}`},
	}
	for _, c := range cases {
		var m *Matcher
		var d MatchDetails
		if c.filter != "" {
			var err error
			if m, err = Parse(ej(t, c.filter), ParseOptions{}); err != nil {
				t.Fatal(err)
			}
			if ok, err := m.MatchesWithDetails(ej(t, c.doc), &d); !ok || err != nil {
				t.Fatalf("%s does not match: %v", c.filter, err)
			}
		}
		p, err := ParseProjection(ej(t, c.spec), m)
		if err != nil {
			t.Errorf("ParseProjection(%s): %v", c.spec, err)
			continue
		}
		out, err := p.Apply(ej(t, c.doc), &d, nil)
		if err != nil {
			t.Errorf("Apply(%s): %v", c.spec, err)
			continue
		}
		if err := bsoncore.Document(out).Validate(); err != nil {
			t.Errorf("%s: invalid output: %v", c.spec, err)
			continue
		}
		want := ej(t, c.want)
		if bsonutil.CompareDocuments(out, want) != 0 {
			t.Errorf("projection %s: got %s, want %s", c.spec, bson.Raw(out), bson.Raw(want))
		}
	}
}

func TestProjectionErrors(t *testing.T) {
	m, _ := Parse(ej(t, `{"a": 1}`), ParseOptions{})
	cases := []struct {
		spec string
		code mongoerr.Code
	}{
		{`{"a": 1, "b": 0}`, 31254},
		{`{"a": 0, "b": 1}`, 31253},
		{`{"a": 0, "b": "x"}`, 31252},
		{`{"a": 1, "a.b": 1}`, 31249},
		{`{"a.b": 1, "a": 1}`, 31250},
		{`{"a": {}}`, 51270},
		{`{"a.$": 1, "a.b.$": 1}`, 31276},
		{`{"a.$.b": 1}`, 31394},
		{`{"a": {"$slice": "x"}}`, 28667},
		{`{"a": {"$slice": [1, 0]}}`, 28724},
		{`{"a": {"$slice": [1]}}`, 28667},
		{`{"a": {"$elemMatch": 1}}`, 31274},
		{`{"a.b": {"$elemMatch": {"c": 1}}}`, 31275},
		{`{"a": {"$meta": "foo"}}`, 17308},
		{`{"a": {"$meta": "textScore"}}`, 40218},
		{`{"a": {"$foo": 1}}`, mongoerr.InvalidPipelineOperator},
		{`{"$a": 1}`, 16410},
		{`{"a..b": 1}`, mongoerr.Location15998},
	}
	for _, c := range cases {
		_, err := ParseProjection(ej(t, c.spec), m)
		if got := mongoerr.CodeOf(err); got != c.code {
			t.Errorf("ParseProjection(%s): got %v (%v), want %v", c.spec, got, err, c.code)
		}
	}
	if _, err := ParseProjection(ej(t, `{"a.$": 1}`), nil); mongoerr.CodeOf(err) != 51050 {
		t.Errorf("positional without a query: %v", err)
	}
	// A positional on a field the query does not constrain parses (MongoDB 7.0 dropped
	// that check); it fails per document with 51246 (below).
	if _, err := ParseProjection(ej(t, `{"b.$": 1}`), m); err != nil {
		t.Errorf("positional on a field the query does not constrain: %v", err)
	}
	for _, spec := range []string{`{"a.$": 1, "b": {"$elemMatch": {"c": 1}}}`, `{"b": {"$elemMatch": {"c": 1}}, "a.$": 1}`} {
		if _, err := ParseProjection(ej(t, spec), m); mongoerr.CodeOf(err) != 31255 {
			t.Errorf("%s: %v", spec, err)
		}
	}
	// Positional with no elemMatchKey over an array fails at execution.
	p, err := ParseProjection(ej(t, `{"a.$": 1}`), m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Apply(ej(t, `{"a": [1, 2]}`), &MatchDetails{}, nil); mongoerr.CodeOf(err) != 51246 {
		t.Errorf("positional without key: %v", err)
	}
}
