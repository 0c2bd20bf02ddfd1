package router

// killAllSessions through the router (MongoDB's cluster_kill_all_sessions_cmd): every
// shard kills the sessions (aborting their transactions and killing their cursors), and the
// router forgets its transactions. Drivers' test runners send it between tests.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
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
	shards, err := c.Shards.All(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(shards))
	for i, s := range shards {
		ids[i] = s.ID
	}
	fwd := bsoncore.NewDocumentBuilder().AppendValue("killAllSessions", arg).Build()
	errs := make([]error, len(ids))
	fanOut(ids, func(i int, shard string) {
		_, errs[i] = c.runOn(context.WithValue(ctx, txnCtxKey{}, nil), shard, "admin", fwd)
	})
	c.txns.mu.Lock()
	c.txns.m = nil // no users or roles: every session matches
	c.txns.mu.Unlock()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return emptyDoc, nil
}
