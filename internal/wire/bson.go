package wire

import (
	"bytes"
	"encoding/binary"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// maxValidateDepth bounds document nesting during validation. MongoDB validates up to
// BSONDepth::kBSONDepthParameterCeiling-ish depths; 200 is its default maxBSONDepth plus
// headroom for the command wrapper. The bound also keeps recursion stack use small on
// hostile input.
const maxValidateDepth = 220

// readDocLen reads the length prefix of a document at the start of b and checks it against
// the bytes available and max. It returns the document's length.
func readDocLen(b []byte, max int, what string) (int, error) {
	if len(b) < 4 {
		return 0, mongoerr.Newf(mongoerr.InvalidBSON, "%s: not enough bytes for a BSON document length (%d)", what, len(b))
	}
	n := int(int32(binary.LittleEndian.Uint32(b)))
	if n < 5 {
		return 0, mongoerr.Newf(mongoerr.InvalidBSON, "%s: BSON document length %d is invalid", what, n)
	}
	if n > max {
		return 0, mongoerr.Newf(mongoerr.BSONObjectTooLarge,
			"BSONObj size: %d (0x%X) is invalid. Size must be between 0 and %d(%dMB)", n, n, max, max>>20)
	}
	if n > len(b) {
		return 0, mongoerr.Newf(mongoerr.InvalidBSON, "%s: BSON document length %d exceeds the %d bytes remaining", what, n, len(b))
	}
	return n, nil
}

// ValidateBSON checks that doc is exactly one well-formed BSON document, recursively (see
// bsonutil.Validate), allowing maxValidateDepth levels of nesting.
func ValidateBSON(doc []byte) error { return bsonutil.Validate(doc, maxValidateDepth) }

// indexNUL returns the index of the first 0 byte in b, or -1.
func indexNUL(b []byte) int { return bytes.IndexByte(b, 0) }
