package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func addReplSetInitiate(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetInitiate",
		Auth:      service.AuthOnCluster(auth.ReplSetConfigure),
		Handler:   runReplSetInitiate,
		Help:      "Initiate/christen a replica set.\n{ replSetInitiate : <config> } (default: a one-member set of this node)",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetInitiate(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	var cfg bsoncore.Document
	if v := lookup(cmd, "replSetInitiate"); v.Type == bsoncore.TypeEmbeddedDocument {
		// An empty object is no configuration, as mongod's `givenConfig.isEmpty()`: what
		// mongosh's rs.initiate() sends.
		if elems, _ := v.Document().Elements(); len(elems) > 0 {
			cfg = v.Document()
		}
	}
	if err := rc.Initiate(ctx, cfg); err != nil {
		return nil, err
	}
	if cfg == nil {
		return bsoncore.NewDocumentBuilder().
			AppendString("info2", "no configuration specified. Using a default configuration for the set").
			AppendString("me", rc.Self()).Build(), nil
	}
	return nil, nil
}
