package matchertest

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/query"
	"humongo/internal/query/update"
)

func j(t *testing.T, s string) bsoncore.Document {
	t.Helper()
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &raw); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	return bsoncore.Document(raw)
}

// matcherHook adapts query.Parse to update.FilterParser.
func matcherHook(f bsoncore.Document) (update.Filter, error) {
	m, err := query.Parse(f, query.ParseOptions{})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func TestWithMatcher(t *testing.T) {
	cases := []struct {
		name, doc, update, want string
		filters                 []string
	}{
		{name: "pull condition", doc: `{"_id":1,"a":[1,5,7,2]}`, update: `{"$pull":{"a":{"$gte":5}}}`, want: `{"_id":1,"a":[1,2]}`},
		{name: "pull in", doc: `{"_id":1,"a":["x","y","z"]}`, update: `{"$pull":{"a":{"$in":["x","z"]}}}`, want: `{"_id":1,"a":["y"]}`},
		{name: "pull doc query", doc: `{"_id":1,"a":[{"s":1,"t":"x"},{"s":5,"t":"x"},3]}`, update: `{"$pull":{"a":{"s":{"$gt":2},"t":"x"}}}`, want: `{"_id":1,"a":[{"s":1,"t":"x"},3]}`},
		{name: "pull elemMatch style", doc: `{"_id":1,"a":[{"r":[1,2]},{"r":[3]}]}`, update: `{"$pull":{"a":{"r":3}}}`, want: `{"_id":1,"a":[{"r":[1,2]}]}`},
		{name: "pull regex", doc: `{"_id":1,"a":["apple","banana"]}`, update: `{"$pull":{"a":{"$regularExpression":{"pattern":"^a","options":""}}}}`, want: `{"_id":1,"a":["banana"]}`},
		{name: "array filter scalar", doc: `{"_id":1,"a":[1,6,3,9]}`, update: `{"$set":{"a.$[x]":0}}`, filters: []string{`{"x":{"$gt":5}}`}, want: `{"_id":1,"a":[1,0,3,0]}`},
		{name: "array filter doc fields", doc: `{"_id":1,"g":[{"k":"a","n":1},{"k":"b","n":2}]}`, update: `{"$inc":{"g.$[e].n":10}}`, filters: []string{`{"e.k":"b","e.n":{"$lt":5}}`}, want: `{"_id":1,"g":[{"k":"a","n":1},{"k":"b","n":12}]}`},
		{name: "nested filters", doc: `{"_id":1,"a":[{"t":1,"b":[{"v":1},{"v":2}]},{"t":2,"b":[{"v":2}]}]}`, update: `{"$set":{"a.$[i].b.$[j].v":0}}`,
			filters: []string{`{"i.t":2}`, `{"j.v":{"$gte":2}}`}, want: `{"_id":1,"a":[{"t":1,"b":[{"v":1},{"v":2}]},{"t":2,"b":[{"v":0}]}]}`},
		{name: "filter with or", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$set":{"a.$[x]":0}}`, filters: []string{`{"$or":[{"x":1},{"x":3}]}`}, want: `{"_id":1,"a":[0,2,0]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var fs []bsoncore.Document
			for _, f := range c.filters {
				fs = append(fs, j(t, f))
			}
			u, err := update.Parse(j(t, c.update), update.ParseOptions{ArrayFilters: fs, ArrayFilterParser: matcherHook})
			if err != nil {
				t.Fatal(err)
			}
			got, changed, err := u.Apply(j(t, c.doc), update.ApplyContext{})
			if err != nil {
				t.Fatal(err)
			}
			if want := j(t, c.want); !bytes.Equal(got, want) || !changed {
				t.Fatalf("got %s (changed %v)\nwant %s", bson.Raw(got), changed, bson.Raw(want))
			}
		})
	}
}
