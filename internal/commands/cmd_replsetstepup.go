package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func addReplSetStepUp(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetStepUp",
		Auth:      service.AuthOnCluster(auth.ReplSetStateChange),
		Handler:   runReplSetStepUp,
		Help:      "Step up as primary (election handoff).\n{ replSetStepUp : 1 }",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetStepUp(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	return nil, rc.StepUp(ctx)
}
