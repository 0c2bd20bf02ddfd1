package configsvr

// Registering a newly sharded collection (spec: sharding.md "Sharding a collection"; MongoDB
// 7.0's CreateCollectionCoordinator commit phase, which writes config.collections and the
// initial config.chunks in one transaction on the config server). Here the db-primary shard
// sends the complete entry and chunks in one _configsvrCommitShardCollection command and
// the config server writes them with one atomic applyOps, under the Committer's lock, after
// checking that the namespace is not sharded already.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
)

// ShardCollectionRequest is the collection's config.collections document and its initial
// config.chunks documents (at least one; they must cover the key space).
type ShardCollectionRequest struct {
	Collection bsoncore.Document
	Chunks     []bsoncore.Document
}

// CommitShardCollection writes the collection's entry and chunks atomically. When the
// namespace is already sharded with the same key, uniqueness and default collation, it
// writes nothing and returns the existing entry (created is false): a retried or repeated
// shardCollection is a success. With other options it is AlreadyInitialized.
func (c *Committer) CommitShardCollection(ctx context.Context, req ShardCollectionRequest) (coll catalogcache.Collection, created bool, err error) {
	want, err := configclient.ParseCollection(req.Collection)
	if err != nil {
		return coll, false, err
	}
	if len(req.Chunks) == 0 {
		return coll, false, mongoerr.New(mongoerr.InvalidOptions, "a sharded collection needs at least one chunk")
	}
	// The chunks must be valid and exactly cover the key space (routing.New checks both).
	chunks := make([]routing.Chunk, len(req.Chunks))
	for i, d := range req.Chunks {
		if chunks[i], err = routing.ParseConfigChunk(d, want.Gen); err != nil {
			return coll, false, err
		}
	}
	if _, err := routing.New(want.UUID, want.Pattern, want.Gen, chunks); err != nil {
		return coll, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	doc, found, err := findOne(ctx, c.Run, "collections", bsoncore.NewDocumentBuilder().AppendString("_id", want.NS).Build(), nil)
	if err != nil {
		return coll, false, err
	}
	if found {
		have, err := configclient.ParseCollection(doc)
		if err != nil {
			return coll, false, err
		}
		if !SameShardingOptions(doc, req.Collection) {
			return coll, false, mongoerr.Newf(mongoerr.AlreadyInitialized, "sharding already enabled for collection %s", want.NS)
		}
		return have, false, nil
	}
	ops := []bsoncore.Document{insertOp("config.collections", req.Collection)}
	for _, d := range req.Chunks {
		ops = append(ops, insertOp("config.chunks", d))
	}
	if err := c.apply(ctx, ops); err != nil {
		return coll, false, err
	}
	return want, true, nil
}

// SameShardingOptions compares two config.collections documents as 7.0's
// checkIfCollectionAlreadyShardedWithSameOptions does: the same key pattern (field order
// and values), the same unique flag and the same default collation.
func SameShardingOptions(a, b bsoncore.Document) bool {
	ka, _ := a.Lookup("key").DocumentOK()
	kb, _ := b.Lookup("key").DocumentOK()
	ua, _ := a.Lookup("unique").BooleanOK()
	ub, _ := b.Lookup("unique").BooleanOK()
	ca, _ := a.Lookup("defaultCollation").DocumentOK()
	cb, _ := b.Lookup("defaultCollation").DocumentOK()
	return string(ka) == string(kb) && ua == ub && bsonutil.CompareDocuments(emptyIfNil(ca), emptyIfNil(cb)) == 0
}

func emptyIfNil(d bsoncore.Document) bsoncore.Document {
	if d == nil {
		return bsoncore.NewDocumentBuilder().Build()
	}
	return d
}
