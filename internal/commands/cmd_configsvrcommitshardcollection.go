package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
)

func configsvrCommitShardCollectionCommand() *service.Command {
	return &service.Command{
		Name:      "_configsvrCommitShardCollection",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrCommitShardCollection,
		Help:      "Internal command, which is exported by the sharding config server. Do not call directly. Registers a sharded collection and its initial chunks.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
		Writes:    true,
	}
}

// runConfigsvrCommitShardCollection writes a newly sharded collection's config.collections
// entry and initial config.chunks atomically ({_configsvrCommitShardCollection: ns,
// collection, chunks}; humongo's stand-in for the transaction 7.0's create-collection
// coordinator runs against the config server) and answers once it is majority committed:
// {created: true}, or {created: false} when the namespace was already sharded with the same
// options (AlreadyInitialized with others).
func runConfigsvrCommitShardCollection(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_configsvrCommitShardCollection"
	if err := requireConfigServer(env, name); err != nil {
		return nil, err
	}
	coll, ok := lookup(cmd, "collection").DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.collection' is missing but a required field", name)
	}
	arr, ok := lookup(cmd, "chunks").ArrayOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.chunks' is missing but a required field", name)
	}
	if ns, _ := cmd.Index(0).Value().StringValueOK(); ns != "" {
		if id, _ := coll.Lookup("_id").StringValueOK(); id != ns {
			return nil, mongoerr.Newf(mongoerr.InvalidOptions, "%s for %s with a config.collections entry for %s", name, ns, id)
		}
	}
	vals, _ := arr.Values()
	req := configsvr.ShardCollectionRequest{Collection: coll}
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.chunks' must hold documents", name)
		}
		req.Chunks = append(req.Chunks, d)
	}
	_, created, err := shardingDDLOf(env).committer.CommitShardCollection(ctx, req)
	if err != nil {
		return nil, err
	}
	return waitMajority(ctx, env, bsoncore.NewDocumentBuilder().AppendBoolean("created", created).Build())
}
