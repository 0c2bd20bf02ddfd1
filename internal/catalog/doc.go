// # Catalog
//
// Spec: execution.md "The Catalog" (Durable Catalog, Collection Catalog, Catalog Changes
// versioning and the Minimum Valid Snapshot, Two-Phase Collection and Index Drop);
// checklist-execution.md section 1.
//
// # Durable catalog
//
// One BSON entry per collection (format in entry.go, MongoDB's shape) keyed by
// recordid.Long(catalog id) in the timestamped table `_mdb_catalog`, so RecoverToStable rolls
// catalog changes back together with the data. Entries of the `local` database live in the
// untimestamped `_mdb_catalog_local` (negative catalog ids) because the local database's
// tables are untimestamped: a local collection created after the stable timestamp keeps its
// data across recovery, so its entry must survive too (MongoDB writes these entries
// untimestamped for the same reason).
//
// # CollectionCatalog (read-copy-update)
//
// Snapshot is an immutable catalog instance; Catalog.Latest returns the newest one through an
// atomic pointer. A DDL call records a change in its unit; at commit an OnCommit hook applies
// the unit's changes to the then-Latest instance (copy-on-write) and installs the result; on
// rollback the changes are discarded and the tables the unit created are dropped. Changes are
// applied to the instance current at commit, not the one current when the change was made, so
// commuting units (multikey updates, DDL on different collections) never lose each other's
// effects. Every modification of an existing entry re-reads the durable entry through the
// unit's snapshot, so a concurrent change to the same entry is a storage WriteConflict.
//
// DDL units are serialized by ddlMu, taken at a unit's first DDL call and released after its
// commit hook installed the new instance (or at rollback): namespace-uniqueness checks and the
// catalog id allocation then see every committed DDL. SetMultikey does not take ddlMu because
// it runs inside ordinary inserts and updates; it only unions flags (multikey never reverts),
// which commutes with everything.
//
// A unit that holds ddlMu must not wait for a lock held by another thread that may itself be
// waiting for ddlMu (take collection/database locks before the first DDL call).
//
// # DDL in multi-document transactions
//
// A transaction's unit (MarkTransaction) lives across statements, up to
// transactionLifetimeLimitSeconds; holding ddlMu that long would stop every DDL on the node.
// So it holds ddlMu only during each DDL call (its uniqueness checks and catalog id
// allocation still see every committed DDL and none runs concurrently with them), and keeps
// what it created to itself by two means:
//
//   - Visibility: its changes stay in its unitState; Latest does not show them. LatestFor(ru)
//     is Latest plus the unit's changes, the view every statement of the transaction reads
//     the catalog through (operation.Context.Catalog; index.Collections.ForUnit gives the
//     write path of a collection only that view knows). The catalog entries are written
//     through the transaction's storage unit, so they commit or vanish with its data; the
//     commit hook installs the changes at the commit timestamp like any unit's.
//   - Reservation: each namespace it creates is reserved (Catalog.reserved) until the unit
//     ends. Any other unit creating or renaming onto a reserved namespace gets WriteConflict
//     at once, never a wait under ddlMu: an ordinary DDL retries (operation's
//     writeConflictRetry, bounded by its maxTimeMS and interruptible) until the transaction
//     committed (then it finds the collection) or aborted; another transaction fails its
//     statement with a transient WriteConflict and the client retries it. This is MongoDB's
//     outcome too (an uncommitted create makes a conflicting create throw WriteConflict).
//
// A transaction may only create collections and add indexes to collections it created (the
// create and createIndexes commands enforce MongoDB's rules), so no other unit can have
// changed what it modifies: its changes commute with every other unit's and the commit
// cannot lose anything. No lock is held between statements, so nothing can deadlock on it;
// ddlActive counts the unit for its whole life, which only sends At to its slow path
// meanwhile.
//
// # Versioning
//
// CollectionMeta.MinValidSnapshot and Snapshot.DDLTimestamp are DDL commit timestamps. At
// returns Latest for a ReadProvided read at or after Latest's DDL timestamp (when no DDL is
// committing); otherwise it instantiates the catalog from the durable entries read through the
// caller's snapshot (the spec's historical instantiation; no per-namespace history map yet).
// Instances loaded at startup carry max(stable, oldest, all-durable) as their timestamp, which
// is conservative for older reads; their metadata is marked MinValidLoaded, so a reader older
// than the bound asks At whether the collection was already the same one then. The read seam
// (operation.Context.ReadCollection) checks every timestamped read against MinValidSnapshot:
// a snapshot read older than it fails with SnapshotUnavailable, a majority read waits for the
// commit point to pass it.
//
// # Two-phase drop
//
// Phase one (DropCollection, DropIndex, rename with dropTarget) deletes or rewrites the entry
// and writes a record per dropped table into the timestamped `_mdb_drop_pending`, in the same
// unit — so recovery to a stable timestamp before the drop resurrects both the entry and the
// table, and a crash after it finds the record. At commit the tables are registered with the
// reaper under the commit timestamp. Phase two (reaper.go) drops a table once
// dropTs < oldest and, when a stable timestamp is set, dropTs < stable, and nobody pinned it
// with MarkIdentInUse. With neither timestamp set (standalone) drops happen at the next pass,
// i.e. right after commit. Records found at startup get max(stable, oldest, all-durable) as
// their drop timestamp; after RecoverToStable that bound is >= the true one. Deleting the
// record of a reaped table needs a commit timestamp, which a background writer does not have
// on a replica set; so stale records are deleted by the next DDL unit instead.
//
// Startup reconciliation (Open, ReloadAfterRecovery): entries whose tables are missing are an
// error; unreferenced `collection-*` / `index-*` tables that are not drop pending are orphans
// and are dropped. Other packages must not name their own tables with those prefixes. At
// startup (Open, not ReloadAfterRecovery, which may run while builds are in progress) every
// unreferenced `internal-*` table (TemporaryIdentPrefix: index builds' temporary tables, left
// behind by a crash mid-build) is dropped too, so no durable state may live under that prefix.
package catalog
