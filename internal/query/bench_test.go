package query

import (
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil/bsontest"
)

var benchDoc = `{"_id": {"$oid": "5f1a2b3c4d5e6f7a8b9c0d1e"}, "name": "alice", "age": 42, "city": "Paris",
	"tags": ["a", "b", "c"], "addr": {"zip": "75001", "street": "rue x"}, "score": 12.5}`

func benchMatch(b *testing.B, filter string) {
	m, err := Parse(ej(b, filter), ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	doc := ej(b, benchDoc)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if ok, _ := m.Matches(doc); !ok {
			b.Fatal("no match")
		}
	}
}

func BenchmarkMatchEq(b *testing.B) { benchMatch(b, `{"addr.zip": "75001", "name": "alice"}`) }
func BenchmarkMatchRange(b *testing.B) {
	benchMatch(b, `{"age": {"$gte": 18, "$lt": 65}, "score": {"$gt": 10}}`)
}
func BenchmarkMatchInArray(b *testing.B) { benchMatch(b, `{"tags": {"$in": ["x", "y", "c"]}}`) }

// TestMatchDoesNotAllocate pins the zero-allocation property the benchmarks report.
func TestMatchDoesNotAllocate(t *testing.T) {
	for _, f := range []string{`{"addr.zip": "75001", "name": "alice"}`,
		`{"age": {"$gte": 18, "$lt": 65}, "score": {"$gt": 10}}`,
		`{"tags": {"$in": ["x", "y", "c"]}, "city": {"$exists": true}, "age": {"$type": "number"}}`} {
		m, err := Parse(ej(t, f), ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		doc := ej(t, benchDoc)
		if n := testing.AllocsPerRun(100, func() { _, _ = m.Matches(doc) }); n != 0 {
			t.Errorf("%s: %v allocs per match", f, n)
		}
	}
}

// FuzzParseMatch parses arbitrary bytes as a filter and matches arbitrary bytes: nothing may
// panic, whatever the input.
func FuzzParseMatch(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	seeds := []string{`{"a": 1}`, `{"a.b": {"$gt": 1}}`, `{"a": {"$elemMatch": {"b": {"$in": [1, null]}}}}`,
		`{"$or": [{"a": {"$type": "number"}}, {"b": {"$mod": [3, 1]}}]}`,
		`{"$expr": {"$gt": [{"$add": ["$a", 1]}, "$b"]}}`,
		`{"a": {"$bitsAllSet": [1, 70]}, "b": {"$size": 2}, "c": {"$all": [1, 2]}}`,
		`{"$jsonSchema": {"properties": {"a": {"type": "array", "items": {"minimum": 1}}}}}`}
	for _, s := range seeds {
		f.Add([]byte(ej(f, s)), []byte(bsontest.D("a", bsontest.RandomValue(r, 3), "b", bsontest.RandomValue(r, 3))))
	}
	f.Fuzz(func(t *testing.T, filter, doc []byte) {
		m, err := Parse(bsoncore.Document(filter), ParseOptions{AllowExpr: true, AllowJSONSchema: true})
		if err != nil {
			return
		}
		var d MatchDetails
		_, _ = m.MatchesWithDetails(doc, &d)
		_, _ = ParsePartialFilter(filter)
	})
}

// TestRandomDocsNoPanic runs every seed filter over random documents.
func TestRandomDocsNoPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	filters := []string{`{"a": 1}`, `{"a.b": {"$gte": null}}`, `{"a": {"$elemMatch": {"b": {"$in": [1, null]}}}}`,
		`{"a.0.b": {"$type": "number"}}`, `{"a": {"$bitsAnySet": [1, 70]}}`, `{"a": {"$regex": "x"}}`,
		`{"$expr": {"$eq": ["$a.b", "$b"]}}`, `{"a": {"$not": {"$size": 1}}}`, `{"a": {"$mod": [3, 1]}}`}
	for _, fs := range filters {
		m, err := Parse(ej(t, fs), ParseOptions{AllowExpr: true})
		if err != nil {
			t.Fatal(err)
		}
		for range 2000 {
			doc := bsontest.D("a", bsontest.RandomValue(r, 3), "b", bsontest.RandomValue(r, 2))
			_, _ = m.Matches(doc)
		}
	}
}

// FuzzProjection parses arbitrary projections and applies them to arbitrary documents: no
// panics, and every successful output is valid BSON.
func FuzzProjection(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range []string{`{"a": 1}`, `{"a.b": 0}`, `{"a": {"$slice": [-1, 2]}}`, `{"a": {"$elemMatch": {"b": 1}}}`,
		`{"a.$": 1}`, `{"x": {"$add": ["$a", 1]}, "a.b": 1}`, `{"_id": 0, "a": {"b": 1, "c": "lit"}}`} {
		f.Add([]byte(ej(f, s)), []byte(bsontest.D("a", bsontest.RandomValue(r, 3), "b", bsontest.RandomValue(r, 2))))
	}
	m, err := Parse(ej(f, `{"a": {"$gt": 0}}`), ParseOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, spec, doc []byte) {
		p, err := ParseProjection(spec, m)
		if err != nil {
			return
		}
		var d MatchDetails
		_, _ = m.MatchesWithDetails(doc, &d)
		out, err := p.Apply(doc, &d, nil)
		if err == nil && bsoncore.Document(doc).Validate() == nil {
			if verr := bsoncore.Document(out).Validate(); verr != nil {
				t.Fatalf("invalid output %x: %v", out, verr)
			}
		}
	})
}

// BenchmarkMatchIn100k matches a document against a 100k-value $in (a sorted set: a binary
// search per value of the field).
func BenchmarkMatchIn100k(b *testing.B) {
	arr := bsoncore.NewArrayBuilder()
	for i := range 100_000 {
		arr.AppendInt32(int32((i * 7919) % 200_000))
	}
	filter := bsoncore.NewDocumentBuilder().AppendDocument("age",
		bsoncore.NewDocumentBuilder().AppendArray("$in", arr.Build()).Build()).Build()
	m, err := Parse(filter, ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	doc := ej(b, benchDoc)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := m.Matches(doc); err != nil {
			b.Fatal(err)
		}
	}
}
