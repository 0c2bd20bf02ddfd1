package commands

import (
	"context"
	"sort"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addTestingReplicaSetHostRewrites(r *service.Registry) {
	add(r, &service.Command{
		Name:    "testingReplicaSetHostRewrites",
		Auth:    service.AuthInternal,
		Handler: runTestingReplicaSetHostRewrites,
		Help: "test only: route this member's connections to other members through other addresses\n" +
			"{testingReplicaSetHostRewrites: {<member host>: <address to dial>, ...}} replaces the whole map; {} clears it",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
		TestOnly:  true,
	})
}

// runTestingReplicaSetHostRewrites replaces the member-to-member dial rewrites of this server
// (its coordinator's client.Rewriter; a standalone has none: NoReplicationEnabled): the fault-injection harness points each member's view of every
// other member at a per-link proxy, so that it can partition links between members while
// the replica-set config keeps the real hosts. Connections whose target changes are closed
// at once. The reply holds the previous map (`was`) and how many connections were closed.
func runTestingReplicaSetHostRewrites(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "testingReplicaSetHostRewrites"
	arg := commandArg(cmd)
	doc, ok := arg.DocumentOK()
	if !ok {
		return nil, typeMismatch(name, name, arg.Type, "object")
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s argument: %v", name, err)
	}
	m := make(map[string]string, len(elems))
	for _, e := range elems {
		to, ok := e.Value().StringValueOK()
		if !ok {
			return nil, typeMismatch(name, e.Key(), e.Value().Type, "string")
		}
		if _, dup := m[e.Key()]; dup {
			return nil, mongoerr.Newf(mongoerr.BadValue, "%s: host %q is rewritten twice", name, e.Key())
		}
		m[e.Key()] = to
	}
	rc, err := replCoord(env)
	if err != nil {
		return nil, err
	}
	was, closed, err := rc.HostRewriter().Set(m)
	if err != nil {
		return nil, err
	}
	env.State.Logger.Info("Replica set host rewrites changed", "c", "NETWORK", "id", 9400100,
		"ctx", env.Conn.Desc(), "rewrites", m, "closedConnections", closed)
	hosts := make([]string, 0, len(was))
	for h := range was {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	wb := bsoncore.NewDocumentBuilder()
	for _, h := range hosts {
		wb.AppendString(h, was[h])
	}
	return bsoncore.NewDocumentBuilder().AppendDocument("was", wb.Build()).
		AppendInt32("closedConnections", int32(closed)).Build(), nil
}
