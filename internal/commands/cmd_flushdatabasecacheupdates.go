package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addFlushDatabaseCacheUpdates(r *service.Registry) {
	for _, name := range []string{"_flushDatabaseCacheUpdates", "_flushDatabaseCacheUpdatesWithWriteConcern"} {
		add(r, &service.Command{
			Name:      name,
			Handler:   runFlushDatabaseCacheUpdates,
			Auth:      service.AuthInternal,
			Help:      "Internal command which waits for any pending routing table cache updates for a particular database to be written locally. The operationTime returned in the response metadata is guaranteed to be at least as late as the last routing table cache update to the local disk. Takes a 'forceRemoteRefresh' option to make this node refresh its cache from the config server before waiting for the last refresh to be persisted.",
			AdminOnly: true,
			Secondary: service.SecondaryNever,
		})
	}
}

// runFlushDatabaseCacheUpdates is _flushDatabaseCacheUpdates (and its WithWriteConcern
// twin): with syncFromConfig (default true) the shard refreshes the database's metadata from
// the config server now. The admin and config databases are refused, as in MongoDB (their
// version is fixed).
func runFlushDatabaseCacheUpdates(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	name := env.Name
	if err := checkStrict(cmd, name, "syncFromConfig"); err != nil {
		return nil, err
	}
	arg := commandArg(cmd)
	db, ok := arg.StringValueOK()
	if !ok {
		return nil, typeMismatch(name, name, arg.Type, "string")
	}
	if err := catalog.ValidateNS(db + ".x"); err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid database name specified '%s'", db)
	}
	if db == "admin" || db == "config" {
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "Can't call %s on the config or admin database", name)
	}
	sync := true
	if v := lookup(cmd, "syncFromConfig"); v.Type != 0 {
		b, ok := v.BooleanOK()
		if !ok {
			return nil, typeMismatch(name, "syncFromConfig", v.Type, "bool")
		}
		sync = b
	}
	rt, _, err := shardRuntime(env)
	if err != nil {
		return nil, err
	}
	if sync {
		if _, err := rt.RefreshDatabase(ctx, db); err != nil {
			return nil, err
		}
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}
