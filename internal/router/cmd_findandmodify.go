package router

// findAndModify through the router (MongoDB 7.0's cluster_find_and_modify_cmd): an
// unsharded collection's goes to its database's primary shard; a sharded collection's to the
// one shard its query targets (the owner of the query's shard key, or the only shard its
// query can match). MongoDB 7.0 runs one whose query targets several shards through its
// two-phase _clusterQueryWithoutShardKey; humongos does not have it yet and answers as
// MongoDB 6 did, ShardKeyNotFound "Query for sharded findAndModify must contain the shard
// key".

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
)

func findAndModifyCommand() *service.Command {
	return &service.Command{Name: "findAndModify", Aliases: []string{"findandmodify"}, Handler: runFindAndModify,
		Writes: true, Secondary: service.SecondaryNever, Help: "find and modify one document"}
}

func runFindAndModify(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	if err := refuseTransaction(cmd); err != nil {
		return nil, err
	}
	ns, coll, err := collectionArg(env, cmd)
	if err != nil {
		return nil, err
	}
	query, err := stmtDoc("findAndModify", "query", cmd, false)
	if err != nil {
		return nil, err
	}
	if query == nil {
		query = emptyDoc
	}
	collated := collatedOf(cmd)
	if _, err := c.ensureDatabase(ctx, env.DB); err != nil {
		return nil, err
	}
	idx, base := shardCmd("findAndModify", stringValue(coll), cmd)
	base = forwardSession(base, cmd)
	base, _ = bsoncore.AppendDocumentEnd(base, idx)
	var reply bsoncore.Document
	err = c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
		shard := r.DB.Primary
		if r.Sharded() {
			if key := exactShardKey(r.Table, query, collated); key != nil {
				if shard, err = r.Table.ShardForKey(key); err != nil {
					return err
				}
			} else {
				shards, err := r.Table.ShardsForQuery(query, collated)
				if err != nil {
					return err
				}
				if len(shards) != 1 {
					return mongoerr.New(mongoerr.ShardKeyNotFound, "Query for sharded findAndModify must contain the shard key")
				}
				shard = shards[0]
			}
		}
		reply, err = c.runOn(ctx, shard, env.DB, routedCmd(base, r, shard))
		return err
	})
	if err != nil {
		return nil, err
	}
	return stripFields(reply, replyNoise), nil
}

// emptyDoc is {}.
var emptyDoc = bsoncore.Document{5, 0, 0, 0, 0}

func stringValue(s string) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, s)}
}
