package shardkey

import (
	"bytes"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// rangesString renders ranges as "[min, max]" joined by " ".
func rangesString(rs []Range) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, "["+bsonutil.FormatDoc(r.Min)+", "+bsonutil.FormatDoc(r.Max)+"]")
	}
	return strings.Join(parts, " ")
}

// TestRanges pins getShardKeyRanges' results for the shapes MongoDB documents
// (shard_key_pattern_query_util_test.cpp's flattenBounds and targeting cases).
func TestRanges(t *testing.T) {
	a := MustParse(doc(t, bson.D{{Key: "a", Value: 1}}))
	ab := MustParse(doc(t, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}))
	h := MustParse(doc(t, bson.D{{Key: "a", Value: "hashed"}}))
	ah := MustParse(doc(t, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: "hashed"}}))
	const full1 = "[{ a: MinKey }, { a: MaxKey }]"
	for _, c := range []struct {
		p        *Pattern
		filter   bson.D
		collated bool
		want     string
	}{
		{a, bson.D{}, false, full1},
		{a, bson.D{{Key: "a", Value: 5}}, false, "[{ a: 5 }, { a: 5 }]"},
		{a, bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{3, 1, 2}}}}}, false,
			"[{ a: 1 }, { a: 1 }] [{ a: 2 }, { a: 2 }] [{ a: 3 }, { a: 3 }]"},
		{a, bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 5}}}}, false, "[{ a: 5 }, { a: inf.0 }]"},
		{a, bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 1}, {Key: "$lt", Value: 9}}}}, false, "[{ a: 1 }, { a: 9 }]"},
		{a, bson.D{{Key: "a", Value: nil}}, false, "[{ a: null }, { a: null }] [{ a: undefined }, { a: undefined }]"},
		{a, bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{}}}}}, false, ""},
		{a, bson.D{{Key: "b", Value: 5}}, false, full1},
		{a, bson.D{{Key: "a", Value: bson.D{{Key: "$ne", Value: 5}}}}, false, full1},
		{a, bson.D{{Key: "a", Value: "x"}}, false, `[{ a: "x" }, { a: "x" }]`},
		// A non-simple collation cannot use string bounds (the shard key index is simple).
		{a, bson.D{{Key: "a", Value: "x"}}, true, full1},
		{a, bson.D{{Key: "a", Value: 5}}, true, "[{ a: 5 }, { a: 5 }]"},
		{a, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 7}}}}}, false,
			"[{ a: 1 }, { a: 1 }] [{ a: 7 }, { a: 7 }]"},
		{a, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "b", Value: 7}}}}}, false,
			"[{ a: 1 }, { a: 1 }] " + full1},
		{a, bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 1}}}}, bson.D{{Key: "a", Value: bson.D{{Key: "$lt", Value: 4}}}}}}}, false,
			"[{ a: 1 }, { a: 4 }]"},
		// Compound: points on every field, a point prefix then a range, a range first.
		{ab, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 2}}, false, "[{ a: 1, b: 2 }, { a: 1, b: 2 }]"},
		{ab, bson.D{{Key: "a", Value: 1}}, false, "[{ a: 1, b: MinKey }, { a: 1, b: MaxKey }]"},
		{ab, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: bson.D{{Key: "$lt", Value: 3}}}}, false, "[{ a: 1, b: -inf.0 }, { a: 1, b: 3 }]"},
		{ab, bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}, {Key: "b", Value: bson.D{{Key: "$in", Value: bson.A{3, 4}}}}}, false,
			"[{ a: 1, b: 3 }, { a: 1, b: 4 }] [{ a: 2, b: 3 }, { a: 2, b: 4 }]"},
		{ab, bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 1}}}, {Key: "b", Value: 2}}, false, "[{ a: 1, b: 2 }, { a: inf.0, b: 2 }]"},
		{ab, bson.D{{Key: "b", Value: 2}}, false, "[{ a: MinKey, b: 2 }, { a: MaxKey, b: 2 }]"},
		// Hashed: equalities become points on the hash; ranges give the full range.
		{h, bson.D{{Key: "a", Value: 1}}, false, "[{ a: 5902408780260971510 }, { a: 5902408780260971510 }]"},
		{h, bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{0, 1}}}}}, false,
			"[{ a: 4854801880128277513 }, { a: 4854801880128277513 }] [{ a: 5902408780260971510 }, { a: 5902408780260971510 }]"},
		{h, bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 1}}}}, false, full1},
		{ah, bson.D{{Key: "a", Value: 2}, {Key: "b", Value: 1}}, false, "[{ a: 2, b: 5902408780260971510 }, { a: 2, b: 5902408780260971510 }]"},
		{ah, bson.D{{Key: "a", Value: 2}, {Key: "b", Value: bson.D{{Key: "$gt", Value: 1}}}}, false, "[{ a: 2, b: MinKey }, { a: 2, b: MaxKey }]"},
	} {
		rs, err := c.p.Ranges(doc(t, c.filter), c.collated)
		if err != nil {
			t.Errorf("%s Ranges(%v): %v", c.p, c.filter, err)
			continue
		}
		if got := rangesString(rs); got != c.want {
			t.Errorf("%s Ranges(%v, collated %v)\n got %s\nwant %s", c.p, c.filter, c.collated, got, c.want)
		}
	}
}

func TestRangesExpansionAndErrors(t *testing.T) {
	p := MustParse(doc(t, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}))
	// The limit applies to the $in expansion of one field times the ranges before it.
	in := bson.A{}
	for i := 0; i < 3000; i++ {
		in = append(in, i)
	}
	rs, err := p.Ranges(doc(t, bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: in}}}, {Key: "b", Value: bson.D{{Key: "$in", Value: in}}}}), false)
	if err != nil || len(rs) != 3000 {
		t.Fatalf("got %d ranges, %v; want 3000 (only the first field expands)", len(rs), err)
	}
	if _, err := p.Ranges(doc(t, bson.D{{Key: "a", Value: bson.D{{Key: "$bad", Value: 1}}}}), false); !mongoerr.Is(err, mongoerr.BadValue) {
		t.Errorf("bad filter: %v", err)
	}
}

func TestKeyFromEqualities(t *testing.T) {
	p := MustParse(doc(t, bson.D{{Key: "g", Value: 1}, {Key: "_id", Value: 1}}))
	for _, c := range []struct {
		filter   bson.D
		collated bool
		want     bson.D // nil: no exact key
	}{
		{bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: 2}}, false, bson.D{{Key: "g", Value: 2}, {Key: "_id", Value: 1}}},
		// An equality to null is exact: a missing shard key field is null.
		{bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: nil}}, false, bson.D{{Key: "g", Value: nil}, {Key: "_id", Value: 1}}},
		{bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "g", Value: bson.D{{Key: "$eq", Value: 3}}}}, bson.D{{Key: "_id", Value: "x"}}}}}, false,
			bson.D{{Key: "g", Value: 3}, {Key: "_id", Value: "x"}}},
		{bson.D{{Key: "_id", Value: "x"}, {Key: "g", Value: 3}}, true, nil},
		{bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: 3}}, true, bson.D{{Key: "g", Value: 3}, {Key: "_id", Value: 1}}},
		{bson.D{{Key: "_id", Value: 1}}, false, nil},
		{bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: bson.D{{Key: "$gt", Value: 1}}}}, false, nil},
		{bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: bson.A{1}}}, false, nil},
		{bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: bson.Regex{Pattern: "a"}}}, false, nil},
	} {
		got, ok := p.KeyFromEqualities(doc(t, c.filter), c.collated)
		if c.want == nil {
			if ok {
				t.Errorf("%v: got key %v, want none", c.filter, got)
			}
			continue
		}
		if !ok || !bytes.Equal(got, doc(t, c.want)) {
			t.Errorf("%v: got %v (%v), want %v", c.filter, got, ok, c.want)
		}
	}
	h := MustParse(doc(t, bson.D{{Key: "_id", Value: "hashed"}}))
	got, ok := h.KeyFromEqualities(doc(t, bson.D{{Key: "_id", Value: 5}}), false)
	want, _ := h.ExtractKey(doc(t, bson.D{{Key: "_id", Value: 5}}))
	if !ok || !bytes.Equal(got, want) {
		t.Errorf("hashed: %v, want %v", got, want)
	}
}
