package commands

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/collation"
	"humongo/internal/query"
)

// writeParseFilterCollated parses a write's filter under the collection's default collation
// (the planner applies the same default when it picks targets, and writes re-match documents
// with this matcher). Explicit collations on writes are still rejected by writeCheckCollation.
func writeParseFilterCollated(op *OpCtx, ns string, q bsoncore.Document) (*query.Matcher, error) {
	m, ok := op.DB.Catalog.Latest().ByNS(ns)
	if !ok {
		return writeParseFilter(q)
	}
	d, ok := lookup(m.Options, "collation").DocumentOK()
	if !ok {
		return writeParseFilter(q)
	}
	c, err := collation.Parse(d)
	if err != nil || c == nil {
		return writeParseFilter(q)
	}
	return query.Parse(q, query.ParseOptions{AllowExpr: true, AllowJSONSchema: true, Collator: c})
}
