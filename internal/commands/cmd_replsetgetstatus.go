package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func addReplSetGetStatus(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetGetStatus",
		Auth:      service.AuthOnCluster(auth.ReplSetGetStatus),
		Handler:   runReplSetGetStatus,
		Help:      "Report status of a replica set from the POV of this server\n{ replSetGetStatus : 1 }",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetGetStatus(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	return rc.Status()
}
