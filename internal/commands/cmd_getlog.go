package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addGetLog(r *service.Registry) {
	add(r, &service.Command{
		Name:      "getLog",
		Auth:      service.AuthOnCluster(auth.GetLog),
		Handler:   runGetLog,
		Help:      "{ getLog : '*' }  OR { getLog : 'global' }",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

// runGetLog serves the in-memory log rings: "*" lists them, "global" holds the last 1024
// lines and "startupWarnings" the warnings logged at startup.
func runGetLog(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	arg := commandArg(cmd)
	// GetLogCommand is IDL-parsed: a null argument counts as missing.
	name, ok := arg.StringValueOK()
	switch {
	case arg.Type == bsoncore.TypeNull:
		return nil, mongoerr.New(codeMissingField, "BSON field 'getLog.getLog' is missing but a required field")
	case !ok:
		return nil, typeMismatch("getLog", "getLog", arg.Type, "string")
	}
	if name == "*" {
		return doc(func(b []byte) []byte {
			return appendStrings(b, "names", []string{"global", "startupWarnings"})
		}), nil
	}
	sink := env.State.Log
	if sink == nil {
		return nil, mongoerr.New(mongoerr.InternalError, "no log sink")
	}
	var lines []string
	var total int64
	switch name {
	case "global":
		lines, total = sink.Global.Lines()
	case "startupWarnings":
		lines, total = sink.Warnings.Lines()
	default:
		return nil, mongoerr.Newf(mongoerr.OperationFailed, "No log named '%s'", name)
	}
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendInt64Element(b, "totalLinesWritten", total)
		return appendStrings(b, "log", lines)
	}), nil
}
