package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addWhatsmyuri(r *service.Registry) {
	add(r, &service.Command{
		Name:      "whatsmyuri",
		Auth:      service.AuthAnyUser,
		Handler:   runWhatsMyURI,
		Help:      "{whatsmyuri:1}",
		Secondary: service.SecondaryAlways,
	})
}

func runWhatsMyURI(_ context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	return bsoncore.NewDocumentBuilder().AppendString("you", env.Conn.Remote).Build(), nil
}
