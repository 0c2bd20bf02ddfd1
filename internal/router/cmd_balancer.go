package router

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// runBalancerStatus is mongos's BalancerStatusCmd: the config server's
// _configsvrBalancerStatus reply passed through (CommandHelpers::
// filterCommandReplyForPassthrough drops ok and the gossiped times): the mode from
// config.settings, whether the config primary's balancer is in a round and how many it ran.
func runBalancerStatus(ctx context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	raw, err := c.config.RunCommand(ctx, "admin", bson.D{{Key: "_configsvrBalancerStatus", Value: 1}}, nil)
	if err != nil {
		return nil, remoteError(err)
	}
	return passthrough(bsoncore.Document(raw)), nil
}

// runBalancerControl is mongos's ClusterBalancerControlCommand: balancerStart and
// balancerStop run _configsvrBalancerStart/Stop on the config primary (majority), which set
// config.settings's balancer mode; stop answers once the round in progress is over.
func runBalancerControl(ctx context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	name := "_configsvrBalancerStart"
	if env.Command.Name == "balancerStop" {
		name = "_configsvrBalancerStop"
	}
	reply, err := c.runOnConfig(ctx, bson.D{{Key: name, Value: 1}})
	if err != nil {
		return nil, err
	}
	return passthrough(reply), nil
}

// runBalancerCollectionStatus is mongos's BalancerCollectionStatusCmd: {balancerCollectionStatus:
// "db.coll"} → the config primary's _configsvrBalancerCollectionStatus, passed through:
// {chunkSize, balancerCompliant, firstComplianceViolation?}.
func runBalancerCollectionStatus(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	v := cmd.Lookup("balancerCollectionStatus")
	ns, ok := v.StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "collection name has invalid type %s", v.Type)
	}
	if db, coll, found := strings.Cut(ns, "."); !found || db == "" || coll == "" || strings.ContainsRune(ns, 0) {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	raw, err := c.config.RunCommand(ctx, "admin", bson.D{{Key: "_configsvrBalancerCollectionStatus", Value: ns}}, nil)
	if err != nil {
		return nil, remoteError(err)
	}
	return passthrough(bsoncore.Document(raw)), nil
}

// runConfigureCollectionBalancing is mongos's ConfigureCollectionBalancingCmd:
// {configureCollectionBalancing: "db.coll", chunkSize?, defragmentCollection?,
// enableAutoMerger?} → the config primary's _configsvrConfigureCollectionBalancing
// (majority), which checks the values.
func runConfigureCollectionBalancing(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	v := cmd.Lookup("configureCollectionBalancing")
	ns, ok := v.StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'configureCollectionBalancing.configureCollectionBalancing' is the wrong type '%s', expected type 'string'",
			bsonutil.TypeName(v.Type))
	}
	if db, coll, found := strings.Cut(ns, "."); !found || db == "" || coll == "" || strings.ContainsRune(ns, 0) {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	fwd := bson.D{{Key: "_configsvrConfigureCollectionBalancing", Value: ns}}
	for _, f := range []string{"chunkSize", "defragmentCollection", "enableAutoMerger"} {
		if v := cmd.Lookup(f); v.Type != 0 {
			fwd = append(fwd, bson.E{Key: f, Value: bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}})
		}
	}
	if _, err := c.runOnConfig(ctx, fwd); err != nil {
		return nil, err
	}
	return emptyDocument, nil
}
