package agg

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// FuzzPipeline feeds arbitrary bytes as a one-stage pipeline and runs whatever parses over a
// few documents: parsing and execution must return errors, never panic.
func FuzzPipeline(f *testing.F) {
	seeds := []string{
		`{"$group": {"_id": "$a", "s": {"$sum": "$b"}}}`,
		`{"$project": {"a": {"$substrCP": ["$s", 1, 2]}, "b": {"$dateToString": {"date": "$d"}}}}`,
		`{"$setWindowFields": {"sortBy": {"a": 1}, "output": {"x": {"$sum": "$a", "window": {"documents": [-1, 1]}}}}}`,
		`{"$bucketAuto": {"groupBy": "$a", "buckets": 2}}`,
		`{"$densify": {"field": "a", "range": {"step": 1, "bounds": "full"}}}`,
		`{"$unwind": {"path": "$arr", "includeArrayIndex": "i"}}`,
		`{"$addFields": {"z": {"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(parseDocs(f, "["+s+"]")[0]))
	}
	input := parseDocs(f, `[{"a": 1, "b": 2, "s": "héllo", "d": {"$date": "2020-01-01T00:00:00Z"}, "arr": [1, 2]}, {"a": "x", "arr": []}, {"a": null}, {}]`)
	f.Fuzz(func(t *testing.T, stage []byte) {
		p, err := Parse([]bsoncore.Document{stage}, ParseContext{DB: "test"})
		if err != nil {
			return
		}
		out, err := p.Run(context.Background(), SliceSource(input), &Context{MaxMemoryBytes: 1 << 20})
		if err != nil {
			return
		}
		_, _ = Drain(context.Background(), out)
	})
}
