package update

import (
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// maxReadDepth bounds the nesting validateBSON accepts (MongoDB's BSONDepth default of 200
// for documents it reads); deeper input is rejected rather than recursed into.
const maxReadDepth = 200

// checkBSON validates a document deeply and returns it cut to its declared length.
// bsoncore's Document.Validate only checks the top level (an embedded document's length
// prefix is trusted), and everything in this package assumes well-formed bytes, so every
// input document passes through here once. It does not allocate on success.
func checkBSON(doc []byte, what string) (bsoncore.Document, error) {
	if err := validateDoc(doc, 0); err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid BSON in %s: %v", what, err)
	}
	return doc[:binary.LittleEndian.Uint32(doc)], nil
}

type bsonError string

func (e bsonError) Error() string { return string(e) }

func validateDoc(doc []byte, depth int) error {
	if depth > maxReadDepth {
		return bsonError("nesting too deep")
	}
	if len(doc) < 5 {
		return bsonError("document too short")
	}
	n := binary.LittleEndian.Uint32(doc)
	if n < 5 || uint64(n) > uint64(len(doc)) || doc[n-1] != 0 {
		return bsonError("bad document length")
	}
	it := doc[4 : n-1]
	for len(it) > 0 {
		e, rest, ok := bsoncore.ReadElement(it)
		if !ok {
			return bsonError("truncated element")
		}
		it = rest
		v := e.Value()
		if err := v.Validate(); err != nil {
			return err
		}
		switch v.Type {
		case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
			if err := validateDoc(v.Data, depth+1); err != nil {
				return err
			}
			if int(binary.LittleEndian.Uint32(v.Data)) != len(v.Data) {
				return bsonError("embedded length mismatch")
			}
		case bsoncore.TypeCodeWithScope:
			_, scope, ok := v.CodeWithScopeOK()
			if !ok {
				return bsonError("bad code with scope")
			}
			if err := validateDoc(scope, depth+1); err != nil {
				return err
			}
		case bsoncore.TypeString, bsoncore.TypeSymbol, bsoncore.TypeJavaScript:
			// Value.Validate checks the length prefix; the terminating NUL must be there too.
			if int32(binary.LittleEndian.Uint32(v.Data)) < 1 || v.Data[len(v.Data)-1] != 0 {
				return bsonError("string not NUL-terminated")
			}
		case 0:
			return bsonError("element with type 0")
		}
	}
	return nil
}
