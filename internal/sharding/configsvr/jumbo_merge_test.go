package configsvr

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/sharding/routing"
)

func TestMergeRuns(t *testing.T) {
	k := func(v int32) bsoncore.Document { return bsoncore.NewDocumentBuilder().AppendInt32("x", v).Build() }
	ts := func(t uint32) *bson.Timestamp { return &bson.Timestamp{T: t, I: 1} }
	chunks := []routing.Chunk{
		{ID: bson.NewObjectID(), Min: k(0), Max: k(10), OnCurrentShardSince: ts(5)},
		{ID: bson.NewObjectID(), Min: k(10), Max: k(20), OnCurrentShardSince: ts(7)},
		{ID: bson.NewObjectID(), Min: k(30), Max: k(40), OnCurrentShardSince: ts(1)},
		{ID: bson.NewObjectID(), Min: k(40), Max: k(50), OnCurrentShardSince: ts(2)},
		{ID: bson.NewObjectID(), Min: k(50), Max: k(60), OnCurrentShardSince: ts(3)},
		{ID: bson.NewObjectID(), Min: k(70), Max: k(80), OnCurrentShardSince: ts(3)},
	}
	v0 := routing.ChunkVersion{Major: 3, Minor: 4}
	ops, v, merged, err := mergeRuns(chunks, v0, "sh0", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Two runs: [0, 20) from 2 chunks and [30, 60) from 3; the lone [70, 80) stays.
	if merged != 5 || len(ops) != 5 || v.Major != 3 || v.Minor != 6 {
		t.Fatalf("merged %d ops %d version %d|%d", merged, len(ops), v.Major, v.Minor)
	}
	first := ops[0].Lookup("o").Document()
	if st, _ := first.Lookup("onCurrentShardSince").Timestamp(); first.Lookup("max", "x").Int32() != 20 || st != 7 {
		t.Errorf("first merged chunk %s", first)
	}
	if mv, mi := first.Lookup("lastmod").Timestamp(); mv != 3 || mi != 5 {
		t.Errorf("first merged chunk version %d|%d", mv, mi)
	}
	if hist := first.Lookup("history", "0", "shard").StringValue(); hist != "sh0" {
		t.Errorf("history %s", first)
	}
	// maxNumberOfChunksToMerge 3: the first run (2) is merged, the third chunk alone is not.
	ops, _, merged, err = mergeRuns(chunks, v0, "sh0", 3)
	if err != nil || merged != 2 || len(ops) != 2 {
		t.Fatalf("limited: merged %d ops %d %v", merged, len(ops), err)
	}
	if ops, _, merged, _ := mergeRuns(chunks[5:], v0, "sh0", 0); len(ops) != 0 || merged != 0 {
		t.Fatalf("single chunk merged")
	}
}

// Auto-merging follows the automerge setting and the balancer document: its mode, and with
// BalancerAllows its activeWindow too.
func TestAutoMergerEnabled(t *testing.T) {
	settings := func(docs ...bsoncore.Document) RunFunc {
		return func(_ context.Context, _ string, _ bsoncore.Document) (bsoncore.Document, error) {
			arr := bsoncore.NewArrayBuilder()
			for _, d := range docs {
				arr.AppendDocument(d)
			}
			return bsoncore.NewDocumentBuilder().AppendDocument("cursor", bsoncore.NewDocumentBuilder().
				AppendInt64("id", 0).AppendArray("firstBatch", arr.Build()).Build()).Build(), nil
		}
	}
	balancerDoc := bsoncore.NewDocumentBuilder().AppendString("_id", BalancerSettingsID).AppendString("mode", "full").Build()
	automergeOff := bsoncore.NewDocumentBuilder().AppendString("_id", "automerge").AppendBoolean("enabled", false).Build()
	stopped := bsoncore.NewDocumentBuilder().AppendString("_id", BalancerSettingsID).AppendString("mode", "off").Build()
	allows := func(ok bool) func(bsoncore.Document, time.Time) bool {
		return func(bsoncore.Document, time.Time) bool { return ok }
	}
	for _, c := range []struct {
		name string
		cfg  AutoMergerConfig
		want bool
	}{
		{"no settings", AutoMergerConfig{Run: settings()}, true},
		{"automerge off", AutoMergerConfig{Run: settings(automergeOff, balancerDoc)}, false},
		{"balancer off", AutoMergerConfig{Run: settings(stopped)}, false},
		{"balancer on", AutoMergerConfig{Run: settings(balancerDoc)}, true},
		{"outside the window", AutoMergerConfig{Run: settings(balancerDoc), BalancerAllows: allows(false)}, false},
		{"inside the window", AutoMergerConfig{Run: settings(balancerDoc), BalancerAllows: allows(true)}, true},
	} {
		got, err := c.cfg.enabled(context.Background())
		if err != nil || got != c.want {
			t.Errorf("%s: %v %v, want %v", c.name, got, err, c.want)
		}
	}
}
