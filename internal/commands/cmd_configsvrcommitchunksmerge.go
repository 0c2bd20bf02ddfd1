package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
)

func configsvrCommitChunksMergeCommand() *service.Command {
	return &service.Command{
		Name:      "_configsvrCommitChunksMerge",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrCommitChunksMerge,
		Help:      "Internal command, which is sent by a shard to the sharding config server. Do not call directly. Receives, validates, and processes a MergeChunksRequest",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
		Writes:    true,
	}
}

// runConfigsvrCommitChunksMerge commits a merge ({_configsvrCommitChunksMerge: ns, collUUID,
// chunkRange: {min, max}, shard, validAfter}) and answers, once majority committed, the new
// collection and shard versions.
func runConfigsvrCommitChunksMerge(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_configsvrCommitChunksMerge"
	if err := requireConfigServer(env, name); err != nil {
		return nil, err
	}
	var req configsvr.MergeRequest
	var ok bool
	if req.NS, ok = cmd.Index(0).Value().StringValueOK(); !ok || req.NS == "" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "invalid namespace specified for request")
	}
	missing := func(field string) error {
		return mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.%s' is missing but a required field", name, field)
	}
	st, data, ok := lookup(cmd, "collUUID").BinaryOK()
	if !ok || st != 4 || len(data) != 16 {
		return nil, missing("collUUID")
	}
	req.UUID = catalog.UUID(data)
	cr, ok := lookup(cmd, "chunkRange").DocumentOK()
	if !ok {
		return nil, missing("chunkRange")
	}
	if req.Min, ok = cr.Lookup("min").DocumentOK(); !ok {
		return nil, missing("chunkRange.min")
	}
	if req.Max, ok = cr.Lookup("max").DocumentOK(); !ok {
		return nil, missing("chunkRange.max")
	}
	if req.Shard, ok = lookup(cmd, "shard").StringValueOK(); !ok {
		return nil, missing("shard")
	}
	t, i, ok := lookup(cmd, "validAfter").TimestampOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "chunk operation requires validAfter timestamp")
	}
	req.ValidAfter = bson.Timestamp{T: t, I: i}
	vs, err := shardingDDLOf(env).committer.CommitMerge(ctx, req)
	if err != nil {
		return nil, err
	}
	return waitMajority(ctx, env, versionsReply(vs))
}
