package oplog

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// randDoc builds a small random document with nested objects and arrays; keys are drawn
// from a tiny alphabet so pre and post images share, reorder, add and drop fields.
func randDoc(r *rand.Rand, depth int) bsoncore.Document {
	start, d := bsoncore.AppendDocumentStart(nil)
	seen := map[string]bool{}
	for range r.IntN(5) {
		k := string(rune('a' + r.IntN(5)))
		if seen[k] {
			continue
		}
		seen[k] = true
		d = bsoncore.AppendValueElement(d, k, randValue(r, depth))
	}
	d, _ = bsoncore.AppendDocumentEnd(d, start)
	return d
}

func randValue(r *rand.Rand, depth int) bsoncore.Value {
	switch n := r.IntN(6); {
	case n == 0 && depth < 3:
		return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: randDoc(r, depth+1)}
	case n == 1 && depth < 3:
		var vs []bsoncore.Value
		for range r.IntN(5) {
			vs = append(vs, randValue(r, depth+1))
		}
		return bsoncore.Value{Type: bsoncore.TypeArray, Data: bsoncore.BuildArray(nil, vs...)}
	case n == 2:
		return bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "s"+strconv.Itoa(r.IntN(3)))}
	default:
		return bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, int32(r.IntN(3)))}
	}
}

// TestDiffRoundTripAndIdempotent: apply(pre, diff(pre, post)) == post byte for byte, and
// applying the diff again to post changes nothing (idempotent entries).
func TestDiffRoundTripAndIdempotent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		pre, post := randDoc(r, 0), randDoc(r, 0)
		diff, err := DiffDocuments(pre, post)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ApplyDiff(pre, diff)
		if err != nil {
			t.Fatalf("case %d: apply: %v (pre %v post %v diff %v)", i, err, pre, post, diff)
		}
		if !bytes.Equal(got, post) {
			t.Fatalf("case %d: apply(pre, diff) = %v, want %v (pre %v, diff %v)", i, got, post, pre, diff)
		}
		again, err := ApplyDiff(post, diff)
		if err != nil || !bytes.Equal(again, post) {
			t.Fatalf("case %d: apply(post, diff) = %v, %v; want %v (diff %v)", i, again, err, post, diff)
		}
	}
}

func TestApplyDiffBadInput(t *testing.T) {
	doc := bsoncore.NewDocumentBuilder().AppendInt32("a", 1).Build()
	for _, diff := range []bsoncore.Document{
		bsoncore.NewDocumentBuilder().AppendInt32("u", 1).Build(),
		bsoncore.NewDocumentBuilder().AppendDocument("sa", bsoncore.NewDocumentBuilder().Build()).Build(),
		bsoncore.NewDocumentBuilder().AppendInt32("zz", 1).Build(),
		bsoncore.Document{1, 2, 3},
	} {
		if _, err := ApplyDiff(doc, diff); err == nil {
			t.Errorf("ApplyDiff(%v, %v) succeeded", doc, diff)
		}
	}
}

// TestArrayDiffLengthOnlyWhenShrinking: the array diff carries l only for a shorter array
// (MongoDB's differ; change streams report l as truncatedArrays); growth is u<n> entries.
func TestArrayDiffLengthOnlyWhenShrinking(t *testing.T) {
	arr := func(vs ...int32) bsoncore.Document {
		var vals []bsoncore.Value
		for _, v := range vs {
			vals = append(vals, bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, v)})
		}
		return bsoncore.NewDocumentBuilder().AppendArray("a", bsoncore.BuildArray(nil, vals...)).Build()
	}
	for _, tc := range []struct {
		pre, post bsoncore.Document
		want      string
	}{
		{arr(1, 2, 3, 4, 5, 6), arr(1, 2, 3, 4, 5, 6, 7), `{"sa": {"a": true,"u6": {"$numberInt":"7"}}}`},
		{arr(1, 2, 3, 4, 5, 6, 7), arr(1, 2, 3, 4, 5, 6), `{"sa": {"a": true,"l": {"$numberInt":"6"}}}`},
	} {
		diff, err := DiffDocuments(tc.pre, tc.post)
		if err != nil {
			t.Fatal(err)
		}
		if got := diff.String(); got != tc.want {
			t.Errorf("diff(%v, %v) = %s, want %s", tc.pre, tc.post, got, tc.want)
		}
		if got, err := ApplyDiff(tc.pre, diff); err != nil || !bytes.Equal(got, tc.post) {
			t.Errorf("apply = %v, %v; want %v", got, err, tc.post)
		}
	}
}

// TestDiffUpdateFollowsPaths: an operator update's diff follows the paths it named, as
// MongoDB's update log builder, whatever the sizes: {$set: {"a.1": 2}} is a sub-diff of a,
// {$set: {a: ...}} replaces a, a $push is its appended elements.
func TestDiffUpdateFollowsPaths(t *testing.T) {
	j := func(s string) bsoncore.Document {
		var d bsoncore.Document
		if err := bsonUnmarshalExtJSON(s, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		pre, post string
		paths     []string
		want      string
	}{
		{`{"_id": 1, "a": {"1": 1}}`, `{"_id": 1, "a": {"1": 2}}`, []string{"a.1"}, `{"sa": {"u": {"1": {"$numberInt":"2"}}}}`},
		{`{"_id": 1, "a": {"1": 1}}`, `{"_id": 1, "a": {"1": 2}}`, []string{"a"}, `{"u": {"a": {"1": {"$numberInt":"2"}}}}`},
		{`{"_id": 1, "a": [{"1": 1}]}`, `{"_id": 1, "a": [{"1": 2}]}`, []string{"a.0.1"}, `{"sa": {"a": true,"s0": {"u": {"1": {"$numberInt":"2"}}}}}`},
		{`{"_id": 1, "a": [{"b": 1}, {"b": 1}]}`, `{"_id": 1, "a": [{"b": 1}, {"b": 2}]}`, []string{"a.$[x].b"}, `{"sa": {"a": true,"s1": {"u": {"b": {"$numberInt":"2"}}}}}`},
		{`{"_id": 1, "a": [1]}`, `{"_id": 1, "a": [1, 2]}`, []string{"a"}, `{"sa": {"a": true,"u1": {"$numberInt":"2"}}}`},
		{`{"_id": 1, "a": [1, 2]}`, `{"_id": 1, "a": [2]}`, []string{"a"}, `{"u": {"a": [{"$numberInt":"2"}]}}`},
	} {
		pre, post := j(tc.pre), j(tc.post)
		diff, err := DiffUpdate(pre, post, tc.paths)
		if err != nil {
			t.Fatal(err)
		}
		if got := diff.String(); got != tc.want {
			t.Errorf("DiffUpdate(%s, %s, %v) = %s, want %s", tc.pre, tc.post, tc.paths, got, tc.want)
		}
		if got, err := ApplyDiff(pre, diff); err != nil || !bytes.Equal(got, post) {
			t.Errorf("apply = %v, %v; want %v", got, err, post)
		}
	}
}

func bsonUnmarshalExtJSON(s string, d *bsoncore.Document) error {
	var m bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &m); err != nil {
		return err
	}
	b, err := bson.Marshal(m)
	*d = b
	return err
}
