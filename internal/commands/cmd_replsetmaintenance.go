package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func init() {
	register(&Command{
		Name:      "replSetMaintenance",
		Handler:   runReplSetMaintenance,
		Help:      "Enter/leave maintenance mode (RECOVERING).\n{ replSetMaintenance : <bool> }",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	})
}

func runReplSetMaintenance(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	return nil, rc.Maintenance(truthy(lookup(cmd, "replSetMaintenance")))
}
