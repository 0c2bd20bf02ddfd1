package router

// findAndModify through the router (MongoDB 7.0's cluster_find_and_modify_cmd): an
// unsharded collection's goes to its database's primary shard; a sharded collection's to the
// one shard its query targets (the owner of the query's shard key, or the only shard its
// query can match). One whose query can match on several shards runs in two phases, as
// MongoDB 7.0's _clusterQueryWithoutShardKey/_clusterWriteWithoutShardKey (simplified as
// write_twophase.go describes): each shard's first document by the command's sort is read,
// the least by the sort (binary string order: a collation does not change the choice) is
// chosen, and the command runs on its shard with the query narrowed to its _id. An upsert
// must still name the shard key ("Query for sharded findAndModify must contain the shard
// key", ShardKeyNotFound).

import (
	"bytes"
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
)

func findAndModifyCommand() *service.Command {
	return &service.Command{Name: "findAndModify", Auth: service.AuthFindAndModify, Aliases: []string{"findandmodify"}, Handler: txnStatement(runFindAndModify),
		Writes: true, Secondary: service.SecondaryNever, Help: "find and modify one document"}
}

func runFindAndModify(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, coll, err := collectionNS(env, cmd)
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
	_, retryable := cmd.Lookup("txnNumber").Int64OK()
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
					if stmtBool(cmd, "upsert") {
						return mongoerr.New(mongoerr.ShardKeyNotFound, "Query for sharded findAndModify must contain the shard key")
					}
					reply, err = c.findAndModifyTwoPhase(ctx, env.DB, coll, cmd, query, r, shards)
					return err
				}
				shard = shards[0]
			}
		}
		reply, err = c.runOnRetrying(ctx, retryable, shard, env.DB, routedCmd(base, r, shard))
		return err
	})
	if err != nil {
		return nil, err
	}
	return stripFields(reply, replyNoise), nil
}

// findAndModifyTwoPhase runs a findAndModify whose query can match on several shards.
func (c *Cluster) findAndModifyTwoPhase(ctx context.Context, db, coll string, cmd, query bsoncore.Document,
	r *catalogcache.Routing, shards []string) (bsoncore.Document, error) {
	var sk *expr.SortKey
	sortSpec, _ := cmd.Lookup("sort").DocumentOK()
	if len(sortSpec) > 5 {
		var err error
		if sk, err = expr.NewSortKey(sortSpec); err != nil {
			return nil, err
		}
	}
	idx, find := bsoncore.AppendDocumentStart(nil)
	find = bsoncore.AppendStringElement(find, "find", coll)
	find = bsoncore.AppendDocumentElement(find, "filter", query)
	if sk != nil {
		find = bsoncore.AppendDocumentElement(find, "sort", sortSpec)
	}
	find = bsoncore.AppendInt64Element(find, "limit", 1)
	find = bsoncore.AppendBooleanElement(find, "singleBatch", true)
	for _, k := range []string{"collation", "let", "hint"} {
		if v, err := cmd.LookupErr(k); err == nil {
			find = bsoncore.AppendValueElement(find, k, v)
		}
	}
	find, _ = bsoncore.AppendDocumentEnd(find, idx)
	for attempt := 0; attempt < twoPhaseAttempts; attempt++ {
		replies := c.broadcast(ctx, db, shards, func(s string) bsoncore.Document { return routedCmd(find, r, s) })
		var best []byte
		shard, id := "", bsoncore.Value{}
		for _, sr := range replies {
			if sr.err != nil {
				return nil, sr.err
			}
			arr, _ := sr.reply.Lookup("cursor", "firstBatch").ArrayOK()
			v, err := arr.IndexErr(0)
			if err != nil {
				continue
			}
			d, ok := v.DocumentOK()
			if !ok {
				continue
			}
			var key []byte
			if sk != nil {
				key = sk.Key(d, nil)
			}
			if id.Type == 0 || (sk != nil && bytes.Compare(key, best) < 0) {
				shard, id, best = sr.shard, d.Lookup("_id"), key
			}
		}
		if id.Type == 0 {
			return noMatchReply(stmtBool(cmd, "remove")), nil
		}
		nidx, narrow := bsoncore.AppendDocumentStart(nil)
		e, _ := cmd.IndexErr(0)
		narrow = bsoncore.AppendValueElement(narrow, e.Key(), e.Value())
		elems, _ := cmd.Elements()
		for k, e := range elems {
			if k == 0 || routerOwned[e.Key()] || e.Key() == "query" {
				continue
			}
			narrow = append(narrow, e...)
		}
		narrow = bsoncore.AppendDocumentElement(narrow, "query", narrowedQuery(query, id))
		narrow = forwardSession(narrow, cmd)
		narrow, _ = bsoncore.AppendDocumentEnd(narrow, nidx)
		_, retryable := cmd.Lookup("txnNumber").Int64OK()
		reply, err := c.runOnRetrying(ctx, retryable, shard, db, routedCmd(narrow, r, shard))
		if err != nil {
			return nil, err
		}
		leo, _ := reply.Lookup("lastErrorObject").DocumentOK()
		if replyInt(leo, "n") > 0 || attempt == twoPhaseAttempts-1 {
			return reply, nil
		}
	}
	return nil, mongoerr.New(mongoerr.InternalError, "unreachable")
}

// noMatchReply is a shard's findAndModify reply when nothing matches (a remove's
// lastErrorObject has no updatedExisting).
func noMatchReply(remove bool) bsoncore.Document {
	idx, out := bsoncore.AppendDocumentStart(nil)
	lidx, out := bsoncore.AppendDocumentElementStart(out, "lastErrorObject")
	out = bsoncore.AppendInt32Element(out, "n", 0)
	if !remove {
		out = bsoncore.AppendBooleanElement(out, "updatedExisting", false)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, lidx)
	out = bsoncore.AppendNullElement(out, "value")
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// emptyDoc is {}.
func stringValue(s string) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, s)}
}
