package router

// $shardedDataDistribution (MongoDB 6.3+, a router-only source stage; sh.status() shows its
// result): per sharded collection, each shard's owned and orphaned documents and bytes. MongoDB
// expands it to $_internalAllCollectionStats on every shard, then a $group by namespace, a
// $lookup of config.collections keeping the sharded ones, and a $project. The router here
// lists the sharded collections from config.collections first, asks every shard for each
// one's $collStats storageStats (a shard without the collection has nothing to report), and
// runs the same $group and $project, then the rest of the client's pipeline, over those
// documents; the numbers keep the shards' own types, as in MongoDB.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

const dataDistributionStage = "$shardedDataDistribution"

// dataDistributionStages are the stages MongoDB's $shardedDataDistribution runs after its
// per-shard collection statistics (DocumentSourceShardedDataDistribution::createFromBson,
// less the $lookup and $match that keep sharded collections: only those are gathered).
var dataDistributionStages = func() []bsoncore.Document {
	owned := bson.D{{Key: "$subtract", Value: bson.A{"$storageStats.count", "$storageStats.numOrphanDocs"}}}
	group := bson.D{{Key: "_id", Value: "$ns"}, {Key: "shards", Value: bson.D{{Key: "$push", Value: bson.D{{Key: "$let", Value: bson.D{
		{Key: "vars", Value: bson.D{{Key: "nOwnedDocs", Value: owned}}},
		{Key: "in", Value: bson.D{
			{Key: "shardName", Value: "$shard"},
			{Key: "numOrphanedDocs", Value: "$storageStats.numOrphanDocs"},
			{Key: "numOwnedDocuments", Value: "$$nOwnedDocs"},
			{Key: "ownedSizeBytes", Value: bson.D{{Key: "$multiply", Value: bson.A{"$storageStats.avgObjSize", "$$nOwnedDocs"}}}},
			{Key: "orphanedSizeBytes", Value: bson.D{{Key: "$multiply", Value: bson.A{"$storageStats.avgObjSize", "$storageStats.numOrphanDocs"}}}},
		}},
	}}}}}}}
	project := bson.D{{Key: "_id", Value: 0}, {Key: "ns", Value: "$_id"}, {Key: "shards", Value: "$shards"}}
	return []bsoncore.Document{stageDoc("$group", group), stageDoc("$project", project)}
}()

// isDataDistribution reports whether cmd is an aggregate whose pipeline starts with
// $shardedDataDistribution.
func isDataDistribution(cmd bsoncore.Document) bool {
	arr, ok := cmd.Lookup("pipeline").ArrayOK()
	if !ok {
		return false
	}
	v, err := arr.IndexErr(0)
	if err != nil {
		return false
	}
	st, ok := v.DocumentOK()
	if !ok {
		return false
	}
	name, _ := stageName(st)
	return name == dataDistributionStage
}

// runDataDistribution answers an aggregate led by $shardedDataDistribution.
func runDataDistribution(ctx context.Context, c *Cluster, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	arr, _ := cmd.Lookup("pipeline").ArrayOK()
	stages, err := pipelineDocs(arr)
	if err != nil {
		return nil, err
	}
	if _, v := stageName(stages[0]); v.Type != bsoncore.TypeEmbeddedDocument || len(v.Document()) != 5 {
		return nil, mongoerr.New(mongoerr.Location6789100, "The $shardedDataDistribution stage specification must be an empty object")
	}
	if _, isColl := firstArg(cmd).StringValueOK(); isColl || env.DB != "admin" {
		return nil, mongoerr.New(mongoerr.Location6789102, "The $shardedDataDistribution stage must be run on the admin database")
	}
	if err := checkStages(stages[1:]); err != nil {
		return nil, err
	}
	req := &aggRequest{ns: "admin.$cmd.aggregate", stages: stages}
	req.allowDisk, _ = cmd.Lookup("allowDiskUse").BooleanOK()
	req.let, _ = cmd.Lookup("let").DocumentOK()
	count := int64(cursor.DefaultFirstBatch)
	cur, ok := cmd.Lookup("cursor").DocumentOK()
	if !ok {
		if explain, _ := cmd.Lookup("explain").BooleanOK(); explain {
			return nil, mongoerr.New(mongoerr.CommandNotSupported, "explain of $shardedDataDistribution is not supported by humongos yet")
		}
		return nil, mongoerr.New(mongoerr.FailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	}
	if n, ok := cur.Lookup("batchSize").AsInt64OK(); ok {
		if n < 0 {
			return nil, mongoerr.Newf(mongoerr.Location51024, "BSON field 'batchSize' value must be >= 0, actual value '%d'", n)
		}
		count = n
	}
	docs, err := collectionStatsPerShard(ctx, c)
	if err != nil {
		return nil, err
	}
	// A drained "cursor" with no shard behind it: Close has nothing to kill or end.
	src := &mergeSource{cursors: []*shardCursor{{remote: &remote{}, buf: docs}}}
	out, err := mergePipeline(ctx, append(append([]bsoncore.Document(nil), dataDistributionStages...), stages[1:]...), src, req, nil, env.DB, c, cmd)
	if err != nil {
		return nil, err
	}
	return firstBatchReply(ctx, env, cmd, req.ns, out, count, false, true)
}

// collectionStatsPerShard returns, for every sharded collection and every shard holding it,
// {ns, shard, storageStats: {count, numOrphanDocs, avgObjSize}} ($_internalAllCollectionStats'
// documents, reduced to what $shardedDataDistribution reads).
func collectionStatsPerShard(ctx context.Context, c *Cluster) ([]bsoncore.Document, error) {
	var colls []struct {
		ID string `bson:"_id"`
	}
	cur, err := c.config.Client().Database("config", options.Database().SetReadConcern(readconcern.Majority())).
		Collection("collections").Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}).SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.HostUnreachable, "reading config.collections: %v", err)
	}
	if err := cur.All(ctx, &colls); err != nil {
		return nil, mongoerr.Newf(mongoerr.HostUnreachable, "reading config.collections: %v", err)
	}
	shards, err := c.Shards.All(ctx)
	if err != nil {
		return nil, err
	}
	collStats := pipelineArray([]bsoncore.Document{stageDoc("$collStats", bson.D{{Key: "storageStats", Value: bson.D{}}})})
	var docs []bsoncore.Document
	for _, sh := range shards {
		rs, err := c.Shard(ctx, sh.ID)
		if err != nil {
			return nil, err
		}
		for _, coll := range colls {
			db, name := splitNS(coll.ID)
			cmd := bsoncore.NewDocumentBuilder().AppendString("aggregate", name).AppendArray("pipeline", collStats).
				AppendDocument("cursor", bsoncore.NewDocumentBuilder().Build()).Build()
			raw, err := rs.RunCommand(ctx, db, rawDoc(cmd), nil)
			if err != nil {
				if err = shardError(ctx, sh.ID, err); mongoerr.Is(err, mongoerr.NamespaceNotFound) {
					continue // not on this shard
				}
				return nil, err
			}
			_, _, batch, err := parseCursorReply(bsoncore.Document(raw))
			if err != nil {
				return nil, err
			}
			for _, d := range batch {
				docs = append(docs, dataDistributionInput(coll.ID, sh.ID, d))
			}
		}
	}
	return docs, nil
}

// dataDistributionInput is one shard's statistics of ns as $shardedDataDistribution's $group
// reads them; a shard that does not count orphans (numOrphanDocs absent) has none.
func dataDistributionInput(ns, shard string, collStats bsoncore.Document) bsoncore.Document {
	ss, _ := collStats.Lookup("storageStats").DocumentOK()
	b := bsoncore.NewDocumentBuilder()
	for _, k := range []string{"count", "numOrphanDocs", "avgObjSize"} {
		v := ss.Lookup(k)
		if v.Type == 0 {
			v = bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 0)}
		}
		b.AppendValue(k, v)
	}
	return bsoncore.NewDocumentBuilder().AppendString("ns", ns).AppendString("shard", shard).
		AppendDocument("storageStats", b.Build()).Build()
}
