package configsvr

// Chunk-placement commits on the config server (spec: sharding.md "Chunks", "Splits" and the
// chunk version transitions; MongoDB's ShardingCatalogManager::commitChunkSplit and
// commitChunksMerge): a shard asks, the config server checks the request against the
// authoritative config.chunks and replaces the affected chunk documents in one atomic
// applyOps (one oplog entry). All commits are serialized by the Committer's lock (MongoDB's
// _kChunkOpLock), so two requests racing on the same chunk see each other's result: the
// second finds its chunk gone and fails with ConflictingOperationInProgress, nothing
// written. The caller (the command handler) waits for majority write concern afterwards.

import (
	"context"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

// Committer applies catalog changes on the config server's primary, one at a time.
type Committer struct {
	Run RunFunc
	mu  sync.Mutex
}

// SplitRequest is _configsvrCommitChunkSplit's content.
type SplitRequest struct {
	NS          string
	Gen         routing.Generation
	Min, Max    bsoncore.Document
	SplitPoints []bsoncore.Document
	Shard       string
}

// MergeRequest is _configsvrCommitChunksMerge's content.
type MergeRequest struct {
	NS         string
	UUID       catalog.UUID
	Min, Max   bsoncore.Document
	Shard      string
	ValidAfter bson.Timestamp
}

// Versions are the placement versions after a commit: the collection's and the requesting
// shard's (equal after a split or merge, which only ever bump the collection version).
type Versions struct {
	Collection, Shard routing.ChunkVersion
}

func rangeString(min, max bsoncore.Document) string {
	return fmt.Sprintf("[%s, %s)", bsonutil.FormatDoc(min), bsonutil.FormatDoc(max))
}

// CommitSplit replaces the chunk [Min, Max) of the collection by the pieces the split points
// cut it into. The first piece keeps the chunk's _id; each piece's version is the collection
// version with the minor part incremented once per piece, in key order (the spec's split
// transition: major unchanged).
func (c *Committer) CommitSplit(ctx context.Context, req SplitRequest) (Versions, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	what := "splitChunk cannot split chunk " + rangeString(req.Min, req.Max)
	coll, err := c.collection(ctx, req.NS)
	if err != nil {
		return Versions{}, err
	}
	if coll.Gen.Epoch != req.Gen.Epoch {
		return Versions{}, mongoerr.Newf(mongoerr.StaleEpoch, "%s. Epoch of collection '%s' has changed. Current epoch: %s, cmd epoch: %s",
			what, req.NS, coll.Gen.Epoch.Hex(), req.Gen.Epoch.Hex())
	}
	if coll.Gen.Timestamp != req.Gen.Timestamp {
		return Versions{}, mongoerr.Newf(mongoerr.StaleEpoch, "%s. Timestamp of collection '%s' has changed. Current timestamp: Timestamp(%d, %d), cmd timestamp: Timestamp(%d, %d)",
			what, req.NS, coll.Gen.Timestamp.T, coll.Gen.Timestamp.I, req.Gen.Timestamp.T, req.Gen.Timestamp.I)
	}
	collVersion, err := c.collectionVersion(ctx, coll)
	if err != nil {
		return Versions{}, err
	}
	orig, found, err := c.chunkAt(ctx, coll, req.Min)
	if err != nil {
		return Versions{}, err
	}
	if !found || bsonutil.CompareDocuments(orig.Max, req.Max) != 0 || orig.Shard != req.Shard {
		return Versions{}, mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"%s. The chunk boundaries may be stale: no chunk %s of %s is owned by shard %s", what, rangeString(req.Min, req.Max), req.NS, req.Shard)
	}
	if len(req.SplitPoints) == 0 {
		return Versions{}, mongoerr.Newf(mongoerr.InvalidOptions, "%s. No split points were given", what)
	}
	var ops []bsoncore.Document
	start := req.Min
	v := collVersion
	bounds := append(append([]bsoncore.Document(nil), req.SplitPoints...), req.Max)
	for i, end := range bounds {
		if i < len(req.SplitPoints) {
			if !coll.Pattern.IsShardKey(end) {
				return Versions{}, mongoerr.Newf(mongoerr.InvalidOptions, "Split key %s is not valid for shard key pattern %s",
					bsonutil.FormatDoc(end), coll.Pattern)
			}
			if bsonutil.CompareDocuments(end, req.Min) < 0 || bsonutil.CompareDocuments(end, req.Max) >= 0 {
				return Versions{}, mongoerr.Newf(mongoerr.InvalidOptions, "Split key %s not contained within chunk %s",
					bsonutil.FormatDoc(end), rangeString(req.Min, req.Max))
			}
			if err := shardkey.CheckKeyForMetadataStorage(end); err != nil {
				return Versions{}, err
			}
		}
		switch cmp := bsonutil.CompareDocuments(end, start); {
		case cmp < 0:
			return Versions{}, mongoerr.Newf(mongoerr.InvalidOptions, "Split keys must be specified in strictly increasing order. Key %s was specified after %s.",
				bsonutil.FormatDoc(end), bsonutil.FormatDoc(start))
		case cmp == 0:
			return Versions{}, mongoerr.Newf(mongoerr.InvalidOptions, "Split on lower bound of chunk [%s, %s] is not allowed",
				bsonutil.FormatDoc(start), bsonutil.FormatDoc(end))
		}
		if v, err = v.IncMinor(); err != nil {
			return Versions{}, err
		}
		piece := orig
		piece.Min, piece.Max, piece.Version = start, end, v
		if i == 0 {
			ops = append(ops, updateOp("config.chunks", orig.ID, piece.ConfigDoc()))
		} else {
			piece.ID = bson.NewObjectID()
			ops = append(ops, insertOp("config.chunks", piece.ConfigDoc()))
		}
		start = end
	}
	if err := c.apply(ctx, ops); err != nil {
		return Versions{}, err
	}
	return Versions{Collection: v, Shard: v}, nil
}

// CommitMerge replaces the chunks of Shard that exactly fill [Min, Max) by one chunk (the
// first one's _id) at the collection version with the minor part incremented. A range that
// is already one chunk is a success with nothing written (the merge was done before).
func (c *Committer) CommitMerge(ctx context.Context, req MergeRequest) (Versions, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	coll, err := c.collection(ctx, req.NS)
	if err != nil {
		return Versions{}, err
	}
	if coll.UUID != req.UUID {
		return Versions{}, mongoerr.Newf(mongoerr.InvalidUUID, "The collection %s has UUID %s, not %s as the merge request says",
			req.NS, coll.UUID, req.UUID)
	}
	collVersion, err := c.collectionVersion(ctx, coll)
	if err != nil {
		return Versions{}, err
	}
	filter := bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, coll.UUID[:]).AppendString("shard", req.Shard).
		AppendDocument("min", bsoncore.NewDocumentBuilder().AppendDocument("$gte", req.Min).AppendDocument("$lt", req.Max).Build()).Build()
	docs, err := FindAll(ctx, c.Run, "chunks", filter, bsoncore.NewDocumentBuilder().AppendInt32("min", 1).Build())
	if err != nil {
		return Versions{}, err
	}
	notFilled := mongoerr.Newf(mongoerr.IllegalOperation,
		"could not merge chunks, shard %s does not contain a sequence of chunks that exactly fills the range %s",
		req.Shard, rangeString(req.Min, req.Max))
	if len(docs) == 0 {
		return Versions{}, notFilled
	}
	chunks := make([]routing.Chunk, len(docs))
	for i, d := range docs {
		if chunks[i], err = routing.ParseConfigChunk(d, coll.Gen); err != nil {
			return Versions{}, err
		}
		if i > 0 && bsonutil.CompareDocuments(chunks[i-1].Max, chunks[i].Min) != 0 {
			return Versions{}, notFilled
		}
	}
	first, last := chunks[0], chunks[len(chunks)-1]
	if bsonutil.CompareDocuments(first.Min, req.Min) != 0 || bsonutil.CompareDocuments(last.Max, req.Max) != 0 {
		return Versions{}, notFilled
	}
	if len(chunks) == 1 {
		return Versions{Collection: collVersion, Shard: collVersion}, nil
	}
	v, err := collVersion.IncMinor()
	if err != nil {
		return Versions{}, err
	}
	merged := first
	merged.Max, merged.Version = req.Max, v
	merged.History = []routing.HistoryEntry{{ValidAfter: req.ValidAfter, Shard: req.Shard}}
	ops := []bsoncore.Document{updateOp("config.chunks", first.ID, merged.ConfigDoc())}
	for _, ch := range chunks[1:] {
		ops = append(ops, deleteOp("config.chunks", ch.ID))
	}
	if err := c.apply(ctx, ops); err != nil {
		return Versions{}, err
	}
	return Versions{Collection: v, Shard: v}, nil
}

// collection reads ns's config.collections entry (NamespaceNotSharded without one).
func (c *Committer) collection(ctx context.Context, ns string) (catalogcache.Collection, error) {
	doc, found, err := findOne(ctx, c.Run, "collections", bsoncore.NewDocumentBuilder().AppendString("_id", ns).Build(), nil)
	if err != nil {
		return catalogcache.Collection{}, err
	}
	if !found {
		return catalogcache.Collection{}, mongoerr.Newf(mongoerr.NamespaceNotSharded, "Collection %s is not sharded.", ns)
	}
	return configclient.ParseCollection(doc)
}

// collectionVersion is the highest lastmod of the collection's chunks.
func (c *Committer) collectionVersion(ctx context.Context, coll catalogcache.Collection) (routing.ChunkVersion, error) {
	doc, found, err := findOne(ctx, c.Run, "chunks", bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, coll.UUID[:]).Build(),
		bsoncore.NewDocumentBuilder().AppendInt32("lastmod", -1).Build())
	if err != nil {
		return routing.ChunkVersion{}, err
	}
	if !found {
		return routing.ChunkVersion{}, mongoerr.Newf(mongoerr.IllegalOperation,
			"Collection '%s' no longer either exists, is sharded, or has chunks", coll.NS)
	}
	ch, err := routing.ParseConfigChunk(doc, coll.Gen)
	return ch.Version, err
}

// chunkAt reads the collection's chunk whose min is min.
func (c *Committer) chunkAt(ctx context.Context, coll catalogcache.Collection, min bsoncore.Document) (routing.Chunk, bool, error) {
	doc, found, err := findOne(ctx, c.Run, "chunks", bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, coll.UUID[:]).
		AppendDocument("min", min).Build(), nil)
	if err != nil || !found {
		return routing.Chunk{}, false, err
	}
	ch, err := routing.ParseConfigChunk(doc, coll.Gen)
	return ch, err == nil, err
}

// apply runs ops as one atomic applyOps (all or nothing, one oplog entry).
func (c *Committer) apply(ctx context.Context, ops []bsoncore.Document) error {
	arr := bsoncore.NewArrayBuilder()
	for _, op := range ops {
		arr.AppendDocument(op)
	}
	cmd := bsoncore.NewDocumentBuilder().AppendArray("applyOps", arr.Build()).AppendBoolean("alwaysUpsert", false).Build()
	if _, err := c.Run(ctx, "admin", cmd); err != nil {
		return fmt.Errorf("commit to the sharding catalog: %w", err)
	}
	return nil
}

func insertOp(ns string, doc bsoncore.Document) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("op", "i").AppendString("ns", ns).AppendDocument("o", doc).Build()
}

func updateOp(ns string, id bson.ObjectID, doc bsoncore.Document) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("op", "u").AppendString("ns", ns).AppendBoolean("b", false).
		AppendDocument("o", doc).AppendDocument("o2", bsoncore.NewDocumentBuilder().AppendObjectID("_id", id).Build()).Build()
}

func deleteOp(ns string, id bson.ObjectID) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("op", "d").AppendString("ns", ns).
		AppendDocument("o", bsoncore.NewDocumentBuilder().AppendObjectID("_id", id).Build()).Build()
}

// findOne runs a find on config.coll limited to one document.
func findOne(ctx context.Context, run RunFunc, coll string, filter, sort bsoncore.Document) (bsoncore.Document, bool, error) {
	b := bsoncore.NewDocumentBuilder().AppendString("find", coll).AppendDocument("filter", filter)
	if sort != nil {
		b.AppendDocument("sort", sort)
	}
	reply, err := run(ctx, "config", b.AppendInt32("limit", 1).AppendBoolean("singleBatch", true).Build())
	if err != nil {
		return nil, false, fmt.Errorf("read config.%s: %w", coll, err)
	}
	batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := batch.Values()
	if len(vals) == 0 {
		return nil, false, nil
	}
	d, _ := vals[0].DocumentOK()
	return append(bsoncore.Document(nil), d...), true, nil
}

// FindAll runs a find on config.coll and follows its cursor to the end.
func FindAll(ctx context.Context, run RunFunc, coll string, filter, sort bsoncore.Document) ([]bsoncore.Document, error) {
	b := bsoncore.NewDocumentBuilder().AppendString("find", coll).AppendDocument("filter", filter)
	if sort != nil {
		b.AppendDocument("sort", sort)
	}
	reply, err := run(ctx, "config", b.Build())
	var out []bsoncore.Document
	for field := "firstBatch"; ; field = "nextBatch" {
		if err != nil {
			return nil, fmt.Errorf("read config.%s: %w", coll, err)
		}
		batch, _ := reply.Lookup("cursor", field).ArrayOK()
		vals, _ := batch.Values()
		for _, v := range vals {
			d, _ := v.DocumentOK()
			out = append(out, append(bsoncore.Document(nil), d...))
		}
		id, _ := reply.Lookup("cursor", "id").AsInt64OK()
		if id == 0 {
			return out, nil
		}
		reply, err = run(ctx, "config", bsoncore.NewDocumentBuilder().AppendInt64("getMore", id).AppendString("collection", coll).Build())
	}
}
