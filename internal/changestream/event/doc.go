// Package event turns oplog entries into change stream events: the documents a
// `$changeStream` cursor returns (spec: execution.md "Oplog Collection", replication.md
// "Transactions" and "Oplog Entry Application" for the entries; MongoDB's
// change_stream_event_transform.cpp, document_source_change_stream_unwind_transaction.cpp,
// change_stream_filter_helpers.cpp, document_source_change_stream_check_invalidate.cpp and
// change_stream_document_diff_parser.cpp for the events, MongoDB 7.0/8.0).
//
// It is a pure function of the entries and the stream's Options: no IO, no clock. The stream
// (internal/changestream) reads the oplog, asks Transform for the events of each entry, adds
// the images it looks up (AddImages) and encodes the resume tokens (Options.MakeID, with
// internal/changestream/resumetoken).
//
// # What an entry gives
//
//	i            insert {fullDocument: o, documentKey: o2, or _id plus the shard key (Options.ShardKey)}
//	u  $v:2 diff update {documentKey: o2, updateDescription from the diff (diff.go)}
//	u  no $v     replace {fullDocument: o, documentKey: o2} (the writer logs the whole post
//	             image when it is smaller than the diff, as MongoDB does)
//	d            delete {documentKey: o}
//	c  drop, renameCollection, dropDatabase: drop, rename, dropDatabase, then invalidate for
//	   the streams they end; create, createIndexes, commitIndexBuild, dropIndexes, collMod:
//	   create, createIndexes, dropIndexes, modify (ShowExpandedEvents only); startIndexBuild,
//	   abortIndexBuild and everything else: nothing
//	c  applyOps (committed): one event per matching operation, see Transactions
//	n  o2.shardCollection, o2.refineCollectionShardKey, o2.reshardCollection: the event of that
//	   name (ShowExpandedEvents only; Humongo's sharding does not log these no-ops yet, the
//	   shapes are MongoDB's); other no-ops: nothing
//
// Entries with fromMigrate: true give nothing (chunk migration's copies and range deletions
// are not user writes), except a migration's create and createIndexes with ShowSystemEvents,
// as MongoDB.
//
// # Field order
//
// Event documents have MongoDB's field order, which is the order its transform appends fields
// (not the order of its documentation's examples):
//
//	to (rename), txnNumber, lsid (transaction operations), _id, operationType, clusterTime,
//	collectionUUID (ShowExpandedEvents), wallTime, fullDocument, ns, documentKey,
//	operationDescription (ShowExpandedEvents), updateDescription | rawUpdateDescription,
//	stateBeforeChange (modify)
//
// so `_id` is first except for renames and for operations of transactions. An update's
// fullDocument (updateLookup and friends) goes after wallTime, where MongoDB's
// AddPostImage stage puts it; fullDocumentBeforeChange goes last. AddImages does both.
//
// # Scopes
//
// Namespace filtering is MongoDB's oplog filter written out without regexes (scope.go): a
// collection stream sees its namespace; a database stream its database; a cluster stream
// every database but admin, config and local. Database and cluster streams skip collections
// named `$...` and `system.*`, except, with ShowSystemEvents, system.js, system.resharding.*
// and system.buckets.*. A collection stream does not see dropDatabase (it is invalidated by
// the drop of its collection that comes first).
//
// # Transactions
//
// A committed transaction's operations are events at the commit: every event has the
// clusterTime and wallTime of the committing entry, the transaction's lsid and txnNumber, and
// a TxnOpIndex counting the transaction's operations in order from 0 across all its entries
// (operations that match no event still count, so tokens stay stable whatever the filter).
// ApplyOpsTS and ApplyOpsIndex name the entry holding the operation and its index there (the
// pre-image key).
//
//   - A single applyOps entry: Transform gives its events.
//   - A chain (partialTxn entries, then the applyOps with count), and a prepared transaction
//     (prepare entry, possibly after partialTxn ones, then commitTransaction): the events come
//     at the last entry, the applyOps with count or the commitTransaction. NeedsTxnEntries
//     says so; the caller reads the earlier entries with ReadTxnChain (walking prevOpTime
//     through a read function it supplies) and calls TransformTxn with them. Transform on
//     such an entry returns ErrNeedsTxnEntries.
//   - partialTxn entries, prepare entries and abortTransaction give nothing.
//
// This is MongoDB's behaviour (its unwind stage filters out partial and prepare entries and
// reads the chain back from the commit), and it is what resume tokens need: every event of
// a transaction sorts at the commit's timestamp.
//
// # Known deviations
//
//   - Humongo logs a cross-database rename as one renameCollection entry on the source
//     database (MongoDB copies into a temporary collection of the target database and
//     renames that). The rename filter therefore matches the source or the target namespace
//     whatever database's $cmd namespace the entry is on.
//   - Humongo's collMod entries carry no o2 (collectionOptions_old, indexOptions_old), so a
//     modify event's stateBeforeChange is {}.
//   - Humongo's inserts carry no o2 (documentKey); Options.ShardKey supplies the shard key.
//   - No endOfTransaction events (behind a feature flag in MongoDB 8.0), no view events
//     (system.views), no internal sharding events (migrateChunkToNewShard, reshardBegin,
//     reshardDoneCatchUp, migrateLastChunkFromShard), no nsType field (after 8.0).
package event
