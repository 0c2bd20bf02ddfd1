package router

// The foreign side of $lookup, $graphLookup and $unionWith run on the router (MongoDB's
// sharded $lookup: the stage runs in the merging part and reads the foreign collection
// through the router's own routing). routerResolver is internal/agg's CollectionResolver and
// Querier seam (agg/pipeline.go) over the cluster: Open scatter-gathers the foreign
// collection, Query targets the shards the probe's filter reaches by the foreign
// collection's shard key (every shard otherwise). Each read is a merged router stream over
// the shards' cursors (mergeSource), fetched a batch at a time, so memory stays bounded as on
// mongod: internal/agg decides, from the first probe, between per-probe queries (reported
// as using the shard key's index when the probe targets a strict subset of the shards, so
// later probes are targeted too), one hash table bounded by LookupCacheBytes, or a streamed
// scan per probe. Writers ($out, $merge) are agg_out.go's.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/sharding/catalogcache"
)

// routerResolver reads (and, agg_out.go, writes) other collections through the router.
type routerResolver struct {
	c *Cluster
	// collation is the aggregate's collation document (nil: none), sent with every foreign
	// read so the shards compare as the pipeline does.
	collation bsoncore.Document
	// writeConcern is the aggregate's writeConcern (nil: the default), for $out and $merge.
	writeConcern bsoncore.Document
	bypass       bool // bypassDocumentValidation
	// readConcern is the aggregate's readConcern (nil: none), which the foreign reads
	// carry as mongos's sub-pipelines do.
	readConcern bsoncore.Document
}

var _ agg.Querier = (*routerResolver)(nil)

// Open implements agg.CollectionResolver: the whole of db.coll through the router (an empty
// stream when its database does not exist).
func (rr *routerResolver) Open(ctx context.Context, db, coll string) (agg.Source, error) {
	src, _, err := rr.read(ctx, db, coll, nil)
	return src, err
}

// Query implements agg.Querier. The index reported is the shard key's when filter targets
// fewer shards than a scatter-gather would (the shard key is always indexed), "" otherwise.
func (rr *routerResolver) Query(ctx context.Context, db, coll string, filter bsoncore.Document) (agg.Source, string, error) {
	src, targeted, err := rr.read(ctx, db, coll, filter)
	if err != nil {
		return nil, "", err
	}
	index := ""
	if targeted {
		index = "shardKey"
	}
	return src, index, nil
}

// read opens a routed find of db.coll with filter; targeted reports that the collection is
// sharded and filter reached a strict subset of the shards owning chunks.
func (rr *routerResolver) read(ctx context.Context, db, coll string, filter bsoncore.Document) (agg.Source, bool, error) {
	ns := db + "." + coll
	var src *mergeSource
	var targeted bool
	err := rr.c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
		shards, err := targetShards(r, filter, rr.collation != nil)
		if err != nil {
			return err
		}
		if r.Sharded() && filter != nil {
			all, err := targetShards(r, nil, false)
			if err != nil {
				return err
			}
			targeted = len(shards) < len(all)
		}
		b := bsoncore.NewDocumentBuilder().AppendString("find", coll)
		if filter != nil {
			b.AppendDocument("filter", filter)
		}
		if rr.collation != nil {
			b.AppendDocument("collation", rr.collation)
		}
		if rr.readConcern != nil {
			b.AppendDocument("readConcern", rr.readConcern)
		}
		cmd := b.Build()
		cursors, err := openCursors(ctx, rr.c, db, shards, versionedFor(cmd, r, shards))
		if err != nil {
			return err
		}
		src = &mergeSource{cursors: cursors}
		return nil
	})
	if missingDatabase(err) {
		return emptySource{}, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return src, targeted, nil
}

// emptySource is the stream of a collection in a database that does not exist.
type emptySource struct{}

func (emptySource) Next(context.Context) (bsoncore.Document, bool, error) { return nil, false, nil }
func (emptySource) Close()                                                {}
