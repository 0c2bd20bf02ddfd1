package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func addReplSetSyncFrom(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetSyncFrom",
		Auth:      service.AuthOnCluster(auth.ReplSetStateChange),
		Handler:   runReplSetSyncFrom,
		Help:      "Sync from the given member.\n{ replSetSyncFrom : \"host:port\" }",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetSyncFrom(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	v := lookup(cmd, "replSetSyncFrom")
	host, ok := v.StringValueOK()
	if !ok {
		return nil, typeMismatch("replSetSyncFrom", "replSetSyncFrom", v.Type, "string")
	}
	prev, err := rc.SyncFrom(host)
	if err != nil {
		return nil, err
	}
	b := bsoncore.NewDocumentBuilder().AppendString("syncFromRequested", host)
	if prev != "" {
		b.AppendString("prevSyncTarget", prev)
	}
	return b.Build(), nil
}
