package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
)

// _configsvrUpdateZoneKeyRange: {_configsvrUpdateZoneKeyRange: ns, min, max, zone} assigns
// the range to the zone, or removes it with zone: null (ConfigsvrUpdateZoneKeyRangeCommand;
// configsvr.Manager.UpdateZoneKeyRange).
func addConfigsvrUpdateZoneKeyRange(r *service.Registry) {
	add(r, &service.Command{
		Name:      "_configsvrUpdateZoneKeyRange",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrUpdateZoneKeyRange,
		Help:      "Internal command, which is exported by the sharding config server. Do not call directly. Validates and assigns a new range to a zone.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
		Writes:    true,
	})
}

func runConfigsvrUpdateZoneKeyRange(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	m, err := configsvrManager(env)
	if err != nil {
		return nil, err
	}
	if err := requireMajorityWriteConcern(env, cmd); err != nil {
		return nil, err
	}
	req, err := configsvr.ParseZoneRange(env.Command.Name, cmd)
	if err != nil {
		return nil, err
	}
	if err := m.UpdateZoneKeyRange(ctx, req); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}
