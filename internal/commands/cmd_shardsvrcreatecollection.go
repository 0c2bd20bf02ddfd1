package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
	"humongo/internal/sharding/ddl"
)

func shardsvrCreateCollectionCommand() *service.Command {
	return &service.Command{
		Name:      "_shardsvrCreateCollection",
		Auth:      service.AuthInternal,
		Handler:   runShardsvrCreateCollection,
		Help:      "Internal command, which is exported by the primary sharding server. Do not call directly. Shards a collection.",
		Secondary: service.SecondaryNever,
		Writes:    true,
	}
}

// runShardsvrCreateCollection is the database primary shard's side of shardCollection: the
// resumable create-collection coordinator (internal/sharding/ddl, shardcoll.go). Reply: {collectionVersion,
// collectionUUID}.
func runShardsvrCreateCollection(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	svc, err := ddlCoordinatorsOf(env, "_shardsvrCreateCollection")
	if err != nil {
		return nil, err
	}
	req, err := ddl.ParseCreateRequest(env.DB, cmd)
	if err != nil {
		return nil, err
	}
	resp, err := svc.ShardCollection(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Doc(), nil
}
