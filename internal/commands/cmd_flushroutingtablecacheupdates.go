package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addFlushRoutingTableCacheUpdates(r *service.Registry) {
	for _, name := range []string{"_flushRoutingTableCacheUpdates", "_flushRoutingTableCacheUpdatesWithWriteConcern"} {
		add(r, &service.Command{
			Name:      name,
			Auth:      service.AuthInternal,
			Handler:   runFlushRoutingTableCacheUpdates,
			Help:      "Internal command which waits for any pending routing table cache updates for a particular namespace to be written locally. The operationTime returned in the response metadata is guaranteed to be at least as late as the last routing table cache update to the local disk. Takes a 'forceRemoteRefresh' option to make this node refresh its cache from the config server before waiting for the last refresh to be persisted.",
			AdminOnly: true,
			Secondary: service.SecondaryNever,
		})
	}
}

// runFlushRoutingTableCacheUpdates is _flushRoutingTableCacheUpdates (and its
// WithWriteConcern twin, which only differs in accepting a writeConcern): with syncFromConfig
// (default true) the shard refreshes the namespace's filtering metadata from the config server
// now (forceShardFilteringMetadataRefresh). A primary's refresh writes config.cache.* before
// it returns (filtering.Runtime.persist), so that is the flush this command waits for.
func runFlushRoutingTableCacheUpdates(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	name := env.Name
	if err := checkStrict(cmd, name, "syncFromConfig"); err != nil {
		return nil, err
	}
	arg := commandArg(cmd)
	ns, ok := arg.StringValueOK()
	if !ok {
		return nil, typeMismatch(name, name, arg.Type, "string")
	}
	if err := catalog.ValidateNS(ns); err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
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
		if _, err := rt.RefreshCollection(ctx, ns); err != nil {
			return nil, err
		}
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}
