package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func init() {
	register(&Command{
		Name:      "replSetGetRBID",
		Handler:   runReplSetGetRBID,
		Help:      "Internal: the rollback id, which changes on every rollback.",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	})
}

func runReplSetGetRBID(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().AppendInt32("rbid", rc.RBID()).Build(), nil
}
