package rangedel

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// BenchmarkRangeDeletion measures the deleter's throughput on a range of 20,000 documents of
// about 1 KB (in-process storage, no replication; the default batch size, no batch delay).
func BenchmarkRangeDeletion(b *testing.B) {
	const n = 20000
	pad := strings.Repeat("x", 1000)
	for range b.N {
		b.StopTimer()
		db, _ := openDB(b)
		docs := make([]bsoncore.Document, 0, 1000)
		for i := 0; i < n; i++ {
			docs = append(docs, doc(bson.D{{Key: "_id", Value: int32(i)}, {Key: "pad", Value: pad}}))
			if len(docs) == cap(docs) {
				insert(b, db, "test.c", docs...)
				docs = docs[:0]
			}
		}
		uuid := collUUID(b, db, "test.c")
		insert(b, db, TasksNS, taskDoc("test.c", uuid, bson.MinKey{}, bson.MaxKey{}, false, CleanNow))
		p := &params{m: map[string]int64{ParamBatchDelayMS: 0}}
		b.StartTimer()
		start := time.Now()
		s := Start(context.Background(), Config{DB: db, Log: quiet, Param: p.get, Poll: time.Millisecond})
		for s.Stats().TasksCompleted == 0 {
			time.Sleep(time.Millisecond)
		}
		el := time.Since(start)
		s.Stop()
		b.ReportMetric(float64(n)/el.Seconds(), "docs/s")
		b.ReportMetric(float64(n)*1.0e-3/el.Seconds(), "MB/s")
	}
}
