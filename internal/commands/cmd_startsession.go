package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func init() {
	register(&Command{
		Name:      "startSession",
		Handler:   runStartSession,
		Help:      "start a logical session",
		Secondary: SecondaryAlways,
	})
}

func runStartSession(_ context.Context, env *Env, _ bsoncore.Document) (bsoncore.Document, error) {
	rec, err := env.State.Sessions.Start("")
	if err != nil {
		return nil, err
	}
	return doc(func(b []byte) []byte {
		b = appendLsid(b, "id", rec.Key.ID)
		return bsoncore.AppendInt32Element(b, "timeoutMinutes", int32(env.State.Sessions.Timeout().Minutes()))
	}), nil
}
