package router

// currentOp and killOp through the router (MongoDB 7.0's cluster_current_op and
// cluster_kill_op): currentOp asks every shard for its operations ($currentOp with allUsers)
// and lists them with the shard's id in `shard` and opid as "<shard>:<opid>", filtered by
// the command's other fields; killOp of such an opid is sent to that shard, a numeric opid
// kills one of the router's own operations.
//
// The router reaches the shards as the internal user and does not pass on its client's
// identity (MongoDB's impersonation metadata), so a shard cannot tell whose an operation is:
// currentOp with $ownOps, and killOp of a shard's operation without killop, are refused
// through humongos rather than answered wrongly.

import (
	"context"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/service"
)

func currentOpCommands() []*service.Command {
	return []*service.Command{
		{Name: "currentOp", Auth: service.AuthCurrentOp, Handler: runRouterCurrentOp, AdminOnly: true,
			Secondary: service.SecondaryAlways, Help: "report the operations running on the cluster's shards"},
		{Name: "killOp", Auth: service.AuthAnyUser, Handler: runRouterKillOp, AdminOnly: true,
			Secondary: service.SecondaryAlways, Help: "Kill an operation: { killOp: 1, op: <opid> }"},
	}
}

func runRouterCurrentOp(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	if service.Truthy(cmd.Lookup("$ownOps")) {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "currentOp with $ownOps is not supported by humongos yet")
	}
	elems, err := cmd.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid command: %v", err)
	}
	fidx, filter := bsoncore.AppendDocumentStart(nil)
	for _, e := range elems[1:] {
		k := e.Key()
		if service.GenericArguments[k] || k == "$all" || k == "$ownOps" || k == "$truncateOps" {
			continue
		}
		filter = append(filter, e...)
	}
	filter, _ = bsoncore.AppendDocumentEnd(filter, fidx)
	m, err := query.Parse(filter, query.ParseOptions{})
	if err != nil {
		return nil, err
	}
	shards, err := c.allShards(ctx)
	if err != nil {
		return nil, err
	}
	spec := bsoncore.NewDocumentBuilder().AppendBoolean("allUsers", true).
		AppendBoolean("idleConnections", service.Truthy(cmd.Lookup("$all"))).Build()
	q := bsoncore.NewDocumentBuilder().AppendInt32("aggregate", 1).
		AppendArray("pipeline", bsoncore.NewArrayBuilder().AppendDocument(
			bsoncore.NewDocumentBuilder().AppendDocument("$currentOp", spec).Build()).Build()).
		AppendDocument("cursor", bsoncore.NewDocumentBuilder().AppendInt64("batchSize", 1<<30).Build()).Build()
	replies := c.broadcast(ctx, "admin", shards, func(string) bsoncore.Document { return q })
	if err := firstError(replies); err != nil {
		return nil, err
	}
	idx, out := bsoncore.AppendDocumentStart(nil)
	ai, out := bsoncore.AppendArrayElementStart(out, "inprog")
	n := 0
	for _, sr := range replies {
		if id, _ := sr.reply.Lookup("cursor", "id").AsInt64OK(); id != 0 {
			// A shard whose operations overflowed one batch: what it listed is reported,
			// its cursor is not left to time out.
			kill := bsoncore.NewDocumentBuilder().AppendString("killCursors", "$cmd.aggregate").
				AppendArray("cursors", bsoncore.NewArrayBuilder().AppendInt64(id).Build()).Build()
			_, _ = c.runOn(ctx, sr.shard, "admin", kill)
		}
		batch, _ := sr.reply.Lookup("cursor", "firstBatch").ArrayOK()
		vals, _ := batch.Values()
		for _, v := range vals {
			d, ok := v.DocumentOK()
			if !ok {
				continue
			}
			d = shardOp(sr.shard, d)
			if ok, err := m.Matches(d); err != nil || !ok {
				continue
			}
			out = bsoncore.AppendDocumentElement(out, strconv.Itoa(n), d)
			n++
		}
	}
	out, _ = bsoncore.AppendArrayEnd(out, ai)
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out, nil
}

// shardOp is a shard's operation document as mongos lists it: shard first, opid as
// "<shard>:<opid>".
func shardOp(shard string, d bsoncore.Document) bsoncore.Document {
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(d)+len(shard)*2+32))
	out = bsoncore.AppendStringElement(out, "shard", shard)
	elems, _ := d.Elements()
	for _, e := range elems {
		if e.Key() == "opid" {
			if id, ok := e.Value().AsInt64OK(); ok {
				out = bsoncore.AppendStringElement(out, "opid", shard+":"+strconv.FormatInt(id, 10))
				continue
			}
		}
		out = append(out, e...)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

func runRouterKillOp(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	v := cmd.Lookup("op")
	if v.Type == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Did not provide \"op\" field")
	}
	s, isString := v.StringValueOK()
	if !isString {
		// One of the router's own operations (only the caller's own without killop).
		opID, err := service.IntArg("killOp", "op", v)
		if err != nil {
			return nil, err
		}
		if env.State.Clients.KillAs(env.Auth, opID, service.ErrInterrupted()) {
			env.State.Logger.Info("Going to kill op", "c", "COMMAND", "id", 20482, "ctx", env.Conn.Desc(), "opId", opID)
		}
		return bsoncore.NewDocumentBuilder().AppendString("info", "attempting to kill op").Build(), nil
	}
	shard, num, ok := strings.Cut(s, ":")
	opID, perr := strconv.ParseInt(num, 10, 64)
	if !ok || shard == "" || perr != nil {
		return nil, mongoerr.Newf(mongoerr.FailedToParse, "Invalid opid %q: expected \"<shard>:<opid>\"", s)
	}
	if env.Auth != nil && !env.Auth.Allowed(auth.Cluster(), auth.Killop) {
		return nil, service.ErrNotAuthorized
	}
	reply, err := c.runOn(ctx, shard, "admin", bsoncore.NewDocumentBuilder().AppendInt32("killOp", 1).AppendInt64("op", opID).Build())
	if err != nil {
		return nil, err
	}
	idx, out := bsoncore.AppendDocumentStart(nil)
	elems, _ := stripFields(reply, replyNoise).Elements()
	for _, e := range elems {
		out = append(out, e...)
	}
	out = bsoncore.AppendStringElement(out, "shard", shard)
	out = bsoncore.AppendInt64Element(out, "shardid", opID)
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out, nil
}
