// Package bsonutil owns the two BSON primitives every layer above storage shares: the canonical
// BSON value order and dotted-path traversal over raw documents.
//
// Spec: spec/execution.md, "KeyString" (the index key order must equal BSON order, numbers by
// value) and checklist-execution.md §8 "Binary comparable"; the order itself is MongoDB's
// BSONElement::woCompare / BSONObj::woCompare (bsonelement.cpp compareElementValues and
// bsontypes.h canonicalizeBSONType). Path traversal follows BSONObj::getFieldDotted (Lookup) and
// the matcher's ElementPath/BSONElementIterator (Walk, MultikeyComponents).
//
// Everything here works on raw bytes (bsoncore) and never decodes a document into Go values.
// Compare does not allocate unless a Decimal128 takes part.
//
// # Order
//
// Values are ordered first by CanonicalTypeOrder, then within a type as follows:
//
//	MinKey
//	undefined
//	null (and EOO, the zero bsoncore.Value, which means "missing" and sorts as null)
//	numbers: int32, int64, double, decimal128 by exact mathematical value; every NaN is equal
//	  to every other NaN and lower than all other numbers; -0 == 0
//	string == symbol: bytewise (no collation), shorter prefix first
//	object: per field, canonical type, then field name bytewise, then value; fewer fields first
//	array: element-wise; shorter first
//	binData: length, then subtype, then bytes
//	ObjectId: bytewise
//	bool: false < true
//	date: signed int64 milliseconds
//	timestamp: unsigned (seconds, increment)
//	regex: pattern, then flags, bytewise
//	dbPointer: value size, then raw bytes (as MongoDB does)
//	JavaScript: bytewise
//	code with scope: code bytewise, then scope as an object
//	MaxKey
//
// As in MongoDB's canonicalizeBSONType, undefined (rank 0) sorts strictly before null (rank 5).
// One deviation: EOO, which a zero bsoncore.Value uses for "missing", shares null's rank rather
// than undefined's, because MongoDB's sort keys and index keys treat a missing field as null.
//
// # Malformed input
//
// Nothing here panics on bad bytes. Compare and CompareDocuments never fail: if the comparison
// reaches a truncated or invalid part of one side before the order is decided, that side sorts
// first (it is "less"); if both sides are malformed at the same point they are ordered by their
// raw bytes (type byte, then data). This is deterministic and antisymmetric, and it is a total
// order on well-formed values, but it is not guaranteed to be transitive across malformed
// values, whose corruption may be found or missed depending on the other operand. Callers that
// need to know use CompareErr. Nesting deeper than MaxDepth counts as malformed.
package bsonutil
