package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func init() {
	register(&Command{
		Name:      "replSetUpdatePosition",
		Handler:   runReplSetUpdatePosition,
		Help:      "Internal: a member reports its (and relayed) applied/durable optimes.",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	})
}

func runReplSetUpdatePosition(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	return nil, rc.ProcessUpdatePosition(cmd)
}
