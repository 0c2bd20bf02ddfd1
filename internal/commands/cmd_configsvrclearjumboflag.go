package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func configsvrClearJumboFlagCommand() *service.Command {
	return &service.Command{
		Name:      "_configsvrClearJumboFlag",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrClearJumboFlag,
		Help:      "internal clearJumboFlag command for config server",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
		Writes:    true,
	}
}

// runConfigsvrClearJumboFlag clears a chunk's jumbo flag ({_configsvrClearJumboFlag: ns,
// epoch, minKey, maxKey}; clear_jumbo_flag.idl) and answers once majority committed.
func runConfigsvrClearJumboFlag(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_configsvrClearJumboFlag"
	if err := requireConfigServer(env, name); err != nil {
		return nil, err
	}
	ns, ok := cmd.Index(0).Value().StringValueOK()
	if !ok || ns == "" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "invalid namespace specified for request")
	}
	field := func(f string, t bsoncore.Type, want string) (bsoncore.Value, error) {
		v := lookup(cmd, f)
		if v.Type == 0 {
			return v, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.%s' is missing but a required field", name, f)
		}
		if v.Type != t {
			return v, typeMismatch(name, f, v.Type, want)
		}
		return v, nil
	}
	ep, err := field("epoch", bsoncore.TypeObjectID, "objectId")
	if err != nil {
		return nil, err
	}
	min, err := field("minKey", bsoncore.TypeEmbeddedDocument, "object")
	if err != nil {
		return nil, err
	}
	max, err := field("maxKey", bsoncore.TypeEmbeddedDocument, "object")
	if err != nil {
		return nil, err
	}
	if err := shardingDDLOf(env).committer.ClearJumboFlag(ctx, ns, ep.ObjectID(), min.Document(), max.Document()); err != nil {
		return nil, err
	}
	return waitMajority(ctx, env, emptyDoc)
}
