package router

// validate through the router (MongoDB 7.0's cluster_validate_cmd): the command goes to every
// shard owning the collection (its primary shard when unsharded), with the routing versions;
// the reply holds each shard's answer under raw, keyed by shard id, and either the one
// shard's own fields (unsharded) or valid: every shard found it valid (sharded). A shard's
// failure is the command's error, raw still attached.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
)

func validateCommand() *service.Command {
	return &service.Command{
		Name:      "validate",
		Auth:      service.AuthOnNS(auth.Validate),
		Handler:   runRouterValidate,
		Secondary: service.SecondaryAlways,
		Help:      "Validate contents of a namespace by scanning its data structures for correctness.\nThis is a slow operation.",
	}
}

func runRouterValidate(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, err := collectionArg(env, cmd)
	if err != nil {
		return nil, err
	}
	base := forward(cmd, nil, nil)
	var replies []shardReply
	sharded := false
	err = c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
		sharded = r.Sharded()
		replies = c.broadcast(ctx, env.DB, ownerShards(r), func(shard string) bsoncore.Document { return routedCmd(base, r, shard) })
		for _, sr := range replies {
			if sr.err != nil && c.NoteStale(ns, sr.err) {
				return sr.err
			}
		}
		return nil
	})
	if err != nil && len(replies) == 0 {
		return nil, err
	}
	var firstErr error
	valid := true
	ridx, raw := bsoncore.AppendDocumentStart(nil)
	for _, sr := range replies {
		if sr.err != nil {
			if firstErr == nil {
				firstErr = sr.err
			}
			raw = bsoncore.AppendDocumentElement(raw, sr.shard, bsoncore.NewDocumentBuilder().
				AppendString("error", mongoerr.CodeOf(sr.err).Name()+": "+errMsg(sr.err)).Build())
			continue
		}
		raw = bsoncore.AppendDocumentElement(raw, sr.shard, sr.reply)
		if v, ok := sr.reply.Lookup("valid").BooleanOK(); !ok || !v {
			valid = false
		}
	}
	raw, _ = bsoncore.AppendDocumentEnd(raw, ridx)
	idx, out := bsoncore.AppendDocumentStart(nil)
	if firstErr == nil {
		if !sharded && len(replies) == 1 {
			elems, _ := stripFields(replies[0].reply, replyNoise).Elements()
			for _, e := range elems {
				out = append(out, e...)
			}
		} else {
			out = bsoncore.AppendBooleanElement(out, "valid", valid)
		}
	}
	out = bsoncore.AppendDocumentElement(out, "raw", raw)
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	if firstErr != nil {
		return nil, withReply(firstErr, out)
	}
	return out, nil
}
