package agg

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/collation"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/query/expr"
)

// Values are the expression language's (internal/query/expr): its constructors and
// document helpers serve the stages too. This file holds what only stages need.

type value = bsoncore.Value

// matchOpts sets the collation of a matcher's options.
func matchOpts(o query.ParseOptions, c *collation.Collator) query.ParseOptions {
	if c != nil {
		o.Collator = c
	}
	return o
}

// setPath sets a dotted path (creating sub-documents; through arrays, in every element) as
// $addFields does.
func setPath(doc bsoncore.Document, path []string, v value) bsoncore.Document {
	if len(path) == 1 {
		return expr.SetField(doc, path[0], v)
	}
	cur := expr.Field(doc, path[0])
	return expr.SetField(doc, path[0], setPathValue(cur, path[1:], v))
}

func setPathValue(cur value, path []string, v value) value {
	switch cur.Type {
	case bsoncore.TypeEmbeddedDocument:
		return expr.Doc(setPath(cur.Data, path, v))
	case bsoncore.TypeArray:
		vals, _ := expr.ArrayValues(cur)
		out := make([]value, len(vals))
		for i, e := range vals {
			out[i] = setPathValue(e, path, v)
		}
		return expr.Array(out)
	}
	return expr.Doc(setPath(expr.EmptyDoc, path, v))
}

// removePath removes a dotted path (through arrays, from every element document).
func removePath(doc bsoncore.Document, path []string) bsoncore.Document {
	cur := expr.Field(doc, path[0])
	if cur.Type == 0 {
		return doc
	}
	if len(path) == 1 {
		return expr.SetField(doc, path[0], expr.Missing)
	}
	return expr.SetField(doc, path[0], removePathValue(cur, path[1:]))
}

func removePathValue(cur value, path []string) value {
	switch cur.Type {
	case bsoncore.TypeEmbeddedDocument:
		return expr.Doc(removePath(cur.Data, path))
	case bsoncore.TypeArray:
		vals, _ := expr.ArrayValues(cur)
		out := make([]value, len(vals))
		for i, e := range vals {
			out[i] = removePathValue(e, path)
		}
		return expr.Array(out)
	}
	return cur
}

// docArray returns the elements of an array of documents; notDoc makes the error for an
// element that is not one.
func docArray(v value, notDoc func(e value) error) ([]bsoncore.Document, error) {
	vals, err := expr.ArrayValues(v)
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
	return expr.DocElems(d)
}
