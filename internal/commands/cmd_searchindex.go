package commands

// Atlas Search index commands. Search indexes are served by Atlas's mongot, which Humongo
// does not have: like MongoDB 7.0 outside Atlas, the commands exist and refuse with
// CommandNotSupported, so drivers' search-index helpers report that clearly (the
// index-management spec expects an error mentioning Atlas) instead of "no such command".

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addSearchIndexCommands(r *service.Registry) {
	for name, act := range map[string]auth.Action{"createSearchIndexes": auth.CreateSearchIndexes,
		"dropSearchIndex": auth.DropSearchIndex, "updateSearchIndex": auth.UpdateSearchIndex} {
		add(r, &service.Command{
			Name:    name,
			Handler: runSearchIndexCommand,
			Help:    "Atlas Search index management (only with Atlas)",
			Auth:    service.AuthOnNS(act),
		})
	}
}

func runSearchIndexCommand(_ context.Context, _ *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	return nil, mongoerr.New(mongoerr.CommandNotSupported, "Search index commands are only supported with Atlas.")
}
