package router

// Pipelines led by a stage that reads a shard's own state ($collStats, $indexStats,
// $planCacheStats; MongoDB's HostTypeRequirement::kAnyShard sources) through the router. As
// mongos 7.0 does, the stage runs on every shard owning chunks of the collection (the primary
// shard for an unsharded one), and each document it yields carries `shard`, the id of the
// shard that produced it (DocumentSourceCollStats::makeStatsForNs appends it on a shard
// server): mongosh's getShardDistribution() reads per-shard storageStats this way. Our shards
// do not add `shard` themselves, so the router sends them the leading stage alone, adds the
// field to each shard's documents, and runs the rest of the pipeline over them (so later
// stages see `shard`, as they would in MongoDB).

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
)

// shardSourceStage reports whether the pipeline starts with one of shardFirstStages.
func shardSourceStage(stages []bsoncore.Document) (string, bool) {
	if len(stages) == 0 {
		return "", false
	}
	name, _ := stageName(stages[0])
	return name, shardFirstStages[name]
}

// checkShardSourcePosition refuses a shard source stage anywhere but first, with MongoDB's
// error (the router's agg parser does not know these stages and would call them unknown).
func checkShardSourcePosition(stages []bsoncore.Document) error {
	for i, st := range stages {
		if name, _ := stageName(st); i > 0 && shardFirstStages[name] {
			return mongoerr.Newf(mongoerr.Location40602, "%s is only valid as the first stage in a pipeline", name)
		}
	}
	return nil
}

// routerParsedStages are the stages the router's agg parser checks: all but a leading shard
// source stage, which only the shards know (they check its spec).
func routerParsedStages(stages []bsoncore.Document) []bsoncore.Document {
	if _, ok := shardSourceStage(stages); ok {
		return stages[1:]
	}
	return stages
}

// shardFieldAfter names the field each stage's documents carry `shard` after in MongoDB 7.0
// ("" or a missing field: at the end).
var shardFieldAfter = map[string]string{"$collStats": "ns", "$indexStats": "host"}

// withShardField returns d with shard: id inserted after field after (at the end when after is
// absent), unchanged when d already has a shard field.
func withShardField(d bsoncore.Document, after, id string) bsoncore.Document {
	if _, err := d.LookupErr("shard"); err == nil {
		return d
	}
	els, err := d.Elements()
	if err != nil {
		return d
	}
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(d)+len(id)+16))
	added := false
	for _, el := range els {
		out = append(out, el...)
		if !added && after != "" && el.Key() == after {
			out = bsoncore.AppendStringElement(out, "shard", id)
			added = true
		}
	}
	if !added {
		out = bsoncore.AppendStringElement(out, "shard", id)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// runShardSourceAggregate runs an aggregate whose pipeline starts with a shard source stage
// (see the file comment) and returns its first batch; count is the first batch's size.
func runShardSourceAggregate(ctx context.Context, c *Cluster, env *service.Env, cmd bsoncore.Document, req *aggRequest, count int64) (bsoncore.Document, error) {
	name, _ := shardSourceStage(req.stages)
	coll, _, err := readCollation("aggregate", cmd)
	if err != nil {
		return nil, err
	}
	var reply bsoncore.Document
	routed := false // f ran: a NamespaceNotFound is then a shard's (no collection), not the cache's
	err = c.WithRouting(ctx, req.ns, func(r *catalogcache.Routing) error {
		routed = true
		shards, err := targetShards(r, nil, false) // every shard owning chunks
		if err != nil {
			return err
		}
		shardCmd := forward(cmd, map[string]bool{"pipeline": true, "cursor": true},
			bsoncore.NewDocumentBuilder().AppendArray("pipeline", pipelineArray(req.stages[:1])).
				AppendDocument("cursor", bsoncore.NewDocumentBuilder().Build()).Build())
		cursors, err := openCursors(ctx, c, env.DB, shards, versionedFor(shardCmd, r, shards))
		if err != nil {
			return err
		}
		src := &mergeSource{cursors: cursors, collator: coll}
		// The stage yields a few documents per shard: drain each shard's cursor here so that
		// every document gets its shard's id before the rest of the pipeline sees it.
		for _, sc := range cursors {
			for sc.id != 0 {
				if err := sc.fetch(ctx, 0); err != nil {
					src.Close()
					return err
				}
			}
			for i, d := range sc.buf {
				sc.buf[i] = withShardField(d, shardFieldAfter[name], sc.shard)
			}
		}
		var out routerSource = src
		if len(req.stages) > 1 {
			if out, err = mergePipeline(ctx, req.stages[1:], src, req, coll, env.DB, c, cmd); err != nil {
				src.Close()
				return err
			}
		}
		reply, err = firstBatchReply(ctx, env, cmd, req.ns, out, count, false, true)
		return err
	})
	if !routed && missingDatabase(err) {
		// No database: an empty result, as mongos answers for a namespace it cannot route.
		return emptyCursorReply(req.ns), nil
	}
	return reply, err
}
