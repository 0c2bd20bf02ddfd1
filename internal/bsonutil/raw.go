package bsonutil

import (
	"bytes"
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// This file holds the bounds-checked, allocation-free readers the rest of the package uses
// instead of bsoncore.ReadString and friends, which convert to string (allocating) and would
// make Compare allocate.

// readI32 reads a little-endian int32; ok is false if src is too short.
func readI32(src []byte) (int32, bool) {
	if len(src) < 4 {
		return 0, false
	}
	return int32(binary.LittleEndian.Uint32(src)), true
}

// valueLen returns how many bytes a value of type t occupies at the start of src, or -1 if t
// is not a valid BSON type or the value does not fit in src. It checks only what is needed to
// skip the value safely (lengths and terminators), not the validity of nested contents.
func valueLen(t bsoncore.Type, src []byte) int {
	n := -1
	switch t {
	case bsoncore.TypeDouble, bsoncore.TypeDateTime, bsoncore.TypeInt64, bsoncore.TypeTimestamp:
		n = 8
	case bsoncore.TypeInt32:
		n = 4
	case bsoncore.TypeDecimal128:
		n = 16
	case bsoncore.TypeObjectID:
		n = 12
	case bsoncore.TypeBoolean:
		n = 1
	case bsoncore.TypeUndefined, bsoncore.TypeNull, bsoncore.TypeMinKey, bsoncore.TypeMaxKey:
		n = 0
	case bsoncore.TypeString, bsoncore.TypeJavaScript, bsoncore.TypeSymbol:
		if _, ok := readStr(src); ok {
			l, _ := readI32(src)
			n = 4 + int(l)
		}
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
		l, ok := readI32(src)
		if ok && l >= 5 && int(l) <= len(src) && src[l-1] == 0 {
			n = int(l)
		}
	case bsoncore.TypeCodeWithScope:
		// int32 total, string, document: at least 4 + 5 + 5.
		l, ok := readI32(src)
		if ok && l >= 14 && int(l) <= len(src) {
			n = int(l)
		}
	case bsoncore.TypeBinary:
		l, ok := readI32(src)
		if ok && l >= 0 {
			n = 5 + int(l)
		}
	case bsoncore.TypeRegex:
		i := bytes.IndexByte(src, 0)
		if i >= 0 {
			j := bytes.IndexByte(src[i+1:], 0)
			if j >= 0 {
				n = i + 1 + j + 1
			}
		}
	case bsoncore.TypeDBPointer:
		if _, ok := readStr(src); ok {
			l, _ := readI32(src)
			n = 4 + int(l) + 12
		}
	}
	if n > len(src) {
		return -1
	}
	return n
}

// readStr returns the bytes of a BSON string (int32 length including the NUL, bytes, NUL)
// without the terminator.
func readStr(src []byte) ([]byte, bool) {
	l, ok := readI32(src)
	if !ok || l < 1 || int64(l) > int64(len(src)-4) || src[4+l-1] != 0 {
		return nil, false
	}
	return src[4 : 4+l-1], true
}

// iter walks the elements of a raw document or array without allocating.
type iter struct {
	rest []byte
	bad  bool // the document or one of its element headers is malformed
}

// newIter checks the document header and terminator. An iter built from malformed bytes
// reports bad on its first next call.
func newIter(doc []byte) iter {
	l, ok := readI32(doc)
	if !ok || l < 5 || int(l) > len(doc) || doc[l-1] != 0 {
		return iter{bad: true}
	}
	return iter{rest: doc[4 : l-1]}
}

// next returns the next element. ok is false at the end or when the element is malformed, in
// which case it.bad is set. The value slice is exactly the value's bytes.
func (it *iter) next() (t bsoncore.Type, key, val []byte, ok bool) {
	if it.bad || len(it.rest) == 0 {
		return 0, nil, nil, false
	}
	t = bsoncore.Type(it.rest[0])
	k := bytes.IndexByte(it.rest[1:], 0)
	if k < 0 {
		it.bad = true
		return 0, nil, nil, false
	}
	key = it.rest[1 : 1+k]
	body := it.rest[1+k+1:]
	n := valueLen(t, body)
	if n < 0 {
		it.bad = true
		return 0, nil, nil, false
	}
	it.rest = body[n:]
	return t, key, body[:n], true
}
