package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func init() {
	register(&Command{
		Name:      "replSetStepUp",
		Handler:   runReplSetStepUp,
		Help:      "Step up as primary (election handoff).\n{ replSetStepUp : 1 }",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	})
}

func runReplSetStepUp(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	return nil, rc.StepUp(ctx)
}
