package plan

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/query"
)

func TestPlan2PartialImplication(t *testing.T) {
	for _, c := range []struct {
		query, partial string
		want           bool
	}{
		{`{"a": 1}`, `{"a": 1}`, true},
		{`{"a": 1.0}`, `{"a": {"$numberLong": "1"}}`, true},
		{`{"a": 2}`, `{"a": 1}`, false},
		{`{"a": 1, "b": 2}`, `{"a": 1, "b": 2}`, true},
		{`{"a": 1}`, `{"a": 1, "b": 2}`, false},
		{`{"a": {"$in": [1]}}`, `{"a": 1}`, true},
		{`{"a": {"$in": [1, 2]}}`, `{"a": 1}`, false},
		{`{"a": "x"}`, `{"a": {"$exists": true}}`, true},
		{`{"a": null}`, `{"a": {"$exists": true}}`, false},
		{`{"a": {"$gt": 3}}`, `{"a": {"$exists": true}}`, true},
		{`{"a": {"$lte": null}}`, `{"a": {"$exists": true}}`, false},
		{`{"a": {"$in": [1, null]}}`, `{"a": {"$exists": true}}`, false},
		{`{"a": {"$exists": true}}`, `{"a": {"$exists": true}}`, true},
		{`{"a": {"$exists": false}}`, `{"a": {"$exists": true}}`, false},
		{`{"a": {"$gt": 10}}`, `{"a": {"$gt": 5}}`, true},
		{`{"a": {"$gt": 5}}`, `{"a": {"$gt": 5}}`, true},
		{`{"a": {"$gte": 5}}`, `{"a": {"$gt": 5}}`, false},
		{`{"a": {"$gte": 5}}`, `{"a": {"$gte": 5}}`, true},
		{`{"a": {"$gt": 5}}`, `{"a": {"$gte": 5}}`, true},
		{`{"a": {"$gt": 4}}`, `{"a": {"$gt": 5}}`, false},
		{`{"a": {"$lt": 3}}`, `{"a": {"$lt": 5}}`, true},
		{`{"a": {"$lt": 5}}`, `{"a": {"$lte": 5}}`, true},
		{`{"a": {"$lte": 5}}`, `{"a": {"$lt": 5}}`, false},
		{`{"a": {"$lt": 3}}`, `{"a": {"$gt": 1}}`, false},
		{`{"a": {"$gt": "z"}}`, `{"a": {"$gt": 5}}`, false},
		{`{"a": 7}`, `{"a": {"$gt": 5}}`, true},
		{`{"a": 5}`, `{"a": {"$gt": 5}}`, false},
		{`{"a": 5}`, `{"a": {"$gte": 5}}`, true},
		{`{"a": 5}`, `{"a": {"$lte": 5}}`, true},
		{`{"a": "7"}`, `{"a": {"$gt": 5}}`, false},
		{`{"a": [7]}`, `{"a": {"$gt": 5}}`, false},
		{`{"a": {"$in": [6, 7]}}`, `{"a": {"$gt": 5}}`, true},
		{`{"a": 2}`, `{"a": {"$in": [1, 2]}}`, true},
		{`{"a": {"$in": [2, 1]}}`, `{"a": {"$in": [1, 2, 3]}}`, true},
		{`{"a": {"$in": [2, 4]}}`, `{"a": {"$in": [1, 2, 3]}}`, false},
		{`{"a": {"$type": "string"}}`, `{"a": {"$type": "string"}}`, true},
		{`{"a": {"$type": "int"}}`, `{"a": {"$type": "string"}}`, false},
		{`{"$and": [{"a": {"$gt": 10}}, {"b": 1}]}`, `{"a": {"$gt": 5}}`, true},
		{`{"$or": [{"a": 6}, {"a": {"$gt": 9}}]}`, `{"a": {"$gt": 5}}`, true},
		{`{"$or": [{"a": 6}, {"b": 9}]}`, `{"a": {"$gt": 5}}`, false},
		{`{"a": 1}`, `{"$or": [{"a": 1}, {"b": 1}]}`, true},
		{`{"a": 1}`, `{"$and": [{"a": {"$gte": 1}}, {"a": {"$lte": 1}}]}`, true},
		{`{"b": {"$elemMatch": {"a": 7}}}`, `{"a": {"$gt": 5}}`, false},
		{`{"a.b": 7}`, `{"a": {"$exists": true}}`, false},
		{`{"a": 1}`, `{}`, true},
	} {
		q := parseExt(t, c.query)
		im := &catalog.IndexMeta{PartialFilterExpression: extDoc(t, c.partial)}
		if got := partialUsable(im, q.Expression()); got != c.want {
			t.Errorf("query %s implies partial %s: got %v, want %v", c.query, c.partial, got, c.want)
		}
	}
}

func extDoc(t *testing.T, s string) bsoncore.Document {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseExt(t *testing.T, s string) *query.Matcher {
	t.Helper()
	m, err := query.Parse(extDoc(t, s), query.ParseOptions{})
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return m
}

func TestPlan2TopKHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int64{1, 2, 7, 100} {
		var h topK
		var all [][]byte
		for i := 0; i < 500; i++ {
			key := []byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(i >> 8), byte(i)}
			all = append(all, key)
			if h.full(k) && string(key) >= string(h.e[0].key) {
				continue
			}
			h.push(key, key, k)
		}
		slices.SortFunc(all, func(a, b []byte) int { return slices.Compare(a, b) })
		h.sortAscending()
		if int64(len(h.e)) != k {
			t.Fatalf("k=%d: kept %d", k, len(h.e))
		}
		for i, e := range h.e {
			if string(e.key) != string(all[i]) || string(e.val) != string(all[i]) {
				t.Fatalf("k=%d: position %d: %x, want %x", k, i, e.key, all[i])
			}
		}
	}
}

// A sort with a small limit (no index provides {a: -1, _id: 1}) over a collection far larger than the sort memory limit keeps
// only the top k documents.
func TestPlan2TopKMemory(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 5000
	}
	f := newPlanFixture(t, n)
	ru := f.e.NewRecoveryUnit()
	defer ru.Close()
	req := Request{NS: "test.c", Sort: mustDoc(bson.D{{Key: "a", Value: -1}, {Key: "_id", Value: 1}}), Limit: 3, Skip: 1,
		Filter: mustDoc(bson.D{{Key: "_id", Value: bson.D{{Key: "$mod", Value: bson.A{2, 0}}}}}), MaxBlockingSortBytes: 4096}
	ex, err := Prepare(context.Background(), ru, f.meta, f.coll, req)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	var got []int32
	for {
		_, doc, ok, err := ex.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, doc.Lookup("_id").Int32())
	}
	want := []int32{int32(n - 4), int32(n - 6), int32(n - 8)}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	qp, _ := ex.Explain(QueryPlanner)
	srt := bsoncore.Document(qp).Lookup("winningPlan", "inputStage", "inputStage")
	if srt.Document().Lookup("stage").StringValue() != "SORT" || srt.Document().Lookup("limitAmount").Int64() != 4 {
		t.Fatalf("plan %s", qp)
	}
	// The same sort without a limit exceeds the memory limit.
	req.Limit, req.Skip = 0, 0
	ex2, err := Prepare(context.Background(), ru, f.meta, f.coll, req)
	if err != nil {
		t.Fatal(err)
	}
	defer ex2.Close()
	if _, _, _, err := ex2.Next(context.Background()); err == nil {
		t.Fatal("unlimited sort within 4096 bytes")
	}
}

func BenchmarkPlan2TopK(b *testing.B) {
	f := newPlanFixture(b, 20000)
	ru := f.e.NewRecoveryUnit()
	defer ru.Close()
	req := Request{NS: "test.c", Sort: mustDoc(bson.D{{Key: "a", Value: -1}, {Key: "_id", Value: 1}}), Limit: 10}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ex, n := f.run(b, ru, req)
		if n != 10 {
			b.Fatal(n)
		}
		ex.Close()
		ru.AbandonSnapshot()
	}
}
