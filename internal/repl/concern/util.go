package concern

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

func lookup(d bsoncore.Document, key string) bsoncore.Value {
	v, err := d.LookupErr(key)
	if err != nil {
		return bsoncore.Value{}
	}
	return v
}

// typeMismatch is the IDL parser's error for a field of the wrong type.
func typeMismatch(cmdName, field string, got bsoncore.Type, want ...string) error {
	s := ""
	if len(want) > 1 {
		s = "s"
	}
	return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type%s '%s'",
		cmdName, field, bsonutil.TypeName(got), s, strings.Join(want, ", "))
}

// truthy is BSON truthiness for numeric and boolean options.
func truthy(v bsoncore.Value) bool {
	if v.Type == bsoncore.TypeBoolean {
		return v.Boolean()
	}
	return asFloat(v) != 0
}

func tsString(ts uint64) string {
	return "Timestamp(" + strconv.FormatUint(ts>>32, 10) + ", " + strconv.FormatUint(uint64(uint32(ts)), 10) + ")"
}

// asFloat is a numeric value as a float64 (0 for non-numbers).
func asFloat(v bsoncore.Value) float64 {
	f, _ := bsonutil.ToFloat64(v)
	return f
}

func typeName(t bsoncore.Type) string { return bsonutil.TypeName(t) }
