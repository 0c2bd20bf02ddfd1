// Package router holds humongos's command handlers and its service.Role: MongoDB's
// src/mongo/s/commands over the shared front end (internal/server).
//
// Today humongos answers the handshake and diagnostics (hello/isMaster with msg "isdbgrid",
// ping, buildInfo, getParameter, setParameter, serverStatus, listCommands, getCmdLineOpts,
// hostInfo, getLog, whatsmyuri, shutdown; startSession, refreshSessions, endSessions and
// killSessions, cmd_currentop.go's currentOp and killOp over the shards, cmd_dbstats.go's
// dbStats and cmd_validate.go's validate),
// reaches its cluster through Cluster (cluster.go): its config-server client, the catalog
// cache and shard registry over it, a client per shard, Versioned (the
// shardVersion/databaseVersion a request carries) and WithRouting (refresh and retry on
// StaleConfig/StaleEpoch/StaleDbVersion, at most 10 times). The cluster commands over it so
// far are listShards, flushRouterConfig, addShard, enableSharding, balancerStatus,
// balancerStart, balancerStop and balancerCollectionStatus (carried
// out by the config server; Cluster.CreateDatabase is also the path of implicit database
// creation), shardCollection (to the database's primary shard's
// _shardsvrCreateCollection), split and mergeChunks (to the chunk owner's splitChunk /
// mergeChunks), removeShard (to _configsvrRemoveShard), movePrimary (to the database's
// primary shard's _shardsvrMovePrimary) and getShardVersion (from the cache)
// (ShardingStateNotInitialized until a
// Cluster is attached: Attach; cmd/humongos attaches one built from --configdb).
//
// Reads are routed (spec sharding.md "Routing"; MongoDB's src/mongo/s/query): find, getMore,
// killCursors, count, distinct, aggregate, explain, listCollections and listIndexes
// (cmd_read.go registers them). A read targets the shards the filter's shard-key bounds reach
// (an unsharded collection's primary shard, with UNSHARDED and the databaseVersion) and is
// retried through WithRouting on stale versions. It runs on the member of each shard that the
// client's $readPreference selects (readpref.go: primary without one; a router cursor's
// getMores and killCursors stay on the member that opened each shard cursor). Router cursors (cursors.go) live in the
// server's cursor manager (idle timeout, killCursors, session ownership) with a mergeSource
// (merge.go) over the shards' cursors as their source: a k-way merge by sort key computed on
// the router, then skip, limit and projection. aggregate (agg.go) passes a single-shard
// pipeline through and otherwise splits it into a shards part and a merging part run on the
// router by internal/agg ($lookup, $graphLookup and $unionWith with a side on other shards
// run there over routed foreign reads, agg_lookup.go; $out and $merge into an unsharded
// target write through the router to its primary shard, agg_out.go); explain.go wraps the shards' plans (SINGLE_SHARD, SHARD_MERGE,
// SHARD_MERGE_SORT). A pipeline led by $collStats, $indexStats or $planCacheStats runs that
// stage on every shard owning chunks, each document naming its shard (agg_collstats.go), and
// $shardedDataDistribution on admin reports each sharded collection's data per shard
// (agg_datadistribution.go): mongosh's getShardDistribution() and sh.status() read them.
//
// Change streams (agg_changestream.go; MongoDB's mongos change streams): an aggregate led by
// $changeStream on a collection, a database (aggregate: 1) or the cluster
// (allChangesForCluster on admin) opens the stream on every shard in the registry, each
// starting at the router's cluster time plus one increment (or at the client's resume
// point) with v2 resume tokens, and merges them on `_id._data` in a tailable awaitData
// router cursor: an event is returned only once every shard with nothing buffered has a
// postBatchResumeToken past it, a getMore's maxTimeMS is its await time (the starved shards
// are asked concurrently), every reply carries the merged postBatchResumeToken, the user's
// stages run on the router, an invalidate ends the stream, and errors carry the
// ResumableChangeStreamError label where a driver may resume. Not yet: shards added after the
// stream opened, updateLookup through the router's routing, explain.
//
// Writes and DDL are routed (spec: sharding.md "Routing", "Databases"): insert, update and
// delete statement by statement with per-shard batches, ordered rounds, stale retries and
// merged replies (write_batch.go, write_target.go; single updates and deletes without shard
// key in two phases, write_twophase.go; visible shard key moves refused,
// write_shardkey.go), findAndModify (cmd_findandmodify.go), create, drop, dropDatabase,
// createIndexes, dropIndexes, collMod, renameCollection and listDatabases (cmd_ddl.go,
// cmd_listdatabases.go); a write or create in an unknown database creates it through the
// config server's _configsvrCreateDatabase (write_db.go). Every other MongoDB command is
// refused with CommandNotSupported, naming the command.
//
// The router's vector clock (role.go) takes clients' $clusterTime, advances from every shard
// and config server reply (the internal client's gossip, internal/vclock), never ticks, and
// answers $clusterTime and the highest operationTime of the shards a command reached.
//
// Faults (retry.go, config_loader.go; spec: sharding.md "Retrying internally"): a read, or a
// retryable write, whose shard failed with a retriable error (its primary killed, stepping
// down, unreachable) is sent again, at most 3 more times, to the primary the shard's client
// finds then (MongoDB's RetryPolicy::kIdempotent); other writes are not sent twice. A request
// that got no reply is HostUnreachable, no primary within the server selection timeout
// FailedToSatisfyReadPreference. With the config server unreachable the caches keep serving
// what they hold and a refresh fails with those codes within the selection timeout (or the
// request's maxTimeMS).
//
// Transactions (txn.go, txn_commit.go; spec: sharding.md "Transactions", "Committing a
// Transaction", "Aborting a Transaction"): a statement with autocommit: false runs in its
// session's router transaction, which tracks the participants (the first that wrote is the
// recovery shard named in every reply's recoveryToken and, unlike MongoDB's first participant,
// the two-phase commit coordinator, so that a recovery always reaches it), attaches the
// transaction fields (startTransaction and readConcern, with atClusterTime for snapshot, on
// the first request to each participant) to every shard request, retries stale routing only
// on the first statement, and aborts on every participant when a statement fails.
// commitTransaction commits directly (one participant, one write shard, read-only) or hands
// two-phase commit to the coordinator shard (coordinateCommitTransaction), or recovers a
// decision from the recovery shard with a recoveryToken; abortTransaction aborts everywhere.
// killAllSessions and configureFailPoint (test-only) are answered too.

package router
