package expr

import (
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/collation"
	"humongo/internal/mongoerr"
)

type (
	value = bsoncore.Value
	expr  = Expression
)

// Shared values, never modified. Missing is the zero Value: a field or result that is absent
// (unlike Null).
var (
	Missing  = bsoncore.Value{}
	Null     = bsoncore.Value{Type: bsoncore.TypeNull}
	True     = Bool(true)
	False    = Bool(false)
	EmptyDoc = bsoncore.Document{5, 0, 0, 0, 0}
)

// Value constructors. Array turns missing elements into null, as an array literal does.
func Bool(b bool) value {
	return value{Type: bsoncore.TypeBoolean, Data: bsoncore.AppendBoolean(nil, b)}
}
func Int32(i int32) value { return value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, i)} }
func Int64(i int64) value { return value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, i)} }
func Double(f float64) value {
	return value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, f)}
}
func String(s string) value {
	return value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, s)}
}
func Date(ms int64) value {
	return value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, ms)}
}
func Doc(d bsoncore.Document) value { return value{Type: bsoncore.TypeEmbeddedDocument, Data: d} }
func Array(vs []value) value {
	for i := range vs {
		if vs[i].Type == 0 {
			vs[i] = Null
		}
	}
	return value{Type: bsoncore.TypeArray, Data: bsoncore.BuildArray(nil, vs...)}
}

// Int is the narrowest integer type holding i (int32 when it fits, as MongoDB's counts).
func Int(i int64) value {
	if i >= math.MinInt32 && i <= math.MaxInt32 {
		return Int32(int32(i))
	}
	return Int64(i)
}

// IsNullish reports missing, null and undefined: the values most operators answer null for.
func IsNullish(v value) bool {
	return v.Type == 0 || v.Type == bsoncore.TypeNull || v.Type == bsoncore.TypeUndefined
}

// IsNumber reports int, long, double and decimal.
func IsNumber(v value) bool { return bsonutil.IsNumber(v.Type) }

// EvalCollator is the collator of an evaluation (nil: binary).
func EvalCollator(ec *EvalContext) *collation.Collator {
	if ec == nil {
		return nil
	}
	c, _ := ec.Collator.(*collation.Collator)
	return c
}

// CollKey is v with every string replaced by its collation sort key, for building the
// KeyStrings that group, deduplicate, join and partition by value: two values get the same
// key exactly when they compare equal under c. Without a collator it is v.
func CollKey(c *collation.Collator, v value) value {
	if c == nil {
		return v
	}
	k, _ := c.AppendValueKey(nil, v)
	return k
}

// Truthy is coerceToBool.
func Truthy(v value) bool {
	switch v.Type {
	case 0, bsoncore.TypeNull, bsoncore.TypeUndefined:
		return false
	case bsoncore.TypeBoolean:
		return v.Boolean()
	}
	if IsNumber(v) {
		f, _ := bsonutil.ToFloat64(v)
		if v.Type == bsoncore.TypeDecimal128 {
			d, err := ToDecimal(v)
			return err != nil || !d.IsZero()
		}
		return f != 0
	}
	return true
}

// TypeName is MongoDB's name for v's type ("missing" for the zero Value).
func TypeName(v value) string { return bsonutil.TypeName(v.Type) }

// ArrayValues returns an array's elements; malformed bytes are an error, never a panic.
func ArrayValues(v value) ([]value, error) {
	vals, err := bsoncore.Array(v.Data).Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid array: %v", err)
	}
	return vals, nil
}

// DocElems returns a document's elements.
func DocElems(d bsoncore.Document) ([]bsoncore.Element, error) {
	els, err := d.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid document: %v", err)
	}
	return els, nil
}

// Field is the top-level field name of doc (missing when absent or malformed).
func Field(doc bsoncore.Document, name string) value {
	v, err := doc.LookupErr(name)
	if err != nil {
		return Missing
	}
	return v
}

// evalPath is ExpressionFieldPath's traversal: documents are entered by field; arrays map the
// rest of the path over their elements, keeping the results that are not missing (nested
// arrays are traversed recursively; scalars are dropped).
func evalPath(v value, path []string) value {
	for i, p := range path {
		switch v.Type {
		case bsoncore.TypeEmbeddedDocument:
			v = Field(v.Data, p)
			if v.Type == 0 {
				return Missing
			}
		case bsoncore.TypeArray:
			vals, err := ArrayValues(v)
			if err != nil {
				return Missing
			}
			out := make([]value, 0, len(vals))
			for _, e := range vals {
				if e.Type != bsoncore.TypeEmbeddedDocument && e.Type != bsoncore.TypeArray {
					continue
				}
				if r := evalPath(e, path[i:]); r.Type != 0 {
					out = append(out, r)
				}
			}
			return value{Type: bsoncore.TypeArray, Data: bsoncore.BuildArray(nil, out...)}
		default:
			return Missing
		}
	}
	return v
}

// DocBuilder appends elements to a document under construction.
type DocBuilder struct {
	idx int32
	b   []byte
}

// NewDoc starts a document.
func NewDoc() *DocBuilder {
	d := &DocBuilder{}
	d.idx, d.b = bsoncore.AppendDocumentStart(nil)
	return d
}

// Add appends field k; a missing v is left out.
func (d *DocBuilder) Add(k string, v value) {
	if v.Type == 0 {
		return
	}
	if i := strings.IndexByte(k, 0); i >= 0 {
		// Field names come from validated specs (splitFieldPath rejects NUL); a NUL here is a
		// missed check, and bsoncore would panic on it. Keep the name's valid prefix instead.
		k = k[:i]
	}
	d.b = bsoncore.AppendValueElement(d.b, k, v)
}

// AddElement appends a raw element as it is.
func (d *DocBuilder) AddElement(el bsoncore.Element) { d.b = append(d.b, el...) }

// Len is the size in bytes of the document so far.
func (d *DocBuilder) Len() int { return len(d.b) }

// Done returns the document.
func (d *DocBuilder) Done() bsoncore.Document {
	b, _ := bsoncore.AppendDocumentEnd(d.b, d.idx)
	return b
}

// DocOf builds a document from alternating keys and values.
func DocOf(kv ...any) bsoncore.Document {
	d := NewDoc()
	for i := 0; i+1 < len(kv); i += 2 {
		d.Add(kv[i].(string), kv[i+1].(value))
	}
	return d.Done()
}

// SetField returns doc with top-level field k replaced (in place) or appended; a missing v
// removes it.
func SetField(doc bsoncore.Document, k string, v value) bsoncore.Document {
	d := NewDoc()
	found := false
	els, _ := doc.Elements()
	for _, el := range els {
		if el.Key() == k {
			if !found {
				d.Add(k, v)
				found = true
			}
			continue
		}
		d.AddElement(el)
	}
	if !found {
		d.Add(k, v)
	}
	return d.Done()
}

// GetPath evaluates a dotted path as an aggregation field path ("$a.b"): arrays map the rest
// of the path over their elements.
func GetPath(doc bsoncore.Document, path []string) value {
	return evalPath(Doc(doc), path)
}

// OrNull is v, with missing as null.
func OrNull(v value) value {
	if v.Type == 0 {
		return Null
	}
	return v
}

// SplitFieldPath validates and splits a field path given without "$".
func SplitFieldPath(p string) ([]string, error) {
	parts, err := bsonutil.SplitPath(p)
	if err != nil {
		return nil, err
	}
	for _, c := range parts {
		if strings.HasPrefix(c, "$") {
			return nil, mongoerr.Newf(mongoerr.Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
	}
	return parts, nil
}

// ValueSize is the memory a value is accounted for.
func ValueSize(v value) int64 { return int64(len(v.Data)) + 16 }

// ComparerOf turns a collator into a bsonutil.StringComparer without wrapping a nil pointer.
func ComparerOf(c *collation.Collator) bsonutil.StringComparer {
	if c == nil {
		return nil
	}
	return c
}

// IsOperatorDoc reports a document whose first field starts with "$" ({$op: ...}).
func IsOperatorDoc(v value) bool {
	d, ok := v.DocumentOK()
	if !ok {
		return false
	}
	els, err := d.Elements()
	return err == nil && len(els) > 0 && strings.HasPrefix(els[0].Key(), "$")
}

// CheckVarName applies MongoDB's rule for user variable names that are defined ($let, "as",
// "let"): variable_validation.cpp's validateNameForUserWrite.
func CheckVarName(n string) error {
	if n == "CURRENT" {
		return nil
	}
	return checkVarName(n, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 0x80 })
}

// CheckVarNameRead is the rule for a referenced variable ("$$name"): validateNameForUserRead,
// which also allows an upper-case first letter (ROOT, CURRENT, NOW...).
func CheckVarNameRead(n string) error {
	return checkVarName(n, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 })
}

func checkVarName(n string, first func(byte) bool) error {
	if n == "" {
		return mongoerr.New(mongoerr.FailedToParse, "empty variable names are not allowed")
	}
	if !first(n[0]) {
		return mongoerr.Newf(mongoerr.FailedToParse, "'%s' starts with an invalid character for a user variable name", n)
	}
	for i := 1; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80) {
			return mongoerr.Newf(mongoerr.FailedToParse, "'%s' contains an invalid character for a variable name: '%c'", n, c)
		}
	}
	return nil
}
