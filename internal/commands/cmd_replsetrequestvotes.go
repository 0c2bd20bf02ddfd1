package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addReplSetRequestVotes(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetRequestVotes",
		Auth:      service.AuthInternal,
		Handler:   runReplSetRequestVotes,
		Help:      "Internal: a candidate asks for this member's vote.",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetRequestVotes(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	return rc.ProcessRequestVotes(cmd)
}
