package filtering

// config.cache.* on a shard primary (MongoDB's ShardServerCatalogCacheLoader persistence,
// shard_metadata_util): after each refresh the primary writes what it learned, in 7.0's
// formats, so the shard's own replica set holds its routing information:
//   - config.cache.databases: {_id: db, primary, version: {uuid, timestamp, lastMod}};
//   - config.cache.collections: ShardCollectionType {_id: ns, epoch, timestamp, uuid, key,
//     unique, refreshing, lastRefreshedCollectionVersion: Timestamp(major, minor)} — refreshing
//     is true while the chunks are rewritten, then false with the new version, the protocol
//     secondaries use to read a consistent set;
//   - config.cache.chunks.<ns>: one document per chunk {_id: min, max, shard, lastmod,
//     history} (ChunkType::toShardBSON); an incremental refresh replaces the documents in the
//     ranges of the changed chunks, a new generation rewrites the collection.
//
// Not yet: secondaries reading these collections (they refresh from the config server
// themselves), and the primary's recovery from them after a restart.

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
)

// Persister writes this node's config.cache.* collections.
type Persister struct {
	// Run runs a command on this node, as the server's own client.
	Run func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error)
	// CanWrite reports whether the node is a writable primary now.
	CanWrite func() bool
}

// persistedColl is what config.cache.* hold for a collection.
type persistedColl struct {
	gen     routing.Generation
	version routing.ChunkVersion
}

const (
	cacheDatabases   = "cache.databases"
	cacheCollections = "cache.collections"
	cacheChunksPfx   = "cache.chunks."
)

// persistCollection writes m, ns's refreshed metadata, if this node is a writable primary.
// It runs inside ns's refresh flight, so this node's writes for one namespace never
// interleave.
func (r *Runtime) persistCollection(ctx context.Context, ns string, m *CollectionMetadata) error {
	p := r.cfg.Persist
	if p == nil || !p.CanWrite() {
		return nil
	}
	prev, had, err := p.readPersisted(ctx, ns)
	if err != nil {
		return err
	}
	if !m.Sharded() {
		if err := p.run(ctx, deleteCmd(cacheCollections, idFilter(ns))); err != nil {
			return err
		}
		return p.drop(ctx, cacheChunksPfx+ns)
	}
	t := m.Table
	v := t.Version()
	if had && prev.gen == t.Generation() && prev.version.Equal(v) {
		return nil // nothing new
	}
	full := !had || prev.gen != t.Generation()
	collDoc := shardCollectionDoc(ns, m, true, nil)
	if err := p.run(ctx, upsertCmd(cacheCollections, idFilter(ns), collDoc)); err != nil {
		return err
	}
	var changed []*routing.Chunk
	if full {
		if err := p.drop(ctx, cacheChunksPfx+ns); err != nil {
			return err
		}
		changed = t.Chunks()
	} else {
		for _, c := range t.Chunks() {
			if !c.Version.IsOlderThan(prev.version) {
				changed = append(changed, c)
			}
		}
		// The documents of the ranges that changed go first (a split or merge changes
		// their bounds, so they are matched by range, not by _id).
		dels := bsoncore.NewArrayBuilder()
		for _, c := range changed {
			dels.AppendDocument(bsoncore.NewDocumentBuilder().
				AppendDocument("q", rangeFilter(c.Min, c.Max)).AppendInt32("limit", 0).Build())
		}
		if len(changed) > 0 {
			if err := p.run(ctx, bsoncore.NewDocumentBuilder().AppendString("delete", cacheChunksPfx+ns).
				AppendArray("deletes", dels.Build()).Build()); err != nil {
				return err
			}
		}
	}
	for start := 0; start < len(changed); start += 1000 {
		docs := bsoncore.NewArrayBuilder()
		for _, c := range changed[start:min(start+1000, len(changed))] {
			docs.AppendDocument(shardChunkDoc(c))
		}
		if err := p.run(ctx, bsoncore.NewDocumentBuilder().AppendString("insert", cacheChunksPfx+ns).
			AppendArray("documents", docs.Build()).Build()); err != nil {
			return err
		}
	}
	collDoc = shardCollectionDoc(ns, m, false, &v)
	return p.run(ctx, upsertCmd(cacheCollections, idFilter(ns), collDoc))
}

// readPersisted reads ns's config.cache.collections entry from this node's storage: the
// generation and collection version its chunks were last completely written at. An entry
// left refreshing (a primary that failed or stepped down mid-write) counts as none, so the
// chunks are rewritten whole. Read each time rather than remembered: another primary may
// have written in between.
func (p *Persister) readPersisted(ctx context.Context, ns string) (persistedColl, bool, error) {
	reply, err := p.Run(ctx, "config", bsoncore.NewDocumentBuilder().AppendString("find", cacheCollections).
		AppendDocument("filter", idFilter(ns)).AppendInt32("limit", 1).AppendBoolean("singleBatch", true).Build())
	if err != nil {
		return persistedColl{}, false, err
	}
	batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := batch.Values()
	if len(vals) == 0 {
		return persistedColl{}, false, nil
	}
	d, _ := vals[0].DocumentOK()
	if refreshing, _ := d.Lookup("refreshing").BooleanOK(); refreshing {
		return persistedColl{}, false, nil
	}
	var pc persistedColl
	var ok1, ok2, ok3 bool
	pc.gen.Epoch, ok1 = d.Lookup("epoch").ObjectIDOK()
	pc.gen.Timestamp.T, pc.gen.Timestamp.I, ok2 = d.Lookup("timestamp").TimestampOK()
	pc.version.Major, pc.version.Minor, ok3 = d.Lookup("lastRefreshedCollectionVersion").TimestampOK()
	pc.version.Generation = pc.gen
	return pc, ok1 && ok2 && ok3, nil
}

// persistDatabase writes the database's entry (nil: dropped) if this node is a writable
// primary.
func (r *Runtime) persistDatabase(ctx context.Context, db string, d *DatabaseInfo) error {
	p := r.cfg.Persist
	if p == nil || !p.CanWrite() {
		return nil
	}
	if d == nil {
		return p.run(ctx, deleteCmd(cacheDatabases, idFilter(db)))
	}
	doc := configclient.DatabaseDoc(catalogcache.Database{Name: db, Primary: d.Primary, Version: d.Version})
	return p.run(ctx, upsertCmd(cacheDatabases, idFilter(db), doc))
}

// shardCollectionDoc is ShardCollectionType's document for t.
func shardCollectionDoc(ns string, m *CollectionMetadata, refreshing bool, last *routing.ChunkVersion) bsoncore.Document {
	t := m.Table
	uuid := t.UUID()
	g := t.Generation()
	b := bsoncore.NewDocumentBuilder().AppendString("_id", ns).
		AppendObjectID("epoch", g.Epoch).
		AppendTimestamp("timestamp", g.Timestamp.T, g.Timestamp.I).
		AppendBinary("uuid", 4, uuid[:]).
		AppendDocument("key", t.Pattern().Doc()).
		AppendBoolean("unique", m.Unique).
		AppendBoolean("refreshing", refreshing)
	if last != nil {
		b.AppendTimestamp("lastRefreshedCollectionVersion", last.Major, last.Minor)
	}
	return b.Build()
}

// shardChunkDoc is ChunkType::toShardBSON: the chunk keyed by its min.
func shardChunkDoc(c *routing.Chunk) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder().AppendDocument("_id", c.Min).AppendDocument("max", c.Max).
		AppendString("shard", c.Shard).AppendTimestamp("lastmod", c.Version.Major, c.Version.Minor)
	if c.OnCurrentShardSince != nil {
		b.AppendTimestamp("onCurrentShardSince", c.OnCurrentShardSince.T, c.OnCurrentShardSince.I)
	}
	if len(c.History) > 0 {
		h := bsoncore.NewArrayBuilder()
		for _, e := range c.History {
			h.AppendDocument(bsoncore.NewDocumentBuilder().AppendTimestamp("validAfter", e.ValidAfter.T, e.ValidAfter.I).
				AppendString("shard", e.Shard).Build())
		}
		b.AppendArray("history", h.Build())
	}
	return b.Build()
}

func idFilter(id string) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("_id", id).Build()
}

// rangeFilter matches the chunk documents whose min lies in [lo, hi).
func rangeFilter(lo, hi bsoncore.Document) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendDocument("_id", bsoncore.NewDocumentBuilder().
		AppendDocument("$gte", lo).AppendDocument("$lt", hi).Build()).Build()
}

func deleteCmd(coll string, q bsoncore.Document) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("delete", coll).AppendArray("deletes", bsoncore.NewArrayBuilder().
		AppendDocument(bsoncore.NewDocumentBuilder().AppendDocument("q", q).AppendInt32("limit", 0).Build()).Build()).Build()
}

func upsertCmd(coll string, q, doc bsoncore.Document) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("update", coll).AppendArray("updates", bsoncore.NewArrayBuilder().
		AppendDocument(bsoncore.NewDocumentBuilder().AppendDocument("q", q).AppendDocument("u", doc).
			AppendBoolean("upsert", true).Build()).Build()).Build()
}

// run runs a write command on the config database and turns write errors into an error.
func (p *Persister) run(ctx context.Context, cmd bsoncore.Document) error {
	reply, err := p.Run(ctx, "config", cmd)
	if err != nil {
		return err
	}
	if we, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		return fmt.Errorf("write to the config.cache collections: %s", bsoncore.Document(we).String())
	}
	return nil
}

// drop drops config.<coll> (a missing collection is fine).
func (p *Persister) drop(ctx context.Context, coll string) error {
	_, err := p.Run(ctx, "config", bsoncore.NewDocumentBuilder().AppendString("drop", coll).Build())
	if mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		return nil
	}
	return err
}
