package router

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/ddl"
)

// shardingDDLCommands are the router's sharding administration commands over the shards'
// and config server's DDL (internal/sharding/ddl, configsvr): shardCollection, split,
// mergeChunks, getShardVersion.
func shardingDDLCommands() []*service.Command {
	return []*service.Command{
		{Name: "shardCollection", Auth: service.AuthOnFullNS(auth.EnableSharding), Aliases: []string{"shardcollection"}, Handler: runShardCollection, AdminOnly: true,
			Secondary: service.SecondaryAlways,
			Help:      "Shard a collection. Sharding must already be enabled for the database.\n   { enablesharding : \"<dbname>\" }\n"},
		{Name: "refineCollectionShardKey", Auth: service.AuthOnFullNS(auth.RefineCollectionShardKey), Handler: runRefineCollectionShardKey, AdminOnly: true, Secondary: service.SecondaryAlways,
			Help: "Adds a suffix to the shard key of an existing collection ('refines the shard key')."},
		{Name: "setAllowMigrations", Auth: service.AuthOnFullNS(auth.MoveChunk), Handler: runSetAllowMigrations, AdminOnly: true, Secondary: service.SecondaryAlways,
			Help: "Enable/disable migrations in a collection"},
		splitCommand(),
		mergeChunksCommand(),
		getShardVersionCommand(),
	}
}

// nsArg reads the command's first value as a full namespace "db.coll".
func nsArg(cmd bsoncore.Document, name string) (ns, db, coll string, err error) {
	v := lookupFirst(cmd)
	s, ok := v.StringValueOK()
	if !ok {
		return "", "", "", mongoerr.Newf(mongoerr.InvalidNamespace, "collection name has invalid type %s", strings.ToLower(v.Type.String()))
	}
	db, coll, ok = strings.Cut(s, ".")
	if !ok || db == "" || coll == "" {
		return "", "", "", mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", s)
	}
	return s, db, coll, nil
}

// runShardCollection is mongos's shardCollection (ClusterShardCollectionCmd): it makes sure
// the database exists (through the config server's _configsvrCreateDatabase where the
// config server has it; otherwise the database must already be in config.databases) and
// sends _shardsvrCreateCollection, with the database version, to the database's primary
// shard, which runs the create-collection coordinator. Reply: {collectionsharded: ns,
// collectionUUID}.
func runShardCollection(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, db, coll, err := nsArg(cmd, "shardCollection")
	if err != nil {
		return nil, err
	}
	switch db {
	case "admin", "config", "local":
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "can't shard collection %s: the %s database cannot be sharded", ns, db)
	}
	key, ok := lookupDoc(cmd, "key")
	if !ok {
		if v := cmd.Lookup("key"); v.Type != 0 {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'shardCollection.key' is the wrong type '%s', expected type 'object'", strings.ToLower(v.Type.String()))
		}
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'shardCollection.key' is missing but a required field")
	}
	if err := ensureDatabase(ctx, c, db); err != nil {
		return nil, err
	}
	fwd := bsoncore.NewDocumentBuilder().AppendString("_shardsvrCreateCollection", coll).AppendDocument("shardKey", key)
	for _, f := range []string{"unique", "numInitialChunks", "presplitHashedZones", "collation", "timeseries"} {
		if v, err := cmd.LookupErr(f); err == nil {
			fwd.AppendValue(f, v)
		}
	}
	base := fwd.AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	// Only the database version, as mongos's appendDbVersionIfPresent: the coordinator runs
	// under the database's primary-shard ownership, whatever the collection is. A failover of
	// the primary shard is retried: the new primary resumes the coordinator, the retry joins.
	reply, err := c.primaryShardDDL(ctx, db, ns, base)
	c.Cache.InvalidateCollection(ns)
	if err != nil {
		return nil, err
	}
	out := bsoncore.NewDocumentBuilder().AppendString("collectionsharded", ns)
	if v, err := reply.LookupErr("collectionUUID"); err == nil {
		out.AppendValue("collectionUUID", v)
	}
	return out.Build(), nil
}

// ensureDatabase makes sure db has a config.databases entry: MongoDB 7.0 creates it
// implicitly through the config server's _configsvrCreateDatabase; a config server without
// that command leaves NamespaceNotFound.
func ensureDatabase(ctx context.Context, c *Cluster, db string) error {
	_, err := c.Cache.Database(ctx, db)
	if err == nil || !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		return err
	}
	create := bsoncore.NewDocumentBuilder().AppendString("_configsvrCreateDatabase", db).
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	if _, cerr := ddl.Run(ctx, c.Config(), "admin", create); cerr != nil {
		if mongoerr.Is(cerr, mongoerr.CommandNotFound) {
			return err
		}
		return cerr
	}
	c.Cache.InvalidateDatabase(db)
	_, err = c.Cache.Database(ctx, db)
	return err
}

func lookupDoc(cmd bsoncore.Document, field string) (bsoncore.Document, bool) {
	return cmd.Lookup(field).DocumentOK()
}

// withDatabaseVersion returns cmd with r's databaseVersion appended.
func withDatabaseVersion(cmd bsoncore.Document, r *catalogcache.Routing) bsoncore.Document {
	if r.DB.Version.IsFixed() {
		return cmd
	}
	out := append([]byte(nil), cmd[:len(cmd)-1]...)
	out = r.DB.Version.AppendDoc(out, "databaseVersion")
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}

// runSetAllowMigrations is mongos's setAllowMigrations ({setAllowMigrations: ns,
// allowMigrations: bool}): the primary shard's coordinator sets the collection's flag on the
// config server. Reply: {ok: 1}.
func runSetAllowMigrations(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, db, coll, err := nsArg(cmd, "setAllowMigrations")
	if err != nil {
		return nil, err
	}
	v := cmd.Lookup("allowMigrations")
	allow, ok := v.BooleanOK()
	if !ok {
		if v.Type == 0 {
			return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'setAllowMigrations.allowMigrations' is missing but a required field")
		}
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'setAllowMigrations.allowMigrations' is the wrong type '%s', expected type 'bool'", strings.ToLower(v.Type.String()))
	}
	if _, err := c.Cache.Database(ctx, db); err != nil {
		return nil, err
	}
	fwd := bsoncore.NewDocumentBuilder().AppendString("_shardsvrSetAllowMigrations", coll).AppendBoolean("allowMigrations", allow).
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	if _, err := c.primaryShardDDL(ctx, db, ns, fwd); err != nil {
		return nil, err
	}
	c.Cache.InvalidateCollection(ns)
	return bsoncore.NewDocumentBuilder().Build(), nil
}

// runRefineCollectionShardKey is mongos's refineCollectionShardKey ({refineCollectionShardKey:
// ns, key}): the primary shard's coordinator refines it. Reply: {ok: 1}.
func runRefineCollectionShardKey(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, db, coll, err := nsArg(cmd, "refineCollectionShardKey")
	if err != nil {
		return nil, err
	}
	key, ok := lookupDoc(cmd, "key")
	if !ok {
		if v := cmd.Lookup("key"); v.Type != 0 {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'refineCollectionShardKey.key' is the wrong type '%s', expected type 'object'", strings.ToLower(v.Type.String()))
		}
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'refineCollectionShardKey.key' is missing but a required field")
	}
	if _, err := c.Cache.Database(ctx, db); err != nil {
		return nil, err
	}
	fwd := bsoncore.NewDocumentBuilder().AppendString("_shardsvrRefineCollectionShardKey", coll).AppendDocument("newShardKey", key).
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	_, err = c.primaryShardDDL(ctx, db, ns, fwd)
	c.Cache.InvalidateCollection(ns)
	if err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}
