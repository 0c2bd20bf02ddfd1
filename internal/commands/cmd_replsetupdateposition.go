package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addReplSetUpdatePosition(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetUpdatePosition",
		Auth:      service.AuthInternal,
		Handler:   runReplSetUpdatePosition,
		Help:      "Internal: a member reports its (and relayed) applied/durable optimes.",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetUpdatePosition(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	return nil, rc.ProcessUpdatePosition(cmd)
}
