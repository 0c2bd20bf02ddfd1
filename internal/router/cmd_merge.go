package router

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/ddl"
)

func mergeChunksCommand() *service.Command {
	return &service.Command{Name: "mergeChunks", Auth: service.AuthOnFullNS(auth.SplitChunk), Handler: runMergeChunks, AdminOnly: true, Secondary: service.SecondaryAlways,
		Help: "Merge Chunks command\nusage: { mergeChunks : <ns>, bounds : [ <min key>, <max key> ] }"}
}

// runMergeChunks is mongos's mergeChunks ({mergeChunks: ns, bounds: [min, max]}): the
// bounds must be shard keys of the collection; the shard owning the chunk at min is asked to
// merge (it has the config server commit the merge of its chunks exactly filling the range).
func runMergeChunks(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, _, _, err := nsArg(cmd, "mergeChunks")
	if err != nil {
		return nil, err
	}
	bv, err := cmd.LookupErr("bounds")
	if err != nil {
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'mergeChunks.bounds' is missing but a required field")
	}
	min, max, err := ddl.ParseBounds("mergeChunks", bv)
	if err != nil {
		return nil, err
	}
	r, err := shardedRouting(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	p := r.Table.Pattern()
	if !p.IsShardKey(min) || !p.IsShardKey(max) {
		return nil, mongoerr.Newf(mongoerr.InvalidOptions, "shard key bounds [%s, %s) are not valid for shard key pattern %s",
			bsonutil.FormatDoc(min), bsonutil.FormatDoc(max), p)
	}
	chunk, err := r.Table.ChunkForKey(min)
	if err != nil {
		return nil, err
	}
	rs, err := c.Shard(ctx, chunk.Shard)
	if err != nil {
		return nil, err
	}
	merge := bsoncore.NewDocumentBuilder().AppendString("mergeChunks", ns).
		AppendArray("bounds", bsoncore.NewArrayBuilder().AppendDocument(min).AppendDocument(max).Build()).
		AppendObjectID("epoch", r.Table.Generation().Epoch).
		AppendTimestamp("timestamp", r.Table.Generation().Timestamp.T, r.Table.Generation().Timestamp.I).Build()
	_, err = ddl.Run(ctx, rs, "admin", merge)
	// The next use refreshes (incrementally: the merged chunk has the newest version and
	// replaces the ones it covers).
	c.Cache.OnStaleShardVersion(ns, nil)
	if err != nil {
		return nil, err
	}
	return emptyDocument, nil
}
