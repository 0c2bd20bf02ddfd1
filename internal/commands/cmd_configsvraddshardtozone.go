package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
)

// addZoneCommands registers the config server's zone commands (MongoDB 7.0's
// ConfigSvrAddShardToZoneCommand, ConfigSvrRemoveShardFromZoneCommand and
// ConfigsvrUpdateZoneKeyRangeCommand), which the router's addShardToZone,
// removeShardFromZone and updateZoneKeyRange forward. The logic is configsvr.Manager's
// (internal/sharding/configsvr/zones.go).
func addZoneCommands(r *service.Registry) {
	addConfigsvrAddShardToZone(r)
	addConfigsvrRemoveShardFromZone(r)
	addConfigsvrUpdateZoneKeyRange(r)
}

// _configsvrAddShardToZone: {_configsvrAddShardToZone: shard, zone}.
func addConfigsvrAddShardToZone(r *service.Registry) {
	add(r, &service.Command{
		Name:      "_configsvrAddShardToZone",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrAddShardToZone,
		Help:      "Internal command, which is exported by the sharding config server. Do not call directly. Validates and adds a new zone to the shard.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
		Writes:    true,
	})
}

func runConfigsvrAddShardToZone(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
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
	if err := m.AddShardToZone(ctx, shard, zone); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}
