package commands

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func addReplSetFreeze(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetFreeze",
		Auth:      service.AuthOnCluster(auth.ReplSetStateChange),
		Handler:   runReplSetFreeze,
		Help:      "Don't stand for election for <seconds> (0 unfreezes).\n{ replSetFreeze : <seconds> }",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetFreeze(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	v := lookup(cmd, "replSetFreeze")
	secs, ok := service.AsFloat(v)
	if !ok {
		return nil, typeMismatch("replSetFreeze", "replSetFreeze", v.Type, "number")
	}
	if err := rc.Freeze(time.Duration(secs * float64(time.Second))); err != nil {
		return nil, err
	}
	b := bsoncore.NewDocumentBuilder()
	switch {
	case secs == 0:
		b.AppendString("info", "unfreezing")
	case secs == 1:
		b.AppendString("warning", "you really want to freeze for only 1 second?")
	}
	return b.Build(), nil
}
