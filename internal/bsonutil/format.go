package bsonutil

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// FormatDoc renders doc the way MongoDB's BSONObj::toString does in error messages such as
// E11000's "dup key: { a: 1 }": `{ name: value, ... }`, strings double-quoted, ObjectId('…'),
// new Date(ms), doubles with a decimal point.
func FormatDoc(doc bsoncore.Document) string {
	var b strings.Builder
	formatDoc(&b, doc, false, 0)
	return b.String()
}

func formatDoc(b *strings.Builder, doc []byte, isArray bool, depth int) {
	open, close := "{", "}"
	if isArray {
		open, close = "[", "]"
	}
	elems, err := bsoncore.Document(doc).Elements()
	if err != nil {
		b.WriteString("<corrupt>")
		return
	}
	b.WriteString(open)
	first := true
	for _, e := range elems {
		name, v := e.Key(), e.Value()
		if first {
			b.WriteString(" ")
			first = false
		} else {
			b.WriteString(", ")
		}
		if !isArray {
			b.WriteString(name)
			b.WriteString(": ")
		}
		formatValue(b, v, depth+1)
	}
	if !first {
		b.WriteString(" ")
	}
	b.WriteString(close)
}

func formatValue(b *strings.Builder, v bsoncore.Value, depth int) {
	if depth > 100 {
		b.WriteString("...")
		return
	}
	switch v.Type {
	case bsoncore.TypeDouble:
		f, ok := v.DoubleOK()
		if !ok {
			b.WriteString("<corrupt>")
			return
		}
		switch {
		case math.IsNaN(f):
			b.WriteString("nan.0")
		case math.IsInf(f, 1):
			b.WriteString("inf.0")
		case math.IsInf(f, -1):
			b.WriteString("-inf.0")
		case f == math.Trunc(f) && math.Abs(f) < 1e15:
			b.WriteString(strconv.FormatFloat(f, 'f', 1, 64))
		default:
			b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		}
	case bsoncore.TypeInt32:
		n, _ := v.Int32OK()
		b.WriteString(strconv.FormatInt(int64(n), 10))
	case bsoncore.TypeInt64:
		n, _ := v.Int64OK()
		b.WriteString(strconv.FormatInt(n, 10))
	case bsoncore.TypeDecimal128:
		hi, lo, ok := v.Decimal128OK()
		if !ok {
			b.WriteString("<corrupt>")
			return
		}
		b.WriteString(`NumberDecimal("` + bson.NewDecimal128(hi, lo).String() + `")`)
	case bsoncore.TypeString, bsoncore.TypeSymbol:
		s, _ := v.StringValueOK()
		if v.Type == bsoncore.TypeSymbol {
			s, _ = v.SymbolOK()
		}
		b.WriteString(strconv.Quote(s))
	case bsoncore.TypeEmbeddedDocument:
		formatDoc(b, v.Data, false, depth)
	case bsoncore.TypeArray:
		formatDoc(b, v.Data, true, depth)
	case bsoncore.TypeObjectID:
		oid, ok := v.ObjectIDOK()
		if !ok {
			b.WriteString("<corrupt>")
			return
		}
		b.WriteString("ObjectId('" + hex.EncodeToString(oid[:]) + "')")
	case bsoncore.TypeBoolean:
		t, _ := v.BooleanOK()
		b.WriteString(strconv.FormatBool(t))
	case bsoncore.TypeDateTime:
		ms, _ := v.DateTimeOK()
		b.WriteString("new Date(" + strconv.FormatInt(ms, 10) + ")")
	case bsoncore.TypeNull:
		b.WriteString("null")
	case bsoncore.TypeUndefined:
		b.WriteString("undefined")
	case bsoncore.TypeMinKey:
		b.WriteString("MinKey")
	case bsoncore.TypeMaxKey:
		b.WriteString("MaxKey")
	case bsoncore.TypeTimestamp:
		t, i, _ := v.TimestampOK()
		b.WriteString("Timestamp(" + strconv.FormatUint(uint64(t), 10) + ", " + strconv.FormatUint(uint64(i), 10) + ")")
	case bsoncore.TypeBinary:
		st, data, ok := v.BinaryOK()
		if !ok {
			b.WriteString("<corrupt>")
			return
		}
		b.WriteString("BinData(" + strconv.Itoa(int(st)) + ", " + strings.ToUpper(hex.EncodeToString(data)) + ")")
	case bsoncore.TypeRegex:
		p, o, _ := v.RegexOK()
		b.WriteString("/" + p + "/" + o)
	default:
		b.WriteString(v.String())
	}
}

// FormatElement renders one element as MongoDB's BSONElement::toString does ("name: value"),
// as messages such as "bit positions must be >= 0 but got: 0: -1" print it.
func FormatElement(name string, v bsoncore.Value) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteString(": ")
	formatValue(&b, v, 0)
	return b.String()
}
