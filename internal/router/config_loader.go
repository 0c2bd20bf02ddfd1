package router

// The router's catalog reads with its config server unreachable (spec: sharding.md "The
// routing table cache"; issue 12 "Bad input and faults"): the caches keep serving what they
// hold, and a refresh that cannot reach the config server fails with the code mongos's
// catalog client answers (FailedToSatisfyReadPreference when no config server is found
// within the server selection timeout, HostUnreachable when the connection fails; the
// request's own maxTimeMS stays MaxTimeMSExpired) rather than the driver's error.

import (
	"context"

	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardregistry"
)

// configLoader is the loader of the router's catalog cache and shard registry: the config
// client, its transport errors given MongoDB's codes (transportError).
type configLoader struct {
	cl  *configclient.Client
	set string // the config server replica set's name, for messages
}

func (l configLoader) err(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if te := transportError(ctx, l.set, err); te != nil {
		return te
	}
	return err
}

// Database implements catalogcache.Loader.
func (l configLoader) Database(ctx context.Context, name string) (catalogcache.Database, error) {
	d, err := l.cl.Database(ctx, name)
	return d, l.err(ctx, err)
}

// Collection implements catalogcache.Loader.
func (l configLoader) Collection(ctx context.Context, ns string, since *routing.ChunkVersion) (catalogcache.Collection, []routing.Chunk, bool, error) {
	coll, chunks, sharded, err := l.cl.Collection(ctx, ns, since)
	return coll, chunks, sharded, l.err(ctx, err)
}

// Shards implements shardregistry.Loader.
func (l configLoader) Shards(ctx context.Context) ([]shardregistry.Shard, error) {
	s, err := l.cl.Shards(ctx)
	return s, l.err(ctx, err)
}
