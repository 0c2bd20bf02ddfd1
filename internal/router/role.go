package router

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/client"
	"humongo/internal/service"
	"humongo/internal/vclock"
)

// Role is humongos's service.Role. A router has no replication state to gate on and no read
// or write concern to wait for locally (the shards will). Its vector clock
// (service.State.Concern.Clock, which its internal clients also advance from every reply:
// cmd/humongos gives it to them) takes the $clusterTime a client gossips and never ticks;
// every reply carries $clusterTime and the operationTime of the shards the command reached
// (the highest of their operationTimes; the cluster time when it reached none, as mongos's
// appendRequiredFieldsToResponse).
type Role struct{}

// Admit implements service.Role: a router serves in any state.
func (Role) Admit(*service.Env, *service.Command, bsoncore.Document) error { return nil }

// Begin implements service.Role: the client's $clusterTime gossip in (rate limited; a
// driver never sends $configTime, and nothing but drivers talks to a router), and the
// collector of the shards' operationTimes in ctx (client.WithOpTimes).
func (Role) Begin(ctx context.Context, env *service.Env, _ *service.Command, cmd bsoncore.Document) (context.Context, any, error) {
	ots := new(client.OpTimes)
	ctx = client.WithOpTimes(ctx, ots)
	if env == nil || env.State == nil {
		return ctx, ots, nil
	}
	g := vclock.ReadGossip(cmd)
	return ctx, ots, env.State.Concern.Clock.Advance(vclock.Time{Cluster: g.Cluster})
}

// Finish implements service.Role.
func (Role) Finish(_ context.Context, _ *service.Env, _ any, reply bsoncore.Document, err error) (bsoncore.Document, bsoncore.Document, error) {
	return reply, nil, err
}

// Decorate implements service.Role: $clusterTime (unsigned, as mongod's, until signing keys
// exist) and operationTime, once the router's clock has a time.
func (Role) Decorate(env *service.Env, op any, reply bsoncore.Document) bsoncore.Document {
	if env == nil || env.State == nil || len(reply) < 5 {
		return reply
	}
	ct := env.State.Concern.Clock.ClusterTime()
	if ct.IsNull() {
		return reply
	}
	opTime := ct
	if ots, ok := op.(*client.OpTimes); ok && !ots.Max().IsNull() {
		opTime = ots.Max()
	}
	out := make([]byte, 0, len(reply)+96)
	out = append(out, reply[:len(reply)-1]...)
	out = vclock.AppendClusterTime(out, ct)
	out = bsoncore.AppendTimestampElement(out, "operationTime", opTime.Secs(), opTime.Inc())
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}

// TopologyVersion implements service.Role: a router's topology (as its clients see it) never
// changes, as a standalone mongod's.
func (Role) TopologyVersion() int64 { return topologyCounter }

// Shutdown implements service.Role. The router's cursors are closed with its Cluster (a
// server Closer; see startCursorReaper), which kills their shard cursors while the shards'
// connections are still open.
func (Role) Shutdown() {}

// topologyCounter is humongos's topologyVersion counter.
const topologyCounter int64 = 0
