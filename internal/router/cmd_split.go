package router

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/ddl"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

func splitCommand() *service.Command {
	return &service.Command{Name: "split", Auth: service.AuthOnFullNS(auth.SplitChunk), Handler: runSplit, AdminOnly: true, Secondary: service.SecondaryAlways,
		Help: " example: - split the shard that contains give key\n   { split : 'alleyinsider.blog.posts' , find : { ts : 1 } }\n" +
			" example: - split the shard that contains the key with this as the middle\n   { split : 'alleyinsider.blog.posts' , middle : { ts : 1 } }\n" +
			" NOTE: this does not move the chunks, it just creates a logical separation."}
}

// splitErr is the error of mongos's errmsg-style argument checks (they carry no code of
// their own in MongoDB; InvalidOptions here).
func splitErr(format string, args ...any) error {
	return mongoerr.Newf(mongoerr.InvalidOptions, format, args...)
}

// shardedRouting refreshes ns's routing (incrementally, as
// getShardedCollectionRoutingInfoWithRefresh) and requires the collection to be sharded.
func shardedRouting(ctx context.Context, c *Cluster, ns string) (*catalogcache.Routing, error) {
	c.Cache.OnStaleShardVersion(ns, nil)
	r, err := c.Cache.Routing(ctx, ns)
	if err != nil {
		return nil, err
	}
	if !r.Sharded() {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotSharded, "Expected collection %s to be sharded", ns)
	}
	return r, nil
}

// runSplit is mongos's split ({split: ns, find | bounds | middle}): it picks the chunk (the
// one holding the find's shard key, the one with exactly these bounds, or the one holding
// middle), and the split point (middle, or the chunk's median document's key read from the
// owning shard), and sends splitChunk to the chunk's owner, which has the config server
// commit it. The router then forgets its routing for ns.
func runSplit(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, _, _, err := nsArg(cmd, "split")
	if err != nil {
		return nil, err
	}
	r, err := shardedRouting(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	p := r.Table.Pattern()
	docArg := func(field string) (bsoncore.Document, error) {
		v, err := cmd.LookupErr(field)
		if err != nil {
			return nil, nil
		}
		d, ok := v.DocumentOK()
		if !ok {
			return nil, splitErr("wrong type for '%s' field, expected object, found %s", field, v.Type)
		}
		if len(d) <= 5 {
			return nil, nil
		}
		return d, nil
	}
	find, err := docArg("find")
	if err != nil {
		return nil, err
	}
	middle, err := docArg("middle")
	if err != nil {
		return nil, err
	}
	var bounds []bsoncore.Value
	if v, err := cmd.LookupErr("bounds"); err == nil {
		arr, ok := v.ArrayOK()
		if !ok {
			return nil, splitErr("wrong type for 'bounds' field, expected array, found %s", v.Type)
		}
		bounds, _ = arr.Values()
		if len(bounds) > 0 && len(bounds) < 2 {
			return nil, splitErr("upper bound not specified")
		}
	}
	switch {
	case find != nil && len(bounds) > 0:
		return nil, splitErr("cannot specify bounds and find at the same time")
	case find == nil && len(bounds) == 0 && middle == nil:
		return nil, splitErr("need to specify find/bounds or middle")
	case find != nil && middle != nil:
		return nil, splitErr("cannot specify find and middle together")
	case len(bounds) > 0 && middle != nil:
		return nil, splitErr("cannot specify bounds and middle together")
	}
	var chunk *routing.Chunk
	switch {
	case find != nil:
		key, ok := shardKeyOfQuery(p, find)
		if !ok {
			return nil, splitErr("no shard key found in chunk query %s", bsonutil.FormatDoc(find))
		}
		if chunk, err = r.Table.ChunkForKey(key); err != nil {
			return nil, err
		}
	case len(bounds) > 0:
		min, ok1 := bounds[0].DocumentOK()
		max, ok2 := bounds[1].DocumentOK()
		if !ok1 || !ok2 || !p.IsShardKey(min) || !p.IsShardKey(max) {
			return nil, splitErr("shard key bounds [%s,%s) are not valid for shard key pattern %s",
				fmtValue(bounds[0]), fmtValue(bounds[1]), p)
		}
		if chunk, err = r.Table.ChunkForKey(min); err != nil {
			return nil, err
		}
		if bsonutil.CompareDocuments(chunk.Min, min) != 0 || bsonutil.CompareDocuments(chunk.Max, max) != 0 {
			return nil, splitErr("no chunk found with the shard key bounds [%s, %s)", bsonutil.FormatDoc(min), bsonutil.FormatDoc(max))
		}
	default:
		if !p.IsShardKey(middle) {
			return nil, splitErr("new split key %s is not valid for shard key pattern %s", bsonutil.FormatDoc(middle), p)
		}
		if chunk, err = r.Table.ChunkForKey(middle); err != nil {
			return nil, err
		}
		if bsonutil.CompareDocuments(chunk.Min, middle) == 0 || bsonutil.CompareDocuments(chunk.Max, middle) == 0 {
			return nil, splitErr("new split key %s is a boundary key of existing chunk [%s,%s)",
				bsonutil.FormatDoc(middle), bsonutil.FormatDoc(chunk.Min), bsonutil.FormatDoc(chunk.Max))
		}
	}
	point := middle
	if point == nil {
		// The median is read from the owning shard with the routing's shard version: a shard
		// that has not loaded the collection's metadata yet answers StaleConfig and refreshes.
		err = c.WithRouting(ctx, ns, func(rr *catalogcache.Routing) error {
			if !rr.Sharded() {
				return mongoerr.Newf(mongoerr.NamespaceNotSharded, "Expected collection %s to be sharded", ns)
			}
			var e error
			point, e = medianKey(ctx, c, rr, chunk)
			return e
		})
		if err != nil {
			return nil, err
		}
	}
	rs, err := c.Shard(ctx, chunk.Shard)
	if err != nil {
		return nil, err
	}
	split := ddl.SplitChunkCommand(ddl.SplitRequest{NS: ns, From: chunk.Shard, KeyPattern: p.Doc(), Gen: r.Table.Generation(),
		Min: chunk.Min, Max: chunk.Max, SplitKeys: []bsoncore.Document{point}})
	_, err = ddl.Run(ctx, rs, "admin", split)
	// The next use refreshes (incrementally: the split pieces have newer versions).
	c.Cache.OnStaleShardVersion(ns, nil)
	if err != nil {
		return nil, err
	}
	return emptyDocument, nil
}

var emptyDocument = bsoncore.NewDocumentBuilder().Build()

func fmtValue(v bsoncore.Value) string {
	if d, ok := v.DocumentOK(); ok {
		return bsonutil.FormatDoc(d)
	}
	return v.String()
}

// shardKeyOfQuery is extractShardKeyFromBasicQuery for equality queries: every shard key
// field must be given as a plain value (not an operator document); hashed fields are hashed.
func shardKeyOfQuery(p *shardkey.Pattern, q bsoncore.Document) (bsoncore.Document, bool) {
	for _, f := range p.Fields() {
		v, err := q.LookupErr(f)
		if err != nil {
			return nil, false
		}
		if d, ok := v.DocumentOK(); ok {
			if e, err := d.IndexErr(0); err == nil && len(e.Key()) > 0 && e.Key()[0] == '$' {
				return nil, false
			}
		}
		if v.Type == bsoncore.TypeArray || v.Type == bsoncore.TypeRegex {
			return nil, false
		}
	}
	vals := make([]bsoncore.Value, 0, p.NumFields())
	for i, f := range p.Fields() {
		v := q.Lookup(f)
		if i == p.HashedField() {
			h, err := shardkey.HashValue(v)
			if err != nil {
				return nil, false
			}
			v = h
		}
		vals = append(vals, v)
	}
	return p.KeyFromValues(vals...), true
}

// medianKey is mongos's selectMedianKey: splitVector with force on the chunk's owner (its
// shard key index scanned over the chunk, split in the middle), for every kind of shard key;
// a chunk with no second key value cannot be split.
func medianKey(ctx context.Context, c *Cluster, r *catalogcache.Routing, chunk *routing.Chunk) (bsoncore.Document, error) {
	rs, err := c.Shard(ctx, chunk.Shard)
	if err != nil {
		return nil, err
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("splitVector", r.Coll.NS).
		AppendDocument("keyPattern", r.Table.Pattern().Doc()).
		AppendDocument("min", chunk.Min).AppendDocument("max", chunk.Max).AppendBoolean("force", true).Build()
	reply, err := ddl.Run(ctx, rs, "admin", cmd)
	if err != nil {
		return nil, err
	}
	keys, _ := reply.Lookup("splitKeys").ArrayOK()
	vals, _ := keys.Values()
	if len(vals) > 0 {
		if d, ok := vals[0].DocumentOK(); ok {
			return append(bsoncore.Document(nil), d...), nil
		}
	}
	return nil, mongoerr.New(mongoerr.CannotSplit, "Unable to find median in chunk because chunk is indivisible.")
}
