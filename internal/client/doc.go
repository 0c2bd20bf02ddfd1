// Package client is the internal client: how a server talks to other servers (members of its
// replica set, and — with sharding — shards and config servers). It owns
//
//   - the host Rewriter (rewriter.go): every connection is dialed through the owning server's
//     Rewriter, so tests can reroute and partition links per server;
//   - per-host pools (pool.go): one directConnection driver client per host, for protocols
//     that address a member by name (heartbeats, votes, the oplog fetcher, initial sync,
//     rollback, index-build votes);
//   - replica-set targeting (replset.go): a client for a whole replica set, given its name and
//     seed list, that picks the member for each command by read preference. The Go driver's
//     own SDAM monitoring plays MongoDB's ReplicaSetMonitor (spec/sharding.md, "Targeting a
//     specific host within a shard"; the sharding ShardRegistry holds one per shard);
//   - host-pinned requests (pinned.go): SelectHost names the member a read preference selects,
//     and Pool.RunCommand runs a request on one named member with a read preference sent
//     along, so that a cursor opened on a secondary is continued there.
//
// Timeouts come from the caller's context: no call here waits longer than its context allows
// (server selection is additionally bounded by Options.ServerSelectionTimeout). Driver
// retries are off: the protocols above decide whether and where to retry.
//
// Known deviations: MongoDB's RSM offers tag sets, maxStalenessSeconds and hedged reads through
// its own monitor; here they are whatever the driver's read preference supports (tag sets and
// maxStalenessSeconds, no hedging), and SelectHost costs a hello on the selected member because
// the driver does not expose its selection.
package client
