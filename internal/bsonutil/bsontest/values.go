// Package bsontest builds BSON values for tests: short constructors from Go scalars and a
// random value generator (RandomValue) covering every BSON type, used by the property tests of
// bsonutil (Compare is a total order) and keystring (encoding order equals Compare).
//
// It is a non-test package so other packages' tests can import it; production code must not.
package bsontest

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// The constructors below return self-contained bsoncore.Values (Data is exactly the value).

func Double(f float64) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, f)}
}

func Int32(i int32) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, i)}
}

func Int64(i int64) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, i)}
}

// Decimal parses s ("1.00", "-0", "NaN", "-Infinity", "1E+6144") and panics on a bad literal:
// it is for test tables.
func Decimal(s string) bsoncore.Value {
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		panic("bsontest.Decimal(" + s + "): " + err.Error())
	}
	h, l := d.GetBytes()
	return DecimalBits(h, l)
}

// DecimalBits builds a decimal128 from its raw high and low words.
func DecimalBits(high, low uint64) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeDecimal128, Data: bsoncore.AppendDecimal128(nil, high, low)}
}

func String(s string) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, s)}
}

func Symbol(s string) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeSymbol, Data: bsoncore.AppendSymbol(nil, s)}
}

func Code(s string) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeJavaScript, Data: bsoncore.AppendJavaScript(nil, s)}
}

func CodeWithScope(code string, scope bsoncore.Document) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeCodeWithScope, Data: bsoncore.AppendCodeWithScope(nil, code, scope)}
}

func Binary(subtype byte, b []byte) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeBinary, Data: bsoncore.AppendBinary(nil, subtype, b)}
}

func ObjectID(id [12]byte) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeObjectID, Data: bsoncore.AppendObjectID(nil, id)}
}

func Bool(b bool) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeBoolean, Data: bsoncore.AppendBoolean(nil, b)}
}

// Date is a UTC datetime in milliseconds since the epoch.
func Date(ms int64) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, ms)}
}

func Timestamp(t, i uint32) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeTimestamp, Data: bsoncore.AppendTimestamp(nil, t, i)}
}

func Regex(pattern, options string) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeRegex, Data: bsoncore.AppendRegex(nil, pattern, options)}
}

func DBPointer(ns string, id [12]byte) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeDBPointer, Data: bsoncore.AppendDBPointer(nil, ns, id)}
}

func Null() bsoncore.Value      { return bsoncore.Value{Type: bsoncore.TypeNull} }
func Undefined() bsoncore.Value { return bsoncore.Value{Type: bsoncore.TypeUndefined} }
func MinKey() bsoncore.Value    { return bsoncore.Value{Type: bsoncore.TypeMinKey} }
func MaxKey() bsoncore.Value    { return bsoncore.Value{Type: bsoncore.TypeMaxKey} }

// D builds a document from alternating key (string) and value arguments: D("a", Int32(1),
// "b", D("c", String("x"))). A value is a bsoncore.Value or a bsoncore.Document (appended as
// an embedded document). It panics on a malformed argument list (test helper).
func D(kvs ...any) bsoncore.Document {
	if len(kvs)%2 != 0 {
		panic("bsontest.D: odd number of arguments")
	}
	idx, b := bsoncore.AppendDocumentStart(nil)
	for i := 0; i < len(kvs); i += 2 {
		v, ok := kvs[i+1].(bsoncore.Value)
		if d, isDoc := kvs[i+1].(bsoncore.Document); isDoc {
			v, ok = bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d}, true
		}
		if !ok {
			panic(fmt.Sprintf("bsontest.D: argument %d is %T, not a value", i+1, kvs[i+1]))
		}
		b = bsoncore.AppendValueElement(b, kvs[i].(string), v)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// Doc builds a document value (type embedded document) like D.
func Doc(kvs ...any) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: D(kvs...)}
}

// Arr builds an array value with keys "0", "1", ...
func Arr(vals ...bsoncore.Value) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeArray, Data: bsoncore.BuildArray(nil, vals...)}
}
