package router

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/routing"
)

// runEnableSharding is mongos 7.0's EnableShardingCmd (ClusterCreateDatabase):
// {enableSharding: "<db>", primaryShard?} has the config server create the database
// (_configsvrCreateDatabase with majority write concern) and tells the catalog cache the
// version it was created with. The reply is plain ok.
func runEnableSharding(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	db, ok := lookupFirst(cmd).StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'enableSharding.enableSharding' is the wrong type '%s', expected type 'string'",
			lookupFirst(cmd).Type)
	}
	fwd := bson.D{{Key: "_configsvrCreateDatabase", Value: db}}
	if v, err := cmd.LookupErr("primaryShard"); err == nil {
		s, ok := v.StringValueOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'enableSharding.primaryShard' is the wrong type '%s', expected type 'string'", v.Type)
		}
		fwd = append(fwd, bson.E{Key: "primaryShardId", Value: s})
	}
	v, err := CreateDatabase(ctx, c, fwd)
	if err != nil {
		return nil, err
	}
	c.Cache.OnStaleDatabaseVersion(db, &v)
	return bsoncore.NewDocumentBuilder().Build(), nil
}

// CreateDatabase runs cmd, a _configsvrCreateDatabase, on the config server and returns the
// database's version; a failure names the database as mongos's does ("Database <db> could
// not be created"). The router's implicit creation of a database on first write goes
// through here too.
func CreateDatabase(ctx context.Context, c *Cluster, cmd bson.D) (routing.DatabaseVersion, error) {
	db, _ := cmd[0].Value.(string)
	reply, err := c.runOnConfig(ctx, cmd)
	if err != nil {
		if me, ok := mongoerr.As(err); ok {
			return routing.DatabaseVersion{}, mongoerr.Newf(me.Code, "Database %s could not be created :: caused by :: %s", db, me.Msg)
		}
		return routing.DatabaseVersion{}, fmt.Errorf("Database %s could not be created: %w", db, err)
	}
	v, err := reply.LookupErr("databaseVersion")
	if err != nil {
		return routing.DatabaseVersion{}, mongoerr.Newf(mongoerr.NoSuchKey, "_configsvrCreateDatabase answered without databaseVersion: %s", reply)
	}
	return routing.ParseDatabaseVersion(v)
}
