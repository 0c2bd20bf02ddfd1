package service

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// LogRotateCommand is logRotate ({logRotate: 1} or {logRotate: "server"}): it rotates the
// log file as SIGUSR1 does (see logv2.Sink.Rotate). As mongod, a failure keeps its code but
// its message hides file paths from the client.
func LogRotateCommand() *Command {
	return &Command{
		Name:      "logRotate",
		Handler:   runLogRotate,
		Auth:      AuthOnCluster(auth.LogRotate),
		Help:      "{ logRotate: 1 || string }",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	}
}

func runLogRotate(_ context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	arg := cmd.Index(0).Value()
	var logType string
	switch arg.Type {
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
	case bsoncore.TypeString:
		logType = arg.StringValue()
	default:
		return nil, mongoerr.Newf(mongoerr.TypeMismatch,
			"BSON field 'logRotate.logRotate' is the wrong type '%s', expected types '[int, string]'", bsonutil.TypeName(arg.Type))
	}
	if env.State.Log == nil {
		return EmptyDoc, nil
	}
	if err := env.State.Log.Rotate(logType); err != nil {
		return nil, mongoerr.New(mongoerr.CodeOf(err), "Log rotation failed due to one or more errors")
	}
	return EmptyDoc, nil
}
