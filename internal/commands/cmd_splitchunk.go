package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
	"humongo/internal/sharding/ddl"
)

func splitChunkCommand() *service.Command {
	return &service.Command{
		Name:      "splitChunk",
		Auth:      service.AuthInternal,
		Handler:   runSplitChunk,
		Help:      "internal command usage only\nexample:\n { splitChunk:\"db.foo\" , keyPattern: {a:1} , min : {a:100} , max: {a:200} { splitKeys : [ {a:150} , ... ]}",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
	}
}

// runSplitChunk is a shard's splitChunk: the chunk's owner asks the config server to commit
// the split ({splitChunk: ns, from, keyPattern, epoch, timestamp, min, max, splitKeys}).
func runSplitChunk(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	self, err := requireShard(env, "splitChunk")
	if err != nil {
		return nil, err
	}
	req, err := ddl.ParseSplitChunk(cmd)
	if err != nil {
		return nil, err
	}
	release, err := registerSplitOrMerge(ctx, env.State, req.NS)
	if err != nil {
		return nil, err
	}
	defer release()
	remote, err := shardingDDLOf(env).coord.Remote()
	if err != nil {
		return nil, err
	}
	if _, err := ddl.SplitChunk(ctx, remote, self, req); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}
