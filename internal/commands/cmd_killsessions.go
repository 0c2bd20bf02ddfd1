package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
	"humongo/internal/txn/lsc"
)

func addKillSessions(r *service.Registry) {
	add(r, &service.Command{
		Name:      "killSessions",
		Handler:   runKillSessions,
		Help:      "kill a logical session and its operations",
		Secondary: service.SecondaryAlways,
	})
}

// runKillSessions removes the listed sessions; an empty list means all of the caller's
// sessions (all sessions, without authentication). Killing a session's running operations
// and cursors arrives with the session catalog.
func runKillSessions(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	keys, err := service.ParseLsidArray("killSessions", commandArg(cmd))
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		env.State.Sessions.KillMatching(func(lsc.Record) bool { return true })
	} else {
		env.State.Sessions.End(keys)
	}
	return emptyDoc, nil
}
