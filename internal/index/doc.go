// Package index owns MongoDB's index machinery over the storage engine (execution spec:
// "Indexes", "Index Builds" — hybrid builds with the side-writes, duplicate-key and
// skipped-record tables —, "The TTLMonitor", "KeyString: Use in WiredTiger indexes"; checklist
// sections 6, 7 and 10; the external sorter of section 9 is the sorter subpackage).
//
// # What it owns
//
//   - Key generation (keygen.go, hash.go): KeyGenerator is BtreeKeyGenerator over raw BSON —
//     compound keys (at most 32 fields), arrays fanning out into one key per element with
//     MongoDB's multikey path tracking, positional paths ("a.1.b"), the parallel-arrays rule
//     (CannotIndexParallelArrays 171), null for missing fields, undefined for empty arrays,
//     sparse and partial indexes (filters from query.ParsePartialFilter) — and getHashKeys
//     for hashed fields, with Hash64 bit-compatible with BSONElementHasher::hash64 (pinned by
//     MongoDB's known answers).
//   - Access methods (access.go, cursor.go): Index stores KeyStrings in an ident, in the
//     formats documented on Index, enforces uniqueness (DuplicateKey 11000 with keyPattern
//     and keyValue) and scans with bounds (Cursor) for the planner and covered reads.
//   - The collection write path (collection.go): Collection writes the record store and every
//     index in the caller's WriteUnitOfWork, routes keys of indexes being built to their
//     interceptors, and persists multikey state the first time it changes.
//   - Collations: an index whose spec has a collation stores the collation keys of strings
//     (collation.Collator.AppendValueKey) in its KeyStrings, and encodes scan bounds and
//     FindRecordID lookups the same way, so a strength-2 unique index rejects "abc" after
//     "ABC". Such keys cannot be decoded back to strings.
//   - Hybrid index builds (build.go) and the TTL monitor (ttl.go).
//   - Two-phase (replicated) builds (twophase.go): TwoPhaseBuild separates registration,
//     the background scan and commit/abort so replication can log startIndexBuild,
//     commitIndexBuild and abortIndexBuild in the right units; Collections.IndexBuilds is
//     the node's registry of running builds. The commit quorum is decided by the commands
//     layer, secondary application by internal/repl/oplog.
//   - Restart of interrupted builds (restart.go): RestartUnfinishedBuilds, called at startup,
//     drops every not-ready index and builds it again from scratch with the same spec, as a
//     standalone MongoDB does. The build's temporary tables (catalog.TemporaryIdentPrefix)
//     were dropped by the catalog's startup reconciliation.
//   - prepareUnique (collMod's first step of a conversion to unique): such an index checks
//     the keys that inserts and updates add exactly as a unique index does (DuplicateKey
//     11000), while duplicates already present stay; builds and validation still treat it as
//     non-unique.
//
// # Invariants
//
//   - A ready index holds exactly the keys generated from the collection's documents at any
//     snapshot: every write touches the record store and all ready indexes in one unit.
//   - A write that commits after an index build's collection scan opened its snapshot records
//     its keys in the build's side-writes table: interceptors are installed, and later
//     removed, while writers are excluded (BuildOptions.BlockWrites), and writers read the
//     index set after acquiring their intent lock and keep it until their unit ends.
//   - Unique indexes never hold two entries with the same KeyString once a write commits:
//     concurrent inserters of the same key conflict on the KeyString-without-RecordId guard
//     write (see Index). Builds and drains may hold duplicates transiently; they are recorded
//     in the duplicate-key table and re-checked with writers excluded before commit.
//   - Multikey never reverts: the catalog only unions multikey paths.
//
// # Not done
//
// Hashed fields of collated indexes hash the raw string (MongoDB hashes the collation key);
// text/2d/2dsphere/wildcard indexes, resumable
// builds (interrupted builds restart from scratch; RestartUnfinishedBuilds rebuilds an
// unfinished two-phase build to ready on its own instead of waiting for its commit entry,
// except one a startup recovery replay restarted) and the unique conversion itself
// (collMod's scan for violations) belong to callers or are future work. Side writes made
// while a build with prepareUnique in its spec runs are not checked until the build is ready.
package index
