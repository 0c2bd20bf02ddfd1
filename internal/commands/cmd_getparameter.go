package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

func init() {
	register(&Command{
		Name:      "getParameter",
		Handler:   runGetParameter,
		Help:      "get administrative option(s)\nexample:\n{ getParameter:1, notablescan:1 }\n{ getParameter:'*' } or { getParameter:{allParameters:true} }\n{ getParameter:{showDetails:true}, logLevel:1 }",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	})
}

// runGetParameter answers {getParameter: 1, name: <any>, ...}, {getParameter: "*"} (all) and
// {getParameter: {allParameters: bool, showDetails: bool}, ...}. Unknown names are skipped;
// finding none is an error, as in mongod.
func runGetParameter(_ context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	params := env.State.Params
	arg := commandArg(cmd)
	all, details := false, false
	switch arg.Type {
	case bsoncore.TypeString:
		all = arg.StringValue() == "*"
	case bsoncore.TypeEmbeddedDocument:
		d := arg.Document()
		all = truthy(lookup(d, "allParameters"))
		details = truthy(lookup(d, "showDetails"))
	}
	var names []string
	if all {
		names = params.Names()
	} else {
		elems, err := cmd.Elements()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid command: %v", err)
		}
		for _, e := range elems[1:] {
			if GenericArguments[e.Key()] {
				continue
			}
			if _, ok := params.Spec(e.Key()); ok {
				names = append(names, e.Key())
			}
		}
	}
	if len(names) == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "no option found to get")
	}
	return doc(func(b []byte) []byte {
		for _, n := range names {
			if !details {
				b = params.AppendValue(b, n, n)
				continue
			}
			s, _ := params.Spec(n)
			idx, b2 := bsoncore.AppendDocumentElementStart(b, n)
			b2 = params.AppendValue(b2, "value", n)
			b2 = bsoncore.AppendBooleanElement(b2, "settableAtRuntime", s.Runtime)
			b2 = bsoncore.AppendBooleanElement(b2, "settableAtStartup", s.Startup)
			b, _ = bsoncore.AppendDocumentEnd(b2, idx)
		}
		return b
	}), nil
}
