package update

import (
	"encoding/hex"
	"humongo/internal/bsonutil"
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// typeName is MongoDB's typeName(BSONType), the spelling used in error messages and $type.
func typeName(t bsoncore.Type) string { return bsonutil.TypeName(t) }

// maxFormatLen bounds the text of one formatted value: error messages quote user documents,
// and a 16 MiB document must not become a 16 MiB error string.
const maxFormatLen = 1024

// formatValue renders v roughly as MongoDB's BSONElement::toString does in error messages:
// {a: 5} for documents built by callers, "{ a: 5 }" for embedded documents, [ 1, 2 ] for
// arrays, strings quoted. Exactness is best effort; malformed bytes print as "<malformed>".
func formatValue(v bsoncore.Value) string {
	var sb strings.Builder
	writeValue(&sb, v, 0)
	s := sb.String()
	if len(s) > maxFormatLen {
		s = s[:maxFormatLen] + "..."
	}
	return s
}

// formatElement renders "name: value".
func formatElement(name string, v bsoncore.Value) string {
	return name + ": " + formatValue(v)
}

// formatDoc renders a whole document as "{ a: 1, b: 2 }".
func formatDoc(d bsoncore.Document) string {
	return formatValue(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d})
}

func writeValue(sb *strings.Builder, v bsoncore.Value, depth int) {
	if sb.Len() > maxFormatLen || depth > 100 {
		sb.WriteString("...")
		return
	}
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
		open, closeS := "{", "}"
		if v.Type == bsoncore.TypeArray {
			open, closeS = "[", "]"
		}
		elems, err := bsoncore.Document(v.Data).Elements()
		if err != nil {
			sb.WriteString("<malformed>")
			return
		}
		if len(elems) == 0 {
			sb.WriteString(open + closeS)
			return
		}
		sb.WriteString(open + " ")
		for i, e := range elems {
			if i > 0 {
				sb.WriteString(", ")
			}
			if v.Type == bsoncore.TypeEmbeddedDocument {
				sb.WriteString(e.Key())
				sb.WriteString(": ")
			}
			writeValue(sb, e.Value(), depth+1)
		}
		sb.WriteString(" " + closeS)
		return
	}
	// Only the OK accessors: bytes that passed validation can still be inconsistent inside
	// (binary subtype 2's inner length), and formatting must never panic.
	switch v.Type {
	case bsoncore.TypeInt32:
		if i, ok := v.Int32OK(); ok {
			sb.WriteString(strconv.FormatInt(int64(i), 10))
			return
		}
	case bsoncore.TypeInt64:
		if i, ok := v.Int64OK(); ok {
			sb.WriteString(strconv.FormatInt(i, 10))
			return
		}
	case bsoncore.TypeDouble:
		if f, ok := v.DoubleOK(); ok {
			if f == math.Trunc(f) && !math.IsInf(f, 0) && math.Abs(f) < 1e15 {
				sb.WriteString(strconv.FormatFloat(f, 'f', 1, 64))
			} else {
				sb.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
			}
			return
		}
	case bsoncore.TypeDecimal128:
		if h, l, ok := v.Decimal128OK(); ok {
			sb.WriteString("NumberDecimal(\"" + bson.NewDecimal128(h, l).String() + "\")")
			return
		}
	case bsoncore.TypeString:
		if str, ok := v.StringValueOK(); ok {
			sb.WriteString(strconv.Quote(str))
			return
		}
	case bsoncore.TypeSymbol:
		if str, ok := v.SymbolOK(); ok {
			sb.WriteString(strconv.Quote(str))
			return
		}
	case bsoncore.TypeBoolean:
		if b, ok := v.BooleanOK(); ok {
			sb.WriteString(strconv.FormatBool(b))
			return
		}
	case bsoncore.TypeNull:
		sb.WriteString("null")
		return
	case bsoncore.TypeUndefined:
		sb.WriteString("undefined")
		return
	case bsoncore.TypeMinKey:
		sb.WriteString("MinKey")
		return
	case bsoncore.TypeMaxKey:
		sb.WriteString("MaxKey")
		return
	case bsoncore.TypeObjectID:
		if id, ok := v.ObjectIDOK(); ok {
			sb.WriteString("ObjectId('" + hex.EncodeToString(id[:]) + "')")
			return
		}
	case bsoncore.TypeDateTime:
		if ms, ok := v.DateTimeOK(); ok {
			sb.WriteString("new Date(" + strconv.FormatInt(ms, 10) + ")")
			return
		}
	case bsoncore.TypeTimestamp:
		if t, i, ok := v.TimestampOK(); ok {
			sb.WriteString("Timestamp(" + strconv.FormatUint(uint64(t), 10) + ", " + strconv.FormatUint(uint64(i), 10) + ")")
			return
		}
	case bsoncore.TypeRegex:
		if p, o, ok := v.RegexOK(); ok {
			sb.WriteString("/" + p + "/" + o)
			return
		}
	case bsoncore.TypeBinary:
		if st, b, ok := v.BinaryOK(); ok {
			sb.WriteString("BinData(" + strconv.Itoa(int(st)) + ", " + hex.EncodeToString(b) + ")")
			return
		}
	case bsoncore.TypeJavaScript:
		if js, ok := v.JavaScriptOK(); ok {
			sb.WriteString("JavaScript(" + strconv.Quote(js) + ")")
			return
		}
	default:
		sb.WriteString(typeName(v.Type))
		return
	}
	sb.WriteString("<malformed>")
}
