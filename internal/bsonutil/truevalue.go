package bsonutil

import "go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

// TrueValue is BSONElement::trueValue: false, null, undefined, missing and numeric zero are
// false; every other value is true.
func TrueValue(v bsoncore.Value) bool {
	switch v.Type {
	case 0, bsoncore.TypeNull, bsoncore.TypeUndefined:
		return false
	case bsoncore.TypeBoolean:
		b, ok := v.BooleanOK()
		return ok && b
	}
	if IsNumber(v.Type) {
		f, ok := ToFloat64(v)
		return ok && f != 0 // NaN is true, as in MongoDB
	}
	return true
}
