package query

import (
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// TestNullQuerySemantics is MongoDB 7.0's jstests/core/null_query_semantics.js (the
// collection-scan half): every query's result set over the same documents.
func TestNullQuerySemantics(t *testing.T) {
	const u = `{"$undefined": true}`
	docs := map[string]string{
		"a_empty_subobject":               `{"a": {}}`,
		"a_null":                          `{"a": null}`,
		"a_number":                        `{"a": 4}`,
		"a_subobject_b_not_null":          `{"a": {"b": "hi"}}`,
		"a_subobject_b_null":              `{"a": {"b": null}}`,
		"a_subobject_b_undefined":         `{"a": {"b": ` + u + `}}`,
		"a_undefined":                     `{"a": ` + u + `}`,
		"no_a":                            `{}`,
		"a_double_array":                  `{"a": [[]]}`,
		"a_empty_array":                   `{"a": []}`,
		"a_object_array_all_b_nulls":      `{"a": [{"b": null}, {"b": ` + u + `}, {"b": null}, {}]}`,
		"a_object_array_no_b_nulls":       `{"a": [{"b": 1}, {"b": 3}, {"b": "string"}]}`,
		"a_object_array_some_b_nulls":     `{"a": [{"b": null}, {"b": 3}, {"b": null}]}`,
		"a_object_array_some_b_undefined": `{"a": [{"b": ` + u + `}, {"b": 3}]}`,
		"a_object_array_some_b_missing":   `{"a": [{"b": 3}, {}]}`,
		"a_value_array_all_nulls":         `{"a": [null, null]}`,
		"a_value_array_no_nulls":          `{"a": [1, "string", 4]}`,
		"a_value_array_with_null":         `{"a": [1, "string", null, 4]}`,
		"a_value_array_with_undefined":    `{"a": [1, "string", ` + u + `, 4]}`,
	}
	parsed := map[string]bsoncore.Document{}
	for id, d := range docs {
		parsed[id] = ej(t, d)
	}
	const (
		scalarNulls  = "a_null a_undefined no_a"
		objNotArrays = "a_empty_subobject a_number a_subobject_b_not_null a_subobject_b_null a_subobject_b_undefined"
		objArrays    = "a_double_array a_empty_array a_object_array_all_b_nulls a_object_array_no_b_nulls a_object_array_some_b_nulls a_object_array_some_b_undefined a_object_array_some_b_missing"
		dottedNull   = "a_empty_subobject a_null a_number a_subobject_b_null a_subobject_b_undefined a_undefined no_a a_object_array_all_b_nulls a_object_array_some_b_nulls a_object_array_some_b_undefined a_object_array_some_b_missing"
		dottedNotNul = "a_subobject_b_not_null a_double_array a_empty_array a_object_array_no_b_nulls a_value_array_all_nulls a_value_array_no_nulls a_value_array_with_null a_value_array_with_undefined"
	)
	cases := []struct{ filter, want string }{
		{`{"a": {"$eq": null}}`, scalarNulls + " a_value_array_all_nulls a_value_array_with_null a_value_array_with_undefined"},
		{`{"a": {"$ne": null}}`, objNotArrays + " " + objArrays + " a_value_array_no_nulls"},
		{`{"a": {"$not": {"$gte": null}}}`, objNotArrays + " " + objArrays + " a_value_array_no_nulls"},
		{`{"a": {"$in": [null, 75]}}`, scalarNulls + " a_value_array_all_nulls a_value_array_with_null a_value_array_with_undefined"},
		{`{"$or": [{"a": null}, {"a": 75}]}`, scalarNulls + " a_value_array_all_nulls a_value_array_with_null a_value_array_with_undefined"},
		{`{"a": {"$nin": [null, 75]}}`, objNotArrays + " " + objArrays + " a_value_array_no_nulls"},
		{`{"a": {"$nin": [null, ` + re("^str.*", "") + `]}}`, objNotArrays + " " + objArrays},
		{`{"a": {"$exists": false}}`, "no_a"},
		{`{"a": {"$elemMatch": {"$eq": null}}}`, "a_value_array_all_nulls a_value_array_with_null a_value_array_with_undefined"},
		{`{"a": {"$elemMatch": {"$ne": null}}}`, "a_double_array a_object_array_all_b_nulls a_object_array_no_b_nulls a_object_array_some_b_nulls a_object_array_some_b_undefined a_object_array_some_b_missing a_value_array_no_nulls a_value_array_with_undefined a_value_array_with_null"},
		{`{"a.b": {"$eq": null}}`, dottedNull},
		{`{"a.b": {"$in": [null, 75]}}`, dottedNull},
		{`{"$or": [{"a.b": null}, {"a.b": 75}]}`, dottedNull},
		{`{"a.b": {"$ne": null}}`, dottedNotNul},
		{`{"a.b": {"$nin": [null, 75]}}`, dottedNotNul},
		{`{"a.b": {"$nin": [null, ` + re("^str.*", "") + `]}}`, "a_subobject_b_not_null a_double_array a_empty_array a_value_array_all_nulls a_value_array_no_nulls a_value_array_with_null a_value_array_with_undefined"},
		{`{"a.b": {"$exists": false}}`, "no_a a_empty_subobject a_null a_number a_undefined a_double_array a_empty_array a_value_array_all_nulls a_value_array_no_nulls a_value_array_with_null a_value_array_with_undefined"}, // $exists: false is NOT $exists: true
		{`{"a.b": {"$elemMatch": {"$eq": null}}}`, ""},
		{`{"a.b": {"$elemMatch": {"$ne": null}}}`, ""},
		{`{"a": {"$elemMatch": {"b": {"$eq": null}}}}`, "a_double_array a_object_array_all_b_nulls a_object_array_some_b_nulls a_object_array_some_b_undefined a_object_array_some_b_missing"},
		{`{"a": {"$elemMatch": {"b": {"$ne": null}}}}`, "a_object_array_no_b_nulls a_object_array_some_b_nulls a_object_array_some_b_undefined a_object_array_some_b_missing"},
	}
	for _, c := range cases {
		m, err := Parse(ej(t, c.filter), ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.filter, err)
		}
		var got []string
		for id, d := range parsed {
			ok, err := m.Matches(d)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				got = append(got, id)
			}
		}
		want := strings.Fields(c.want)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got  %v\n want %v", c.filter, got, want)
		}
	}
}
