package applier_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/repl/applier"
	"humongo/internal/repl/applier/repltest"
)

// BenchmarkApplyTransactions applies single-entry transactions of two updates each (the
// bench txn workload's shape) one per batch (how a command entry is batched) and 100 per
// batch (how the batcher hands over CRUD-only applyOps entries: oplog.SharesBatch).
func BenchmarkApplyTransactions(b *testing.B) {
	for _, perBatch := range []int{1, 100} {
		b.Run(map[int]string{1: "alone", 100: "shared"}[perBatch], func(b *testing.B) {
			ctx := context.Background()
			m := repltest.StartMember(b)
			a := applier.New(applier.Config{Engine: m.DB.Engine, Catalog: m.DB.Catalog, Colls: m.DB.Colls, Writer: m.Writer,
				Fatal: func(err error) { b.Errorf("fatal: %v", err) }}).WithApplier(m.Writer.Applier())
			mk := func(d bson.D) bsoncore.Document {
				raw, err := bson.Marshal(d)
				if err != nil {
					b.Fatal(err)
				}
				return raw
			}
			inc := uint32(1)
			next := func() bson.Timestamp { inc++; return bson.Timestamp{T: 100, I: inc} }
			setup := []bsoncore.Document{mk(bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "b.c"}, {Key: "o", Value: bson.D{{Key: "create", Value: "c"}}},
				{Key: "ts", Value: next()}, {Key: "t", Value: int64(1)}, {Key: "wall", Value: bson.DateTime(0)}})}
			if _, err := a.ApplyBatch(ctx, setup); err != nil {
				b.Fatal(err)
			}
			var docs []bsoncore.Document
			for i := range 1000 {
				docs = append(docs, mk(bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "b.c"}, {Key: "o", Value: bson.D{{Key: "_id", Value: i}, {Key: "n", Value: 0}}},
					{Key: "ts", Value: next()}, {Key: "t", Value: int64(1)}, {Key: "wall", Value: bson.DateTime(0)}}))
			}
			if _, err := a.ApplyBatch(ctx, docs); err != nil {
				b.Fatal(err)
			}
			upd := func(id, n int) bson.D {
				return bson.D{{Key: "op", Value: "u"}, {Key: "ns", Value: "b.c"},
					{Key: "o", Value: bson.D{{Key: "$v", Value: 2}, {Key: "diff", Value: bson.D{{Key: "u", Value: bson.D{{Key: "n", Value: n}}}}}}},
					{Key: "o2", Value: bson.D{{Key: "_id", Value: id}}}}
			}
			b.ResetTimer()
			var batch []bsoncore.Document
			for i := range b.N {
				batch = append(batch, mk(bson.D{{Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}},
					{Key: "txnNumber", Value: int64(i + 1)}, {Key: "op", Value: "c"}, {Key: "ns", Value: "admin.$cmd"},
					{Key: "o", Value: bson.D{{Key: "applyOps", Value: bson.A{upd(i%1000, i), upd((i+500)%1000, -i)}}}},
					{Key: "ts", Value: next()}, {Key: "t", Value: int64(1)}, {Key: "wall", Value: bson.DateTime(0)},
					{Key: "prevOpTime", Value: bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}}}}))
				if len(batch) == perBatch || i == b.N-1 {
					if _, err := a.ApplyBatch(ctx, batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			b.StopTimer()
		})
	}
}
