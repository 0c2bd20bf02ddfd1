package routing

// Historical routing (spec: sharding.md "Routing", snapshot reads; MongoDB's
// ChunkInfo::getShardIdAt and ChunkManager built with an atClusterTime): a read at a cluster
// time in the past, a snapshot read with atClusterTime or a statement of a snapshot
// transaction, is routed, and filtered on the shard, by the placement of that time, which
// each chunk's history (config.chunks' history: [{validAfter, shard}], newest first) keeps
// for the config server's history window. A migration's recipient holds the moved documents
// from before the commit (the clone), so without this a read at a time before the commit
// would see them twice (donor and recipient) or, routed by the current placement, at the
// recipient only where the recipient filtered them out.

import (
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/mongoerr"
)

// tsLessEq reports whether a <= b.
func tsLessEq(a, b bson.Timestamp) bool { return a.T < b.T || a.T == b.T && a.I <= b.I }

// staleChunkHistory is MongoDB's error for a time older than a chunk's history.
func staleChunkHistory(ts bson.Timestamp) error {
	return mongoerr.Newf(mongoerr.StaleChunkHistory,
		"Cannot find shardId the chunk belonged to at cluster time Timestamp(%d, %d)", ts.T, ts.I)
}

// ShardAt is ChunkInfo::getShardIdAt: the shard that owned the chunk at cluster time ts, the
// first history entry (newest first) valid at or before ts; StaleChunkHistory when ts is
// older than every entry (the history was trimmed, or the chunk did not exist yet). A chunk
// without history (written by a version that kept none) answers its current shard.
func (c *Chunk) ShardAt(ts bson.Timestamp) (string, error) {
	if len(c.History) == 0 {
		return c.Shard, nil
	}
	for _, h := range c.History {
		if tsLessEq(h.ValidAfter, ts) {
			return h.Shard, nil
		}
	}
	return "", staleChunkHistory(ts)
}

// At is the table as of cluster time ts (MongoDB's ChunkManager with an atClusterTime): the
// same chunks and bounds, each owned by the shard its history names at ts. Versions stay the
// current ones (ShardVersion, Version): a router sends a read at ts the shard's current
// version, and the shard checks it against its current metadata, as MongoDB 5.0 to 7.0 do;
// only ownership is historical. A chunk whose history does not reach back to ts has no owner
// in the view: a lookup that reaches it fails with StaleChunkHistory (lazily, as MongoDB:
// a read that never touches the chunk is not refused). A view is for lookups only: the
// catalog keeps, refreshes and Updates the current table.
func (rt *RoutingTable) At(ts bson.Timestamp) *RoutingTable {
	at := *rt
	at.chunks = make([]*Chunk, len(rt.chunks))
	at.histErr = make([]error, len(rt.chunks))
	owners := map[string]bool{}
	for i, c := range rt.chunks {
		s, err := c.ShardAt(ts)
		if err != nil {
			at.histErr[i] = err
		} else {
			owners[s] = true
		}
		if s == c.Shard {
			at.chunks[i] = c
			continue
		}
		cp := *c
		cp.Shard = s
		at.chunks[i] = &cp
	}
	at.shards = make([]string, 0, len(owners))
	for s := range owners {
		at.shards = append(at.shards, s)
	}
	slices.Sort(at.shards)
	at.atTime = &ts
	return &at
}

// AtTime is the cluster time of a table built by At (nil for the current placement).
func (rt *RoutingTable) AtTime() *bson.Timestamp { return rt.atTime }

// chunkAt returns chunk i, or StaleChunkHistory when the view has no owner for it.
func (rt *RoutingTable) chunkAt(i int) (*Chunk, error) {
	if rt.histErr != nil && rt.histErr[i] != nil {
		return nil, rt.histErr[i]
	}
	return rt.chunks[i], nil
}

// String names the table for messages: its collection, version and, for a view, its time.
func (rt *RoutingTable) String() string {
	if rt.atTime != nil {
		return fmt.Sprintf("%s %s at Timestamp(%d, %d)", rt.uuid, rt.collVer, rt.atTime.T, rt.atTime.I)
	}
	return fmt.Sprintf("%s %s", rt.uuid, rt.collVer)
}
