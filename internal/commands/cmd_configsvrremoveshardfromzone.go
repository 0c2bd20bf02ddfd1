package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
)

// _configsvrRemoveShardFromZone: {_configsvrRemoveShardFromZone: shard, zone}
// (ConfigSvrRemoveShardFromZoneCommand; configsvr.Manager.RemoveShardFromZone).
func addConfigsvrRemoveShardFromZone(r *service.Registry) {
	add(r, &service.Command{
		Name:      "_configsvrRemoveShardFromZone",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrRemoveShardFromZone,
		Help:      "Internal command, which is exported by the sharding config server. Do not call directly. Validates and removes the shard from the zone.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
		Writes:    true,
	})
}

func runConfigsvrRemoveShardFromZone(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	m, err := configsvrManager(env)
	if err != nil {
		return nil, err
	}
	if err := requireMajorityWriteConcern(env, cmd); err != nil {
		return nil, err
	}
	shard, zone, err := configsvr.ParseShardZone(env.Command.Name, cmd)
	if err != nil {
		return nil, err
	}
	if err := m.RemoveShardFromZone(ctx, shard, zone); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}
