package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func init() {
	register(&Command{
		Name:      "whatsmyuri",
		Handler:   runWhatsMyURI,
		Help:      "{whatsmyuri:1}",
		Secondary: SecondaryAlways,
	})
}

func runWhatsMyURI(_ context.Context, env *Env, _ bsoncore.Document) (bsoncore.Document, error) {
	return bsoncore.NewDocumentBuilder().AppendString("you", env.Conn.Remote).Build(), nil
}
