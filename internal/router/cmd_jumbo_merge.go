package router

// clearJumboFlag and mergeAllChunksOnShard on the router (MongoDB 7.0's
// ClearJumboFlagCommand and ClusterMergeAllChunksOnShardCommand): each picks what it acts on
// from the routing table and has the config server primary carry it out
// (_configsvrClearJumboFlag, _configsvrCommitMergeAllChunksOnShard) with majority write
// concern; the router then forgets its routing for the namespace.

import (
	"context"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/routing"
)

// chunkMaintenanceCommands are registered by NewRegistry.
func chunkMaintenanceCommands() []*service.Command {
	return []*service.Command{
		{Name: "clearJumboFlag", Auth: service.AuthOnFullNS(auth.ClearJumboFlag), Aliases: []string{"clearjumboflag"}, Handler: runClearJumboFlag, AdminOnly: true,
			Secondary: service.SecondaryAlways,
			Help:      "clears the jumbo flag of the chunk that contains the key\n   { clearJumboFlag : 'alleyinsider.blog.posts' , find : { ts : 1 } }\n"},
		{Name: "mergeAllChunksOnShard", Auth: service.AuthOnFullNS(auth.SplitChunk), Handler: runMergeAllChunksOnShard, AdminOnly: true, Secondary: service.SecondaryNever,
			Help: "Merge all contiguous chunks on a specific shard\nusage: {mergeAllChunksOnShard: <ns>, shard: <shard>}"},
	}
}

// runClearJumboFlag handles {clearJumboFlag: ns, find | bounds}.
func runClearJumboFlag(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "clearJumboFlag"
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, _, _, err := nsArg(cmd, name)
	if err != nil {
		return nil, err
	}
	var find bsoncore.Document
	if v := cmd.Lookup("find"); v.Type != 0 {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.find' is the wrong type '%s', expected type 'object'", name, bsonutil.TypeName(v.Type))
		}
		find = d
	}
	var bounds []bsoncore.Value
	hasBounds := false
	if v := cmd.Lookup("bounds"); v.Type != 0 {
		arr, ok := v.ArrayOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.bounds' is the wrong type '%s', expected type 'array'", name, bsonutil.TypeName(v.Type))
		}
		bounds, _ = arr.Values()
		for i, b := range bounds {
			if b.Type != bsoncore.TypeEmbeddedDocument {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.bounds.%d' is the wrong type '%s', expected type 'object'", name, i, bsonutil.TypeName(b.Type))
			}
		}
		hasBounds = true
	}
	r, err := shardedRouting(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	switch {
	case hasBounds && len(bounds) != 2:
		return nil, mongoerr.New(mongoerr.InvalidOptions, "bounds can only have exactly 2 elements")
	case find != nil && hasBounds:
		return nil, mongoerr.New(mongoerr.InvalidOptions, "cannot specify bounds and find at the same time")
	case find == nil && !hasBounds:
		return nil, mongoerr.New(mongoerr.InvalidOptions, "need to specify find or bounds")
	}
	p := r.Table.Pattern()
	var chunk *routing.Chunk
	if find != nil {
		key, ok := shardKeyOfQuery(p, find)
		if !ok {
			return nil, mongoerr.Newf(mongoerr.Location51260, "no shard key found in chunk query %s", bsonutil.FormatDoc(find))
		}
		if chunk, err = r.Table.ChunkForKey(key); err != nil {
			return nil, err
		}
	} else {
		min, max := bounds[0].Document(), bounds[1].Document()
		if !p.IsShardKey(min) || !p.IsShardKey(max) {
			return nil, mongoerr.Newf(mongoerr.Location51261, "no chunk found with the shard key bounds [%s, %s)", bsonutil.FormatDoc(min), bsonutil.FormatDoc(max))
		}
		if chunk, err = r.Table.ChunkForKey(min); err != nil {
			return nil, err
		}
		if bsonutil.CompareDocuments(chunk.Min, min) != 0 || bsonutil.CompareDocuments(chunk.Max, max) != 0 {
			return nil, mongoerr.Newf(mongoerr.Location51261, "no chunk found with the shard key bounds [%s, %s)", bsonutil.FormatDoc(min), bsonutil.FormatDoc(max))
		}
	}
	_, err = c.runOnConfig(ctx, bson.D{{Key: "_configsvrClearJumboFlag", Value: ns},
		{Key: "epoch", Value: r.Table.Generation().Epoch},
		{Key: "minKey", Value: bson.Raw(chunk.Min)}, {Key: "maxKey", Value: bson.Raw(chunk.Max)}})
	c.Cache.OnStaleShardVersion(ns, nil)
	if err != nil {
		return nil, err
	}
	return emptyDocument, nil
}

// runMergeAllChunksOnShard handles {mergeAllChunksOnShard: ns, shard,
// maxNumberOfChunksToMerge}.
func runMergeAllChunksOnShard(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "mergeAllChunksOnShard"
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, _, _, err := nsArg(cmd, name)
	if err != nil {
		return nil, err
	}
	sv := cmd.Lookup("shard")
	if sv.Type == 0 {
		return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.shard' is missing but a required field", name)
	}
	shard, ok := sv.StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.shard' is the wrong type '%s', expected type 'string'", name, bsonutil.TypeName(sv.Type))
	}
	max := int64(math.MaxInt32)
	if v := cmd.Lookup("maxNumberOfChunksToMerge"); v.Type != 0 {
		n, ok := v.AsInt64OK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.maxNumberOfChunksToMerge' is the wrong type '%s', expected type 'int'", name, bsonutil.TypeName(v.Type))
		}
		max = n
	}
	if _, err := c.Shard(ctx, shard); err != nil {
		return nil, err
	}
	_, err = c.runOnConfig(ctx, bson.D{{Key: "_configsvrCommitMergeAllChunksOnShard", Value: ns},
		{Key: "shard", Value: shard}, {Key: "maxNumberOfChunksToMerge", Value: max}})
	c.Cache.OnStaleShardVersion(ns, nil)
	if err != nil {
		return nil, err
	}
	return emptyDocument, nil
}
