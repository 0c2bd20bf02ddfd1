package event

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestUpdateDescriptionFromDiff: MongoDB's change_stream_document_diff_parser cases
// (document_source_change_stream_test.cpp and change_stream_document_diff_parser_test.cpp).
func TestUpdateDescriptionFromDiff(t *testing.T) {
	for _, tc := range []struct {
		name string
		diff string
		want string // with disambiguatedPaths (expanded events)
	}{
		{"updated and inserted fields", `{"u": {"a": 1, "b": "updated"}, "i": {"c": 2}}`,
			`{"updatedFields": {"a": 1, "b": "updated", "c": 2}, "removedFields": [], "truncatedArrays": [], "disambiguatedPaths": {}}`},
		{"removed fields", `{"d": {"a": false, "b": false}}`,
			`{"updatedFields": {}, "removedFields": ["a", "b"], "truncatedArrays": [], "disambiguatedPaths": {}}`},
		{"sub object", `{"u": {"c": 1}, "ssubObj": {"d": {"a": false, "b": false}, "u": {"c": 1, "d": "updated"}}}`,
			`{"updatedFields": {"c": 1, "subObj.c": 1, "subObj.d": "updated"}, "removedFields": ["subObj.a", "subObj.b"], "truncatedArrays": [], "disambiguatedPaths": {}}`},
		{"sub arrays", `{"sarrField": {"a": true, "l": 10, "u0": 1, "u1": {"a": 1}}, "sarrField2": {"a": true, "l": 20}}`,
			`{"updatedFields": {"arrField.0": 1, "arrField.1": {"a": 1}}, "removedFields": [], "truncatedArrays": [{"field": "arrField", "newSize": 10}, {"field": "arrField2", "newSize": 20}], "disambiguatedPaths": {}}`},
		{"empty field name", `{"s": {"a": true, "l": 10, "u0": 1, "u1": {"a": 1}}}`,
			`{"updatedFields": {".0": 1, ".1": {"a": 1}}, "removedFields": [], "truncatedArrays": [{"field": "", "newSize": 10}], "disambiguatedPaths": {}}`},
		{"nested", `{"u": {"a": 1, "b": 2}, "sarrField": {"a": true, "l": 10, "u0": 1, "u1": {"a": 1}, "s2": {"u": {"a": 1}}, "u4": 1, "u6": 2}, "ssubObj": {"d": {"b": false}, "u": {"a": 1}}}`,
			`{"updatedFields": {"a": 1, "b": 2, "arrField.0": 1, "arrField.1": {"a": 1}, "arrField.2.a": 1, "arrField.4": 1, "arrField.6": 2, "subObj.a": 1}, "removedFields": ["subObj.b"], "truncatedArrays": [{"field": "arrField", "newSize": 10}], "disambiguatedPaths": {}}`},
		{"growth is updated fields, not truncation", `{"sarr": {"a": true, "u3": 4}}`,
			`{"updatedFields": {"arr.3": 4}, "removedFields": [], "truncatedArrays": [], "disambiguatedPaths": {}}`},
		{"dotted and numeric names are disambiguated", `{"u": {"a.b": 1, "0": 2}, "sx": {"u": {"1": 3}, "d": {"c.d": false}, "sarr": {"a": true, "l": 1, "s0": {"u": {"y": 4}}}}, "sq.r": {"sarr": {"a": true, "u0": 5}}}`,
			`{"updatedFields": {"a.b": 1, "0": 2, "x.1": 3, "x.arr.0.y": 4, "q.r.arr.0": 5}, "removedFields": ["x.c.d"], "truncatedArrays": [{"field": "x.arr", "newSize": 1}],` +
				` "disambiguatedPaths": {"a.b": ["a.b"], "x.1": ["x", "1"], "x.c.d": ["x", "c.d"], "q.r.arr.0": ["q.r", "arr", 0]}}`},
		{"leading zero is a field name, not an index", `{"sx": {"u": {"01": 1}}}`,
			`{"updatedFields": {"x.01": 1}, "removedFields": [], "truncatedArrays": [], "disambiguatedPaths": {}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var diff bson.Raw
			if err := bson.UnmarshalExtJSON([]byte(tc.diff), false, &diff); err != nil {
				t.Fatal(err)
			}
			var want bson.Raw
			if err := bson.UnmarshalExtJSON([]byte(tc.want), false, &want); err != nil {
				t.Fatal(err)
			}
			out, err := appendUpdateDescription(nil, []byte(diff), true)
			if err != nil {
				t.Fatal(err)
			}
			// out is the element updateDescription: {...}; its value follows the type byte and key.
			if gotDoc := bson.Raw(out[1+len("updateDescription")+1:]); string(gotDoc) != string(want) {
				t.Errorf("\n got  %s\n want %s", gotDoc, want)
			}
			// Without expanded events: no disambiguatedPaths.
			out, _ = appendUpdateDescription(nil, []byte(diff), false)
			if _, err := bson.Raw(out[1+len("updateDescription")+1:]).LookupErr("disambiguatedPaths"); err == nil {
				t.Error("disambiguatedPaths without expanded events")
			}
		})
	}
}

func TestBadDiffs(t *testing.T) {
	for _, d := range []string{
		`{"u": 1}`, `{"x": {}}`, `{"sa": 1}`, `{"sa": {"a": true, "l": -1}}`, `{"sa": {"a": true, "ux": 1}}`,
		`{"sa": {"a": true, "q1": 1}}`, `{"sa": {"a": true, "s1": 5}}`,
	} {
		var diff bson.Raw
		if err := bson.UnmarshalExtJSON([]byte(d), false, &diff); err != nil {
			t.Fatal(err)
		}
		if _, err := appendUpdateDescription(nil, []byte(diff), true); err == nil {
			t.Errorf("diff %s accepted", d)
		}
	}
}
