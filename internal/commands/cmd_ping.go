package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func init() {
	register(&Command{
		Name:      "ping",
		Handler:   runPing,
		Help:      "a way to check that the server is alive. responds immediately even if server is in a db lock.",
		Secondary: SecondaryAlways,
	})
}

func runPing(context.Context, *Env, bsoncore.Document) (bsoncore.Document, error) {
	return emptyDoc, nil
}

// emptyDoc is a reply with no fields besides the `ok` the server appends.
var emptyDoc = bsoncore.Document{5, 0, 0, 0, 0}
