package index

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
)

// FormatDoc renders doc the way MongoDB's BSONObj::toString does in error messages such as
// E11000's "dup key: { a: 1 }" (bsonutil.FormatDoc, where catalog's messages can reach it too).
func FormatDoc(doc bsoncore.Document) string { return bsonutil.FormatDoc(doc) }
