package commands

// The getDefaultRWConcern / setDefaultRWConcern commands over repl/concern's cluster-wide
// defaults (MongoDB 7.0's ReadWriteConcernDefaults). The implicit default of a replica set is
// {w: "majority"} and {level: "local"}; setDefaultRWConcern stores the new defaults in
// config.settings under _id "ReadWriteConcernDefaults" (a replicated write, so every member
// sees them) and in memory. A member loads the stored document on first use.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/concern"
	"humongo/internal/service"
)

func addGetDefaultRWConcern(r *service.Registry) {
	add(r, &service.Command{
		Name:      "getDefaultRWConcern",
		Auth:      service.AuthOnCluster(auth.GetDefaultRWConcern),
		Handler:   runGetDefaultRWConcern,
		Help:      "Get the current read and write concern defaults being applied by this server.",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
	add(r, &service.Command{
		Name:      "setDefaultRWConcern",
		Auth:      service.AuthOnCluster(auth.SetDefaultRWConcern),
		Handler:   runSetDefaultRWConcern,
		Help:      "Set the cluster-wide default read and write concern.",
		AdminOnly: true,
		Writes:    true,
	})
}

// codeRWCStandalone is Location51300 ("'<cmd>' is not supported on standalone nodes."); it
// belongs in mongoerr (reported to the lead).
const codeRWCStandalone = mongoerr.Location51300

func runGetDefaultRWConcern(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if env.State.Repl == nil {
		return nil, mongoerr.Newf(codeRWCStandalone, "'%s' is not supported on standalone nodes.", "getDefaultRWConcern")
	}
	return concern.GetDefaults(concernNode(env.State)), nil
}

func runSetDefaultRWConcern(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if env.State.Repl == nil {
		return nil, mongoerr.Newf(codeRWCStandalone, "'%s' is not supported on standalone nodes.", "setDefaultRWConcern")
	}
	if err := checkStrict(cmd, "setDefaultRWConcern", "defaultReadConcern", "defaultWriteConcern"); err != nil {
		return nil, err
	}
	return concern.SetDefaults(ctx, concernNode(env.State), lookup(cmd, "defaultWriteConcern"), lookup(cmd, "defaultReadConcern"))
}
