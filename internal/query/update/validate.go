package update

import (
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// maxReadDepth bounds the nesting accepted in input documents (MongoDB's BSONDepth default of
// 200 for documents it reads); deeper input is rejected rather than recursed into.
const maxReadDepth = 200

// checkBSON validates a document deeply and returns it cut to its declared length.
// Everything in this package assumes well-formed bytes, so every input document passes through
// here once. It does not allocate on success.
func checkBSON(doc []byte, what string) (bsoncore.Document, error) {
	if len(doc) < 5 {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid BSON in %s: document too short", what)
	}
	n := binary.LittleEndian.Uint32(doc)
	if n < 5 || uint64(n) > uint64(len(doc)) {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid BSON in %s: bad document length", what)
	}
	if err := bsonutil.Validate(doc[:n], maxReadDepth); err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid BSON in %s: %v", what, err)
	}
	return doc[:n], nil
}
