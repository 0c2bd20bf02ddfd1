package router

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/client"
	"humongo/internal/repl/concern"
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

// Begin implements service.Role: the client's $clusterTime gossip in (rate limited and,
// under authorization, validated: vclock.Clock.GossipIn), every component from a cluster
// member (a request carrying $configTime, as internal clients' do; under authorization
// only from __system), and the collector of the shards' operationTimes in ctx
// (client.WithOpTimes).
func (Role) Begin(ctx context.Context, env *service.Env, c *service.Command, cmd bsoncore.Document) (context.Context, any, error) {
	op := &routerOp{}
	ctx = client.WithOpTimes(ctx, &op.ots)
	if c != nil && !snapshotReads[c.Name] && !inTxn(cmd) {
		// As mongos's read concern support check: only the reads take readConcern snapshot
		// outside a transaction (listDatabases, a write... fail with InvalidOptions).
		if err := concern.RefuseSnapshot(c.Name, cmd); err != nil {
			return ctx, op, err
		}
	}
	if env == nil || env.State == nil {
		return ctx, op, nil
	}
	g := vclock.ReadGossip(cmd)
	p := service.GossipPeer(env)
	op.member = p.IsMember(g)
	if !op.member {
		g.Time = vclock.Time{Cluster: g.Cluster}
	}
	return ctx, op, env.State.Concern.Clock.GossipIn(ctx, g, p)
}

// snapshotReads are the commands that read at readConcern snapshot outside a transaction
// (cmd_read.go's readsAt); RefuseSnapshot allows explain itself.
var snapshotReads = map[string]bool{"find": true, "aggregate": true, "distinct": true}

// routerOp is what Begin hands to Decorate.
type routerOp struct {
	ots    client.OpTimes
	member bool // the request carried $configTime: the reply carries the member gossip
}

// Finish implements service.Role.
func (Role) Finish(_ context.Context, _ *service.Env, _ any, reply bsoncore.Document, err error) (bsoncore.Document, bsoncore.Document, error) {
	return reply, nil, err
}

// Decorate implements service.Role: $clusterTime (signed for the sender, as mongod's:
// vclock.Clock.SignatureFor) and operationTime, once the router's clock has a time and, under
// authorization, a key to sign it for a sender without advanceClusterTime, and $configTime
// and $topologyTime for members.
func (Role) Decorate(env *service.Env, op any, reply bsoncore.Document) bsoncore.Document {
	if env == nil || env.State == nil || len(reply) < 5 {
		return reply
	}
	t := env.State.Concern.Clock.Time()
	ct := t.Cluster
	if ct.IsNull() {
		return reply
	}
	opTime := ct
	rop, _ := op.(*routerOp)
	if rop != nil && !rop.ots.Max().IsNull() {
		opTime = rop.ots.Max()
	}
	sig, ok := env.State.Concern.Clock.SignatureFor(ct, service.GossipPeer(env))
	if !ok {
		return reply
	}
	out := make([]byte, 0, len(reply)+128)
	out = append(out, reply[:len(reply)-1]...)
	out = vclock.AppendSignedClusterTime(out, ct, sig)
	out = bsoncore.AppendTimestampElement(out, "operationTime", opTime.Secs(), opTime.Inc())
	if rop != nil && rop.member {
		out = vclock.AppendMemberGossip(out, t)
	}
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
