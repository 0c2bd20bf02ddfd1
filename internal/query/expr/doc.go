// Package expr is the aggregation expression language: the parser (Parse), the evaluation
// context ($$ROOT, $$CURRENT, $$NOW, user variables, the collation), every expression
// operator, and the accumulators ($sum, $push, $topN, ...) that $group, $bucket and
// $setWindowFields fold with and that $sum/$avg/$min/$max/$stdDev* reuse as expressions.
// The matcher's $expr (internal/query), find's computed projections (internal/query) and the
// aggregation stages (internal/agg) all parse with it, so every importer sees the same
// language: $expr in a find filter, a partial-index check or a validator knows $map, $let,
// $switch and the string and date operators whether or not internal/agg is linked.
//
// It ranks below internal/query (it needs only BSON, collations and KeyStrings) so the
// matcher can import it; internal/agg ranks above both.
//
// Spec: none of spec/ covers expression semantics; this package follows MongoDB 7.0's
// documented behaviour and its sources (src/mongo/db/pipeline: expression.cpp,
// accumulator*.cpp). ARCHITECTURE.md, "Layers": internal/query.
//
// # Operator table
//
// The operators live in one table built once, when the package is initialised (newTable in
// core.go), from the files that define them: core.go (field paths, variables, literals,
// comparisons, $and/$or/$not, $add/$subtract/$multiply/$divide, $cond, $ifNull, $in, $size,
// $type, $literal), arith.go, array.go, date.go, misc.go ($let, $switch, $rand, accumulators
// as expressions, $mergeObjects, $getField/$setField) and string.go. The table is never
// written afterwards, so lookups take no lock; an unknown operator fails with
// InvalidPipelineOperator. Nothing outside this package adds operators.
//
// # Values
//
// Values are bsoncore.Values; the zero Value is Missing, which aggregation distinguishes from
// null (it sorts with undefined, below null, unlike in the matcher). value.go has the value
// constructors (Bool, Int32, Doc, Array, ...) and document helpers (Field, GetPath,
// SetField, DocBuilder) that the stages in internal/agg share; sortkey.go turns documents
// into KeyString sort keys (SortKey) for $sortArray, $topN and agg's $sort.
//
// # Known deviations
//
// The core operators ($and, $or, $not, $cond and the $expr result) coerce to bool with
// bsonutil.TrueValue (BSONElement::trueValue, through a double for decimals) while the
// others use Truthy (coerceToBool, exact for decimals); they differ only for decimals too
// small for a double. Both are kept as they were when the language was split between query
// and agg.
package expr
