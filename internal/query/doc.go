// Package query owns the query language: the matcher (filters) and projection. The
// aggregation expressions that $expr uses are internal/query/expr; update operators live in
// query/update. All three rank below internal/index (they need only BSON), so the index
// layer compiles partial filters with ParsePartialFilter; the planner, query/plan, ranks
// above index.
//
// Spec: none of spec/ covers query semantics; this package follows MongoDB 7.0's documented
// behaviour and its matcher sources (src/mongo/db/matcher: expression_parser.cpp,
// expression_leaf.cpp, path.cpp; projection_ast / projection_executor for projection).
// ARCHITECTURE.md, "Layers": internal/query.
//
// # Matcher
//
// Parse turns a filter into a tree of MatchExpression nodes (And/Or/Nor/Not and path leaves:
// comparisons, $in, $exists, $type, $regex, $mod, $size, bit tests, $elemMatch; pathless
// $expr and $jsonSchema). Leaves are tested against every value a path reaches, with
// MongoDB's traversal (bsonutil.Walk): documents are followed field by field; arrays in the
// middle of a path fan out to their document elements (and, for numeric components, to the
// element at that index); an array at the end of the path is tested as a whole and, for most
// leaves, element by element. The negations ($ne, $nin, $not, {$exists: false}, $nor) are Not
// over the positive predicate, so {a: {$ne: 5}} excludes a: [1, 5].
//
// Semantics pinned by tests (matcher_test.go), each as MongoDB 7.0 documents them:
//
//   - {a: null} matches a missing a, null, undefined (7.0 still does; 8.0 stops matching
//     undefined) and arrays containing null. {$gte: null} and {$lte: null} are the same set;
//     {$gt: null} and {$lt: null} match nothing.
//   - Comparisons bracket by canonical type: {$gt: 5} never matches a string. Everything is
//     above MinKey and below MaxKey. Numbers compare by value across int/long/double/decimal.
//     NaN equals NaN and is neither above nor below anything.
//   - {a: [1, 5]} matches the array [1, 5] exactly and an array containing it.
//   - $where: Humongo has no JavaScript engine, so it fails the way a mongod without one
//     does: BadValue "no globalScriptEngine in $where parsing". $text fails with IndexNotFound
//     "text index required for $text query" (there are no text indexes).
//   - $regex uses regexp2 (PCRE-like: lookaround, backreferences) with options i, m, s, x
//     (u accepted); invalid patterns fail with Location51091, bad options with Location51108.
//
// Matches does not allocate for equality, range, $in, $exists and $type filters: the path
// walk iterates raw bytes and the leaves compare raw values (BenchmarkMatchEq,
// BenchmarkMatchRange).
//
// # Expressions
//
// $expr and computed projection fields are aggregation expressions, parsed and evaluated by
// internal/query/expr, which ranks below this package; expr.go wraps one as a match node.
// They may read variables: a command's let (ParseOptions.Vars, constants evaluated once,
// MongoDB 5.0+), or variables bound per evaluation (ParseOptions.VarNames, whose values an
// aggregation passes in MatchDetails.Vars, e.g. a $lookup's let). Any other $$name fails to
// parse with 17276.
//
// # Projection
//
// projection.go: find's projection language (inclusion/exclusion, _id, dotted paths through
// arrays, $slice, $elemMatch, positional $, $meta, literals). Computed fields are
// aggregation expressions (see projField.expr).
package query
