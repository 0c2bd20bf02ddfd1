package router

import (
	"context"
	"strings"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

type clusterKey struct{}

// Attach makes c the cluster the router's commands reach (cmd/humongos, once connected to
// the config servers).
func Attach(st *service.State, c *Cluster) {
	clusterOf(st).Store(c)
	startCursorReaper(st, c)
	startClusterTimeKeys(st, c)
}

func clusterOf(st *service.State) *atomic.Pointer[Cluster] {
	return st.Decorate(clusterKey{}, func() any { return new(atomic.Pointer[Cluster]) }).(*atomic.Pointer[Cluster])
}

// cluster returns the attached cluster; a router without one cannot route.
func cluster(env *service.Env) (*Cluster, error) {
	if c := clusterOf(env.State).Load(); c != nil {
		return c, nil
	}
	return nil, mongoerr.New(mongoerr.ShardingStateNotInitialized, "the router is not connected to its config servers")
}

func clusterCommands() []*service.Command {
	return []*service.Command{
		{Name: "listShards", Auth: service.AuthOnCluster(auth.ListShards), Handler: runListShards, AdminOnly: true, Secondary: service.SecondaryAlways,
			Help: "list all shards of the system"},
		{Name: "flushRouterConfig", Auth: service.AuthOnCluster(auth.FlushRouterConfig), Handler: runFlushRouterConfig, AdminOnly: true, Secondary: service.SecondaryAlways,
			Help: "flush all router config"},
	}
}

// runListShards answers {shards: [config.shards documents]}, read from the config servers
// (majority) as mongos's ClusterListShardsCmd does; it also refreshes the shard registry.
func runListShards(ctx context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	if err := c.Shards.Reload(ctx); err != nil {
		return nil, err
	}
	shards, err := c.Shards.All(ctx)
	if err != nil {
		return nil, err
	}
	ab := bsoncore.NewArrayBuilder()
	for _, s := range shards {
		ab.AppendDocument(s.Doc())
	}
	return bsoncore.NewDocumentBuilder().AppendArray("shards", ab.Build()).Build(), nil
}

// runFlushRouterConfig forgets cached routing information: all of it ({flushRouterConfig: 1}
// or true), a database's ("db") or a collection's ("db.coll"), as mongos does.
func runFlushRouterConfig(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	arg := lookupFirst(cmd)
	switch ns, _ := arg.StringValueOK(); {
	case ns == "" || arg.Type != bsoncore.TypeString:
		c.Cache.Purge()
	case strings.Contains(ns, "."):
		c.Cache.InvalidateCollection(ns)
	default:
		c.Cache.InvalidateDatabase(ns)
	}
	return bsoncore.NewDocumentBuilder().AppendBoolean("flushed", true).Build(), nil
}

func lookupFirst(cmd bsoncore.Document) bsoncore.Value {
	e, err := cmd.IndexErr(0)
	if err != nil {
		return bsoncore.Value{}
	}
	return e.Value()
}
