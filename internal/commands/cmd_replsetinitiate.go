package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addReplSetInitiate(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetInitiate",
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
		cfg = v.Document()
	}
	if err := rc.Initiate(ctx, cfg); err != nil {
		return nil, err
	}
	return nil, nil
}
