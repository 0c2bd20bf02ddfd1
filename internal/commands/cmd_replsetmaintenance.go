package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func addReplSetMaintenance(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetMaintenance",
		Auth:      service.AuthOnCluster(auth.ReplSetStateChange),
		Handler:   runReplSetMaintenance,
		Help:      "Enter/leave maintenance mode (RECOVERING).\n{ replSetMaintenance : <bool> }",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetMaintenance(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	return nil, rc.Maintenance(truthy(lookup(cmd, "replSetMaintenance")))
}
