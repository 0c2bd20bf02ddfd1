package router

// moveChunk and moveRange on the router (MongoDB 7.0's ClusterMoveChunkCmd and
// ClusterMoveRangeCommand): the arguments are checked against the router's routing table,
// then the config server's _configsvrMoveRange has the donor primary run the migration
// (_shardsvrMoveRange; internal/sharding/migration). The router forgets its routing for the
// collection afterwards; other routers learn the move from StaleConfig.

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/ddl"
	"humongo/internal/sharding/migration"
	"humongo/internal/sharding/routing"
)

func migrationCommands() []*service.Command {
	return []*service.Command{
		{Name: "moveChunk", Auth: service.AuthOnFullNS(auth.MoveChunk), Aliases: []string{"movechunk"}, Handler: runMoveChunk, AdminOnly: true, Secondary: service.SecondaryAlways,
			Help: "Example: move chunk that contains the doc {num : 7} to shard001\n" +
				"  { movechunk : 'test.foo' , find : { num : 7 } , to : 'shard0001' }\n" +
				"Example: move chunk with lower bound 0 and upper bound 10 to shard001\n" +
				"  { movechunk : 'test.foo' , bounds : [ { num : 0 } , { num : 10 } ]  , to : 'shard001' }\n"},
		{Name: "moveRange", Auth: service.AuthOnFullNS(auth.MoveChunk), Handler: runMoveRange, AdminOnly: true, Secondary: service.SecondaryAlways,
			Help: "Moves a range of a sharded collection to another shard: { moveRange: 'db.coll', toShard: 'shard0001', min: {...}, max: {...} }"},
	}
}

// moveErr is the error of ClusterMoveChunkCmd's errmsg-style checks (no code of their own
// in MongoDB; InvalidOptions here, as the router's split does).
func moveErr(format string, args ...any) error {
	return mongoerr.Newf(mongoerr.InvalidOptions, format, args...)
}

// runMoveChunk is mongos's moveChunk ({moveChunk: ns, find | bounds, to, _secondaryThrottle,
// writeConcern, _waitForDelete, forceJumbo}): it picks the chunk (holding find's shard key,
// or with exactly these bounds) and asks the config server to move it.
func runMoveChunk(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	start := time.Now()
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, _, _, err := nsArg(cmd, "moveChunk")
	if err != nil {
		return nil, err
	}
	r, err := shardedRouting(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	toV := cmd.Lookup("to")
	to, ok := toV.StringValueOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "'to' must be of type String")
	}
	if to == "" {
		return nil, moveErr("you have to specify where you want to move the chunk")
	}
	if _, err := c.Shards.Lookup(ctx, to); err != nil {
		return nil, mongoerr.Newf(mongoerr.ShardNotFound, "Could not move chunk in '%s' to shard '%s' because that shard does not exist", ns, to)
	}
	p := r.Table.Pattern()
	find, _ := cmd.Lookup("find").DocumentOK()
	var bounds []bsoncore.Value
	if arr, ok := cmd.Lookup("bounds").ArrayOK(); ok {
		bounds, _ = arr.Values()
	}
	if (len(find) <= 5) == (len(bounds) == 0) {
		return nil, moveErr("need to specify either a find query, or both lower and upper bounds.")
	}
	var chunk *routing.Chunk
	if len(find) > 5 {
		key, ok := shardKeyOfQuery(p, find)
		if !ok {
			return nil, moveErr("no shard key found in chunk query %s", bsonutil.FormatDoc(find))
		}
		if chunk, err = r.Table.ChunkForKey(key); err != nil {
			return nil, err
		}
	} else {
		if len(bounds) != 2 {
			return nil, moveErr("need to specify either a find query, or both lower and upper bounds.")
		}
		min, ok1 := bounds[0].DocumentOK()
		max, ok2 := bounds[1].DocumentOK()
		if !ok1 || !ok2 || !p.IsShardKey(min) || !p.IsShardKey(max) {
			return nil, moveErr("shard key bounds [%s,%s) are not valid for shard key pattern %s",
				fmtValue(bounds[0]), fmtValue(bounds[1]), p)
		}
		if chunk, err = r.Table.ChunkForKey(min); err != nil {
			return nil, err
		}
		if bsonutil.CompareDocuments(chunk.Min, min) != 0 || bsonutil.CompareDocuments(chunk.Max, max) != 0 {
			return nil, moveErr("no chunk found with the shard key bounds [%s, %s)", bsonutil.FormatDoc(min), bsonutil.FormatDoc(max))
		}
	}
	wfd1, _ := cmd.Lookup("_waitForDelete").BooleanOK()
	wfd2, _ := cmd.Lookup("waitForDelete").BooleanOK()
	waitForDelete := wfd1 || wfd2
	forceJumbo := migration.DoNotForce
	if b, ok := cmd.Lookup("forceJumbo").BooleanOK(); ok && b {
		forceJumbo = migration.ForceManualMigration
	}
	req := migration.MoveRangeRequest{NS: ns, ToShard: to, Min: chunk.Min, Max: chunk.Max, WaitForDelete: waitForDelete,
		ForceJumbo: forceJumbo, SecondaryThrottle: secondaryThrottle(cmd)}
	if err := configsvrMoveRange(ctx, c, req); err != nil {
		c.Cache.OnStaleShardVersion(ns, nil)
		return nil, err
	}
	c.Cache.OnStaleShardVersion(ns, nil)
	return bsoncore.NewDocumentBuilder().AppendInt64("millis", time.Since(start).Milliseconds()).Build(), nil
}

// secondaryThrottle is moveChunk's {_secondaryThrottle, writeConcern} as the config
// server's request carries them (nil when neither was given).
func secondaryThrottle(cmd bsoncore.Document) bsoncore.Document {
	st := cmd.Lookup("_secondaryThrottle")
	if st.Type == 0 {
		st = cmd.Lookup("secondaryThrottle")
	}
	wc := cmd.Lookup("writeConcern")
	if st.Type == 0 && wc.Type == 0 {
		return nil
	}
	b := bsoncore.NewDocumentBuilder()
	if st.Type != 0 {
		b.AppendValue("_secondaryThrottle", st)
	}
	if wc.Type != 0 {
		b.AppendValue("writeConcern", wc)
	}
	return b.Build()
}

// runMoveRange is mongos's moveRange ({moveRange: ns, toShard, min, max?, forceJumbo?,
// waitForDelete?, secondaryThrottle?}).
func runMoveRange(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	if _, _, _, err := nsArg(cmd, "moveRange"); err != nil {
		return nil, err
	}
	req, err := migration.ParseMoveRangeBase("moveRange", cmd)
	if err != nil {
		return nil, err
	}
	r, err := shardedRouting(ctx, c, req.NS)
	if err != nil {
		return nil, err
	}
	p := r.Table.Pattern()
	if !p.IsShardKey(req.Min) || (req.Max != nil && !p.IsShardKey(req.Max)) {
		return nil, moveErr("shard key bounds [%s, %s) are not valid for shard key pattern %s",
			bsonutil.FormatDoc(req.Min), fmtDocOrEmpty(req.Max), p)
	}
	if _, err := c.Shards.Lookup(ctx, req.ToShard); err != nil {
		return nil, mongoerr.Newf(mongoerr.ShardNotFound, "Could not find shard %s", req.ToShard)
	}
	err = configsvrMoveRange(ctx, c, req)
	c.Cache.OnStaleShardVersion(req.NS, nil)
	if err != nil {
		return nil, err
	}
	return emptyDocument, nil
}

func fmtDocOrEmpty(d bsoncore.Document) string {
	if d == nil {
		return "{}"
	}
	return bsonutil.FormatDoc(d)
}

// configsvrMoveRange sends {_configsvrMoveRange: ns, toShard, min, max?, waitForDelete,
// forceJumbo, secondaryThrottle?} (majority) to the config server primary.
func configsvrMoveRange(ctx context.Context, c *Cluster, req migration.MoveRangeRequest) error {
	b := bsoncore.NewDocumentBuilder().AppendString("_configsvrMoveRange", req.NS).AppendString("toShard", req.ToShard).
		AppendDocument("min", req.Min)
	if req.Max != nil {
		b.AppendDocument("max", req.Max)
	}
	b.AppendBoolean("waitForDelete", req.WaitForDelete).AppendString("forceJumbo", req.ForceJumbo)
	if req.SecondaryThrottle != nil {
		b.AppendDocument("secondaryThrottle", req.SecondaryThrottle)
	}
	b.AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build())
	_, err := ddl.Run(ctx, c.Config(), "admin", b.Build())
	return err
}
