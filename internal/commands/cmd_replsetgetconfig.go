package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func addReplSetGetConfig(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetGetConfig",
		Auth:      service.AuthOnCluster(auth.ReplSetGetConfig),
		Handler:   runReplSetGetConfig,
		Help:      "Returns the current replica set configuration\n{ replSetGetConfig : 1 }",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetGetConfig(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	cfg, err := rc.Config()
	if err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().AppendDocument("config", cfg).Build(), nil
}
