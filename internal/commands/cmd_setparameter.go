package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addSetParameter(r *service.Registry) {
	add(r, &service.Command{
		Name:      "setParameter",
		Auth:      service.AuthOnCluster(auth.SetParameter),
		Handler:   runSetParameter,
		Help:      "set administrative option(s)\n{ setParameter:1, <param>:<value> }\nsupported:\n",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

// runSetParameter sets each non-generic field as a parameter. Every name is validated before
// any value changes, so a bad request leaves all parameters as they were. The reply's `was` is
// the previous value of the (last) parameter set.
func runSetParameter(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	params := env.State.Params
	elems, err := cmd.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid command: %v", err)
	}
	var toSet []bsoncore.Element
	for _, e := range elems[1:] {
		k := e.Key()
		if service.GenericArguments[k] {
			continue
		}
		if _, ok := params.Spec(k); !ok {
			return nil, service.UnrecognizedParam(k)
		}
		toSet = append(toSet, e)
	}
	if len(toSet) == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "no option found to set, use help:true to see options ")
	}
	if len(toSet) > 1 {
		// mongod accepts several, but then a failure half-way leaves a partial change; we
		// validate all first by dry-running against copies.
		for _, e := range toSet {
			if err := params.Check(e.Key(), e.Value()); err != nil {
				return nil, err
			}
		}
	}
	var was bsoncore.Value
	for _, e := range toSet {
		if was, err = params.SetValue(e.Key(), e.Value()); err != nil {
			return nil, err
		}
		env.State.Logger.Info("Setting new configuration", "c", "COMMAND", "id", 23300,
			"ctx", env.Conn.Desc(), "parameter", e.Key(), "value", e.Value().String())
	}
	return bsoncore.NewDocumentBuilder().AppendValue("was", was).Build(), nil
}
