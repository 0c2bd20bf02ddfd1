// Package ddl owns the shard side of sharding DDL (spec: /work/shared/spec/sharding.md,
// "Sharding a collection", "Chunks", "Splits"; MongoDB 7.0's ShardsvrCreateCollection,
// CreateCollectionCoordinator, InitialSplitPolicy, ShardsvrCreateCollectionParticipant,
// splitChunk and mergeChunks):
//
//   - the shard key and supporting-index rules of shardCollection (index.go);
//   - the initial chunk placement (split_policy.go): one chunk [MinKey, MaxKey) on the
//     database's primary shard, or for a hashed-prefix key on an empty collection
//     numInitialChunks chunks spread over all shards (7.0's SplitPointsBasedSplitPolicy);
//     with zones in config.tags (zones.go), on an empty collection a chunk per zone range
//     on the zone's shards and per gap between them (SingleChunkPerTagSplitPolicy), or the
//     zone ranges presplit at hashed values (PresplitHashedZonesSplitPolicy);
//   - the create-collection coordinator (create.go) that the database's primary shard runs
//     for _shardsvrCreateCollection: validate, create the collection and its shard key index
//     locally, create them with the same UUID on every other shard that gets chunks, and
//     commit config.collections and config.chunks on the config server in one atomic
//     command (majority);
//   - movePrimary (moveprimary.go, resumable: moveprimary_coordinator.go): the database's
//     primary shard moves its unsharded collections to another shard under the database
//     critical section, commits the new primary on the config server and drops its copies;
//     the recipient clones them (_shardsvrCloneCatalogData);
//   - the shard's view of the rest of the cluster (Remote: the config server replica set,
//     the shard registry, a client per shard).
//   - splitVector (split_vector.go; spec "The auto split task", MongoDB's split_vector.cpp):
//     split points every k-th key of a shard key index scan, pure selection over a key
//     scan (SelectSplitPoints) fed from the node's own commands;
//   - auto-splitting (chunk_splitter.go; spec "Auto-splitting"): the shard primary's
//     ChunkSplitter tracks the bytes routed writes put in each chunk and splits a chunk past
//     half the chunk size in the background (top chunk optimisation), flagging a chunk of a
//     single key value jumbo on the config server instead.
//
// The resumable DDL coordinators (spec "Sharding DDL Coordinator"; coordinators.go: the
// ShardingDDLCoordinatorService on internal/primaryonly, state documents in
// config.system.sharding_ddl_coordinators, DDL locks per database then namespace, reacquired
// at a rebuild before new requests; one `coordinator` base) run shardCollection
// (shardcoll.go, over the create steps above, whose config-server commit happens at most
// once, inside the primary's critical section), create (createunsharded.go), collMod
// (collmod.go), drop (drop.go: critical sections on every shard), dropDatabase (dropdb.go),
// renameCollection (rename.go: critical sections on every shard, the config entry moved to
// a new epoch), refineCollectionShardKey (refine.go), movePrimary (moveprimary_coordinator.go)
// and setAllowMigrations (allowmigrations.go). The participants' critical sections are
// persisted (config.collection_critical_sections) and re-entered at step-up. The
// shard-side filtering metadata and version checks are elsewhere.
//
// sim_test.go simulates the drop coordinator (crashes at every phase, 1,000 seeds).
//
// Commands reach the local node through a RunFunc (in-process, as DBDirectClient) so the
// package stays below the command layer.
package ddl
