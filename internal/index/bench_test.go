package index

import (
	"context"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// benchDoc is a ~1 KB document with an _id, two indexed fields and padding.
func benchDoc(b testing.TB, i int) bsoncore.Document {
	return doc(b, d{{"_id", i}, {"a", i * 7 % 100003}, {"b", "user-" + strings.Repeat("x", 8)}, {"n", i % 1000},
		{"pad", strings.Repeat("p", 900)}})
}

func benchEnv(b *testing.B) *env {
	v := newEnv(b)
	for _, spec := range []d{
		{{"key", d{{"a", 1}}}, {"name", "a_1"}},
		{{"key", d{{"b", 1}, {"n", -1}}}, {"name", "b_1_n_-1"}},
	} {
		if _, _, err := v.build(spec, BuildOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return v
}

// BenchmarkInsert1KBThreeIndexes: one 1 KB document per unit of work into a collection with
// the _id index and two secondary indexes, single-threaded.
func BenchmarkInsert1KBThreeIndexes(b *testing.B) {
	v := benchEnv(b)
	docs := make([]bsoncore.Document, 4096)
	for i := range docs {
		docs[i] = benchDoc(b, i)
	}
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	ctx := context.Background()
	b.SetBytes(int64(len(docs[0])))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dd := docs[i%len(docs)]
		// A fresh _id per iteration: patch the int32 _id value in place (bytes 9..12).
		dd = append(bsoncore.Document(nil), dd...)
		dd[9], dd[10], dd[11], dd[12] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		if err := v.coll.Write(ctx, ru, func() error {
			_, err := v.coll.InsertDocument(ru, dd)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}

func loadBench(b *testing.B, v *env, n int) {
	for start := 0; start < n; start += 1000 {
		var docs []bsoncore.Document
		for i := start; i < min(n, start+1000); i++ {
			docs = append(docs, benchDoc(b, i))
		}
		if _, err := v.insert(docs...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPointReadByID: _id index lookup plus record fetch.
func BenchmarkPointReadByID(b *testing.B) {
	v := benchEnv(b)
	const n = 20000
	loadBench(b, v, n)
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	ids := make([]bsoncore.Value, n)
	for i := range ids {
		ids[i] = value(b, int32(i*7919%n))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _, found, err := v.coll.FindByID(ru, ids[i%n])
		if err != nil || !found {
			b.Fatalf("lookup %d: %v %v", i, found, err)
		}
		if i%1024 == 1023 {
			ru.AbandonSnapshot()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
}

// BenchmarkRangeScan100: index range scan returning 100 keys (RecordIds and KeyStrings).
func BenchmarkRangeScan100(b *testing.B) {
	v := benchEnv(b)
	const n = 20000
	loadBench(b, v, n)
	ix, _, _ := v.coll.Index("b_1_n_-1")
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	// b is the same string everywhere; n descending; n in [k, k+4] holds 5*20 = 100 keys.
	bv := value(b, "user-xxxxxxxx")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := int32(i % 990)
		low := &Bound{Values: []bsoncore.Value{bv, value(b, k+4)}, Inclusive: true} // descending field
		high := &Bound{Values: []bsoncore.Value{bv, value(b, k)}, Inclusive: true}
		c, err := ix.NewCursor(ru, ScanOptions{Low: low, High: high})
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for c.Next() {
			_ = c.RecordID()
			got++
		}
		if c.Err() != nil || got != 100 {
			b.Fatalf("scan returned %d: %v", got, c.Err())
		}
		c.Close()
		if i%256 == 255 {
			ru.AbandonSnapshot()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "scans/s")
}
