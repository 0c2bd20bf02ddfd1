package router

// Sending commands to shards (spec: sharding.md "Routing"; MongoDB's ShardEndpoint and
// AsyncRequestsSender): which replica set a shard id names (the config server for the config
// and admin databases), how a client's command is rebuilt for a shard (the generic arguments
// a router forwards and those it owns), and how a shard's error reply becomes the router's.

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/client"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
)

// configShard is the shard id configclient gives the config and admin databases' primary:
// they live on the config server replica set (as mongos's "config" shard).
const configShard = "config"

// replicaSet returns the client of shard id, the config server's for configShard.
func (c *Cluster) replicaSet(ctx context.Context, id string) (*client.ReplicaSet, error) {
	if id == configShard {
		return c.config, nil
	}
	return c.Shard(ctx, id)
}

// runOn runs cmd against db on shard's primary. A shard's error reply becomes a
// *mongoerr.Error with the shard's code, message, labels and extra fields (shardError).
func (c *Cluster) runOn(ctx context.Context, shard, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	rs, err := c.replicaSet(ctx, shard)
	if err != nil {
		return nil, err
	}
	t := txnFrom(ctx)
	if t != nil && shard != configShard {
		cmd = t.attach(shard, cmd)
	} else {
		t = nil
		cmd = gossipReadTime(ctx, cmd)
	}
	raw, err := rs.RunCommand(ctx, db, bson.Raw(cmd), nil)
	if err != nil {
		// The driver reports a reply with ok: 1 and writeErrors or a writeConcernError as an
		// error; for the router it is a reply to merge.
		var we mongo.WriteException
		if errors.As(err, &we) && len(we.Raw) > 0 {
			if ok, _ := bsoncore.Document(we.Raw).Lookup("ok").AsFloat64OK(); ok == 1 {
				if t != nil {
					t.observe(shard, bsoncore.Document(we.Raw))
				}
				return bsoncore.Document(we.Raw), nil
			}
		}
		return nil, writeShardError(ctx, err, shard)
	}
	if t != nil {
		t.observe(shard, bsoncore.Document(raw))
	}
	return bsoncore.Document(raw), nil
}

// maxFailedHostRetries is MongoDB's kMaxNumFailedHostRetryAttempts: how many times a
// retryable write is sent again after a retriable error.
const maxFailedHostRetries = 3

// runOnRetrying is runOn for a command the router may send again (a retryable write: the shard
// recognises a statement that already ran; MongoDB's RetryPolicy::kIdempotent): after a
// retriable error (the primary stepped down or is unreachable, it is shutting down) it sends
// the command again, to the primary the client finds then, at most maxFailedHostRetries times.
func (c *Cluster) runOnRetrying(ctx context.Context, retry bool, shard, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	if !retry {
		return c.runOn(ctx, shard, db, cmd)
	}
	var reply bsoncore.Document
	err := retryFailedHost(ctx, func() (err error) {
		reply, err = c.runOn(ctx, shard, db, cmd)
		return err
	})
	return reply, err
}

// routedCmd returns cmd as sent for routing r to shard: versioned (Versioned) except on the
// config server, which the config and admin databases are routed to unversioned (mongos's
// targeter sends no shardVersion for internal databases).
func routedCmd(cmd bsoncore.Document, r *catalogcache.Routing, shard string) bsoncore.Document {
	if shard == configShard || r.DB.Primary == configShard {
		return cmd
	}
	return Versioned(cmd, r, shard)
}

// replyNoise are the fields of a shard's reply that are about the shard's connection, not
// the command: they never reach the router's client.
var replyNoise = map[string]bool{
	"ok": true, "errmsg": true, "code": true, "codeName": true, "errorLabels": true,
	"$clusterTime": true, "operationTime": true, "$configTime": true, "$topologyTime": true,
	"topologyVersion": true, "$gleStats": true, "lastCommittedOpTime": true, "$configServerState": true,
	"electionId": true, "opTime": true,
}

// shardError is err (from the driver) as the router answers it: a shard's command error keeps
// its code, message, labels and extra fields (errInfo, keyPattern, StaleConfig's ns and
// versions...) and the driver error as its cause, so NoteStale still reads the shard's reply;
// a request that got no reply is HostUnreachable or FailedToSatisfyReadPreference
// (transportError).
func writeShardError(ctx context.Context, err error, shard string) error {
	if te := transportError(ctx, shard, err); te != nil {
		return te
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		me := &mongoerr.Error{Code: mongoerr.Code(ce.Code), Msg: ce.Message, Labels: ce.Labels, Err: ce}
		if len(ce.Raw) > 0 {
			me.Info = stripFields(bsoncore.Document(ce.Raw), replyNoise)
		}
		return me
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	if _, ok := mongoerr.As(err); ok {
		return err
	}
	return mongoerr.Newf(mongoerr.HostUnreachable, "cannot reach shard %s: %w", shard, err)
}

// stripFields returns d without the top-level fields in drop.
func stripFields(d bsoncore.Document, drop map[string]bool) bsoncore.Document {
	idx, out := bsoncore.AppendDocumentStart(nil)
	elems, _ := d.Elements()
	for _, e := range elems {
		if !drop[e.Key()] {
			out = append(out, e...)
		}
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// routerOwned are the generic arguments a router does not pass through to shards: the
// connection's own ($db, $clusterTime, read preference...), the versions it attaches itself,
// and the session fields forwardSession re-adds.
var routerOwned = map[string]bool{
	"$db": true, "lsid": true, "txnNumber": true, "stmtId": true, "stmtIds": true,
	"autocommit": true, "startTransaction": true, "$clusterTime": true, "$readPreference": true,
	"$configTime": true, "$topologyTime": true, "$audit": true, "$client": true,
	"shardVersion": true, "databaseVersion": true, "$configServerState": true, "$secondaryOk": true,
	"$queryOptions": true, "help": true,
}

// shardCmd starts a command for a shard: {name: arg} followed by every field of the client's
// cmd a router passes through except skip's (the fields the caller rebuilds). The caller
// appends its own fields to the returned builder's bytes and ends the document.
func shardCmd(name string, arg bsoncore.Value, cmd bsoncore.Document, skip ...string) (int32, []byte) {
	idx, out := bsoncore.AppendDocumentStart(nil)
	out = bsoncore.AppendValueElement(out, name, arg)
	elems, _ := cmd.Elements()
	for i, e := range elems {
		if i == 0 || routerOwned[e.Key()] || contains(skip, e.Key()) {
			continue
		}
		out = append(out, e...)
	}
	return idx, out
}

func contains(s []string, k string) bool {
	for _, x := range s {
		if x == k {
			return true
		}
	}
	return false
}

// forwardSession appends the client's lsid and txnNumber when the command is a retryable
// write (it has a txnNumber): the shard then records the write in the session so a retry
// through any router is answered from its history.
func forwardSession(out []byte, cmd bsoncore.Document) []byte {
	txn, err := cmd.LookupErr("txnNumber")
	if err != nil {
		return out
	}
	if lsid, err := cmd.LookupErr("lsid"); err == nil {
		out = bsoncore.AppendValueElement(out, "lsid", lsid)
	}
	return bsoncore.AppendValueElement(out, "txnNumber", txn)
}

// refuseTransaction answers a command not allowed in a multi-document transaction that
// carries autocommit or startTransaction, with mongod's and mongos's error (the commands
// allowed in one are wrapped in txnStatement instead).
func refuseTransaction(cmd bsoncore.Document) error {
	_, acErr := cmd.LookupErr("autocommit")
	_, stErr := cmd.LookupErr("startTransaction")
	if acErr != nil && stErr != nil {
		return nil
	}
	name := ""
	if e, err := cmd.IndexErr(0); err == nil {
		name = e.Key()
	}
	return mongoerr.Newf(mongoerr.OperationNotSupportedInTransaction, "Cannot run '%s' in a multi-document transaction.", name)
}

// collectionArg returns the collection a command names in its first field (a string), as
// "db.coll"; InvalidNamespace when it is not a valid one.
func collectionNS(env *service.Env, cmd bsoncore.Document) (string, string, error) {
	v := lookupFirst(cmd)
	coll, ok := v.StringValueOK()
	if !ok {
		return "", "", mongoerr.Newf(mongoerr.InvalidNamespace, "collection name has invalid type %s", typeName(v.Type))
	}
	ns := env.DB + "." + coll
	if err := catalog.ValidateNS(ns); err != nil {
		return "", "", err
	}
	return ns, coll, nil
}

func typeName(t bsoncore.Type) string {
	if t == 0 {
		return "missing"
	}
	return t.String()
}
