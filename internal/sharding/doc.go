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
// Subpackages so far: shardstate (a data node's cluster role, its shard identity and
// shard awareness, serverStatus.sharding) and configsvr (the config server's catalog
// collections and indexes, created on step-up).
package sharding
