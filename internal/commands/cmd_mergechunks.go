package commands

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/ddl"
)

func mergeChunksCommand() *service.Command {
	return &service.Command{
		Name:      "mergeChunks",
		Auth:      service.AuthInternal,
		Handler:   runMergeChunks,
		Help:      "Merge Chunks command\nusage: { mergeChunks : <ns>, bounds : [ <min key>, <max key> ] }",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
	}
}

// runMergeChunks is a shard's mergeChunks: it asks the config server to merge this shard's
// chunks that exactly fill the bounds ({mergeChunks: ns, bounds: [min, max]}).
func runMergeChunks(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	self, err := requireShard(env, "mergeChunks")
	if err != nil {
		return nil, err
	}
	ns, ok := cmd.Index(0).Value().StringValueOK()
	if !ok || !strings.Contains(ns, ".") {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "invalid namespace specified for request")
	}
	bv, err := cmd.LookupErr("bounds")
	if err != nil {
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'mergeChunks.bounds' is missing but a required field")
	}
	min, max, err := ddl.ParseBounds("mergeChunks", bv)
	if err != nil {
		return nil, err
	}
	release, err := registerSplitOrMerge(ctx, env.State, ns)
	if err != nil {
		return nil, err
	}
	defer release()
	remote, err := shardingDDLOf(env).coord.Remote()
	if err != nil {
		return nil, err
	}
	if _, err := ddl.MergeChunks(ctx, ddl.RunFunc(internalRunner(env.State, env.Registry)), remote, self, ns, min, max); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}
