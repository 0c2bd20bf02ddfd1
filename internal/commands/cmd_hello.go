package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
	"humongo/internal/sharding/shardstate"
)

func addHello(r *service.Registry) {
	add(r, &service.Command{
		Name:             "hello",
		PreAuth:          true,
		Aliases:          []string{"isMaster", "ismaster"},
		Handler:          runHello,
		Help:             "Check if this server is primary for a replica set\n{ hello : 1 }",
		Secondary:        service.SecondaryAlways,
		AllowedOnOpQuery: true,
	})
}

// TopologyCounter is a standalone's topologyVersion counter: its topology never changes, so it
// stays 0. A replica-set member's counter is its replication coordinator's
// (CurrentTopologyVersion).
const TopologyCounter int64 = 0

func runHello(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if err := service.HelloHandshake(env, cmd); err != nil {
		return nil, err
	}
	if err := service.HelloAwait(ctx, env, cmd, func() (int64, <-chan struct{}) { return CurrentTopologyVersion(env.State) }); err != nil {
		return nil, err
	}

	st := env.State
	b := make([]byte, 0, 512)
	idx, b := bsoncore.AppendDocumentStart(b)
	if truthy(lookup(cmd, "helloOk")) {
		b = bsoncore.AppendBooleanElement(b, "helloOk", true)
	}
	// The legacy names answer with the legacy field; drivers read whichever matches what they sent.
	switch {
	case st.Repl != nil:
		b = appendHelloRepl(b, env, st.Repl)
	case env.Name == "hello":
		b = bsoncore.AppendBooleanElement(b, "isWritablePrimary", true)
	default:
		b = bsoncore.AppendBooleanElement(b, "ismaster", true)
	}
	counter, _ := CurrentTopologyVersion(st)
	tv := bsoncore.NewDocumentBuilder().AppendObjectID("processId", st.ProcessID).
		AppendInt64("counter", counter).Build()
	b = bsoncore.AppendDocumentElement(b, "topologyVersion", tv)
	if st.Sharding.Role() == shardstate.RoleConfigServer {
		// mongod's configServerModeNumber: config servers run as a replica set (CSRS).
		b = bsoncore.AppendInt32Element(b, "configsvr", 2)
	}
	b = service.AppendHelloLimits(ctx, b, env, cmd)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}
