// Package agg is the aggregation framework (MongoDB behaviour; issue 6, spec/execution.md
// "Query execution"): a pipeline of stages parsed once (Parse), optimised (top-k sort,
// $match moved ahead of $project/$addFields when it reads no computed field, a leading
// $match/$sort/$limit offered to the query layer through LeadingMatch) and run as a chain of
// pull-based Sources (Run).
//
// Expressions and accumulators are internal/query/expr's: find's $expr and aggregation share
// one language, parser and value model. This package holds the stages that use them.
//
// Values are bsoncore.Values; the zero Value is "missing". Documents handed between stages
// are immutable: a stage never modifies a document it received, it builds a new one, so a
// Source may hand out documents that alias earlier ones freely. A Source that reuses a buffer
// across Next calls must copy before returning.
//
// Blocking stages ($group, $bucket, $sort, $bucketAuto, $setWindowFields, $densify, $fill)
// account the bytes they hold and fail with QueryExceededMemoryLimitNoDiskUseAllowed (292)
// above Context.MaxMemoryBytes unless AllowDiskUse is set. With it, $sort spills sorted runs
// through internal/index/sorter, and $group/$bucket spill further input documents keyed by
// (group key, arrival order) to the same sorter and fold them group by group at the end, so
// $first/$last/$push keep arrival order. $setWindowFields, $fill and $densify spill their
// input to the same sorter keyed by (partition, sort key, arrival order) and read it back one
// partition at a time; a partition that alone exceeds the limit goes to a file read back by
// position (spill.go). $bucketAuto spills its input keyed by (groupBy value, arrival order)
// and cuts the buckets in one streaming pass. These stages stream their output.
//
// Joins ($lookup, $graphLookup) probe the foreign side per input document (foreign.go): as
// planner queries through the resolver's Querier while an index serves them (switching to a
// hash join once the probes outweigh reading a small foreign collection), else through a
// hash table of the foreign collection keyed by the KeyString of the joined field when it
// fits in LookupCacheBytes, else by a streamed scan per probe. A $lookup pipeline starting
// with {$match: {$expr: {$eq: ["$field", "$$var"]}}} probes field too. One document's
// $lookup matches are bounded by LookupMaxResultBytes (4568) and a $graphLookup search by
// GraphLookupMaxMemoryBytes (40099); $unionWith streams its collection.
//
// Files: pipeline.go (Parse/Run/Explain/LeadingMatch, sources), stages.go (simple stages
// and the optimiser), project.go, group.go, sort.go, bucket.go, join.go ($lookup,
// $graphLookup, $unionWith, $facet, $out, $merge), foreign.go (the joins' foreign side),
// window.go ($setWindowFields, $densify, $fill), spill.go (their partitioned, spillable
// input), value.go (document path helpers only stages need).
package agg
