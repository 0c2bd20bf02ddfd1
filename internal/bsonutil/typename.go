package bsonutil

import "go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

// typeNames are MongoDB's spellings of BSON types (typeName(BSONType)): the $type aliases, and
// the names error messages and $type use.
var typeNames = [256]string{
	bsoncore.TypeDouble: "double", bsoncore.TypeString: "string", bsoncore.TypeEmbeddedDocument: "object",
	bsoncore.TypeArray: "array", bsoncore.TypeBinary: "binData", bsoncore.TypeUndefined: "undefined",
	bsoncore.TypeObjectID: "objectId", bsoncore.TypeBoolean: "bool", bsoncore.TypeDateTime: "date",
	bsoncore.TypeNull: "null", bsoncore.TypeRegex: "regex", bsoncore.TypeDBPointer: "dbPointer",
	bsoncore.TypeJavaScript: "javascript", bsoncore.TypeSymbol: "symbol",
	bsoncore.TypeCodeWithScope: "javascriptWithScope", bsoncore.TypeInt32: "int",
	bsoncore.TypeTimestamp: "timestamp", bsoncore.TypeInt64: "long", bsoncore.TypeDecimal128: "decimal",
	bsoncore.TypeMinKey: "minKey", bsoncore.TypeMaxKey: "maxKey",
}

// TypeName returns MongoDB's name for t: "double", "string", "object", ..., "missing" for the
// zero type (a missing field) and "invalid" for a byte that is no BSON type.
func TypeName(t bsoncore.Type) string {
	if t == 0 {
		return "missing"
	}
	if n := typeNames[byte(t)]; n != "" {
		return n
	}
	return "invalid"
}

// TypeByName returns the BSON type MongoDB names alias ("double", "objectId", ...). The $type
// alias "number", which stands for several types, is not a single type and is not accepted.
func TypeByName(alias string) (bsoncore.Type, bool) {
	for t, n := range typeNames {
		if n == alias && n != "" {
			return bsoncore.Type(t), true
		}
	}
	return 0, false
}
