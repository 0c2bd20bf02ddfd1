package router

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func helloCommand() *service.Command {
	return &service.Command{
		Name:             "hello",
		PreAuth:          true,
		Aliases:          []string{"isMaster", "ismaster"},
		Handler:          runHello,
		Help:             "Check if this server is primary for a replica set\n{ hello : 1 }",
		Secondary:        service.SecondaryAlways,
		AllowedOnOpQuery: true,
	}
}

// runHello answers as mongos does: writable, msg "isdbgrid" (which drivers read as "this is
// a router"), and no replica-set fields.
func runHello(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if err := service.HelloHandshake(env, cmd); err != nil {
		return nil, err
	}
	// The router's topology never changes: an awaitable hello waits out maxAwaitTimeMS.
	if err := service.HelloAwait(ctx, env, cmd, func() (int64, <-chan struct{}) { return topologyCounter, nil }); err != nil {
		return nil, err
	}
	idx, b := bsoncore.AppendDocumentStart(make([]byte, 0, 512))
	if v, err := cmd.LookupErr("helloOk"); err == nil && service.Truthy(v) {
		b = bsoncore.AppendBooleanElement(b, "helloOk", true)
	}
	// The legacy names answer with the legacy field, as on mongod.
	if env.Name == "hello" {
		b = bsoncore.AppendBooleanElement(b, "isWritablePrimary", true)
	} else {
		b = bsoncore.AppendBooleanElement(b, "ismaster", true)
	}
	b = bsoncore.AppendStringElement(b, "msg", "isdbgrid")
	b = bsoncore.AppendDocumentElement(b, "topologyVersion", bsoncore.NewDocumentBuilder().
		AppendObjectID("processId", env.State.ProcessID).AppendInt64("counter", topologyCounter).Build())
	b = service.AppendHelloLimits(ctx, b, env, cmd)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}
