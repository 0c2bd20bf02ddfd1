package query

import (
	"bytes"
	"encoding/binary"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// elemIter walks the elements of a raw document or array without allocating. Malformed bytes
// end the iteration (bad is then set), so callers treat the rest of the document as absent,
// which is how the matcher treats corrupt input: never a panic, at worst a non-match.
type elemIter struct {
	rest []byte
	bad  bool
}

func newElemIter(doc []byte) elemIter {
	if len(doc) < 5 {
		return elemIter{bad: len(doc) != 0}
	}
	n := int(int32(binary.LittleEndian.Uint32(doc)))
	if n < 5 || n > len(doc) {
		return elemIter{bad: true}
	}
	return elemIter{rest: doc[4 : n-1]}
}

// next returns the next element's type, key and value.
func (it *elemIter) next() (key []byte, v bsoncore.Value, ok bool) {
	if len(it.rest) == 0 {
		return nil, bsoncore.Value{}, false
	}
	t := bsoncore.Type(it.rest[0])
	nul := bytes.IndexByte(it.rest[1:], 0)
	if nul < 0 {
		it.bad, it.rest = true, nil
		return nil, bsoncore.Value{}, false
	}
	key = it.rest[1 : 1+nul]
	val, rem, ok := bsoncore.ReadValue(it.rest[2+nul:], t)
	if !ok {
		it.bad, it.rest = true, nil
		return nil, bsoncore.Value{}, false
	}
	it.rest = rem
	return key, val, true
}

// getField returns the first element of doc named name (BSONObj::getField).
func getField(doc []byte, name string) (bsoncore.Value, bool) {
	it := newElemIter(doc)
	for {
		key, v, ok := it.next()
		if !ok {
			return bsoncore.Value{}, false
		}
		if string(key) == name {
			return v, true
		}
	}
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

// cutDot splits path at its first dot.
func cutDot(path string) (head, tail string, hasTail bool) {
	if i := strings.IndexByte(path, '.'); i >= 0 {
		return path[:i], path[i+1:], true
	}
	return path, "", false
}

// isArrayOrDoc reports whether v is a BSON object in MongoDB's sense (isABSONObj).
func isArrayOrDoc(v bsoncore.Value) bool {
	return v.Type == bsoncore.TypeEmbeddedDocument || v.Type == bsoncore.TypeArray
}
