package agg

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/collation"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
)

type (
	value = bsoncore.Value
	expr  = query.Expression
)

var (
	missing  = bsoncore.Value{}
	nullV    = bsoncore.Value{Type: bsoncore.TypeNull}
	trueV    = boolV(true)
	falseV   = boolV(false)
	emptyDoc = bsoncore.Document{5, 0, 0, 0, 0}
)

func boolV(b bool) value {
	return value{Type: bsoncore.TypeBoolean, Data: bsoncore.AppendBoolean(nil, b)}
}
func i32V(i int32) value { return value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, i)} }
func i64V(i int64) value { return value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, i)} }
func f64V(f float64) value {
	return value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, f)}
}
func strV(s string) value {
	return value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, s)}
}
func dateV(ms int64) value {
	return value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, ms)}
}
func docV(d bsoncore.Document) value { return value{Type: bsoncore.TypeEmbeddedDocument, Data: d} }
func arrV(vs []value) value {
	for i := range vs {
		if vs[i].Type == 0 {
			vs[i] = nullV
		}
	}
	return value{Type: bsoncore.TypeArray, Data: bsoncore.BuildArray(nil, vs...)}
}

// intV is the narrowest integer type holding i (int32 when it fits, as MongoDB's counts).
func intV(i int64) value {
	if i >= math.MinInt32 && i <= math.MaxInt32 {
		return i32V(int32(i))
	}
	return i64V(i)
}

// orNull is v, with missing as null.
func orNull(v value) value {
	if v.Type == 0 {
		return nullV
	}
	return v
}

func isNullish(v value) bool {
	return v.Type == 0 || v.Type == bsoncore.TypeNull || v.Type == bsoncore.TypeUndefined
}

func isNumber(v value) bool { return bsonutil.IsNumber(v.Type) }

// cmpV is aggregation's Value::compare (missing sorts with undefined, below null).
func cmpV(a, b value) int {
	if a.Type == 0 {
		a = value{Type: bsoncore.TypeUndefined}
	}
	if b.Type == 0 {
		b = value{Type: bsoncore.TypeUndefined}
	}
	return bsonutil.Compare(a, b)
}

// cmpC is cmpV under the collation sc (nil: binary), for run-time comparisons that see an
// EvalContext (ec.Collator) or a runCtx.
func cmpC(a, b value, sc query.Collator) int { return query.CompareAgg(a, b, sc) }

// ecColl is the collator of an evaluation (nil: binary).
func ecColl(ec *query.EvalContext) *collation.Collator {
	if ec == nil {
		return nil
	}
	c, _ := ec.Collator.(*collation.Collator)
	return c
}

// collKey is v with every string replaced by its collation sort key, for building the
// KeyStrings that group, deduplicate, join and partition by value: two values get the same
// key exactly when they compare equal under c. Without a collator it is v.
func collKey(c *collation.Collator, v value) value {
	if c == nil {
		return v
	}
	k, _ := c.AppendValueKey(nil, v)
	return k
}

// collOf turns a runCtx collator into a query.Collator without wrapping a nil pointer.
func collOf(c *collation.Collator) query.Collator {
	if c == nil {
		return nil
	}
	return c
}

// matchOpts sets the collation of a matcher's options.
func matchOpts(o query.ParseOptions, c *collation.Collator) query.ParseOptions {
	if c != nil {
		o.Collator = c
	}
	return o
}

// truthy is coerceToBool.
func truthy(v value) bool {
	switch v.Type {
	case 0, bsoncore.TypeNull, bsoncore.TypeUndefined:
		return false
	case bsoncore.TypeBoolean:
		return v.Boolean()
	}
	if isNumber(v) {
		f, _ := bsonutil.ToFloat64(v)
		if v.Type == bsoncore.TypeDecimal128 {
			d, err := toDec(v)
			return err != nil || !d.IsZero()
		}
		return f != 0
	}
	return true
}

// typeName is MongoDB's name for v's type ("missing" for the zero Value).
func typeName(v value) string { return bsonutil.TypeName(v.Type) }

// arrValues returns an array's elements; malformed bytes are an error, never a panic.
func arrValues(v value) ([]value, error) {
	vals, err := bsoncore.Array(v.Data).Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid array: %v", err)
	}
	return vals, nil
}

// docElems returns a document's elements.
func docElems(d bsoncore.Document) ([]bsoncore.Element, error) {
	els, err := d.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid document: %v", err)
	}
	return els, nil
}

// field is the top-level field name of doc (missing when absent or malformed).
func field(doc bsoncore.Document, name string) value {
	v, err := doc.LookupErr(name)
	if err != nil {
		return missing
	}
	return v
}

// getPath evaluates a dotted path as an aggregation field path ("$a.b"): arrays map the rest
// of the path over their elements.
func getPath(doc bsoncore.Document, path []string) value {
	return evalPath(docV(doc), path)
}

func evalPath(v value, path []string) value {
	for i, p := range path {
		switch v.Type {
		case bsoncore.TypeEmbeddedDocument:
			v = field(v.Data, p)
			if v.Type == 0 {
				return missing
			}
		case bsoncore.TypeArray:
			vals, err := arrValues(v)
			if err != nil {
				return missing
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
			return missing
		}
	}
	return v
}

// docBuilder appends elements to a document under construction.
type docBuilder struct {
	idx int32
	b   []byte
}

func newDoc() *docBuilder {
	d := &docBuilder{}
	d.idx, d.b = bsoncore.AppendDocumentStart(nil)
	return d
}

func (d *docBuilder) add(k string, v value) {
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

func (d *docBuilder) done() bsoncore.Document {
	b, _ := bsoncore.AppendDocumentEnd(d.b, d.idx)
	return b
}

// docOf builds a document from alternating keys and values.
func docOf(kv ...any) bsoncore.Document {
	d := newDoc()
	for i := 0; i+1 < len(kv); i += 2 {
		d.add(kv[i].(string), kv[i+1].(value))
	}
	return d.done()
}

// setField returns doc with top-level field k replaced (in place) or appended; a missing v
// removes it.
func setField(doc bsoncore.Document, k string, v value) bsoncore.Document {
	d := newDoc()
	found := false
	els, _ := doc.Elements()
	for _, el := range els {
		if el.Key() == k {
			if !found {
				d.add(k, v)
				found = true
			}
			continue
		}
		d.b = append(d.b, el...)
	}
	if !found {
		d.add(k, v)
	}
	return d.done()
}

// setPath sets a dotted path (creating sub-documents; through arrays, in every element) as
// $addFields does.
func setPath(doc bsoncore.Document, path []string, v value) bsoncore.Document {
	if len(path) == 1 {
		return setField(doc, path[0], v)
	}
	cur := field(doc, path[0])
	return setField(doc, path[0], setPathValue(cur, path[1:], v))
}

func setPathValue(cur value, path []string, v value) value {
	switch cur.Type {
	case bsoncore.TypeEmbeddedDocument:
		return docV(setPath(cur.Data, path, v))
	case bsoncore.TypeArray:
		vals, _ := arrValues(cur)
		out := make([]value, len(vals))
		for i, e := range vals {
			out[i] = setPathValue(e, path, v)
		}
		return arrV(out)
	}
	return docV(setPath(emptyDoc, path, v))
}

// removePath removes a dotted path (through arrays, from every element document).
func removePath(doc bsoncore.Document, path []string) bsoncore.Document {
	cur := field(doc, path[0])
	if cur.Type == 0 {
		return doc
	}
	if len(path) == 1 {
		return setField(doc, path[0], missing)
	}
	return setField(doc, path[0], removePathValue(cur, path[1:]))
}

func removePathValue(cur value, path []string) value {
	switch cur.Type {
	case bsoncore.TypeEmbeddedDocument:
		return docV(removePath(cur.Data, path))
	case bsoncore.TypeArray:
		vals, _ := arrValues(cur)
		out := make([]value, len(vals))
		for i, e := range vals {
			out[i] = removePathValue(e, path)
		}
		return arrV(out)
	}
	return cur
}

// splitFieldPath validates and splits a field path given without "$".
func splitFieldPath(p string) ([]string, error) {
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

// valueSize is the memory a value is accounted for.
func valueSize(v value) int64 { return int64(len(v.Data)) + 16 }

// docValueBytes renders a value as a one-element array body, for hashing/keys.
func sameBytes(a, b []byte) bool { return bytes.Equal(a, b) }

var _ = binary.LittleEndian

// docArray returns the elements of an array of documents; notDoc makes the error for an
// element that is not one.
func docArray(v value, notDoc func(e value) error) ([]bsoncore.Document, error) {
	vals, err := arrValues(v)
	if err != nil {
		return nil, err
	}
	docs := make([]bsoncore.Document, len(vals))
	for i, e := range vals {
		d, ok := e.DocumentOK()
		if !ok {
			return nil, notDoc(e)
		}
		docs[i] = d
	}
	return docs, nil
}

// objectElems returns the fields of an object specification; code and msg are the error for
// anything else.
func objectElems(v value, code mongoerr.Code, msg string) ([]bsoncore.Element, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.New(code, msg)
	}
	return docElems(d)
}
