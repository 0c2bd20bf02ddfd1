package router

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

// Role is humongos's service.Role. A router has no replication state to gate on, no read or
// write concern to wait for locally (the shards will), and no vector clock yet, so every
// hook passes through; they fill in with targeting and $clusterTime gossip.
type Role struct{}

// Admit implements service.Role: a router serves in any state.
func (Role) Admit(*service.Env, *service.Command, bsoncore.Document) error { return nil }

// Begin implements service.Role.
func (Role) Begin(ctx context.Context, _ *service.Env, _ *service.Command, _ bsoncore.Document) (context.Context, any, error) {
	return ctx, nil, nil
}

// Finish implements service.Role.
func (Role) Finish(_ context.Context, _ *service.Env, _ any, reply bsoncore.Document, err error) (bsoncore.Document, bsoncore.Document, error) {
	return reply, nil, err
}

// Decorate implements service.Role.
func (Role) Decorate(_ *service.Env, _ any, reply bsoncore.Document) bsoncore.Document { return reply }

// TopologyVersion implements service.Role: a router's topology (as its clients see it) never
// changes, as a standalone mongod's.
func (Role) TopologyVersion() int64 { return topologyCounter }

// Shutdown implements service.Role. The router's cursors are closed with its Cluster (a
// server Closer; see startCursorReaper), which kills their shard cursors while the shards'
// connections are still open.
func (Role) Shutdown() {}

// topologyCounter is humongos's topologyVersion counter.
const topologyCounter int64 = 0
