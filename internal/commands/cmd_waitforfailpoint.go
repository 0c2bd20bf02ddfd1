package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/failpoint"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addWaitForFailPoint(r *service.Registry) {
	add(r, &service.Command{
		Name:      "waitForFailPoint",
		Handler:   runWaitForFailPoint,
		Help:      "wait for a fail point to be entered a certain number of times\n{waitForFailPoint: <name>, timesEntered: n, maxTimeMS: ms}",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
		PreAuth:   true,
		TestOnly:  true,
	})
}

// runWaitForFailPoint blocks until the fail point has fired timesEntered times in total. A
// maxTimeMS is required (the dispatcher turns it into the context deadline), as in mongod.
func runWaitForFailPoint(ctx context.Context, _ *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	name, ok := commandArg(cmd).StringValueOK()
	if !ok {
		return nil, typeMismatch("waitForFailPoint", "waitForFailPoint", commandArg(cmd).Type, "string")
	}
	fp := failpoint.Get(name)
	if fp == nil {
		return nil, mongoerr.Newf(mongoerr.FailPointSetFailed, "%s not found", name)
	}
	tv := lookup(cmd, "timesEntered")
	if tv.Type == 0 {
		return nil, mongoerr.New(codeMissingField, "BSON field 'waitForFailPoint.timesEntered' is missing but a required field")
	}
	n, err := intArg("waitForFailPoint", "timesEntered", tv)
	if err != nil {
		return nil, err
	}
	if lookup(cmd, "maxTimeMS").Type == 0 {
		return nil, mongoerr.New(codeMissingField, "BSON field 'waitForFailPoint.maxTimeMS' is missing but a required field")
	}
	if err := fp.WaitForTimesEntered(ctx, n); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}
