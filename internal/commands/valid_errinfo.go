package commands

// errInfo of a DocumentValidationFailure, shaped like MongoDB 5.0+'s doc_validation_error.cpp:
//
//	{failingDocumentId: <_id>, details: {operatorName: "$jsonSchema" | "$and" | "$gt" | ...,
//	    specifiedAs | clausesNotSatisfied | schemaRulesNotSatisfied: ..., reason, consideredValue}}
//
// The matcher decides whether a document passes; this file only explains a failure, and runs
// only then. It works from the validator's BSON: each clause (and each $jsonSchema keyword)
// is re-checked on its own by parsing a one-clause filter, so the explanation never disagrees
// with the matcher about what failed. The reasons are MongoDB's strings for the common
// operators and keywords; rarer ones get a generic reason (an approximation, documented in
// the report).

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/query"
)

// validErrInfo explains why d fails validator.
func validErrInfo(validator, d bsoncore.Document) bsoncore.Document {
	info := bson.D{}
	if id, err := d.LookupErr("_id"); err == nil {
		info = append(info, bson.E{Key: "failingDocumentId", Value: validRaw(id)})
	}
	info = append(info, bson.E{Key: "details", Value: validFilterDetails(validator, d, 0)})
	raw, err := bson.Marshal(info)
	if err != nil {
		return emptyDoc
	}
	return raw
}

// validMaxDepth bounds the recursion of explanations (validators are bounded by the matcher's
// own depth limit; this is a second guard for the per-clause re-parsing).
const validMaxDepth = 50

// validRaw wraps a core value for the BSON marshaler.
func validRaw(v bsoncore.Value) bson.RawValue {
	return bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}
}

// validMatches reports whether d satisfies filter (false when filter does not parse).
func validMatches(filter, d bsoncore.Document) bool {
	m, err := query.Parse(filter, query.ParseOptions{AllowExpr: true, AllowJSONSchema: true})
	if err != nil {
		return false
	}
	ok, err := m.Matches(d)
	return err == nil && ok
}

// validClauses splits a filter into its ANDed clauses: top-level elements, with a field's
// operator document split per operator ({a: {$gt: 1, $lt: 5}} is two clauses) unless it uses
// $options, which belongs to its $regex.
func validClauses(filter bsoncore.Document) []bsoncore.Document {
	elems, err := filter.Elements()
	if err != nil {
		return nil
	}
	var out []bsoncore.Document
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if ops, ok := v.DocumentOK(); ok && !strings.HasPrefix(k, "$") && validIsOperatorDoc(ops) && lookup(ops, "$options").Type == 0 {
			oes, _ := ops.Elements()
			if len(oes) > 1 {
				for _, oe := range oes {
					inner := doc(func(b []byte) []byte { return append(b, oe...) })
					out = append(out, doc(func(b []byte) []byte { return bsoncore.AppendDocumentElement(b, k, inner) }))
				}
				continue
			}
		}
		out = append(out, doc(func(b []byte) []byte { return append(b, e...) }))
	}
	return out
}

// validIsOperatorDoc reports whether a field's value is an operator document ({$gt: 1}) rather
// than an object to compare for equality.
func validIsOperatorDoc(d bsoncore.Document) bool {
	e, err := d.IndexErr(0)
	if err != nil {
		return false
	}
	k := e.Key()
	return strings.HasPrefix(k, "$") && k != "$ref" && k != "$id" && k != "$db"
}

// validFilterDetails explains why d fails filter (an implicit $and of its clauses).
func validFilterDetails(filter, d bsoncore.Document, depth int) bson.D {
	clauses := validClauses(filter)
	if len(clauses) == 1 {
		return validClauseDetails(clauses[0], d, depth)
	}
	var failed bson.A
	for i, c := range clauses {
		if !validMatches(c, d) {
			failed = append(failed, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: validClauseDetails(c, d, depth+1)}})
		}
	}
	return bson.D{{Key: "operatorName", Value: "$and"}, {Key: "clausesNotSatisfied", Value: failed}}
}

// validClauseDetails explains why d fails one clause {key: value}.
func validClauseDetails(clause, d bsoncore.Document, depth int) bson.D {
	e, err := clause.IndexErr(0)
	if err != nil || depth > validMaxDepth {
		return bson.D{{Key: "operatorName", Value: "$and"}, {Key: "reason", Value: "validation failed"}}
	}
	k, v := e.Key(), e.Value()
	switch k {
	case "$and", "$or", "$nor":
		subs, _ := v.ArrayOK()
		vals, _ := subs.Values()
		var failed bson.A
		for i, sv := range vals {
			sd, ok := sv.DocumentOK()
			if !ok {
				continue
			}
			matched := validMatches(sd, d)
			switch {
			case k == "$nor" && matched:
				failed = append(failed, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: bson.D{
					{Key: "operatorName", Value: "$nor"}, {Key: "specifiedAs", Value: bson.Raw(sd)},
					{Key: "reason", Value: "child expression matched"}}}})
			case k != "$nor" && !matched:
				failed = append(failed, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: validFilterDetails(sd, d, depth+1)}})
			}
		}
		return bson.D{{Key: "operatorName", Value: k}, {Key: "clausesNotSatisfied", Value: failed}}
	case "$jsonSchema":
		sd, _ := v.DocumentOK()
		out := bson.D{{Key: "operatorName", Value: "$jsonSchema"}}
		out = validAppendAnnotations(out, sd)
		return append(out, bson.E{Key: "schemaRulesNotSatisfied",
			Value: validSchemaRules(sd, bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d}, depth+1)})
	case "$expr":
		return bson.D{{Key: "operatorName", Value: "$expr"}, {Key: "specifiedAs", Value: bson.Raw(clause)},
			{Key: "reason", Value: "expression did not match"}, {Key: "expressionResult", Value: false}}
	}
	if strings.HasPrefix(k, "$") {
		return bson.D{{Key: "operatorName", Value: k}, {Key: "specifiedAs", Value: bson.Raw(clause)},
			{Key: "reason", Value: "expression did not match"}}
	}
	op, arg := "$eq", v
	if ops, ok := v.DocumentOK(); ok && validIsOperatorDoc(ops) {
		oe, _ := ops.IndexErr(0)
		op, arg = oe.Key(), oe.Value()
	}
	out := bson.D{{Key: "operatorName", Value: op}, {Key: "specifiedAs", Value: bson.Raw(clause)}}
	val, found := validLookupPath(d, k)
	switch op {
	case "$exists":
		if truthy(arg) {
			return append(out, bson.E{Key: "reason", Value: "path does not exist"})
		}
		return append(out, bson.E{Key: "reason", Value: "path does exist"}, bson.E{Key: "consideredValue", Value: validRaw(val)})
	case "$not":
		out = append(out, bson.E{Key: "reason", Value: "child expression matched"})
		if found {
			out = append(out, bson.E{Key: "consideredValue", Value: validRaw(val)})
		}
		return out
	}
	if !found {
		return append(out, bson.E{Key: "reason", Value: "field was missing"})
	}
	reason := "value did not match"
	switch op {
	case "$eq", "$ne", "$gt", "$gte", "$lt", "$lte":
		reason = "comparison failed"
	case "$in":
		reason = "no matching value found in array"
	case "$nin":
		reason = "matching value found in array"
	case "$type":
		return append(out, bson.E{Key: "reason", Value: "type did not match"},
			bson.E{Key: "consideredValue", Value: validRaw(val)}, bson.E{Key: "consideredType", Value: bsonutil.TypeName(val.Type)})
	case "$regex":
		reason = "regular expression did not match"
	case "$size":
		reason = "array length was not equal to given size"
	case "$mod":
		reason = "$mod did not evaluate to expected remainder"
	case "$all":
		reason = "array did not contain all specified values"
	case "$elemMatch":
		reason = "array did not satisfy the child predicate"
	case "$bitsAllSet", "$bitsAllClear", "$bitsAnySet", "$bitsAnyClear":
		reason = "bitwise operator failed to match"
	}
	return append(out, bson.E{Key: "reason", Value: reason}, bson.E{Key: "consideredValue", Value: validRaw(val)})
}

// validLookupPath finds a dotted path without array traversal (enough to show the value the
// clause considered in the common case).
func validLookupPath(d bsoncore.Document, path string) (bsoncore.Value, bool) {
	v, err := d.LookupErr(strings.Split(path, ".")...)
	return v, err == nil
}

// validAppendAnnotations adds a schema's title and description, as MongoDB's details do.
func validAppendAnnotations(out bson.D, schema bsoncore.Document) bson.D {
	for _, k := range []string{"title", "description"} {
		if s, ok := lookup(schema, k).StringValueOK(); ok {
			out = append(out, bson.E{Key: k, Value: s})
		}
	}
	return out
}

// validSchemaValid reports whether v satisfies the $jsonSchema subschema schema.
func validSchemaValid(schema bsoncore.Document, v bsoncore.Value) bool {
	filter := doc(func(b []byte) []byte {
		si, b := bsoncore.AppendDocumentElementStart(b, "$jsonSchema")
		pi, b := bsoncore.AppendDocumentElementStart(b, "properties")
		b = bsoncore.AppendDocumentElement(b, "v", schema)
		b, _ = bsoncore.AppendDocumentEnd(b, pi)
		b, _ = bsoncore.AppendDocumentEnd(b, si)
		return b
	})
	wrapped := doc(func(b []byte) []byte { return bsoncore.AppendValueElement(b, "v", v) })
	return validMatches(filter, wrapped)
}

// validSchemaKeyword returns {kw: spec} plus the keywords kw is interpreted with.
func validSchemaKeyword(schema bsoncore.Document, kws ...string) bsoncore.Document {
	return doc(func(b []byte) []byte {
		for _, k := range kws {
			if e, err := schema.LookupErr(k); err == nil {
				b = bsoncore.AppendValueElement(b, k, e)
			}
		}
		return b
	})
}

// validSchemaReasons are MongoDB's reasons for keywords explained by a single line.
var validSchemaReasons = map[string]string{
	"bsonType":      "type did not match",
	"type":          "type did not match",
	"enum":          "value was not found in enum",
	"minimum":       "comparison failed",
	"maximum":       "comparison failed",
	"minLength":     "specified string length was not satisfied",
	"maxLength":     "specified string length was not satisfied",
	"pattern":       "regular expression did not match",
	"minItems":      "array did not match specified length",
	"maxItems":      "array did not match specified length",
	"uniqueItems":   "found a duplicate item",
	"minProperties": "specified number of properties was not satisfied",
	"maxProperties": "specified number of properties was not satisfied",
}

// validSchemaRules lists the keywords of schema that v does not satisfy, with details.
func validSchemaRules(schema bsoncore.Document, v bsoncore.Value, depth int) bson.A {
	rules := bson.A{}
	elems, err := schema.Elements()
	if err != nil || depth > validMaxDepth {
		return rules
	}
	obj, isObj := v.DocumentOK()
	arr, isArr := v.ArrayOK()
	for _, e := range elems {
		kw, spec := e.Key(), e.Value()
		switch kw {
		case "required":
			if !isObj {
				continue
			}
			var missing bson.A
			names, _ := spec.Array().Values()
			for _, n := range names {
				if s, ok := n.StringValueOK(); ok && lookup(obj, s).Type == 0 {
					missing = append(missing, s)
				}
			}
			if len(missing) > 0 {
				rules = append(rules, bson.D{{Key: "operatorName", Value: "required"},
					{Key: "specifiedAs", Value: bson.D{{Key: "required", Value: validRaw(spec)}}},
					{Key: "missingProperties", Value: missing}})
			}
		case "properties":
			if !isObj {
				continue
			}
			props, _ := spec.DocumentOK()
			pes, _ := props.Elements()
			var failed bson.A
			for _, pe := range pes {
				ps, ok := pe.Value().DocumentOK()
				val := lookup(obj, pe.Key())
				if !ok || val.Type == 0 || validSchemaValid(ps, val) {
					continue
				}
				entry := bson.D{{Key: "propertyName", Value: pe.Key()}}
				entry = validAppendAnnotations(entry, ps)
				failed = append(failed, append(entry, bson.E{Key: "details", Value: validSchemaRules(ps, val, depth+1)}))
			}
			if len(failed) > 0 {
				rules = append(rules, bson.D{{Key: "operatorName", Value: "properties"}, {Key: "propertiesNotSatisfied", Value: failed}})
			}
		case "patternProperties", "additionalProperties":
			if !isObj {
				continue
			}
			if r := validSchemaObjectRule(schema, kw, obj, depth); r != nil {
				rules = append(rules, r)
			}
		case "items", "additionalItems":
			if !isArr {
				continue
			}
			if r := validSchemaItemsRule(schema, kw, arr, depth); r != nil {
				rules = append(rules, r)
			}
		case "allOf", "anyOf", "oneOf":
			subs, _ := spec.ArrayOK()
			vals, _ := subs.Values()
			var notSat bson.A
			var matching bson.A
			for i, sv := range vals {
				sd, ok := sv.DocumentOK()
				if !ok {
					continue
				}
				if validSchemaValid(sd, v) {
					matching = append(matching, int32(i))
					continue
				}
				notSat = append(notSat, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: validSchemaRules(sd, v, depth+1)}})
			}
			switch {
			case kw == "allOf" && len(notSat) > 0,
				kw != "allOf" && len(matching) == 0:
				rules = append(rules, bson.D{{Key: "operatorName", Value: kw}, {Key: "schemasNotSatisfied", Value: notSat}})
			case kw == "oneOf" && len(matching) > 1:
				rules = append(rules, bson.D{{Key: "operatorName", Value: kw},
					{Key: "reason", Value: "more than one subschema matched"}, {Key: "matchingSchemaIndexes", Value: matching}})
			}
		case "not":
			if sd, ok := spec.DocumentOK(); ok && validSchemaValid(sd, v) {
				rules = append(rules, bson.D{{Key: "operatorName", Value: "not"},
					{Key: "specifiedAs", Value: bson.D{{Key: "not", Value: validRaw(spec)}}},
					{Key: "reason", Value: "child expression matched"}})
			}
		case "title", "description", "exclusiveMinimum", "exclusiveMaximum":
		default:
			kws := []string{kw}
			switch kw {
			case "minimum":
				kws = append(kws, "exclusiveMinimum")
			case "maximum":
				kws = append(kws, "exclusiveMaximum")
			}
			single := validSchemaKeyword(schema, kws...)
			if validSchemaValid(single, v) {
				continue
			}
			reason, ok := validSchemaReasons[kw]
			if !ok {
				reason = "keyword was not satisfied"
			}
			r := bson.D{{Key: "operatorName", Value: kw}, {Key: "specifiedAs", Value: bson.Raw(single)},
				{Key: "reason", Value: reason}, {Key: "consideredValue", Value: validRaw(v)}}
			if kw == "bsonType" || kw == "type" {
				r = append(r, bson.E{Key: "consideredType", Value: bsonutil.TypeName(v.Type)})
			}
			if kw == "minProperties" || kw == "maxProperties" {
				n, _ := obj.Elements()
				r = append(r[:3], bson.E{Key: "numberOfProperties", Value: int32(len(n))})
			}
			rules = append(rules, r)
		}
	}
	return rules
}

// validSchemaObjectRule explains patternProperties or additionalProperties for an object.
func validSchemaObjectRule(schema bsoncore.Document, kw string, obj bsoncore.Document, depth int) bson.D {
	ctx := validSchemaKeyword(schema, "properties", "patternProperties", "additionalProperties")
	if kw == "patternProperties" {
		ctx = validSchemaKeyword(schema, "patternProperties")
	}
	objVal := bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: obj}
	if validSchemaValid(ctx, objVal) {
		return nil
	}
	elems, _ := obj.Elements()
	if kw == "patternProperties" {
		pats, _ := lookup(schema, "patternProperties").DocumentOK()
		pes, _ := pats.Elements()
		var failed bson.A
		for _, e := range elems {
			one := doc(func(b []byte) []byte { return append(b, e...) })
			for _, pe := range pes {
				ps, ok := pe.Value().DocumentOK()
				if !ok || !validPatternMatches(pe.Key(), e.Key()) {
					continue
				}
				onePattern := doc(func(b []byte) []byte {
					pi, b := bsoncore.AppendDocumentElementStart(b, "patternProperties")
					b = append(b, pe...)
					b, _ = bsoncore.AppendDocumentEnd(b, pi)
					return b
				})
				if !validSchemaValid(onePattern, bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: one}) {
					failed = append(failed, bson.D{{Key: "propertyName", Value: e.Key()}, {Key: "regexMatched", Value: pe.Key()},
						{Key: "details", Value: validSchemaRules(ps, e.Value(), depth+1)}})
				}
			}
		}
		if len(failed) == 0 {
			return nil
		}
		return bson.D{{Key: "operatorName", Value: "patternProperties"}, {Key: "propertiesNotSatisfied", Value: failed}}
	}
	// additionalProperties: the fields neither properties nor patternProperties name.
	props, _ := lookup(schema, "properties").DocumentOK()
	pats, _ := lookup(schema, "patternProperties").DocumentOK()
	pes, _ := pats.Elements()
	var extra bson.A
	var firstExtra bsoncore.Element
	for _, e := range elems {
		if lookup(props, e.Key()).Type != 0 {
			continue
		}
		matched := false
		for _, pe := range pes {
			if validPatternMatches(pe.Key(), e.Key()) {
				matched = true
				break
			}
		}
		if !matched {
			if firstExtra == nil {
				sub, ok := lookup(schema, "additionalProperties").DocumentOK()
				if !ok || !validSchemaValid(sub, e.Value()) {
					firstExtra = e
				}
			}
			extra = append(extra, e.Key())
		}
	}
	spec := lookup(schema, "additionalProperties")
	if sub, ok := spec.DocumentOK(); ok {
		if firstExtra == nil {
			return nil
		}
		return bson.D{{Key: "operatorName", Value: "additionalProperties"},
			{Key: "reason", Value: "at least one additional property did not match the subschema"},
			{Key: "failingProperty", Value: firstExtra.Key()},
			{Key: "details", Value: validSchemaRules(sub, firstExtra.Value(), depth+1)}}
	}
	if len(extra) == 0 {
		return nil
	}
	return bson.D{{Key: "operatorName", Value: "additionalProperties"},
		{Key: "specifiedAs", Value: bson.D{{Key: "additionalProperties", Value: validRaw(spec)}}},
		{Key: "additionalProperties", Value: extra}}
}

// validPatternMatches reports whether a patternProperties regex matches name, asking the
// matcher (the same regex engine $jsonSchema uses).
func validPatternMatches(pattern, name string) bool {
	filter := doc(func(b []byte) []byte {
		return bsoncore.AppendRegexElement(b, "n", pattern, "")
	})
	return validMatches(filter, doc(func(b []byte) []byte { return bsoncore.AppendStringElement(b, "n", name) }))
}

// validSchemaItemsRule explains items or additionalItems for an array.
func validSchemaItemsRule(schema bsoncore.Document, kw string, arr bsoncore.Array, depth int) bson.D {
	arrVal := bsoncore.Value{Type: bsoncore.TypeArray, Data: arr}
	vals, _ := arr.Values()
	items := lookup(schema, "items")
	if kw == "additionalItems" {
		ctx := validSchemaKeyword(schema, "items", "additionalItems")
		if items.Type != bsoncore.TypeArray || validSchemaValid(ctx, arrVal) {
			return nil
		}
		list, _ := items.Array().Values()
		spec := lookup(schema, "additionalItems")
		for i := len(list); i < len(vals); i++ {
			if sub, ok := spec.DocumentOK(); ok && validSchemaValid(sub, vals[i]) {
				continue
			}
			r := bson.D{{Key: "operatorName", Value: "additionalItems"},
				{Key: "reason", Value: "at least one additional item did not match the sub-schema"},
				{Key: "itemIndex", Value: int32(i)}}
			if sub, ok := spec.DocumentOK(); ok {
				r = append(r, bson.E{Key: "details", Value: validSchemaRules(sub, vals[i], depth+1)})
			}
			return r
		}
		return nil
	}
	if validSchemaValid(validSchemaKeyword(schema, "items"), arrVal) {
		return nil
	}
	if sub, ok := items.DocumentOK(); ok {
		for i, x := range vals {
			if !validSchemaValid(sub, x) {
				return bson.D{{Key: "operatorName", Value: "items"},
					{Key: "reason", Value: "At least one item did not match the sub-schema"},
					{Key: "itemIndex", Value: int32(i)}, {Key: "details", Value: validSchemaRules(sub, x, depth+1)}}
			}
		}
		return nil
	}
	list, _ := items.Array().Values()
	var failed bson.A
	for i := 0; i < len(list) && i < len(vals); i++ {
		if sub, ok := list[i].DocumentOK(); ok && !validSchemaValid(sub, vals[i]) {
			failed = append(failed, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: validSchemaRules(sub, vals[i], depth+1)}})
		}
	}
	return bson.D{{Key: "operatorName", Value: "items"}, {Key: "details", Value: failed}}
}
