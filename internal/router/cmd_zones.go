package router

// The router's zone commands (MongoDB 7.0's ClusterAddShardToZoneCmd,
// ClusterRemoveShardFromZoneCmd and ClusterUpdateZoneKeyRangeCmd): each parses its request
// and has the config server primary carry it out (_configsvrAddShardToZone,
// _configsvrRemoveShardFromZone, _configsvrUpdateZoneKeyRange) with majority write concern;
// the reply is plain ok. mongosh's sh.addShardToZone, sh.removeShardFromZone,
// sh.updateZoneKeyRange, sh.removeRangeFromZone and the legacy sh.addShardTag /
// sh.addTagRange / sh.removeTagRange call these.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
)

// zoneCommands are the router's zone commands, registered by NewRegistry.
func zoneCommands() []*service.Command {
	return []*service.Command{
		{Name: "addShardToZone", Auth: authAddShardToZone, Aliases: []string{"addshardtozone"}, Handler: runShardZone("_configsvrAddShardToZone"),
			AdminOnly: true, Secondary: service.SecondaryAlways, Help: "Adds a shard to zone."},
		{Name: "removeShardFromZone", Auth: authRemoveShardFromZone, Aliases: []string{"removeshardfromzone"}, Handler: runShardZone("_configsvrRemoveShardFromZone"),
			AdminOnly: true, Secondary: service.SecondaryAlways, Help: "Removes a shard from the zone."},
		{Name: "updateZoneKeyRange", Auth: authUpdateZoneKeyRange, Aliases: []string{"updatezonekeyrange"}, Handler: runUpdateZoneKeyRange,
			AdminOnly: true, Secondary: service.SecondaryAlways, Help: "Assigns or removes a range of a collection's shard key to or from a zone."},
	}
}

// runShardZone handles {addShardToZone|removeShardFromZone: shard, zone}.
func runShardZone(configCmd string) service.Handler {
	return func(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
		c, err := cluster(env)
		if err != nil {
			return nil, err
		}
		shard, zone, err := configsvr.ParseShardZone(env.Command.Name, cmd)
		if err != nil {
			return nil, err
		}
		if _, err := c.runOnConfig(ctx, bson.D{{Key: configCmd, Value: shard}, {Key: "zone", Value: zone}}); err != nil {
			return nil, err
		}
		return bsoncore.NewDocumentBuilder().Build(), nil
	}
}

// runUpdateZoneKeyRange handles {updateZoneKeyRange: ns, min, max, zone: string|null}.
func runUpdateZoneKeyRange(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	req, err := configsvr.ParseZoneRange(env.Command.Name, cmd)
	if err != nil {
		return nil, err
	}
	var fwd bson.D
	if err := bson.Unmarshal(req.Command(), &fwd); err != nil {
		return nil, err
	}
	if _, err := c.runOnConfig(ctx, fwd); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}
