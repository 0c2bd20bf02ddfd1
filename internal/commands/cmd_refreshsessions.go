package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addRefreshSessions(r *service.Registry) {
	add(r, &service.Command{
		Name:      "refreshSessions",
		Auth:      service.AuthAnyUser,
		Handler:   runRefreshSessions,
		Help:      "renew a set of logical sessions",
		Secondary: service.SecondaryAlways,
	})
}

func runRefreshSessions(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	keys, err := service.ParseLsidArray("refreshSessions", commandArg(cmd))
	if err != nil {
		return nil, err
	}
	keys = service.OwnSessions(env, keys)
	if err := env.State.Sessions.VivifyAll(keys, ""); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}
