package configsvr

// Jumbo flags and merging every mergeable chunk of a shard (spec: sharding.md "Jumbo
// Chunks", checklist 3 "Jumbo"; MongoDB 7.0's ShardingCatalogManager::clearJumboFlag and
// commitMergeAllChunksOnShard). Both are serialized with the other chunk commits by the
// Committer's lock and written with one atomic applyOps.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/routing"
)

// ClearJumboFlag clears the jumbo flag of ns's chunk [min, max) and gives the chunk a new
// major version (the collection version's major + 1, minor 0) so that routers and shards see
// the change on their next incremental refresh. A chunk that is not jumbo is left alone.
func (c *Committer) ClearJumboFlag(ctx context.Context, ns string, epoch bson.ObjectID, min, max bsoncore.Document) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	coll, err := c.collection(ctx, ns)
	if mongoerr.CodeOf(err) == mongoerr.NamespaceNotSharded {
		return mongoerr.New(mongoerr.ConflictingOperationInProgress, "Collection does not exist")
	}
	if err != nil {
		return err
	}
	doc, found, err := findOne(ctx, c.Run, "chunks", bsoncore.NewDocumentBuilder().AppendDocument("min", min).
		AppendDocument("max", max).AppendBinary("uuid", 4, coll.UUID[:]).Build(), nil)
	if err != nil {
		return err
	}
	if !found {
		return mongoerr.Newf(mongoerr.Location51262, "Unable to locate chunk %s from ns: %s", rangeString(min, max), ns)
	}
	chunk, err := routing.ParseConfigChunk(doc, coll.Gen)
	if err != nil {
		return err
	}
	if !chunk.Jumbo {
		return nil
	}
	collVersion, err := c.collectionVersion(ctx, coll)
	if err != nil {
		return err
	}
	if coll.Gen.Epoch != epoch {
		return mongoerr.Newf(mongoerr.StaleEpoch, "The epoch of collection '%s' has changed since the migration began. The config server's collection placement version epoch is now '%s', but the shard's is %s'. Aborting clear jumbo on chunk (%s).",
			ns, coll.Gen.Epoch.Hex(), epoch.Hex(), rangeString(min, max))
	}
	chunk.Jumbo = false
	chunk.Version = routing.ChunkVersion{Major: collVersion.Major + 1, Minor: 0, Generation: collVersion.Generation}
	return c.apply(ctx, []bsoncore.Document{updateOp("config.chunks", chunk.ID, chunk.ConfigDoc())})
}

// MergeAllResult is what CommitMergeAllChunksOnShard did: the versions after it and how
// many chunks were merged away into fewer ones.
type MergeAllResult struct {
	Versions
	Merged int
}

// CommitMergeAllChunksOnShard merges every run of contiguous mergeable chunks of shard in
// ns into one chunk each, at most maxChunks chunks in all (0: no limit). A chunk is
// mergeable when it is not jumbo and has been on the shard since before oldest (the oldest
// timestamp snapshot reads may still use: merging younger chunks would lose the history
// that routes such reads). Each merged chunk gets the collection version with the minor
// part incremented once per merged range, onCurrentShardSince the newest of its pieces' and
// a one-entry history. Nothing to merge is a success with nothing written.
func (c *Committer) CommitMergeAllChunksOnShard(ctx context.Context, ns, shard string, maxChunks int, oldest bson.Timestamp) (MergeAllResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	coll, err := c.collection(ctx, ns)
	if err != nil {
		return MergeAllResult{}, err
	}
	collVersion, err := c.collectionVersion(ctx, coll)
	if err != nil {
		return MergeAllResult{}, err
	}
	filter := bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, coll.UUID[:]).AppendString("shard", shard).
		AppendDocument("onCurrentShardSince", bsoncore.NewDocumentBuilder().AppendTimestamp("$lt", oldest.T, oldest.I).Build()).
		AppendDocument("jumbo", bsoncore.NewDocumentBuilder().AppendBoolean("$ne", true).Build()).Build()
	docs, err := FindAll(ctx, c.Run, "chunks", filter, bsoncore.NewDocumentBuilder().AppendInt32("min", 1).Build())
	if err != nil {
		return MergeAllResult{}, err
	}
	chunks := make([]routing.Chunk, len(docs))
	for i, d := range docs {
		if chunks[i], err = routing.ParseConfigChunk(d, coll.Gen); err != nil {
			return MergeAllResult{}, err
		}
	}
	ops, newVersion, merged, err := mergeRuns(chunks, collVersion, shard, maxChunks)
	if err != nil {
		return MergeAllResult{}, err
	}
	if len(ops) == 0 {
		sv, err := c.shardVersion(ctx, coll, shard)
		if err != nil {
			return MergeAllResult{}, err
		}
		return MergeAllResult{Versions: Versions{Collection: collVersion, Shard: sv}}, nil
	}
	if err := c.apply(ctx, ops); err != nil {
		return MergeAllResult{}, err
	}
	return MergeAllResult{Versions: Versions{Collection: newVersion, Shard: newVersion}, Merged: merged}, nil
}

// mergeRuns builds the applyOps entries merging each run of contiguous chunks (sorted by
// min) of more than one chunk: the run's first document becomes the merged chunk, the others
// are deleted. It stops adding chunks once maxChunks (when > 0) have been taken.
func mergeRuns(chunks []routing.Chunk, collVersion routing.ChunkVersion, shard string, maxChunks int) (ops []bsoncore.Document, v routing.ChunkVersion, merged int, err error) {
	v = collVersion
	var run []routing.Chunk
	flush := func() error {
		if len(run) > 1 {
			var since bson.Timestamp
			for _, ch := range run {
				if ch.OnCurrentShardSince != nil && timestampAfter(*ch.OnCurrentShardSince, since) {
					since = *ch.OnCurrentShardSince
				}
			}
			nv, err := v.IncMinor()
			if err != nil {
				return err
			}
			v = nv
			m := run[0]
			m.Max, m.Version = run[len(run)-1].Max, v
			m.OnCurrentShardSince = &since
			m.History = []routing.HistoryEntry{{ValidAfter: since, Shard: shard}}
			ops = append(ops, updateOp("config.chunks", m.ID, m.ConfigDoc()))
			for _, ch := range run[1:] {
				ops = append(ops, deleteOp("config.chunks", ch.ID))
			}
			merged += len(run)
		}
		run = run[:0]
		return nil
	}
	for _, ch := range chunks {
		if len(run) > 0 && bsonutil.CompareDocuments(run[len(run)-1].Max, ch.Min) != 0 {
			if err := flush(); err != nil {
				return nil, v, 0, err
			}
		}
		run = append(run, ch)
		if maxChunks > 0 && merged+len(run) == maxChunks {
			break
		}
	}
	if err := flush(); err != nil {
		return nil, v, 0, err
	}
	return ops, v, merged, nil
}

func timestampAfter(a, b bson.Timestamp) bool {
	return a.T > b.T || (a.T == b.T && a.I > b.I)
}

// shardVersion is the highest lastmod of shard's chunks of coll (0|0 of the generation when
// it owns none).
func (c *Committer) shardVersion(ctx context.Context, coll catalogcache.Collection, shard string) (routing.ChunkVersion, error) {
	doc, found, err := findOne(ctx, c.Run, "chunks", bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, coll.UUID[:]).
		AppendString("shard", shard).Build(), bsoncore.NewDocumentBuilder().AppendInt32("lastmod", -1).Build())
	if err != nil {
		return routing.ChunkVersion{}, err
	}
	if !found {
		return routing.ChunkVersion{Generation: coll.Gen}, nil
	}
	ch, err := routing.ParseConfigChunk(doc, coll.Gen)
	return ch.Version, err
}
