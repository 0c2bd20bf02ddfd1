package router

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/mongoerr"
)

// $collStats, $indexStats through the router: run on every shard owning chunks (the primary
// for an unsharded collection), each document naming its shard, the rest of the pipeline run
// over them on the router (mongosh's getShardDistribution() relies on this).
func TestRouterCollStats(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dr := drainer(t, ctx)
	d := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	collStats := d("$collStats", d("storageStats", bson.D{}))

	// Sharded app.s: one document per shard, `shard` right after `ns` as on a MongoDB shard.
	got := dr(rc.app.Collection("s").Aggregate(ctx, bson.A{collStats}))
	if len(got) != 2 {
		t.Fatalf("$collStats of a sharded collection: %d documents, want 2: %v", len(got), got)
	}
	var shards []string
	for _, doc := range got {
		els, err := doc.Elements()
		if err != nil || len(els) < 3 || els[0].Key() != "ns" || els[1].Key() != "shard" {
			t.Fatalf("$collStats document: want ns then shard first: %s", doc)
		}
		if ns := doc.Lookup("ns").StringValue(); ns != "app.s" {
			t.Fatalf("$collStats ns %q", ns)
		}
		if n := doc.Lookup("storageStats", "count").AsInt64(); n != readDocs/2 {
			t.Fatalf("$collStats on %s: count %d, want %d", doc.Lookup("shard"), n, readDocs/2)
		}
		shards = append(shards, doc.Lookup("shard").StringValue())
	}
	slices.Sort(shards)
	if !slices.Equal(shards, []string{"shard0", "shard1"}) {
		t.Fatalf("$collStats shards %v", shards)
	}

	// Later stages run on the router over the shards' documents, and see `shard`.
	got = dr(rc.app.Collection("s").Aggregate(ctx, bson.A{collStats,
		d("$project", bson.D{{Key: "_id", Value: 0}, {Key: "shard", Value: 1}, {Key: "n", Value: "$storageStats.count"}}),
		d("$sort", d("shard", -1))}))
	want := []bson.Raw{
		bson.Raw(mustDoc(bson.D{{Key: "shard", Value: "shard1"}, {Key: "n", Value: int64(readDocs / 2)}})),
		bson.Raw(mustDoc(bson.D{{Key: "shard", Value: "shard0"}, {Key: "n", Value: int64(readDocs / 2)}})),
	}
	if len(got) == 2 && got[0].Lookup("n").Type == bson.TypeInt32 { // the shard's own numeric type
		want = []bson.Raw{
			bson.Raw(mustDoc(bson.D{{Key: "shard", Value: "shard1"}, {Key: "n", Value: int32(readDocs / 2)}})),
			bson.Raw(mustDoc(bson.D{{Key: "shard", Value: "shard0"}, {Key: "n", Value: int32(readDocs / 2)}})),
		}
	}
	sameDocs(t, "$collStats then $project and $sort", got, want)

	// Unsharded app.u: its primary shard only.
	got = dr(rc.app.Collection("u").Aggregate(ctx, bson.A{collStats}))
	if len(got) != 1 || got[0].Lookup("shard").StringValue() != "shard0" || got[0].Lookup("storageStats", "count").AsInt64() != readDocs {
		t.Fatalf("$collStats of an unsharded collection: %v", got)
	}

	// $indexStats: every index of every shard owning chunks, each naming its shard.
	got = dr(rc.app.Collection("s").Aggregate(ctx, bson.A{d("$indexStats", bson.D{})}))
	seen := map[string]bool{}
	for _, doc := range got {
		seen[doc.Lookup("shard").StringValue()] = true
	}
	if len(got) < 2 || !seen["shard0"] || !seen["shard1"] {
		t.Fatalf("$indexStats: %v", got)
	}

	// A missing database is an empty result; a missing collection of an existing database is
	// the primary shard's NamespaceNotFound, not an empty result.
	if got := dr(rc.router.Database("nodb").Collection("c").Aggregate(ctx, bson.A{collStats})); len(got) != 0 {
		t.Fatalf("$collStats in a missing database: %v", got)
	}
	var ce mongo.CommandError
	if _, err := rc.app.Collection("missing").Aggregate(ctx, bson.A{collStats}); !errors.As(err, &ce) || ce.Code != int32(mongoerr.NamespaceNotFound) {
		t.Fatalf("$collStats storageStats of a missing collection: %v", err)
	}
	// Only as the first stage (40602), and the shards check the spec (5447000).
	if _, err := rc.app.Collection("s").Aggregate(ctx, bson.A{d("$match", bson.D{}), collStats}); !errors.As(err, &ce) || ce.Code != int32(mongoerr.Location40602) {
		t.Fatalf("$collStats not first: %v", err)
	}
	if _, err := rc.app.Collection("s").Aggregate(ctx, bson.A{d("$collStats", 1)}); !errors.As(err, &ce) || ce.Code != int32(mongoerr.Location5447000) {
		t.Fatalf("$collStats: 1: %v", err)
	}
}

func TestWithShardField(t *testing.T) {
	for _, tc := range []struct {
		in    bson.D
		after string
		want  bson.D
	}{
		{bson.D{{Key: "ns", Value: "a.b"}, {Key: "host", Value: "h"}}, "ns",
			bson.D{{Key: "ns", Value: "a.b"}, {Key: "shard", Value: "s0"}, {Key: "host", Value: "h"}}},
		{bson.D{{Key: "name", Value: "_id_"}}, "host", bson.D{{Key: "name", Value: "_id_"}, {Key: "shard", Value: "s0"}}},
		{bson.D{{Key: "x", Value: 1}}, "", bson.D{{Key: "x", Value: 1}, {Key: "shard", Value: "s0"}}},
		// A shard that names itself already is left alone.
		{bson.D{{Key: "ns", Value: "a.b"}, {Key: "shard", Value: "other"}}, "ns", bson.D{{Key: "ns", Value: "a.b"}, {Key: "shard", Value: "other"}}},
	} {
		got := withShardField(mustDoc(tc.in), tc.after, "s0")
		if want := mustDoc(tc.want); string(got) != string(want) {
			t.Errorf("withShardField(%v, %q) = %s, want %s", tc.in, tc.after, bson.Raw(got), bson.Raw(want))
		}
	}
}

// $shardedDataDistribution on admin: each sharded collection (app.s, not the unsharded app.u)
// with every shard's owned documents and bytes, as sh.status() shows them.
func TestRouterShardedDataDistribution(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dr := drainer(t, ctx)
	d := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	admin := rc.router.Database("admin")
	// An empty first batch: the rest comes by getMore on the router's cursor.
	got := dr(admin.Aggregate(ctx, bson.A{d("$shardedDataDistribution", bson.D{})}, options.Aggregate().SetBatchSize(0)))
	if len(got) != 1 || got[0].Lookup("ns").StringValue() != "app.s" {
		t.Fatalf("$shardedDataDistribution: want app.s alone: %v", got)
	}
	perShard := map[string]bson.Raw{}
	for _, v := range mustValues(t, got[0].Lookup("shards").Array()) {
		s := v.Document()
		perShard[s.Lookup("shardName").StringValue()] = s
	}
	for _, id := range []string{"shard0", "shard1"} {
		s, ok := perShard[id]
		if !ok {
			t.Fatalf("$shardedDataDistribution: no %s in %s", id, got[0])
		}
		owned, size := s.Lookup("numOwnedDocuments").AsInt64(), s.Lookup("ownedSizeBytes").AsInt64()
		if owned != readDocs/2 || size <= 0 || s.Lookup("numOrphanedDocs").AsInt64() != 0 || s.Lookup("orphanedSizeBytes").AsInt64() != 0 {
			t.Fatalf("$shardedDataDistribution on %s: %s", id, s)
		}
	}
	// The client's own stages run after it.
	got = dr(admin.Aggregate(ctx, bson.A{d("$shardedDataDistribution", bson.D{}), d("$unwind", "$shards"),
		d("$group", bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: d("$sum", "$shards.numOwnedDocuments")}})}))
	if len(got) != 1 || got[0].Lookup("n").AsInt64() != readDocs {
		t.Fatalf("$shardedDataDistribution then $group: %v", got)
	}
	var ce mongo.CommandError
	if _, err := admin.Aggregate(ctx, bson.A{d("$shardedDataDistribution", d("x", 1))}); !errors.As(err, &ce) || ce.Code != int32(mongoerr.Location6789100) {
		t.Fatalf("$shardedDataDistribution with a non-empty spec: %v", err)
	}
	if _, err := rc.app.Aggregate(ctx, bson.A{d("$shardedDataDistribution", bson.D{})}); !errors.As(err, &ce) || ce.Code != int32(mongoerr.Location6789102) {
		t.Fatalf("$shardedDataDistribution outside admin: %v", err)
	}
	if _, err := rc.router.Database("admin").Collection("c").Aggregate(ctx, bson.A{d("$shardedDataDistribution", bson.D{})}); !errors.As(err, &ce) || ce.Code != int32(mongoerr.Location6789102) {
		t.Fatalf("$shardedDataDistribution on a collection: %v", err)
	}
}
