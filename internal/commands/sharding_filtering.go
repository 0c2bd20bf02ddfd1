package commands

// The shard's versioning runtime (internal/sharding/filtering) on humongod: a --shardsvr
// node checks every versioned request against its filtering metadata under the collection
// lock (operation.DB.ShardCheck), answers StaleConfig / StaleDbVersion, and refreshes from
// the config server before the stale error goes back (Role.Finish calls shardOnStaleError,
// MongoDB's handleException). Its commands: getShardVersion, _flushRoutingTableCacheUpdates,
// _flushDatabaseCacheUpdates (cmd_getshardversion.go, cmd_flushroutingtablecacheupdates.go,
// cmd_flushdatabasecacheupdates.go).

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/client"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
	"humongo/internal/service"
	"humongo/internal/sharding/filtering"
	"humongo/internal/sharding/shardstate"
)

// startShardRuntime attaches a shard's filtering runtime to st's storage; stop disconnects
// it from the config servers. rc (nil on a standalone) gives the host rewriter its client
// dials through and whether this node is the primary that persists config.cache.*, which it
// writes through reg's handlers.
func startShardRuntime(st *service.State, reg *service.Registry, rc *coord.Coordinator) (stop func()) {
	o := shardClientOptions(st, "humongod-shard-catalog", 10*time.Second)
	canWrite := func() bool { return true }
	if rc != nil {
		canWrite = rc.IsWritablePrimary
	}
	rt := filtering.New(filtering.Config{Identity: st.Sharding.Identity, ClientOptions: o, Log: st.Logger,
		Persist: &filtering.Persister{Run: internalRunner(st, reg), CanWrite: canWrite}})
	filtering.Attach(st.DB, rt)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
	}
}

// shardOnStaleError refreshes what a command's StaleConfig / StaleDbVersion was about, on a
// shard, before the error is answered: the command's error, or the first stale write error
// of a write command's reply (write_ops_exec's handleError refreshes there too).
func shardOnStaleError(ctx context.Context, env *service.Env, reply bsoncore.Document, err error) {
	if env == nil || env.State == nil || env.State.DB == nil || env.State.Sharding.Role() != shardstate.RoleShardServer {
		return
	}
	if err == nil {
		err = staleWriteError(reply)
	}
	code := mongoerr.CodeOf(err)
	if code != mongoerr.StaleConfig && code != mongoerr.StaleDbVersion {
		return
	}
	if rt := filtering.Of(env.State.DB); rt != nil {
		rt.OnStaleError(ctx, err)
	}
}

// staleWriteError is the first StaleConfig / StaleDbVersion entry of reply's writeErrors as
// an error whose Info is the entry (its inline ns/db, vReceived, vWanted fields), or nil.
func staleWriteError(reply bsoncore.Document) error {
	arr, ok := reply.Lookup("writeErrors").ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			continue
		}
		code, _ := d.Lookup("code").AsInt64OK()
		if c := mongoerr.Code(code); c == mongoerr.StaleConfig || c == mongoerr.StaleDbVersion {
			return mongoerr.New(c, "").WithInfo(d)
		}
	}
	return nil
}

// shardRuntime returns the node's runtime for a shard-only command: NoShardingEnabled on a
// node not started with --shardsvr, ShardingStateNotInitialized before its shard identity
// (ShardingState::canAcceptShardedCommands).
func shardRuntime(env *service.Env) (*filtering.Runtime, shardstate.Identity, error) {
	st := env.State
	if st.Sharding.Role() != shardstate.RoleShardServer || st.DB == nil {
		return nil, shardstate.Identity{}, mongoerr.New(mongoerr.NoShardingEnabled,
			"Cannot accept sharding commands if not started with --shardsvr")
	}
	id, aware := st.Sharding.Identity()
	rt := filtering.Of(st.DB)
	if !aware || rt == nil {
		return nil, id, mongoerr.New(mongoerr.ShardingStateNotInitialized,
			"Cannot accept sharding commands if sharding state has not been initialized with a shardIdentity document")
	}
	return rt, id, nil
}

// shardClientOptions are the options of a sharded-cluster member's clients to other members:
// through the node's host rewriter, gossiping its vector clock.
func shardClientOptions(st *service.State, app string, selection time.Duration) client.Options {
	o := client.Options{AppName: app, ServerSelectionTimeout: selection, Clock: &st.Concern.Clock}
	if st.Repl != nil {
		o.Dialer = st.Repl.HostRewriter()
	} else if st.ClientSecurity != nil {
		o.Dialer = &client.Rewriter{Security: st.ClientSecurity}
	}
	return o
}
