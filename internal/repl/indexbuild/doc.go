// Package indexbuild coordinates replicated (two-phase) index builds: the commit-quorum side
// (spec/execution.md "Replica Set Index Builds", "Commit Quorum"; MongoDB's
// IndexBuildsCoordinatorMongod).
//
// index.TwoPhaseBuild does the building; the oplog applier starts, commits and aborts builds
// on secondaries. This package decides when a build commits. Every node runs one driver
// goroutine per running build (Coordinator.drive), started by createIndexes on the
// primary or when a build started by the applier is ready to commit. A driver waits for the
// build's scan and then:
//
//   - on a writable primary, votes for itself and, once the votes satisfy the build's commit
//     quorum, commits the build with constraint checks under the write block, logging
//     commitIndexBuild in the unit that marks the indexes ready, or aborts it with
//     abortIndexBuild when a constraint fails (DuplicateKey, key generation errors);
//   - elsewhere, sends voteCommitIndexBuild to the current primary, again after every change
//     of primary (votes live in the primary's memory, see below), and otherwise waits for the
//     applier to commit or abort the build.
//
// Because every node drives its builds, the node that commits need not be the one that
// started the build: a secondary that becomes primary commits the builds it is running.
//
// Differences from MongoDB: votes are kept in memory instead of config.system.indexBuilds
// (voters re-vote to each new primary instead), and a build started on a secondary is driven
// with the default commit quorum ("votingMembers") after a failover, since the quorum given
// to createIndexes is not replicated. Tag-set commit quorums are refused
// (UnsatisfiableCommitQuorum).
//
// The coordinator is per node: it hangs off the node's operation.DB (Of) and stops when the
// DB closes. It sits in repl because it follows the replica set (who is primary, the config's
// voting members) and sends votes to the primary.
package indexbuild
