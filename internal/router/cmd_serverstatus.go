package router

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func serverStatusCommand() *service.Command {
	return &service.Command{
		Name:      "serverStatus",
		Auth:      service.AuthOnCluster(auth.ServerStatus),
		Handler:   runServerStatus,
		Help:      "returns lots of administrative server statistics",
		Secondary: service.SecondaryAlways,
	}
}

// runServerStatus reports the sections every role has, as process "mongos" (tools tell a
// router by it).
func runServerStatus(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = service.AppendServerStatusBase(b, env, "mongos", service.ServerStatusWant(cmd))
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}
