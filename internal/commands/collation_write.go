package commands

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/collation"
	"humongo/internal/operation"
	"humongo/internal/query"
)

// writeCollation is a write statement's collation: set says the statement gave one (c is nil
// for {locale: "simple"}); otherwise the collection's default applies.
type writeCollation struct {
	c   *collation.Collator
	set bool
}

// writeParseCollation parses a statement's (or findAndModify's) collation argument.
func writeParseCollation(cmdName string, v bsoncore.Value) (writeCollation, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return writeCollation{}, typeMismatch(cmdName, "collation", v.Type, "object")
	}
	c, err := collation.Parse(d)
	if err != nil {
		return writeCollation{}, err
	}
	return writeCollation{c: c, set: true}, nil
}

// writeParseFilterCollated parses a write's filter under the statement's collation or, when it
// gave none, the collection's default, with the command's let variables vars (the planner applies the same rule when it picks
// targets, and writes re-match documents with this matcher).
func writeParseFilterCollated(op *operation.Context, ns string, q bsoncore.Document, wc writeCollation, vars map[string]bsoncore.Value) (*query.Matcher, error) {
	if wc.set {
		if wc.c == nil {
			return writeParseFilter(q, vars)
		}
		return query.Parse(q, query.ParseOptions{AllowExpr: true, AllowJSONSchema: true, Collator: wc.c, Vars: vars})
	}
	m, ok := op.Catalog().ByNS(ns)
	if !ok {
		return writeParseFilter(q, vars)
	}
	d, ok := lookup(m.Options, "collation").DocumentOK()
	if !ok {
		return writeParseFilter(q, vars)
	}
	c, err := collation.Parse(d)
	if err != nil || c == nil {
		return writeParseFilter(q, vars)
	}
	return query.Parse(q, query.ParseOptions{AllowExpr: true, AllowJSONSchema: true, Collator: c, Vars: vars})
}
