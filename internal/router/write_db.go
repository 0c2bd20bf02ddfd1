package router

// Database resolution for writes and DDL (spec: sharding.md "Databases"; mongos's
// createDatabase in cluster_commands_helpers): a write or create in a database the config
// server does not know creates it first through _configsvrCreateDatabase, which picks the
// primary shard, then the router reloads its entry.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
)

// ensureDatabase returns db's entry, creating the database on the config server when it has
// none (the implicit creation of MongoDB's first write).
func (c *Cluster) ensureDatabase(ctx context.Context, db string) (catalogcache.Database, error) {
	if !catalog.ValidDBName(db) {
		return catalogcache.Database{}, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid db name: %s", db)
	}
	d, err := c.Cache.Database(ctx, db)
	if err == nil || !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		return d, err
	}
	if err := c.createDatabase(ctx, db); err != nil {
		return catalogcache.Database{}, err
	}
	c.Cache.InvalidateDatabase(db)
	return c.Cache.Database(ctx, db)
}

// createDatabase runs {_configsvrCreateDatabase: db} on the config server primary with
// majority write concern, as mongos 7.0 does.
func (c *Cluster) createDatabase(ctx context.Context, db string) error {
	idx, cmd := bsoncore.AppendDocumentStart(nil)
	cmd = bsoncore.AppendStringElement(cmd, "_configsvrCreateDatabase", db)
	cmd = appendMajority(cmd)
	cmd, _ = bsoncore.AppendDocumentEnd(cmd, idx)
	_, err := c.runOn(ctx, configShard, "admin", cmd)
	return err
}

// appendMajority appends writeConcern {w: "majority"}: the router's catalog changes.
func appendMajority(out []byte) []byte {
	idx, out := bsoncore.AppendDocumentElementStart(out, "writeConcern")
	out = bsoncore.AppendStringElement(out, "w", "majority")
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}
