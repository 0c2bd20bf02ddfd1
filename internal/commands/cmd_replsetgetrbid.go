package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addReplSetGetRBID(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetGetRBID",
		Auth:      service.AuthInternal,
		Handler:   runReplSetGetRBID,
		Help:      "Internal: the rollback id, which changes on every rollback.",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetGetRBID(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().AppendInt32("rbid", rc.RBID()).Build(), nil
}
