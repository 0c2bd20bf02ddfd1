// Package configsvr owns the config server's catalog collections (spec:
// /work/shared/spec/sharding.md, "The config server" and "The sharding catalog"; MongoDB's
// ShardingCatalogManager::initializeConfigDatabaseIfNeeded): when a --configsvr replica set's
// primary becomes writable it makes sure config.shards, config.databases, config.collections,
// config.chunks, config.tags, config.settings and config.version exist with the indexes
// MongoDB 7.0 builds on them, and that config.version holds the cluster's identity
// {_id: 1, clusterId: ObjectId}. Everything goes through ordinary replicated commands run on
// the node itself (create, createIndexes, insert, find), so secondaries get it from the oplog
// and a later primary finds it all in place and writes nothing.
//
// The Committer (collection.go, chunks.go) applies the catalog changes shards ask for
// (spec: "Sharding a collection", "Chunks", "Splits"): a newly sharded collection's entry
// and initial chunks, chunk splits and merges, each checked against config.chunks and
// written with one atomic applyOps, one at a time; also clearing a chunk's jumbo flag and
// merging every mergeable run of a shard's chunks (jumbo_merge.go, spec "Jumbo Chunks";
// MongoDB 7.0's clearJumboFlag and commitMergeAllChunksOnShard). The config primary's
// AutoMerger (automerge.go) runs those merges on its own every autoMergerIntervalSecs.
//
// Manager is the config server primary's writer of that catalog (MongoDB's
// ShardingCatalogManager; spec sharding.md "The config server"): addShard (addshard.go:
// validate the candidate set, _addShard on it, config.shards and the databases it holds),
// createDatabase (database.go: config.databases entries, the primary being the shard with
// the least data), zones (zones.go: shards' zones in config.shards, zone ranges in
// config.tags), removeShard (removeshard.go: draining, then the entry removed with a new
// topologyTime) and movePrimary's commit (moveprimary.go). The commands over it are in
// internal/commands (_configsvrAddShard, _configsvrRemoveShard, _configsvrCreateDatabase,
// _configsvrCommitMovePrimary, _configsvrAddShardToZone, _configsvrRemoveShardFromZone,
// _configsvrUpdateZoneKeyRange). The balancer and its settings are internal/sharding/balancer.
package configsvr

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// RunFunc runs one command on this node, in-process, with internal privileges, and returns
// its reply (an error for ok: 0). The role that runs the config server supplies it.
type RunFunc func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error)

// Index is one index MongoDB builds on a config collection.
type Index struct {
	Coll   string
	Key    bson.D
	Unique bool
}

// Name is the index's default name, as createIndexOnConfigCollection leaves it.
func (ix Index) Name() string {
	name := ""
	for i, e := range ix.Key {
		if i > 0 {
			name += "_"
		}
		name += fmt.Sprintf("%s_%v", e.Key, e.Value)
	}
	return name
}

// Collections are the catalog collections the primary creates even while they have no
// index of their own beyond _id (MongoDB creates config.collections and config.settings
// explicitly; config.databases and config.version are listed so that they exist from the
// start, as the spec's catalog describes them).
var Collections = []string{"collections", "databases", "settings", "version"}

// Indexes are MongoDB 7.0's config indexes (_initConfigIndexes and
// createIndexesForConfigChunks), in the order it builds them.
var Indexes = []Index{
	{Coll: "chunks", Key: bson.D{{Key: "uuid", Value: 1}, {Key: "min", Value: 1}}, Unique: true},
	{Coll: "chunks", Key: bson.D{{Key: "uuid", Value: 1}, {Key: "shard", Value: 1}, {Key: "min", Value: 1}}, Unique: true},
	{Coll: "chunks", Key: bson.D{{Key: "uuid", Value: 1}, {Key: "lastmod", Value: 1}}, Unique: true},
	{Coll: "chunks", Key: bson.D{{Key: "uuid", Value: 1}, {Key: "shard", Value: 1}, {Key: "onCurrentShardSince", Value: 1}}},
	{Coll: "shards", Key: bson.D{{Key: "host", Value: 1}}, Unique: true},
	{Coll: "tags", Key: bson.D{{Key: "ns", Value: 1}, {Key: "min", Value: 1}}, Unique: true},
	{Coll: "tags", Key: bson.D{{Key: "ns", Value: 1}, {Key: "tag", Value: 1}}},
	{Coll: "placementHistory", Key: bson.D{{Key: "nss", Value: 1}, {Key: "timestamp", Value: -1}}, Unique: true},
}

// VersionID is config.version's one document's _id.
const VersionID = 1

// InitCatalog creates what is missing of the catalog and returns the cluster id. It is
// idempotent: on a catalog already complete it writes nothing. config.version is written
// last, as in MongoDB, so that a cluster id is only ever seen with the indexes in place.
func InitCatalog(ctx context.Context, run RunFunc) (bson.ObjectID, error) {
	for _, coll := range Collections {
		cmd := bsoncore.NewDocumentBuilder().AppendString("create", coll).Build()
		if _, err := run(ctx, "config", cmd); err != nil && mongoerr.CodeOf(err) != mongoerr.NamespaceExists {
			return bson.ObjectID{}, fmt.Errorf("Could not create config.%s: %w", coll, err)
		}
	}
	for _, ix := range Indexes {
		key, err := bson.Marshal(ix.Key)
		if err != nil {
			return bson.ObjectID{}, err
		}
		spec := bsoncore.NewDocumentBuilder().AppendDocument("key", key).AppendString("name", ix.Name())
		if ix.Unique {
			spec.AppendBoolean("unique", true)
		}
		cmd := bsoncore.NewDocumentBuilder().AppendString("createIndexes", ix.Coll).
			AppendArray("indexes", bsoncore.NewArrayBuilder().AppendDocument(spec.Build()).Build()).Build()
		if _, err := run(ctx, "config", cmd); err != nil {
			return bson.ObjectID{}, fmt.Errorf("couldn't create %s index on config.%s: %w", ix.Name(), ix.Coll, err)
		}
	}
	if id, ok, err := ReadClusterID(ctx, run); err != nil || ok {
		return id, err
	}
	doc := bsoncore.NewDocumentBuilder().AppendInt32("_id", VersionID).AppendObjectID("clusterId", bson.NewObjectID()).Build()
	cmd := bsoncore.NewDocumentBuilder().AppendString("insert", "version").
		AppendArray("documents", bsoncore.NewArrayBuilder().AppendDocument(doc).Build()).Build()
	reply, err := run(ctx, "config", cmd)
	if err != nil {
		return bson.ObjectID{}, fmt.Errorf("could not write config.version: %w", err)
	}
	if we, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		vals, _ := we.Values()
		for _, v := range vals {
			d, _ := v.DocumentOK()
			code, _ := d.Lookup("code").AsInt64OK()
			if mongoerr.Code(code) != mongoerr.DuplicateKey {
				msg, _ := d.Lookup("errmsg").StringValueOK()
				return bson.ObjectID{}, fmt.Errorf("could not write config.version: %w", mongoerr.New(mongoerr.Code(code), msg))
			}
		}
	}
	id, ok, err := ReadClusterID(ctx, run)
	if err == nil && !ok {
		err = mongoerr.New(mongoerr.NoMatchingDocument, "could not find config version document")
	}
	return id, err
}

// ReadClusterID reads config.version's cluster id; ok is false when there is no document.
func ReadClusterID(ctx context.Context, run RunFunc) (id bson.ObjectID, ok bool, err error) {
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", "version").
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendInt32("_id", VersionID).Build()).
		AppendInt32("limit", 1).AppendBoolean("singleBatch", true).Build()
	reply, err := run(ctx, "config", cmd)
	if err != nil {
		return id, false, fmt.Errorf("could not read config.version: %w", err)
	}
	batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := batch.Values()
	if len(vals) == 0 {
		return id, false, nil
	}
	d, _ := vals[0].DocumentOK()
	oid, ok := d.Lookup("clusterId").ObjectIDOK()
	if !ok {
		return id, false, mongoerr.Newf(mongoerr.UnsupportedFormat, "invalid config.version document: %s", d)
	}
	return oid, true, nil
}
