package commands

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// Location codes used by these commands that mongoerr does not name yet. They are kept in this
// one block so moving them into mongoerr is a one-line change each (reported to the lead).
const (
	codeUnknownField = mongoerr.Location40415 // IDL: unknown field
	codeMissingField = mongoerr.Location40414 // IDL: required field missing
)

// truthy reports whether v counts as true the way BSONElement::trueValue does.
func truthy(v bsoncore.Value) bool {
	switch v.Type {
	case bsoncore.TypeBoolean:
		return v.Boolean()
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		f, _ := service.AsFloat(v)
		return f != 0
	case bsoncore.TypeNull, bsoncore.TypeUndefined, 0:
		return false
	}
	return true
}

// lookup returns the top-level field key of cmd (Type 0 when absent).
func lookup(cmd bsoncore.Document, key string) bsoncore.Value {
	v, err := cmd.LookupErr(key)
	if err != nil {
		return bsoncore.Value{}
	}
	return v
}

// commandArg returns the value of the command's first element (the `1` in {ping: 1}).
func commandArg(cmd bsoncore.Document) bsoncore.Value {
	e, err := cmd.IndexErr(0)
	if err != nil {
		return bsoncore.Value{}
	}
	return e.Value()
}

// typeMismatch is the error IDL parsers give for a field of the wrong type: one type
// (IDLParserContext::checkAndAssertTypeSlowPath) or several (throwBadType, whose list is
// bracketed with the closing quote inside: "expected types '[long, int, decimal, double']").
func typeMismatch(cmdName, field string, got bsoncore.Type, want ...string) error {
	if len(want) > 1 {
		return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected types '[%s']",
			cmdName, field, bsonutil.TypeName(got), strings.Join(want, ", "))
	}
	return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type '%s'",
		cmdName, field, bsonutil.TypeName(got), strings.Join(want, ", "))
}

func plural(n int) string {
	if n > 1 {
		return "s"
	}
	return ""
}

// intArg parses a numeric field as an integer, as IDL "safeInt64" fields do: any number type,
// read with BSONElement::safeNumberLong (a fraction is truncated, NaN is 0 and values out of
// range saturate).
func intArg(cmdName, field string, v bsoncore.Value) (int64, error) {
	return service.IntArg(cmdName, field, v)
}

// checkStrict rejects top-level fields that are neither the command name, a generic argument
// nor one of known, the way IDL "strict" commands do, and a known field given twice
// (IDLParserContext::throwDuplicateField).
func checkStrict(cmd bsoncore.Document, name string, known ...string) error {
	elems, err := cmd.Elements()
	if err != nil {
		return mongoerr.Newf(mongoerr.InvalidBSON, "invalid command document: %v", err)
	}
	var seen map[string]bool
outer:
	for i, e := range elems {
		k := e.Key()
		if i == 0 || service.GenericArguments[k] {
			continue
		}
		for _, kn := range known {
			if k == kn {
				if seen[k] {
					return mongoerr.Newf(mongoerr.Location40413, "BSON field '%s.%s' is a duplicate field", name, k)
				}
				if seen == nil {
					seen = map[string]bool{}
				}
				seen[k] = true
				continue outer
			}
		}
		return mongoerr.Newf(codeUnknownField, "BSON field '%s.%s' is an unknown field.", name, k)
	}
	return nil
}

// appendStrings appends an array element of strings.
func appendStrings(b []byte, key string, ss []string) []byte {
	idx, b := bsoncore.AppendArrayElementStart(b, key)
	for i, s := range ss {
		b = bsoncore.AppendStringElement(b, itoa(int64(i)), s)
	}
	b, _ = bsoncore.AppendArrayEnd(b, idx)
	return b
}

// doc wraps appended elements into a document.
func doc(fill func(b []byte) []byte) bsoncore.Document {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = fill(b)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// emptyDoc is a reply with no fields besides the `ok` the server appends.
var emptyDoc = service.EmptyDoc

// itoa formats array indexes and ids as BSON array keys and names.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// requiredField is an IDL-parsed internal command's required field of type t: 40414 when
// missing, TypeMismatch when of another type.
func requiredField(cmd bsoncore.Document, name, field string, t bsoncore.Type) (bsoncore.Value, error) {
	v := lookup(cmd, field)
	if v.Type == 0 {
		return v, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.%s' is missing but a required field", name, field)
	}
	if v.Type != t {
		return v, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s'", name, field, v.Type)
	}
	return v, nil
}
