package router

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
)

// addCatalogCommands registers the router's cluster administration commands that the
// config server carries out (addShard, enableSharding, balancerStatus).
func addCatalogCommands(r *service.Registry) {
	for _, c := range []*service.Command{
		{Name: "addShard", Auth: service.AuthOnCluster(auth.AddShard), Aliases: []string{"addshard"}, Handler: runAddShard, AdminOnly: true,
			Secondary: service.SecondaryAlways, Help: "add a new shard to the system"},
		{Name: "enableSharding", Auth: service.AuthOnFullNS(auth.EnableSharding), Aliases: []string{"enablesharding"}, Handler: runEnableSharding, AdminOnly: true,
			Secondary: service.SecondaryAlways, Help: "Create a database with the provided options."},
		{Name: "balancerStatus", Auth: authOnConfig(configSettings, auth.Find), Handler: runBalancerStatus, AdminOnly: true,
			Secondary: service.SecondaryAlways, Help: "Returns information about the balancer's status, such as whether it is running or stopped, the current balancing mode, etc."},
		{Name: "balancerStart", Auth: authOnConfig(configSettings, auth.Update), Handler: runBalancerControl, AdminOnly: true,
			Secondary: service.SecondaryAlways, Help: "Starts the balancer"},
		{Name: "balancerStop", Auth: authOnConfig(configSettings, auth.Update), Handler: runBalancerControl, AdminOnly: true,
			Secondary: service.SecondaryAlways, Help: "Stops the balancer"},
		{Name: "configureCollectionBalancing", Auth: authConfigureCollectionBalancing, Handler: runConfigureCollectionBalancing, AdminOnly: true,
			Secondary: service.SecondaryAlways, Help: "Command to configure balancing settings for a collection."},
		{Name: "balancerCollectionStatus", Auth: service.AuthOnFullNS(auth.EnableSharding), Handler: runBalancerCollectionStatus,
			Secondary: service.SecondaryAlways, Help: "Checks whether the chunks of a given collection are in a quiesced state or there are any which need to be moved because of (1) draining shards, (2) zone violation or (3) imbalance between shards"},
	} {
		r.Register(c)
	}
}

// runAddShard is mongos's ClusterAddShardCmd: {addShard: "set/host,...", name?} runs
// _configsvrAddShard on the config server primary with majority write concern, then
// reloads the shard registry so that this router knows the new shard at once.
func runAddShard(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	req, err := configsvr.ParseAddShard(cmd)
	if err != nil {
		return nil, err
	}
	fwd := bson.D{{Key: "_configsvrAddShard", Value: req.ConnString}}
	if req.Name != nil {
		fwd = append(fwd, bson.E{Key: "name", Value: *req.Name})
	}
	reply, err := c.runOnConfig(ctx, fwd)
	if err != nil {
		return nil, err
	}
	name, ok := reply.Lookup("shardAdded").StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.NoSuchKey, "_configsvrAddShard answered without shardAdded: %s", reply)
	}
	if err := c.Shards.Reload(ctx); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().AppendString("shardAdded", name).Build(), nil
}

// configRetries is how many times a catalog command is tried (MongoDB's
// runCommandWithFixedRetryAttempts with the idempotent policy: the catalog commands are
// idempotent).
const configRetries = 3

// runOnConfig runs a catalog command on the config server primary against admin with
// majority write concern (CommandHelpers::appendMajorityWriteConcern), again after a
// retriable error (a config primary stepping down, a dropped connection), up to
// configRetries times; the config server's error is the router's, with its code and message.
func (c *Cluster) runOnConfig(ctx context.Context, cmd bson.D) (bsoncore.Document, error) {
	cmd = append(cmd, bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}})
	var raw bson.Raw
	var err error
	for attempt := 1; ; attempt++ {
		raw, err = c.config.RunCommand(ctx, "admin", cmd, nil)
		if err == nil || attempt == configRetries || ctx.Err() != nil || !retriable(err) {
			break
		}
	}
	if err != nil {
		return nil, remoteError(err)
	}
	reply := bsoncore.Document(raw)
	if err := configsvr.WriteReplyError(reply); err != nil {
		return nil, err
	}
	return reply, nil
}

// retriable reports an error worth another attempt at an idempotent command: MongoDB's
// RetriableError category, or a network error the driver saw (which the driver reports as a
// CommandError without a code, so it is asked first).
func retriable(err error) bool {
	if mongo.IsNetworkError(err) || poolCleared(err) {
		return true
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return mongoerr.IsRetriableError(mongoerr.Code(ce.Code))
	}
	return false
}

// remoteError keeps a remote command's code and message (a driver CommandError) as the
// router's own error.
func remoteError(err error) error {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return mongoerr.New(mongoerr.Code(ce.Code), ce.Message)
	}
	return err
}
