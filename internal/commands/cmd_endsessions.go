package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addEndSessions(r *service.Registry) {
	add(r, &service.Command{
		Name:      "endSessions",
		Handler:   runEndSessions,
		Help:      "end a set of logical sessions",
		Secondary: service.SecondaryAlways,
	})
}

func runEndSessions(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	keys, err := parseLsidArray("endSessions", commandArg(cmd))
	if err != nil {
		return nil, err
	}
	env.State.Sessions.End(keys)
	return emptyDoc, nil
}
