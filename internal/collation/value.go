package collation

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// maxDepth bounds the recursion of AppendValueKey on hostile nesting (bsonutil.MaxDepth).
const maxDepth = 1000

// AppendValueKey returns v with every string and symbol in it (nested in documents and arrays
// too) replaced by its sort key, as MongoDB's KeyString does for an index or a sort with a
// collation: the result orders under the binary comparison as v orders under the collation.
// Values that hold no string are returned unchanged without copying. Otherwise the new value's
// bytes are appended to dst, and the returned Data aliases the returned buffer. Malformed input
// is returned unchanged (the caller's encoder reports it).
func (c *Collator) AppendValueKey(dst []byte, v bsoncore.Value) (bsoncore.Value, []byte) {
	if c == nil || !hasString(v.Type, v.Data, 0) {
		return v, dst
	}
	start := len(dst)
	out, ok := c.appendValue(dst, v.Type, v.Data, 0)
	if !ok {
		return v, dst
	}
	return bsoncore.Value{Type: v.Type, Data: out[start:]}, out
}

// hasString reports whether a value contains a string or symbol.
func hasString(t bsoncore.Type, d []byte, depth int) bool {
	switch t {
	case bsoncore.TypeString, bsoncore.TypeSymbol:
		return true
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
		if depth > maxDepth {
			return false
		}
		elems, err := bsoncore.Document(d).Elements()
		if err != nil {
			return false
		}
		for _, e := range elems {
			v := e.Value()
			if hasString(v.Type, v.Data, depth+1) {
				return true
			}
		}
	}
	return false
}

// appendValue appends the value bytes (no type, no name) of the key form of (t, d).
func (c *Collator) appendValue(dst []byte, t bsoncore.Type, d []byte, depth int) ([]byte, bool) {
	switch t {
	case bsoncore.TypeString, bsoncore.TypeSymbol:
		s, _, ok := bsoncore.ReadString(d)
		if !ok {
			return dst, false
		}
		// BSON string: int32 length including the NUL, bytes, NUL. Keys may contain NUL
		// bytes; the length prefix keeps them intact and KeyString escapes them.
		lenAt := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst = c.AppendKey(dst, []byte(s))
		dst = append(dst, 0)
		n := len(dst) - lenAt - 4
		dst[lenAt], dst[lenAt+1], dst[lenAt+2], dst[lenAt+3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		return dst, true
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
		if depth > maxDepth {
			return dst, false
		}
		elems, err := bsoncore.Document(d).Elements()
		if err != nil {
			return dst, false
		}
		idx, out := bsoncore.AppendDocumentStart(dst)
		for _, e := range elems {
			v := e.Value()
			out = bsoncore.AppendHeader(out, v.Type, e.Key())
			var ok bool
			if out, ok = c.appendValue(out, v.Type, v.Data, depth+1); !ok {
				return dst, false
			}
		}
		out, err = bsoncore.AppendDocumentEnd(out, idx)
		if err != nil {
			return dst, false
		}
		return out, true
	}
	n := len(d)
	if vl, ok := valueLen(t, d); ok {
		n = vl
	}
	return append(dst, d[:n]...), true
}

// valueLen is the byte length of a value of type t at the start of d.
func valueLen(t bsoncore.Type, d []byte) (int, bool) {
	v, _, ok := bsoncore.ReadValue(d, t)
	if !ok {
		return 0, false
	}
	return len(v.Data), true
}
