package query

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/collation"
)

func TestMatcherCollation(t *testing.T) {
	spec, _ := bson.Marshal(bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 2}})
	coll, err := collation.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		filter bson.D
		doc    bson.D
		want   bool
	}{
		{bson.D{{Key: "a", Value: "abc"}}, bson.D{{Key: "a", Value: "ABC"}}, true},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$ne", Value: "abc"}}}}, bson.D{{Key: "a", Value: "ABC"}}, false},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{"x", "ABC"}}}}}, bson.D{{Key: "a", Value: "abc"}}, true},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$nin", Value: bson.A{"abc"}}}}}, bson.D{{Key: "a", Value: "Abc"}}, false},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: "B"}}}}, bson.D{{Key: "a", Value: "b"}}, false},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: "B"}}}}, bson.D{{Key: "a", Value: "b"}}, true},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$lt", Value: "b"}}}}, bson.D{{Key: "a", Value: "A"}}, true},
		{bson.D{{Key: "a", Value: "abc"}}, bson.D{{Key: "a", Value: bson.A{"x", "ABC"}}}, true},
		{bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: "X"}}}}, bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: "x"}}}}, true},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "$eq", Value: "q"}}}}}}, bson.D{{Key: "a", Value: bson.A{"Q"}}}, true},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$regex", Value: "^abc$"}}}}, bson.D{{Key: "a", Value: "ABC"}}, false}, // regex ignores collation
		{bson.D{{Key: "a", Value: "é"}}, bson.D{{Key: "a", Value: "e"}}, false},                                       // strength 2 keeps accents
		{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 1.0}}, true},
	}
	for _, tc := range cases {
		f, _ := bson.Marshal(tc.filter)
		d, _ := bson.Marshal(tc.doc)
		m, err := Parse(f, ParseOptions{Collator: coll})
		if err != nil {
			t.Fatalf("%v: %v", tc.filter, err)
		}
		got, err := m.Matches(d)
		if err != nil || got != tc.want {
			t.Errorf("%v on %v = %v, %v; want %v", tc.filter, tc.doc, got, err, tc.want)
		}
		// Without the collation, case matters.
		if tc.want && tc.filter[0].Value == "abc" {
			m0, _ := Parse(f, ParseOptions{})
			if ok, _ := m0.Matches(d); ok {
				t.Errorf("%v matched %v without collation", tc.filter, tc.doc)
			}
		}
	}
}
