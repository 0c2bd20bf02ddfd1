package index

import (
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// el and d are test shorthands for ordered documents (local types, so unkeyed literals stay
// vet-clean); a is an array. toBSON converts them recursively for the driver.
type el struct {
	k string
	v any
}
type d []el
type a []any

func toBSON(x any) any {
	switch x := x.(type) {
	case d:
		out := make(bson.D, len(x))
		for i, e := range x {
			out[i] = bson.E{Key: e.k, Value: toBSON(e.v)}
		}
		return out
	case a:
		out := make(bson.A, len(x))
		for i, v := range x {
			out[i] = toBSON(v)
		}
		return out
	}
	return x
}

// doc marshals a test document.
func doc(t testing.TB, dd d) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(toBSON(dd))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// renderKeys renders a KeySet as sorted, deduplicated strings "v1,v2" (test inputs avoid
// numerically-equal values of different types, which the KeyString layer deduplicates).
func renderKeys(ks *KeySet) []string {
	var out []string
	for i := 0; i < ks.Len(); i++ {
		var parts []string
		for _, v := range ks.Key(i) {
			parts = append(parts, v.String())
		}
		out = append(out, strings.Join(parts, ","))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestKeyGeneration(t *testing.T) {
	cases := []struct {
		name     string
		pattern  d
		sparse   bool
		doc      d
		keys     []string // nil: skipped
		multikey []uint64 // per field component masks; nil means all zero
		errCode  mongoerr.Code
		errMsg   string
	}{
		{name: "scalar", pattern: d{{"a", 1}}, doc: d{{"a", 1}}, keys: []string{`{"$numberInt":"1"}`}},
		{name: "missing is null", pattern: d{{"a", 1}}, doc: d{{"b", 1}}, keys: []string{`null`}},
		{name: "array fans out", pattern: d{{"a", 1}}, doc: d{{"a", a{3, 1, 2}}},
			keys: []string{`{"$numberInt":"1"}`, `{"$numberInt":"2"}`, `{"$numberInt":"3"}`}, multikey: []uint64{1}},
		{name: "array dedup still multikey", pattern: d{{"a", 1}}, doc: d{{"a", a{1, 1}}},
			keys: []string{`{"$numberInt":"1"}`}, multikey: []uint64{1}},
		{name: "empty array is undefined", pattern: d{{"a", 1}}, doc: d{{"a", a{}}},
			keys: []string{`{"$undefined":true}`}, multikey: []uint64{1}},
		{name: "nested array indexed whole", pattern: d{{"a", 1}}, doc: d{{"a", a{a{1, 2}, 3}}},
			keys: []string{`[{"$numberInt":"1"},{"$numberInt":"2"}]`, `{"$numberInt":"3"}`}, multikey: []uint64{1}},
		{name: "dotted into doc", pattern: d{{"a.b", 1}}, doc: d{{"a", d{{"b", "x"}}}}, keys: []string{`"x"`}},
		{name: "dotted through scalar", pattern: d{{"a.b", 1}}, doc: d{{"a", 5}}, keys: []string{`null`}},
		{name: "dotted into array of docs", pattern: d{{"a.b", 1}},
			doc:  d{{"a", a{d{{"b", 1}}, d{{"b", a{2, 3}}}}}},
			keys: []string{`{"$numberInt":"1"}`, `{"$numberInt":"2"}`, `{"$numberInt":"3"}`}, multikey: []uint64{0b11}},
		{name: "dotted array missing in some", pattern: d{{"a.b", 1}},
			doc:  d{{"a", a{d{{"b", 1}}, d{{"c", 2}}, 7}}},
			keys: []string{`null`, `{"$numberInt":"1"}`}, multikey: []uint64{0b01}},
		{name: "array of arrays not traversed", pattern: d{{"a.b", 1}}, doc: d{{"a", a{a{d{{"b", 1}}}}}},
			keys: []string{`null`}, multikey: []uint64{0b01}},
		{name: "empty array mid path", pattern: d{{"a.b.c", 1}},
			doc:  d{{"a", a{d{{"b", a{}}}, d{{"b", 1}}}}},
			keys: []string{`null`}, multikey: []uint64{0b011}},
		{name: "compound one array", pattern: d{{"a", 1}, {"b", -1}}, doc: d{{"a", a{1, 2}}, {"b", "z"}},
			keys: []string{`{"$numberInt":"1"},"z"`, `{"$numberInt":"2"},"z"`}, multikey: []uint64{1, 0}},
		{name: "compound same array", pattern: d{{"a.b", 1}, {"a.c", 1}},
			doc:  d{{"a", a{d{{"b", 1}, {"c", 2}}, d{{"b", 3}, {"c", 4}}}}},
			keys: []string{`{"$numberInt":"1"},{"$numberInt":"2"}`, `{"$numberInt":"3"},{"$numberInt":"4"}`}, multikey: []uint64{1, 1}},
		{name: "parallel arrays", pattern: d{{"a", 1}, {"b", 1}}, doc: d{{"a", a{1, 2, 3}}, {"b", a{4, 5, 6}}},
			errCode: mongoerr.CannotIndexParallelArrays, errMsg: "cannot index parallel arrays [b] [a]"},
		{name: "parallel arrays nested", pattern: d{{"a.x", 1}, {"a.y", 1}},
			doc:     d{{"a", a{d{{"x", a{1, 2}}, {"y", a{3}}}}}},
			errCode: mongoerr.CannotIndexParallelArrays, errMsg: "cannot index parallel arrays [y] [x]"},
		{name: "positional", pattern: d{{"a.0", 1}}, doc: d{{"a", a{5, 6}}}, keys: []string{`{"$numberInt":"5"}`}},
		{name: "positional into doc", pattern: d{{"a.1.b", 1}}, doc: d{{"a", a{d{{"b", 1}}, d{{"b", 2}}}}},
			keys: []string{`{"$numberInt":"2"}`}},
		{name: "sparse skips missing", pattern: d{{"a", 1}}, sparse: true, doc: d{{"b", 1}}, keys: nil},
		{name: "sparse keeps null", pattern: d{{"a", 1}}, sparse: true, doc: d{{"a", nil}}, keys: []string{`null`}},
		{name: "sparse compound partial", pattern: d{{"a", 1}, {"b", 1}}, sparse: true, doc: d{{"a", 1}},
			keys: []string{`{"$numberInt":"1"},null`}},
		{name: "hashed", pattern: d{{"a", "hashed"}}, doc: d{{"a", int64(0)}},
			keys: []string{`{"$numberLong":"4854801880128277513"}`}},
		{name: "hashed missing is hash of null", pattern: d{{"a", "hashed"}, {"b", 1}}, doc: d{{"b", 2}},
			keys: []string{`{"$numberLong":"2338878944348059895"},{"$numberInt":"2"}`}},
		{name: "hashed sparse", pattern: d{{"a", "hashed"}}, sparse: true, doc: d{{"b", 2}}, keys: nil},
		{name: "hashed array", pattern: d{{"a.b", "hashed"}}, doc: d{{"a", a{1}}},
			errCode: 16766, errMsg: "Found array at path: a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := NewKeyGenerator(doc(t, c.pattern), KeyGenOptions{Sparse: c.sparse})
			if err != nil {
				t.Fatal(err)
			}
			var ks KeySet
			err = g.GetKeys(doc(t, c.doc), &ks)
			if c.errCode != 0 {
				if mongoerr.CodeOf(err) != c.errCode || !strings.Contains(err.Error(), c.errMsg) {
					t.Fatalf("err = %v, want %d %q", err, c.errCode, c.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := renderKeys(&ks)
			if c.keys == nil {
				if len(got) != 0 || !ks.Skipped {
					t.Fatalf("expected skipped doc, got %v", got)
				}
				return
			}
			if !slices.Equal(got, c.keys) {
				t.Fatalf("keys = %v\nwant   %v", got, c.keys)
			}
			for i := 0; i < g.NumFields(); i++ {
				var want uint64
				if c.multikey != nil {
					want = c.multikey[i]
				}
				if ks.MultikeyComponents(i) != want {
					t.Fatalf("field %d multikey components %b, want %b", i, ks.MultikeyComponents(i), want)
				}
			}
		})
	}
}

func TestKeyPatternValidation(t *testing.T) {
	var many d
	for i := 0; i < 33; i++ {
		many = append(many, el{strings.Repeat("f", i+1), 1})
	}
	for _, p := range []d{many, {}, {{"a", 0}}, {{"a", "text"}}, {{"a", "hashed"}, {"b", "hashed"}}, {{"a..b", 1}}, {{"a", true}}} {
		if _, err := NewKeyGenerator(doc(t, p), KeyGenOptions{}); mongoerr.CodeOf(err) != mongoerr.CannotCreateIndex {
			t.Errorf("pattern %v: err %v, want CannotCreateIndex", p, err)
		}
	}
	if _, err := NewKeyGenerator(doc(t, many[:32]), KeyGenOptions{}); err != nil {
		t.Errorf("32 fields must be allowed: %v", err)
	}
}

// TestKeyGenCorruptInput feeds truncated and mangled documents: errors, never panics.
func TestKeyGenCorruptInput(t *testing.T) {
	g, err := NewKeyGenerator(doc(t, d{{"a.b", 1}, {"c", 1}}), KeyGenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good := doc(t, d{{"a", a{d{{"b", 1}}, d{{"b", "xyz"}}}}, {"c", 2}})
	var ks KeySet
	for i := 0; i < len(good); i++ {
		bad := slices.Clone(good[:i])
		_ = g.GetKeys(bad, &ks)
		bad2 := slices.Clone(good)
		bad2[i] ^= 0x5a
		_ = g.GetKeys(bad2, &ks)
	}
}

type filterFunc func(bsoncore.Document) (bool, error)

func (f filterFunc) Matches(doc bsoncore.Document) (bool, error) { return f(doc) }

func TestPartialFilter(t *testing.T) {
	f := filterFunc(func(doc bsoncore.Document) (bool, error) {
		_, err := doc.LookupErr("keep")
		return err == nil, nil
	})
	g, err := NewKeyGenerator(doc(t, d{{"a", 1}}), KeyGenOptions{Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	var ks KeySet
	if err := g.GetKeys(doc(t, d{{"a", 1}}), &ks); err != nil || !ks.Skipped || ks.Len() != 0 {
		t.Fatalf("filtered doc indexed: %v %v", err, ks.Len())
	}
	if err := g.GetKeys(doc(t, d{{"a", 1}, {"keep", true}}), &ks); err != nil || ks.Skipped || ks.Len() != 1 {
		t.Fatalf("matching doc not indexed: %v %v", err, ks.Len())
	}
}

func BenchmarkGetKeys(b *testing.B) {
	g, _ := NewKeyGenerator(doc(b, d{{"a", 1}, {"b.c", -1}}), KeyGenOptions{})
	dd := doc(b, d{{"_id", 1}, {"x", "some string"}, {"a", 42}, {"b", d{{"c", "hello"}}}})
	var ks KeySet
	b.ReportAllocs()
	for b.Loop() {
		if err := g.GetKeys(dd, &ks); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzGetKeys: arbitrary bytes as a document never panic the key generators.
func FuzzGetKeys(f *testing.F) {
	f.Add([]byte(doc(f, d{{"a", a{d{{"b", 1}}, d{{"b", a{2, 3}}}}}, {"c", "x"}})))
	f.Add([]byte(doc(f, d{{"a", a{a{1, 2}, 3}}, {"c", a{}}})))
	var gens []*KeyGenerator
	for _, p := range []d{{{"a.b", 1}, {"c", -1}}, {{"a.0", 1}}, {{"a.b", "hashed"}, {"c", 1}}, {{"a", 1}, {"c", 1}}} {
		g, err := NewKeyGenerator(doc(f, p), KeyGenOptions{Sparse: true})
		if err != nil {
			f.Fatal(err)
		}
		gens = append(gens, g)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var ks KeySet
		for _, g := range gens {
			_ = g.GetKeys(b, &ks)
		}
		_, _ = Hash64(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: b}, 0)
		_ = FormatDoc(b)
	})
}
