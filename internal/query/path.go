package query

import "go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

// leaf is a predicate on the single values found at a path (MongoDB's
// LeafMatchExpression::matchesSingleElement). The path walk below feeds it every candidate.
type leaf interface {
	// matchesSingle tests one value. The zero Value means "missing". d may be nil; only
	// $elemMatch records into it (the index of the matching element).
	matchesSingle(v bsoncore.Value, d *MatchDetails) bool
	// expandsLeafArray reports whether an array found at the end of the path is also tested
	// element by element (true for comparisons, $type, $regex...; false for $size and
	// $elemMatch, which look at the array itself).
	expandsLeafArray() bool
}

// matchPath reports whether any value at path in doc satisfies lf. It is bsonutil.Walk's
// traversal (MongoDB's BSONElementIterator) followed by leaf-array expansion, specialised so
// that it does not allocate and so that it can report the elemMatchKey: the index, in the first
// array traversed, of the element through which the match was found.
func matchPath(doc []byte, path string, lf leaf, d *MatchDetails) bool {
	return walkDoc(doc, path, lf, nil, d)
}

func walkDoc(doc []byte, path string, lf leaf, key []byte, d *MatchDetails) bool {
	cur, rest := doc, path
	for {
		head, tail, hasTail := cutDot(rest)
		v, found := getField(cur, head)
		switch {
		case !found:
			return matchValue(bsoncore.Value{}, lf, key, d)
		case !hasTail:
			return matchValue(v, lf, key, d)
		case v.Type == bsoncore.TypeEmbeddedDocument:
			cur, rest = v.Data, tail
		case v.Type == bsoncore.TypeArray:
			return walkArray(v.Data, tail, lf, key, d)
		default:
			// A scalar in the middle of the path: the rest of the path is missing.
			return matchValue(bsoncore.Value{}, lf, key, d)
		}
	}
}

// walkArray applies a non-empty path to the elements of an array.
func walkArray(arr []byte, path string, lf leaf, key []byte, d *MatchDetails) bool {
	head, tail, hasTail := cutDot(path)
	index := isAllDigits(head)
	it := newElemIter(arr)
	for {
		ekey, v, ok := it.next()
		if !ok {
			return false
		}
		k := key
		if k == nil {
			k = ekey
		}
		if v.Type == bsoncore.TypeEmbeddedDocument && walkDoc(v.Data, path, lf, k, d) {
			return true
		}
		if !index || string(ekey) != head {
			continue
		}
		// Positional: the element at this index.
		switch {
		case !hasTail:
			if matchValue(v, lf, k, d) {
				return true
			}
		case v.Type == bsoncore.TypeEmbeddedDocument:
			if walkDoc(v.Data, tail, lf, k, d) {
				return true
			}
		case v.Type == bsoncore.TypeArray:
			if walkArray(v.Data, tail, lf, k, d) {
				return true
			}
		}
	}
}

// matchValue tests the value at the end of a path: for an array and an expanding leaf, each
// element first and then the array as a whole (so {a: [1, 2]} equals the array itself and
// {a: 1} matches one of its elements).
func matchValue(v bsoncore.Value, lf leaf, key []byte, d *MatchDetails) bool {
	if v.Type == bsoncore.TypeArray && lf.expandsLeafArray() {
		it := newElemIter(v.Data)
		for {
			ekey, e, ok := it.next()
			if !ok {
				break
			}
			if lf.matchesSingle(e, d) {
				k := key
				if k == nil {
					k = ekey
				}
				d.record(k)
				return true
			}
		}
	}
	if lf.matchesSingle(v, d) {
		d.record(key)
		return true
	}
	return false
}
