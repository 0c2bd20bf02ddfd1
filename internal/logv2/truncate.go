package logv2

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// DefaultMaxAttributeSizeKB is the maxLogSizeKB server parameter's default: a logged attribute
// is cut after this many KB of JSON.
const DefaultMaxAttributeSizeKB = 10

// Attribute truncation follows MongoDB's JSON formatter (src/mongo/logv2/json_formatter.cpp
// and BSONElement::jsonStringGenerator): a BSON attribute is written element by element until
// its JSON passes the limit; the element that passed it is taken back and every enclosing
// object and array is closed there. The line then carries, after "attr", a "truncated"
// object naming the path to the element that was cut, with its type and BSON value size, and
// a "size" object with the whole attribute's BSON size:
//
//	"attr":{"command":{"insert":"c","documents":[{"_id":0},...]}},
//	"truncated":{"command":{"documents":{"155":{"_id":{"type":"int","size":4}}}}},
//	"size":{"command":2201234}
//
// A string attribute is cut at the limit (on a UTF-8 boundary) and reported as
// {"type":"string","size":<escaped length>}, with no "size" entry.

// truncation collects one record's truncation report.
type truncation struct {
	limit int // bytes per attribute; 0: no truncation
	cut   []byte
	sizes []byte
}

func (t *truncation) report(name string, path bsoncore.Document, size int64) {
	if t.cut == nil {
		_, t.cut = bsoncore.AppendDocumentStart(nil)
		_, t.sizes = bsoncore.AppendDocumentStart(nil)
	}
	t.cut = bsoncore.AppendDocumentElement(t.cut, name, path)
	if size >= 0 {
		t.sizes = bsoncore.AppendInt64Element(t.sizes, name, size)
	}
}

// appendTo appends the report fields, if anything was cut.
func (t *truncation) appendTo(b []byte) []byte {
	if t == nil || t.cut == nil {
		return b
	}
	cut, _ := bsoncore.AppendDocumentEnd(t.cut, 0)
	sizes, _ := bsoncore.AppendDocumentEnd(t.sizes, 0)
	b = append(b, `,"truncated":`...)
	j, _ := bson.MarshalExtJSON(bson.Raw(cut), false, false)
	b = append(b, j...)
	if len(sizes) > 5 {
		b = append(b, `,"size":`...)
		j, _ = bson.MarshalExtJSON(bson.Raw(sizes), false, false)
		b = append(b, j...)
	}
	return b
}

// appendBSONAttr appends doc (an attribute named name) as relaxed Extended JSON, truncated
// at t.limit bytes.
func appendBSONAttr(b []byte, name string, doc bsoncore.Document, t *truncation) []byte {
	if err := doc.Validate(); err != nil {
		return appendString(b, "invalid BSON: "+err.Error())
	}
	limit := 0
	if t != nil && t.limit > 0 {
		limit = len(b) + t.limit
	}
	b, cut := appendDocJSON(b, doc, false, limit)
	if cut != nil {
		t.report(name, cut, int64(len(doc)))
	}
	return b
}

// appendDocJSON writes doc (an array when isArray) and returns the path of the element cut at
// limit (an absolute length of b; 0: none), or nil.
func appendDocJSON(b []byte, doc bsoncore.Document, isArray bool, limit int) ([]byte, bsoncore.Document) {
	open, closing := byte('{'), byte('}')
	if isArray {
		open, closing = '[', ']'
	}
	b = append(b, open)
	elems, _ := doc.Elements()
	var cut bsoncore.Document
	for i, e := range elems {
		b, cut = appendElemJSON(b, e, i > 0, !isArray, limit)
		if cut != nil {
			break
		}
	}
	return append(b, closing), cut
}

func appendElemJSON(b []byte, e bsoncore.Element, sep, withName bool, limit int) ([]byte, bsoncore.Document) {
	before := len(b)
	if sep {
		b = append(b, ',')
	}
	if withName {
		b = appendString(b, e.Key())
		b = append(b, ':')
	}
	v := e.Value()
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
		sub, cut := appendDocJSON(b, bsoncore.Document(v.Data), v.Type == bsoncore.TypeArray, limit)
		if cut != nil {
			return sub, bsoncore.NewDocumentBuilder().AppendDocument(e.Key(), cut).Build()
		}
		return sub, nil
	case bsoncore.TypeString:
		s := v.StringValue()
		if limit > 0 && len(b)+len(s)+2 > limit {
			// Its JSON is at least this long: it would be taken back.
			return b[:before], cutReport(e.Key(), v)
		}
		b = appendString(b, s)
	case bsoncore.TypeInt32:
		b = appendInt(b, int64(v.Int32()))
	case bsoncore.TypeInt64:
		b = appendInt(b, v.Int64())
	case bsoncore.TypeBoolean:
		if v.Boolean() {
			b = append(b, "true"...)
		} else {
			b = append(b, "false"...)
		}
	case bsoncore.TypeNull:
		b = append(b, "null"...)
	case bsoncore.TypeBinary, bsoncore.TypeJavaScript, bsoncore.TypeSymbol:
		// Their JSON is longer than their BSON value: a large one need not be written to
		// be taken back.
		if limit > 0 && len(b)+len(v.Data) > limit {
			return b[:before], cutReport(e.Key(), v)
		}
		b = appendValueExtJSON(b, v)
	default:
		b = appendValueExtJSON(b, v)
	}
	if limit > 0 && len(b) > limit {
		return b[:before], cutReport(e.Key(), v)
	}
	return b, nil
}

// appendValueExtJSON appends the relaxed Extended JSON of any other value, as the driver
// writes it.
func appendValueExtJSON(b []byte, v bsoncore.Value) []byte {
	doc := bsoncore.NewDocumentBuilder().AppendValue("", v).Build()
	j, err := bson.MarshalExtJSON(bson.Raw(doc), false, false)
	if err != nil {
		return appendString(b, err.Error())
	}
	// j is {"":<value>}.
	const prefix = `{"":`
	if len(j) < len(prefix)+1 || string(j[:len(prefix)]) != prefix {
		return append(b, j...)
	}
	return append(b, j[len(prefix):len(j)-1]...)
}

func cutReport(key string, v bsoncore.Value) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendDocument(key, bsoncore.NewDocumentBuilder().
		AppendString("type", typeName(v.Type)).AppendInt32("size", int32(len(v.Data))).Build()).Build()
}

// typeNames are MongoDB's typeName(BSONType) spellings.
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

func typeName(t bsoncore.Type) string {
	if n := typeNames[byte(t)]; n != "" {
		return n
	}
	return "invalid"
}

// appendTruncatedString appends s as a JSON string whose escaped contents are cut at t.limit
// bytes on a UTF-8 boundary, reporting the cut under name.
func appendTruncatedString(b []byte, name, s string, t *truncation) []byte {
	if t == nil || t.limit <= 0 || len(s) <= t.limit/6 {
		// Even fully escaped (\u00XX) it fits.
		return appendString(b, s)
	}
	start := len(b)
	b = appendString(b, s)
	body := len(b) - start - 2 // escaped contents, without the quotes
	if body <= t.limit {
		return b
	}
	end := start + 1 + t.limit
	// Step back off a UTF-8 continuation byte and off a partial escape sequence.
	for end > start+1 && b[end]&0xC0 == 0x80 {
		end--
	}
	if i := lastEscapeStart(b[start+1 : end]); i >= 0 {
		end = start + 1 + i
	}
	b = append(b[:end], '"')
	t.report(name, bsoncore.NewDocumentBuilder().AppendString("type", "string").
		AppendInt64("size", int64(body)).Build(), -1)
	return b
}

// lastEscapeStart returns the index of a backslash escape cut short at the end of s, or -1.
func lastEscapeStart(s []byte) int {
	for i := len(s) - 1; i >= 0 && i >= len(s)-6; i-- {
		if s[i] != '\\' {
			continue
		}
		// Count the backslashes before it: an even run means s[i] starts an escape.
		n := 0
		for j := i; j >= 0 && s[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			continue // s[i] is the escaped character of "\\"
		}
		need := 2
		if i+1 < len(s) && s[i+1] == 'u' {
			need = 6
		}
		if len(s)-i < need {
			return i
		}
		return -1
	}
	return -1
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }
