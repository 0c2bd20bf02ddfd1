package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addGetCmdLineOpts(r *service.Registry) {
	add(r, &service.Command{
		Name:      "getCmdLineOpts",
		Handler:   runGetCmdLineOpts,
		Help:      "get argv",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runGetCmdLineOpts(_ context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	cl := env.State.CmdLine
	parsed := cl.Parsed
	if parsed == nil {
		parsed = emptyDoc
	}
	return doc(func(b []byte) []byte {
		b = appendStrings(b, "argv", cl.Argv)
		return bsoncore.AppendDocumentElement(b, "parsed", parsed)
	}), nil
}
