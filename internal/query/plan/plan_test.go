package plan

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/storage"
)

// planFixture is an in-memory engine with one collection of n documents {_id: i, a: i} and
// an index on a.
type planFixture struct {
	e    *storage.Engine
	cat  *catalog.Catalog
	coll *index.Collection
	meta *catalog.CollectionMeta
}

func newPlanFixture(tb testing.TB, n int) *planFixture {
	tb.Helper()
	ctx := context.Background()
	e, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		tb.Fatal(err)
	}
	cat, err := catalog.Open(ctx, e)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cat.Close(); _ = e.Close() })
	colls := index.NewCollections(e, cat)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	meta, err := cat.CreateCollection(ru, "test.c", nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		tb.Fatal(err)
	}
	w.End()
	coll, err := colls.ByUUID(meta.UUID)
	if err != nil {
		tb.Fatal(err)
	}
	for start := 0; start < n; start += 1000 {
		var docs []bsoncore.Document
		for i := start; i < min(n, start+1000); i++ {
			d, _ := bson.Marshal(bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i}})
			docs = append(docs, d)
		}
		if err := coll.Write(ctx, ru, func() error { _, err := coll.InsertDocuments(ru, docs); return err }); err != nil {
			tb.Fatal(err)
		}
	}
	spec, _ := bson.Marshal(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "v", Value: 2}})
	if _, _, err := index.Build(ctx, coll, spec, index.BuildOptions{}); err != nil {
		tb.Fatal(err)
	}
	meta, _ = cat.Latest().ByNS("test.c")
	return &planFixture{e: e, cat: cat, coll: coll, meta: meta}
}

func (f *planFixture) run(tb testing.TB, ru *storage.RecoveryUnit, req Request) (*Executor, int) {
	tb.Helper()
	ex, err := Prepare(context.Background(), ru, f.meta, f.coll, req)
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for {
		_, _, ok, err := ex.Next(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		if !ok {
			return ex, n
		}
		n++
	}
}

func mustDoc(d bson.D) bsoncore.Document {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

func TestPlanRangeYieldAndWinner(t *testing.T) {
	f := newPlanFixture(t, 3000)
	ru := f.e.NewRecoveryUnit()
	defer ru.Close()
	// A range scan that yields every 7 works still returns each document exactly once.
	filter := mustDoc(bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 100}, {Key: "$lt", Value: 1100}}}})
	ex, n := f.run(t, ru, Request{NS: "test.c", Filter: filter, YieldEvery: 7})
	defer ex.Close()
	if n != 1000 {
		t.Fatalf("got %d", n)
	}
	if ex.IndexName() != "a_1" {
		t.Fatalf("index %q", ex.IndexName())
	}
	st := ex.Stats()
	if st.KeysExamined != 1000 || st.DocsExamined != 1000 {
		t.Fatalf("stats %+v", st)
	}
	// Save / abandon / Restore between "getMores" continues where it stopped.
	ex2, err := Prepare(context.Background(), ru, f.meta, f.coll, Request{NS: "test.c", Filter: filter, Sort: mustDoc(bson.D{{Key: "a", Value: -1}})})
	if err != nil {
		t.Fatal(err)
	}
	defer ex2.Close()
	last := int32(1 << 30)
	count := 0
	for {
		_, doc, ok, err := ex2.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		a := doc.Lookup("a").Int32()
		if a >= last {
			t.Fatalf("order: %d after %d", a, last)
		}
		last = a
		count++
		if count%100 == 0 {
			ex2.Save()
			ru.AbandonSnapshot()
			if err := ex2.Restore(f.meta); err != nil {
				t.Fatal(err)
			}
		}
	}
	if count != 1000 {
		t.Fatalf("reverse count %d", count)
	}
}

func BenchmarkPlanIDHack(b *testing.B) {
	f := newPlanFixture(b, 10000)
	ru := f.e.NewRecoveryUnit()
	defer ru.Close()
	filter := mustDoc(bson.D{{Key: "_id", Value: 4242}})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ex, n := f.run(b, ru, Request{NS: "test.c", Filter: filter})
		if n != 1 {
			b.Fatal(n)
		}
		ex.Close()
		ru.AbandonSnapshot()
	}
}

func BenchmarkPlanIndexRange100(b *testing.B) {
	f := newPlanFixture(b, 10000)
	ru := f.e.NewRecoveryUnit()
	defer ru.Close()
	filter := mustDoc(bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 5000}, {Key: "$lt", Value: 5100}}}})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ex, n := f.run(b, ru, Request{NS: "test.c", Filter: filter})
		if n != 100 {
			b.Fatal(n)
		}
		ex.Close()
		ru.AbandonSnapshot()
	}
}
