package bsonutil

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// SplitPath splits a dotted field path into its components, rejecting what MongoDB's FieldPath
// constructor rejects (field_path.cpp): the empty path (40352), a trailing dot (40353), an
// empty component ("a..b", ".a": 15998) and an embedded NUL byte (16411). Context-specific
// rules ($-prefixed components, positional operators, depth limits) belong to the caller.
func SplitPath(path string) ([]string, error) {
	if err := ValidatePath(path); err != nil {
		return nil, err
	}
	return strings.Split(path, "."), nil
}

// ValidatePath applies SplitPath's checks without allocating.
func ValidatePath(path string) error {
	if path == "" {
		return mongoerr.New(mongoerr.Location40352, "FieldPath cannot be constructed with empty string")
	}
	if path[len(path)-1] == '.' {
		return mongoerr.New(mongoerr.Location40353, "FieldPath must not end with a '.'.")
	}
	if path[0] == '.' || strings.Contains(path, "..") {
		return mongoerr.New(mongoerr.Location15998, "FieldPath field names may not be empty strings.")
	}
	if strings.IndexByte(path, 0) >= 0 {
		return mongoerr.New(mongoerr.Location16411, "FieldPath field names may not contain '\\0'.")
	}
	return nil
}

// cutDot splits path at its first dot.
func cutDot(path string) (head, tail string, hasTail bool) {
	if i := strings.IndexByte(path, '.'); i >= 0 {
		return path[:i], path[i+1:], true
	}
	return path, "", false
}

// isAllDigits is MongoDB's test for a path component that may be an array index.
func isAllDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// getField returns the first element of doc named name (BSONObj::getField). Malformed bytes
// end the search as if the field were absent; callers that must distinguish use iter directly.
func getField(doc []byte, name string) (bsoncore.Value, bool) {
	it := newIter(doc)
	for {
		t, key, val, ok := it.next()
		if !ok {
			return bsoncore.Value{}, false
		}
		// string(key) in a comparison does not allocate.
		if string(key) == name {
			return bsoncore.Value{Type: t, Data: val}, true
		}
	}
}

// Lookup returns the value at a dotted path with BSONObj::getFieldDotted semantics: at each
// level a field literally named by the whole remaining path wins (field names may contain
// dots); otherwise the first component is looked up and, if it is an embedded document or an
// array, the rest of the path is looked up inside it. Arrays are entered only by field name,
// so a numeric component indexes into an array ("a.0.b") and a non-numeric one finds nothing
// there: Lookup never fans out over array elements (use Walk for that). Malformed bytes are
// treated as absent fields.
func Lookup(doc bsoncore.Document, path string) (bsoncore.Value, bool) {
	cur, rest := []byte(doc), path
	for {
		head, _, hasTail := cutDot(rest)
		if !hasTail {
			return getField(cur, rest)
		}
		// One pass finds both the literal match (which wins) and the first-component match.
		var sub bsoncore.Value
		found := false
		it := newIter(cur)
		for {
			t, key, val, ok := it.next()
			if !ok {
				break
			}
			if string(key) == rest {
				return bsoncore.Value{Type: t, Data: val}, true
			}
			if !found && string(key) == head {
				sub, found = bsoncore.Value{Type: t, Data: val}, true
			}
		}
		if !found || (sub.Type != bsoncore.TypeEmbeddedDocument && sub.Type != bsoncore.TypeArray) {
			return bsoncore.Value{}, false
		}
		cur, rest = sub.Data, rest[len(head)+1:]
	}
}

// Walk reports every value a query predicate on path must consider, with the semantics of
// MongoDB's matcher path iterator (BSONElementIterator):
//
//   - Embedded documents are followed component by component.
//   - When a component's value is an array and components remain, the rest of the path is
//     applied to every element that is a document (so "a.b" on {a: [{b: 1}, {b: 2}]} reports
//     1 and 2). Elements that are not documents, including nested arrays, are skipped, unless:
//   - the next component is all digits (an array index). Then, for each element, a document
//     element first gets the rest of the path applied with that number as a field name, and
//     the element at that index is also taken positionally: reported itself if the number was
//     the last component, otherwise the path after the number is applied to it (a document)
//     or to its elements (a nested array, traversed the same way).
//   - The value at the end of the path is reported as is. If it is an array, its elements are
//     NOT reported separately: a predicate such as {a: 1} against {a: [1, 2]} must look at the
//     array and at its elements, a predicate such as {a: [1, 2]} only at the array, and that
//     choice belongs to the caller.
//   - A missing path is reported as the zero bsoncore.Value (Type 0), once for each place it
//     is missing: at the top level, or inside each document element of a traversed array
//     (so {"a.b": null} can match {a: [{c: 1}]}). A scalar in the middle of the path (a: 5
//     for "a.b") counts as missing. Compare ranks the zero Value equal to null. Missing values
//     are not reported for array elements that are skipped (non-documents), nor for an empty
//     array.
//
// viaArray is true when an array was traversed to reach the value. fn returning false stops
// the walk. Malformed bytes are treated as absent fields. Walk does not allocate.
func Walk(doc bsoncore.Document, path string, fn func(v bsoncore.Value, viaArray bool) bool) {
	walkDoc(doc, path, false, fn)
}

// walkDoc is getFieldDottedOrArray followed by the array iteration. It returns false when fn
// asked to stop.
func walkDoc(doc []byte, path string, via bool, fn func(bsoncore.Value, bool) bool) bool {
	cur, rest := doc, path
	for {
		head, tail, hasTail := cutDot(rest)
		v, found := getField(cur, head)
		switch {
		case !found:
			return fn(bsoncore.Value{}, via)
		case !hasTail:
			return fn(v, via)
		case v.Type == bsoncore.TypeEmbeddedDocument:
			cur, rest = v.Data, tail
		case v.Type == bsoncore.TypeArray:
			return walkArray(v.Data, tail, fn)
		default:
			return fn(bsoncore.Value{}, via)
		}
	}
}

// walkArray applies a non-empty path to the elements of an array.
func walkArray(arr []byte, path string, fn func(bsoncore.Value, bool) bool) bool {
	head, tail, hasTail := cutDot(path)
	index := isAllDigits(head)
	it := newIter(arr)
	for {
		t, key, val, ok := it.next()
		if !ok {
			return true
		}
		if t == bsoncore.TypeEmbeddedDocument && !walkDoc(val, path, true, fn) {
			return false
		}
		if !index || string(key) != head {
			continue
		}
		// Positional match: the element at this index.
		switch {
		case !hasTail:
			if !fn(bsoncore.Value{Type: t, Data: val}, true) {
				return false
			}
		case t == bsoncore.TypeEmbeddedDocument:
			if !walkDoc(val, tail, true, fn) {
				return false
			}
		case t == bsoncore.TypeArray:
			if !walkArray(val, tail, fn) {
				return false
			}
		}
	}
}

// MultikeyComponents returns the indexes of the path components whose value is an array that
// index key generation expands in doc (MongoDB's MultikeyPaths / "arrayComponents" from
// multikey_dotted_path_support::extractAllElementsAlongPath with expandArrayOnTrailingField):
// for path "a.b.c", 0 means a was an array, 2 means a.b.c was. An array followed by an
// all-digits component is indexed positionally and does not count. The result is sorted and
// nil when no component is an array. Errors: an invalid path (SplitPath's rules) or
// malformed BSON on the way (InvalidBSON).
func MultikeyComponents(doc bsoncore.Document, path string) ([]int, error) {
	var comps []int
	err := ExtractElements(doc, path, true, func(bsoncore.Value) {}, func(c int) {
		if !slices.Contains(comps, c) {
			comps = append(comps, c)
		}
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(comps)
	return comps, nil
}

// ExtractElements is MongoDB's extractAllElementsAlongPath: it calls elem for every value
// found at path, expanding arrays met before the last component (every document or array
// element gets the rest of the path, except that an array followed by an all-digits component
// is entered positionally) and, if expandTrailingArray, an array found at the end of the path
// (its elements are reported instead of it). arrayComponent, if non-nil, is called with the
// index of each path component whose array was expanded (possibly more than once). Missing
// fields report nothing. Errors: an invalid path, or InvalidBSON if malformed bytes are met.
func ExtractElements(doc bsoncore.Document, path string, expandTrailingArray bool,
	elem func(bsoncore.Value), arrayComponent func(int)) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	if !extract(doc, path, expandTrailingArray, 0, elem, arrayComponent) {
		return mongoerr.Newf(mongoerr.InvalidBSON, "malformed BSON while extracting path %q", path)
	}
	return nil
}

// extract returns false on malformed BSON.
func extract(doc []byte, path string, expandTrailing bool, depth int,
	elem func(bsoncore.Value), arrayComponent func(int)) bool {
	head, tail, hasTail := cutDot(path)
	v, found, ok := getFieldChecked(doc, head)
	if !ok {
		return false
	}
	if !found {
		return true
	}
	if !hasTail {
		if v.Type == bsoncore.TypeArray && expandTrailing {
			it := newIter(v.Data)
			for {
				t, _, val, more := it.next()
				if !more {
					break
				}
				elem(bsoncore.Value{Type: t, Data: val})
			}
			if it.bad {
				return false
			}
			if arrayComponent != nil {
				arrayComponent(depth)
			}
			return true
		}
		elem(v)
		return true
	}
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument:
		return extract(v.Data, tail, expandTrailing, depth+1, elem, arrayComponent)
	case bsoncore.TypeArray:
		next, _, _ := cutDot(tail)
		if isAllDigits(next) {
			return extract(v.Data, tail, expandTrailing, depth+1, elem, arrayComponent)
		}
		it := newIter(v.Data)
		for {
			t, _, val, more := it.next()
			if !more {
				break
			}
			if t == bsoncore.TypeEmbeddedDocument || t == bsoncore.TypeArray {
				if !extract(val, tail, expandTrailing, depth+1, elem, arrayComponent) {
					return false
				}
			}
		}
		if it.bad {
			return false
		}
		if arrayComponent != nil {
			arrayComponent(depth)
		}
	}
	return true
}

// getFieldChecked is getField that reports malformed bytes (ok false) met before the field.
func getFieldChecked(doc []byte, name string) (v bsoncore.Value, found, ok bool) {
	it := newIter(doc)
	for {
		t, key, val, more := it.next()
		if !more {
			return bsoncore.Value{}, false, !it.bad
		}
		if string(key) == name {
			return bsoncore.Value{Type: t, Data: val}, true, true
		}
	}
}
