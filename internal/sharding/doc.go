// Package sharding will own the sharding state shared by routers, shards and config servers
// (spec: /work/shared/spec/sharding.md):
//
//   - the catalog cache: routing tables per database and collection, refreshed from the
//     config server ("The routing table cache");
//   - shard versions and database versions, and their staleness checks ("Shard versioning and
//     database versioning");
//   - the shard registry: shard ids to replica-set connection strings ("The shard registry");
//   - a shard's filtering metadata and orphan filtering ("Orphan filtering"), the ownership
//     filter handed to the planner's read seam;
//   - migrations: the live migration protocol's donor and recipient sides ("Migrations"),
//     and the range deleter ("Orphaned range deletion");
//   - the balancer and chunk splitting ("Auto-splitting and auto-balancing"), as pure policy
//     cores in the style of repl/topology;
//   - DDL coordinators ("DDL operations") on primaryonly's state-document services;
//   - the config server's catalog (config.databases, config.collections, config.chunks,
//     config.shards).
//
// What exists so far, as subpackages:
//
//   - shardkey: shard key patterns (validation as shardCollection does, key extraction with
//     hashing, global bounds, checks on stored chunk bounds) and targeting a find filter to the
//     shard key ranges it can touch ("Query routing"), on the planner's index bounds;
//   - routing: chunk versions (with UNSHARDED and IGNORED), shard versions and database
//     versions with their ordering and 7.0 wire forms, config.chunks documents, and the
//     routing table of one collection: validated, incrementally refreshed, answering which
//     shard owns a key and which shards a set of ranges touches;
//   - catalogcache: the routing table cache over a Loader: lazy, single-flight, incremental
//     refreshes, stale marks from StaleConfig and StaleDbVersion answers, invalidation;
//   - shardregistry: the mirror of config.shards (lookups by shard id, replica set name, host
//     or connection string; reload on a miss and periodically);
//   - configclient: the loader of both from the config server's config.databases,
//     config.collections, config.chunks and config.shards (majority reads), and the
//     documents' formats;
//   - shardstate: a data node's cluster role, its shard identity and shard awareness,
//     serverStatus.sharding;
//   - configsvr: the config server's catalog collections and indexes, created on step-up,
//     and its commits of catalog changes (a newly sharded collection with its chunks, chunk
//     splits and merges: atomic, serialized, majority);
//   - ddl: the shard side of sharding DDL: shardCollection's key and index rules, the
//     initial split policy, the (non-resumable) create-collection coordinator, splitChunk
//     and mergeChunks.
//
// The router (internal/router, cmd/humongos) reaches its cluster through these (Cluster).
package sharding
