package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// _configsvrRemoveShard: the config server's half of removeShard (MongoDB 7.0's
// ConfigSvrRemoveShardCommand); the logic is configsvr.Manager.RemoveShard.
func addConfigsvrRemoveShard(r *service.Registry) {
	add(r, &service.Command{
		Name:      "_configsvrRemoveShard",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrRemoveShard,
		Help:      "Internal command, which is exported by the sharding config server. Do not call directly. Removes a shard from the cluster.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
	})
}

func runConfigsvrRemoveShard(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	m, err := configsvrManager(env)
	if err != nil {
		return nil, err
	}
	if err := requireMajorityWriteConcern(env, cmd); err != nil {
		return nil, err
	}
	first, err := cmd.IndexErr(0)
	if err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "_configsvrRemoveShard: empty command")
	}
	target, ok := first.Value().StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "Field '%s' must be of type string", first.Key())
	}
	p, err := m.RemoveShard(ctx, target)
	if err != nil {
		return nil, err
	}
	return p.Reply(), nil
}
