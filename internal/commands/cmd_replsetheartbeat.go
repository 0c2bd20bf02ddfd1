package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/repl/coord"
	"humongo/internal/service"
)

func addReplSetHeartbeat(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetHeartbeat",
		Auth:      service.AuthInternal,
		Handler:   runReplSetHeartbeat,
		Help:      "Internal: replica-set heartbeat between members.",
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetHeartbeat(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	args, err := coord.ParseHeartbeat(cmd)
	if err != nil {
		return nil, err
	}
	return rc.ProcessHeartbeat(args)
}
