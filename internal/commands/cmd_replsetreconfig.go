package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addReplSetReconfig(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetReconfig",
		Auth:      service.AuthOnCluster(auth.ReplSetConfigure),
		Handler:   runReplSetReconfig,
		Help:      "Adjust configuration of a replica set\n{ replSetReconfig : config_object, force: <bool> }",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetReconfig(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	cfg, ok := lookup(cmd, "replSetReconfig").DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'replSetReconfig' is the wrong type, expected type 'object'")
	}
	if err := rc.Reconfig(ctx, cfg, truthy(lookup(cmd, "force"))); err != nil {
		return nil, err
	}
	return nil, nil
}
