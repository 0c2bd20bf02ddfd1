package commands

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
	"humongo/internal/service"
)

func addReplSetStepDown(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetStepDown",
		Auth:      service.AuthOnCluster(auth.ReplSetStateChange),
		Handler:   runReplSetStepDown,
		Help:      "Step down as primary.\n{ replSetStepDown : <seconds>, secondaryCatchUpPeriodSecs: <seconds>, force: <bool> }",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runReplSetStepDown(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	secs := 60.0
	if v := lookup(cmd, "replSetStepDown"); v.Type != bsoncore.TypeBoolean {
		if f, ok := service.AsFloat(v); ok {
			secs = f
		}
	}
	force := truthy(lookup(cmd, "force"))
	catchUp := 10.0
	if force {
		catchUp = 0
	}
	if v := lookup(cmd, "secondaryCatchUpPeriodSecs"); v.Type != 0 {
		f, ok := service.AsFloat(v)
		if !ok {
			return nil, typeMismatch("replSetStepDown", "secondaryCatchUpPeriodSecs", v.Type, "number")
		}
		catchUp = f
	}
	if secs <= 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "stepdown period must be a positive integer")
	}
	if catchUp > secs {
		return nil, mongoerr.New(mongoerr.BadValue, "stepDownSecs should be greater than or equal to secondaryCatchUpPeriodSecs")
	}
	err = rc.StepDown(ctx, coord.StepDownArgs{StepDownSecs: time.Duration(secs * float64(time.Second)),
		CatchUpSecs: time.Duration(catchUp * float64(time.Second)), Force: force})
	return nil, err
}
