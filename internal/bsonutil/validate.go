package bsonutil

import (
	"bytes"
	"encoding/binary"

	"humongo/internal/mongoerr"
)

// Validate checks that doc is exactly one well-formed BSON document, recursively, as
// MongoDB's validateBSON does in its default mode: lengths consistent at every level, strings
// NUL-terminated, known element types, booleans 0 or 1, nesting at most maxDepth. It does not
// check UTF-8 or array key order (MongoDB's default mode does not either) and it does not
// allocate unless it fails. bsoncore's Document.Validate is not enough for untrusted input:
// it checks only the top level and trusts embedded length prefixes.
func Validate(doc []byte, maxDepth int) error {
	if err := validateDoc(doc, 0, maxDepth); err != nil {
		return mongoerr.Newf(mongoerr.InvalidBSON, "invalid BSON: %s", err.msg)
	}
	return nil
}

// bsonErr is a cheap validation failure; Validate converts it once at the top so the
// recursive walk does not format messages at each level.
type bsonErr struct{ msg string }

var (
	errShort     = &bsonErr{"document is truncated or its length is inconsistent"}
	errBadLen    = &bsonErr{"invalid document length"}
	errNoEOO     = &bsonErr{"document not terminated with EOO"}
	errKey       = &bsonErr{"element field name is not NUL-terminated"}
	errString    = &bsonErr{"invalid string length or missing NUL terminator"}
	errBadType   = &bsonErr{"unknown BSON element type"}
	errBool      = &bsonErr{"boolean value is neither 0 nor 1"}
	errTooDeep   = &bsonErr{"document nesting is too deep"}
	errBinary    = &bsonErr{"invalid binary data length"}
	errCodeScope = &bsonErr{"invalid code with scope length"}
)

// validateDoc validates the document that must occupy all of b.
func validateDoc(b []byte, depth, maxDepth int) *bsonErr {
	if depth > maxDepth {
		return errTooDeep
	}
	if len(b) < 5 {
		return errShort
	}
	if int(int32(binary.LittleEndian.Uint32(b))) != len(b) {
		return errBadLen
	}
	if b[len(b)-1] != 0 {
		return errNoEOO
	}
	p := b[4 : len(b)-1]
	for len(p) > 0 {
		t := p[0]
		if t == 0 {
			// An EOO before the end of the document.
			return errNoEOO
		}
		k := indexNUL(p[1:])
		if k < 0 {
			return errKey
		}
		p = p[1+k+1:]
		n, err := validValueLen(t, p, depth, maxDepth)
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// validValueLen validates the value of type t at the start of p and returns its length.
func validValueLen(t byte, p []byte, depth, maxDepth int) (int, *bsonErr) {
	fixed := func(n int) (int, *bsonErr) {
		if len(p) < n {
			return 0, errShort
		}
		return n, nil
	}
	switch t {
	case 0x01, 0x09, 0x11, 0x12: // double, datetime, timestamp, int64
		return fixed(8)
	case 0x02, 0x0D, 0x0E: // string, JavaScript code, symbol
		return stringLen(p)
	case 0x03, 0x04: // document, array
		if len(p) < 4 {
			return 0, errShort
		}
		n := int(int32(binary.LittleEndian.Uint32(p)))
		if n < 5 || n > len(p) {
			return 0, errShort
		}
		return n, validateDoc(p[:n], depth+1, maxDepth)
	case 0x05: // binary: int32 length, subtype, bytes
		if len(p) < 5 {
			return 0, errShort
		}
		n := int(int32(binary.LittleEndian.Uint32(p)))
		if n < 0 || n > len(p)-5 {
			return 0, errBinary
		}
		if p[4] == 0x02 { // old binary: an inner length that must be n-4
			if n < 4 || int(int32(binary.LittleEndian.Uint32(p[5:]))) != n-4 {
				return 0, errBinary
			}
		}
		return 5 + n, nil
	case 0x06, 0x0A, 0x7F, 0xFF: // undefined, null, maxKey, minKey
		return 0, nil
	case 0x07: // ObjectId
		return fixed(12)
	case 0x08:
		if len(p) < 1 {
			return 0, errShort
		}
		if p[0] > 1 {
			return 0, errBool
		}
		return 1, nil
	case 0x0B: // regex: pattern cstring, options cstring
		i := indexNUL(p)
		if i < 0 {
			return 0, errString
		}
		j := indexNUL(p[i+1:])
		if j < 0 {
			return 0, errString
		}
		return i + 1 + j + 1, nil
	case 0x0C: // DBPointer: string, ObjectId
		n, err := stringLen(p)
		if err != nil {
			return 0, err
		}
		if len(p)-n < 12 {
			return 0, errShort
		}
		return n + 12, nil
	case 0x0F: // code with scope: int32 total, string, document
		if len(p) < 4 {
			return 0, errShort
		}
		total := int(int32(binary.LittleEndian.Uint32(p)))
		if total < 4+5+5 || total > len(p) {
			return 0, errCodeScope
		}
		q := p[4:total]
		n, err := stringLen(q)
		if err != nil {
			return 0, err
		}
		if err := validateDoc(q[n:], depth+1, maxDepth); err != nil {
			return 0, err
		}
		return total, nil
	case 0x10: // int32
		return fixed(4)
	case 0x13: // decimal128
		return fixed(16)
	default:
		return 0, errBadType
	}
}

// stringLen validates a BSON string (int32 length including the NUL, bytes, NUL).
func stringLen(p []byte) (int, *bsonErr) {
	if len(p) < 4 {
		return 0, errShort
	}
	n := int(int32(binary.LittleEndian.Uint32(p)))
	if n < 1 || n > len(p)-4 || p[4+n-1] != 0 {
		return 0, errString
	}
	return 4 + n, nil
}

// indexNUL returns the index of the first 0 byte in b, or -1.
func indexNUL(b []byte) int { return bytes.IndexByte(b, 0) }
