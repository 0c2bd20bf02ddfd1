// Package migration is chunk migration (spec: sharding.md "The live migration protocol" and
// "Orphaned range deletion"; MongoDB 7.0's src/mongo/db/s migration_* files), donor-driven:
//
//   - Registry is a shard's ActiveMigrationsRegistry: one outgoing and one incoming migration
//     at a time; an identical _shardsvrMoveRange joins the running one, a different one fails
//     with ConflictingOperationInProgress.
//   - Source is the donor's MigrationSourceManager for one _shardsvrMoveRange: validate,
//     write the MigrationCoordinator and pending range deletion documents, start the cloner,
//     _recvChunkStart the recipient, poll _recvChunkStatus until steady, enter the critical
//     section (filtering, writes then reads), _recvChunkCommit, commit on the config server
//     (_configsvrCommitChunkMigration), refresh, leave the critical section, and run the
//     coordinator's commit or abort sequence.
//   - Cloner is MigrationChunkClonerSource: the _ids of the range collected first, then
//     served in _migrateClone batches; the _ids the donor's own writes touch in the range,
//     recorded on commit by a DocListener (the write path's hook after the op observer),
//     served by _transferMods as reload/deleted sets.
//   - Destination is MigrationDestinationManager: the recipient's clone (collection with the
//     donor's UUID and indexes first, waits for overlapping range deletions, pending range
//     deletion task), catch-up, steady state, and the final drain on _recvChunkCommit.
//   - SessionSource is SessionCatalogMigrationSource: the retryable-write history of the
//     range (config.transactions chains, writes during the migration noted by the Tracker,
//     findAndModify images, dead-end sentinels), served by _getNextSessionMods; the
//     recipient writes it from the start of the clone until the commit (sessions.go), so a
//     retry after the move is answered, not executed again.
//   - Coordinator is MigrationCoordinator: the decision and the commit/abort sequences over
//     small interfaces (Steps), so that a simulation can drive it, and the step-up recovery of
//     unfinished coordinators (config.migrationCoordinators).
//
// The range deleter (executing ready config.rangeDeletions tasks) is not here: this package
// only writes, marks ready and deletes the task documents.
package migration
