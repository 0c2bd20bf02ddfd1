package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addStartSession(r *service.Registry) {
	add(r, &service.Command{
		Name:      "startSession",
		Auth:      service.AuthAnyUser,
		Handler:   runStartSession,
		Help:      "start a logical session",
		Secondary: service.SecondaryAlways,
	})
}

func runStartSession(_ context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	// The session's uid is its user's digest, as the uid of every command naming it.
	rec, err := env.State.Sessions.Start(env.Auth.SessionOwner())
	if err != nil {
		return nil, err
	}
	return doc(func(b []byte) []byte {
		b = appendLsid(b, "id", rec.Key.ID)
		return bsoncore.AppendInt32Element(b, "timeoutMinutes", int32(env.State.Sessions.Timeout().Minutes()))
	}), nil
}
