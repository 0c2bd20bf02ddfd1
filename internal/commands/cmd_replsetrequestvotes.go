package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func init() {
	register(&Command{
		Name:      "replSetRequestVotes",
		Handler:   runReplSetRequestVotes,
		Help:      "Internal: a candidate asks for this member's vote.",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	})
}

func runReplSetRequestVotes(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	return rc.ProcessRequestVotes(cmd)
}
