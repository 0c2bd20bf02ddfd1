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
	primary := ""
	if v, err := cmd.LookupErr("primaryShard"); err == nil {
		s, ok := v.StringValueOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'enableSharding.primaryShard' is the wrong type '%s', expected type 'string'", v.Type)
		}
		if s == "" {
			return nil, mongoerr.Newf(mongoerr.BadValue, "invalid shard name: %s", s)
		}
		primary = s
	}
	if _, err := c.CreateDatabase(ctx, db, primary); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}

// CreateDatabase has the config server create database db (or find it), on primaryShard
// when not "" (else the shard with the least data), as mongos's cluster_ddl::createDatabase
// does: _configsvrCreateDatabase on the config server primary with majority write concern,
// then the catalog cache learns the version it was created with, so the next routing of db
// reloads it. A failure names the database ("Database <db> could not be created"). The
// router's implicit creation of a database on first write goes through here too.
func (c *Cluster) CreateDatabase(ctx context.Context, db, primaryShard string) (routing.DatabaseVersion, error) {
	cmd := bson.D{{Key: "_configsvrCreateDatabase", Value: db}}
	if primaryShard != "" {
		cmd = append(cmd, bson.E{Key: "primaryShardId", Value: primaryShard})
	}
	reply, err := c.runOnConfig(ctx, cmd)
	if err != nil {
		if me, ok := mongoerr.As(err); ok {
			return routing.DatabaseVersion{}, mongoerr.Newf(me.Code, "Database %s could not be created :: caused by :: %s", db, me.Msg)
		}
		return routing.DatabaseVersion{}, fmt.Errorf("Database %s could not be created: %w", db, err)
	}
	raw, err := reply.LookupErr("databaseVersion")
	if err != nil {
		return routing.DatabaseVersion{}, mongoerr.Newf(mongoerr.NoSuchKey, "_configsvrCreateDatabase answered without databaseVersion: %s", reply)
	}
	v, err := routing.ParseDatabaseVersion(raw)
	if err != nil {
		return routing.DatabaseVersion{}, err
	}
	c.Cache.OnStaleDatabaseVersion(db, &v)
	return v, nil
}
