// Package plan is the query planner and executor (MongoDB's query planner, plan stages and
// explain) for find, count, distinct and the targeting of update/delete/findAndModify.
//
// Planning. Prepare validates the request (sort pattern, hint, min/max, skip/limit) and
// enumerates candidate plans: IDHACK for a lone {_id: scalar}; otherwise one IXSCAN plan per
// ready, non-hidden index whose leading field the filter bounds (or that provides the
// requested sort), plus an OR plan when every branch of a top-level $or can use an index
// (or.go); a COLLSCAN only when no index applies. A partial index is a candidate only when
// the filter implies its partialFilterExpression (partial.go; a hint of one that is not
// implied is rejected). Hashed fields are bounded only by equalities and $in, as point
// intervals on the values' hashes (hashed.go); their plans always FETCH and re-filter, since
// values can share a hash. Bounds come from
// the top-level conjunction's leaves ($eq, ranges with type bracketing, $in, prefix regexes,
// $exists, $type, $elemMatch children). On multikey fields, predicates are not intersected
// (only the first bounds the scan) unless they come from the same $elemMatch, and a field that
// shares a multikey path prefix with an earlier bounded field is not bounded. Several
// candidates are raced in MongoDB-style trial runs (up to 10000 works or 101 results each);
// the most productive (advanced/works, +1 for reaching EOF, tie-breaks for no SORT and
// covered) wins and is rebuilt from scratch.
//
// Execution. Stages do one unit of work per call (advanced / needTime / EOF): COLLSCAN,
// IDHACK, IXSCAN (ranges from the bounds: a cartesian product of leading point intervals
// then the intervals of the next field; remaining fields are checked per key; multikey
// results de-duplicated), OR (children in turn, RecordIds de-duplicated), FETCH (+ the
// whole filter), SORT (blocking, KeyString-encoded sort keys in the external sorter; error
// 292 past the memory limit unless allowDiskUse, then it spills; with a limit, a top-k heap
// of skip+limit entries, explain's limitAmount, that falls back to the external sorter only
// when those k documents alone exceed the limit), SKIP, LIMIT,
// PROJECTION_SIMPLE/DEFAULT/COVERED and RETURN_KEY. Sort keys follow
// MongoDB: an array contributes its smallest element ascending and its largest descending;
// missing is null.
//
// Ownership: a Request's OwnershipFilter (a predicate on the shard key; nil on unsharded
// data) adds a SHARDING_FILTER stage right above the access path (above FETCH, COLLSCAN or
// IDHACK, below SORT/SKIP/LIMIT and projection), which drops the documents this node does not
// own and counts them as chunkSkips. Plans under it are never covered, and Count does not use
// the record store's fast count, which includes orphans.
//
// Yielding: every YieldEvery works the executor saves its stages, abandons the storage
// snapshot and restores (locks stay held). Between getMores the caller does the same with
// Save / Restore; Restore fails with QueryPlanKilled if the collection or scanned index was
// dropped. Context cancellation (maxTimeMS, killOp) stops Next with the context's cause.
//
// Prepare conflicts (spec: replication.md "Prepare Conflicts"): a storage read that meets a
// document a prepared transaction wrote fails with storage.ErrPrepareConflict (unless the
// unit ignores them: read concern local/available/majority). The stage that met it keeps its
// place (the storage cursors redo their failed move, FETCH its pending record, IDHACK its
// lookup), and Next (or a trial run) waits for the transaction to commit or abort, then
// continues in a new view: outside a unit of work as a yield does; inside one (a
// transaction's statement) by RecoveryUnit.RefreshSnapshot at the same timestamp when the
// unit allows it. Otherwise the conflict is returned for the caller's write retry loop to
// roll back and wait (operation), or, in a transaction (Request.InTransaction), the plan
// waits and then fails with WriteConflict. The waits end with the context.
//
// Known deviations from MongoDB: $or plans pick one index per branch by a bounds heuristic
// instead of enumerating and ranking every branch combination, never use SORT_MERGE, and
// only the first top-level $or is indexed (nested $or inside a branch disables the OR plan);
// no index intersection, no plan cache; partial filter implication is syntactic (one query
// predicate must imply each partial predicate); covered plans need top-level non-multikey,
// non-hashed key fields and simple inclusion projections; parsedQuery echoes the filter
// instead of MongoDB's normalised form; locks are not released at yields; SHARDING_FILTER
// always works on fetched documents (MongoDB evaluates it on the index key when the index
// holds the whole shard key, keeping such plans covered).
//
// Spec: none of spec/ covers the planner; behaviour follows MongoDB 7.0 (query_planner.cpp,
// index_bounds_builder.cpp, plan_ranker.cpp, explain output of the classic engine).
package plan
