// Package update implements MongoDB's update language: operator updates ($set, $unset, $inc,
// $mul, $min, $max, $rename, $setOnInsert, $currentDate, $push with $each/$position/$slice/
// $sort, $addToSet with $each, $pop, $pull, $pullAll, $bit), the positional operators "$",
// "$[]" and "$[<id>]" with arrayFilters, replacement documents, and upsert seeding from a
// query's equalities.
//
// Spec: ARCHITECTURE.md, layer internal/query ("update operators"); the behaviour is MongoDB
// 7.0's update subsystem (src/mongo/db/update: UpdateObjectNode, UpdateArrayNode, the
// modifier nodes, ObjectReplaceExecutor, and pathsupport for upsert seeding). There is no
// section of spec/execution.md about it; tests pin documented MongoDB behaviour.
//
// # Model
//
// Parse turns {$op: {path: arg}} into a tree with one node per path component (MongoDB's
// UpdateNode tree). A modifier is a leaf. Two modifiers whose paths are equal or where one is
// a prefix of the other are rejected at parse time with ConflictingUpdateOperators (40).
// Positional children ("$", "$[]", "$[id]") can still reach the same array element as an
// explicit index or each other; those are merged when applied and a conflict found then is
// also code 40 ("Update created a conflict at ...").
//
// Apply streams the document once, copying untouched elements verbatim and recursing only
// into fields the tree names; the output is built in one buffer. No document is decoded into
// Go values except arrays that an array modifier ($push, $pull, ...) rewrites.
//
// # Semantics pinned here
//
//   - Field order: existing fields stay in place; new fields are appended in the order MongoDB
//     5.0+ processes them: array-index names numerically first, then other names bytewise.
//     {$set: {z: 1, a: 1}} on {_id: 1} yields {_id: 1, a: 1, z: 1}.
//   - No-op detection: changed is false when the result is byte-identical to the input. So
//     $set of 1.0 over int32 1 is a change (the type differs), as in MongoDB.
//   - _id: any change of the _id value (including type) by an operator update is
//     ImmutableField (66); a replacement with a different _id also. A replacement without _id
//     keeps the old one; the result has _id first.
//   - Arithmetic ($inc/$mul) follows SafeNum: int32 overflow promotes to int64, int64 overflow
//     is BadValue "Failed to apply $inc operations to current value ((NumberLong)...) ...",
//     doubles win over integers, decimals over everything.
//   - Paths: a.2 on an array indexes it and pads with nulls when past the end (at most
//     1,500,000 nulls: CannotBackfillArray); $unset of an array element sets it to null;
//     a creating modifier under a scalar or a non-numeric name on an array is PathNotViable
//     (28); non-creating ones ($unset, $pop, $pull, $pullAll, rename source) do nothing.
//   - $currentDate {$type: "timestamp"} writes Timestamp(now seconds, 1); MongoDB uses the
//     next oplog optime, which the command layer can substitute later.
//   - Storage validation (ApplyContext.Validate): _id may not be an array, regex or
//     undefined (InvalidIdField 53); nesting deeper than 100 is Overflow (15) "Document
//     exceeds maximum nesting depth of 100". Size (16 MiB, BSONObjectTooLarge) is left to
//     the caller, who knows the namespace: len(newDoc) is the size.
//
// # Array filters and $pull conditions
//
// Both are parsed by the query matcher (internal/query, which does not import this package).
// An array element is matched as {"<id>": element} for arrayFilters and as {"v": element} for
// $pull conditions that start with an operator ({$gte: 6}); a $pull document without
// operators ({a: 1}) is a query on document elements.
//
// # Known deviations
//
//   - The command's collation is not applied: array filters, $pull, $pullAll, $addToSet,
//     $min/$max and $push's $sort compare strings binarily, where MongoDB uses the collator.
package update
