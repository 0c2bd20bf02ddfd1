package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/failpoint"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addConfigureFailPoint(r *service.Registry) {
	add(r, &service.Command{
		Name:         "configureFailPoint",
		Handler:      runConfigureFailPoint,
		Help:         "modifies the settings of a fail point\n{configureFailPoint: <name>, mode: 'alwaysOn'|'off'|{times: n}|{skip: n}|{activationProbability: p}, data: {...}}",
		AdminOnly:    true,
		Secondary:    service.SecondaryAlways,
		RequiresAuth: true,
		TestOnly:     true,
	})
}

func runConfigureFailPoint(_ context.Context, _ *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	name, ok := commandArg(cmd).StringValueOK()
	if !ok {
		return nil, typeMismatch("configureFailPoint", "configureFailPoint", commandArg(cmd).Type, "string")
	}
	fp := failpoint.Get(name)
	if fp == nil {
		return nil, mongoerr.Newf(mongoerr.FailPointSetFailed, "%s not found", name)
	}
	mode, n, p, err := parseFailPointMode(lookup(cmd, "mode"))
	if err != nil {
		return nil, err
	}
	var data bsoncore.Document
	if dv := lookup(cmd, "data"); dv.Type != 0 {
		d, ok := dv.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "the 'data' field must be an object")
		}
		data = d
	}
	count := fp.Configure(mode, n, p, data)
	return bsoncore.NewDocumentBuilder().AppendInt64("count", count).Build(), nil
}

// parseFailPointMode parses MongoDB's fail point mode argument.
func parseFailPointMode(v bsoncore.Value) (failpoint.Mode, int64, float64, error) {
	switch v.Type {
	case 0:
		return 0, 0, 0, mongoerr.New(mongoerr.IllegalOperation, "When setting a failpoint, you must supply a 'mode'")
	case bsoncore.TypeString:
		switch v.StringValue() {
		case "alwaysOn":
			return failpoint.AlwaysOn, 0, 0, nil
		case "off":
			return failpoint.Off, 0, 0, nil
		}
		return 0, 0, 0, mongoerr.New(mongoerr.BadValue, "unknown mode: "+v.StringValue())
	case bsoncore.TypeEmbeddedDocument:
		d := v.Document()
		if t := lookup(d, "times"); t.Type != 0 {
			n, err := intArg("mode", "times", t)
			if err != nil {
				return 0, 0, 0, err
			}
			if n < 0 {
				return 0, 0, 0, mongoerr.New(mongoerr.BadValue, "times must be positive")
			}
			return failpoint.Times, n, 0, nil
		}
		if s := lookup(d, "skip"); s.Type != 0 {
			n, err := intArg("mode", "skip", s)
			if err != nil {
				return 0, 0, 0, err
			}
			if n < 0 {
				return 0, 0, 0, mongoerr.New(mongoerr.BadValue, "skip must be positive")
			}
			return failpoint.Skip, n, 0, nil
		}
		if pv := lookup(d, "activationProbability"); pv.Type != 0 {
			p, ok := service.AsFloat(pv)
			if !ok || p < 0 || p > 1 {
				return 0, 0, 0, mongoerr.New(mongoerr.BadValue, "activationProbability must be between 0.0 and 1.0")
			}
			return failpoint.Probability, 0, p, nil
		}
		return 0, 0, 0, mongoerr.New(mongoerr.BadValue, "mode object can include 'times', 'skip', or 'activationProbability'")
	}
	return 0, 0, 0, mongoerr.New(mongoerr.TypeMismatch, "'mode' must be a string or JSON object")
}
