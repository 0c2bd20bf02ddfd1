package router

// killAllSessions and killSessions through the router (MongoDB's
// cluster_kill_all_sessions_cmd, cluster_kill_sessions_cmd): every shard kills the sessions
// (aborting their transactions and killing their cursors), and the router kills its own
// operations and cursors of them and forgets their transactions. Drivers' test runners send
// killAllSessions between tests.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
)

func killAllSessionsCommand() *service.Command {
	return &service.Command{Name: "killAllSessions", Auth: service.AuthOnCluster(auth.KillAnySession), Handler: runKillAllSessions, Secondary: service.SecondaryAlways,
		Help: "kill all logical sessions, for a set of users, and their operations"}
}

func runKillAllSessions(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	arg := firstArg(cmd)
	if arg.Type != bsoncore.TypeArray {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'killAllSessions.killAllSessions' is the wrong type '%s', expected type 'array'", typeName(arg.Type))
	}
	err = killOnShards(ctx, c, bsoncore.NewDocumentBuilder().AppendValue("killAllSessions", arg).Build())
	c.txns.mu.Lock()
	c.txns.m = nil // no users or roles: every session matches
	c.txns.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// killOnShards sends a session-killing command to every shard the registry knows (no
// reload: drivers' test runners send killAllSessions between tests), outside any transaction
// of the caller's, and returns the first shard's failure.
func killOnShards(ctx context.Context, c *Cluster, cmd bsoncore.Document) error {
	all, err := c.Shards.All(ctx)
	if err != nil {
		return err
	}
	ids := make([]string, len(all))
	for i, s := range all {
		ids[i] = s.ID
	}
	return firstError(c.broadcast(context.WithValue(ctx, txnCtxKey{}, nil), "admin", ids, func(string) bsoncore.Document { return cmd }))
}

func killSessionsCommand() *service.Command {
	return &service.Command{Name: "killSessions", Auth: service.AuthAnyUser, Handler: runRouterKillSessions, Secondary: service.SecondaryAlways,
		Help: "kill a logical session and its operations"}
}

// runRouterKillSessions kills the listed sessions (the caller's own, or any user's with
// killAnySession) on every shard and on the router. An empty list kills nothing, as mongod.
func runRouterKillSessions(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	keys, err := service.ParseLsidArray("killSessions", firstArg(cmd))
	if err != nil {
		return nil, err
	}
	if keys, err = service.OwnSessions(env, keys, auth.KillAnySession); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return emptyDoc, nil
	}
	set := make(map[lsc.Key]bool, len(keys))
	ab := bsoncore.NewArrayBuilder()
	for _, k := range keys {
		set[k] = true
		ab.AppendDocument(bsoncore.NewDocumentBuilder().AppendBinary("id", 4, k.ID[:]).AppendBinary("uid", 0, k.UID[:]).Build())
	}
	match := func(k lsc.Key) bool { return set[k] }
	env.State.KillSessions(env.Op, match)
	c.txns.drop(match)
	if err := killOnShards(ctx, c, bsoncore.NewDocumentBuilder().AppendArray("killSessions", ab.Build()).Build()); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}
