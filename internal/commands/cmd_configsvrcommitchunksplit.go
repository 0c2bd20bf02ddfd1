package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
)

func configsvrCommitChunkSplitCommand() *service.Command {
	return &service.Command{
		Name:      "_configsvrCommitChunkSplit",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrCommitChunkSplit,
		Help:      "Internal command, which is sent by a shard to the sharding config server. Do not call directly. Receives, validates, and processes a SplitChunkRequest.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
		Writes:    true,
	}
}

// runConfigsvrCommitChunkSplit commits a split ({_configsvrCommitChunkSplit: ns, collEpoch,
// collTimestamp, min, max, splitPoints, shard}) and answers, once majority committed, the
// new collection and shard versions.
func runConfigsvrCommitChunkSplit(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_configsvrCommitChunkSplit"
	if err := requireConfigServer(env, name); err != nil {
		return nil, err
	}
	var req configsvr.SplitRequest
	var ok bool
	if req.NS, ok = cmd.Index(0).Value().StringValueOK(); !ok || req.NS == "" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "invalid namespace specified for request")
	}
	required := func(field string, t bsoncore.Type) (bsoncore.Value, error) { return requiredField(cmd, name, field, t) }
	v, err := required("collEpoch", bsoncore.TypeObjectID)
	if err != nil {
		return nil, err
	}
	req.Gen.Epoch = v.ObjectID()
	if v, err = required("collTimestamp", bsoncore.TypeTimestamp); err != nil {
		return nil, err
	}
	t, i := v.Timestamp()
	req.Gen.Timestamp = bson.Timestamp{T: t, I: i}
	if v, err = required("min", bsoncore.TypeEmbeddedDocument); err != nil {
		return nil, err
	}
	req.Min = v.Document()
	if v, err = required("max", bsoncore.TypeEmbeddedDocument); err != nil {
		return nil, err
	}
	req.Max = v.Document()
	if v, err = required("shard", bsoncore.TypeString); err != nil {
		return nil, err
	}
	req.Shard = v.StringValue()
	if v, err = required("splitPoints", bsoncore.TypeArray); err != nil {
		return nil, err
	}
	vals, _ := v.Array().Values()
	for _, p := range vals {
		d, ok := p.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.splitPoints' must hold documents", name)
		}
		req.SplitPoints = append(req.SplitPoints, d)
	}
	vs, err := shardingDDLOf(env).committer.CommitSplit(ctx, req)
	if err != nil {
		return nil, err
	}
	return waitMajority(ctx, env, versionsReply(vs))
}

// versionsReply is {shardVersion: {e, t, v}, collectionVersion: {e, t, v}}.
func versionsReply(vs configsvr.Versions) bsoncore.Document {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = vs.Shard.AppendShardVersion(b, "shardVersion")
	b = vs.Collection.AppendShardVersion(b, "collectionVersion")
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}
