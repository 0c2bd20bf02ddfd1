package query

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// $jsonSchema: the JSON Schema draft 4 subset MongoDB implements, with its extension bsonType.
// As in JSON Schema, a keyword constrains only values of the type it is about (minimum says
// nothing about strings), and properties that are absent are fine unless required.

type schema struct {
	typed      bool
	types      [256]bool
	number     bool
	required   []string
	props      []schemaProp
	patProps   []schemaPattern
	addlFalse  bool    // additionalProperties: false
	addl       *schema // additionalProperties: {schema}
	min, max   bsoncore.Value
	exMin      bool
	exMax      bool
	minLen     int // -1 when absent
	maxLen     int
	pattern    *regexp2.Regexp
	enum       []bsoncore.Value
	items      *schema
	itemsList  []*schema
	addlItemsF bool
	addlItems  *schema
	minItems   int
	maxItems   int
	unique     bool
	minProps   int
	maxProps   int
	allOf      []*schema
	anyOf      []*schema
	oneOf      []*schema
	not        *schema
	deps       []schemaDep
}

// schemaDep is one entry of `dependencies`: when prop is present, either every name in
// required must be present too (property dependency), or the whole object must satisfy s
// (schema dependency).
type schemaDep struct {
	prop     string
	required []string
	s        *schema
}

type schemaProp struct {
	name string
	s    *schema
}

type schemaPattern struct {
	re *regexp2.Regexp
	s  *schema
}

func schemaErr(format string, args ...any) error {
	return mongoerr.Newf(mongoerr.FailedToParse, format, args...)
}

var jsonTypes = map[string][]bsoncore.Type{
	"object":  {bsoncore.TypeEmbeddedDocument},
	"array":   {bsoncore.TypeArray},
	"boolean": {bsoncore.TypeBoolean},
	"string":  {bsoncore.TypeString},
	"null":    {bsoncore.TypeNull},
}

func nonNegInt(kw string, v bsoncore.Value) (int, error) {
	i, ok := bsonutil.ToInt64Exact(v)
	if !ok || i < 0 || i > math.MaxInt32 {
		return 0, schemaErr("$jsonSchema keyword '%s' must be a representable as a non-negative integer", kw)
	}
	return int(i), nil
}

func parseSchemaList(kw string, v bsoncore.Value, depth int) ([]*schema, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be an array", kw)
	}
	vals, err := arr.Values()
	if err != nil || len(vals) == 0 {
		return nil, schemaErr("$jsonSchema keyword '%s' must be a non-empty array", kw)
	}
	var out []*schema
	for _, e := range vals {
		d, ok := e.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be an array of objects", kw)
		}
		s, err := parseSchema(d, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func subSchema(kw string, v bsoncore.Value, depth int) (*schema, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be an object", kw)
	}
	return parseSchema(d, depth+1)
}

func parseSchema(doc bsoncore.Document, depth int) (*schema, error) {
	if depth > maxDepth {
		return nil, depthErr()
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid $jsonSchema: %v", err)
	}
	s := &schema{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1, minProps: -1, maxProps: -1}
	sawType, sawBSONType := false, false
	for _, el := range elems {
		kw, v := el.Key(), el.Value()
		switch kw {
		case "title", "description":
			if v.Type != bsoncore.TypeString {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be a string", kw)
			}
		case "bsonType":
			sawBSONType = true
			s.typed = true
			if err := forEachStringOrArray(kw, v, func(name string) error {
				if name == "number" {
					s.number = true
					return nil
				}
				t, ok := bsonutil.TypeByName(name)
				if !ok {
					return mongoerr.Newf(mongoerr.BadValue, "Unknown type name alias: %s", name)
				}
				s.types[byte(t)] = true
				return nil
			}); err != nil {
				return nil, err
			}
		case "type":
			sawType = true
			s.typed = true
			if err := forEachStringOrArray(kw, v, func(name string) error {
				switch name {
				case "number":
					s.number = true
					return nil
				case "integer":
					return schemaErr("$jsonSchema type 'integer' is not currently supported.")
				}
				ts, ok := jsonTypes[name]
				if !ok {
					return mongoerr.Newf(mongoerr.BadValue, "Unknown type name alias: %s", name)
				}
				for _, t := range ts {
					s.types[byte(t)] = true
				}
				return nil
			}); err != nil {
				return nil, err
			}
		case "required":
			arr, ok := v.ArrayOK()
			vals, err := arr.Values()
			if !ok || err != nil || len(vals) == 0 {
				return nil, schemaErr("$jsonSchema keyword 'required' must be a non-empty array of strings")
			}
			for _, e := range vals {
				name, ok := e.StringValueOK()
				if !ok {
					return nil, schemaErr("$jsonSchema keyword 'required' must be a non-empty array of strings")
				}
				s.required = append(s.required, name)
			}
		case "properties", "patternProperties":
			d, ok := v.DocumentOK()
			if !ok {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be an object", kw)
			}
			pes, err := d.Elements()
			if err != nil {
				return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s: %v", kw, err)
			}
			for _, pe := range pes {
				sub, err := subSchema(kw, pe.Value(), depth)
				if err != nil {
					return nil, err
				}
				if kw == "properties" {
					s.props = append(s.props, schemaProp{pe.Key(), sub})
					continue
				}
				re, err := compileRegex(pe.Key(), "")
				if err != nil {
					return nil, err
				}
				s.patProps = append(s.patProps, schemaPattern{re, sub})
			}
		case "dependencies":
			d, ok := v.DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$jsonSchema keyword 'dependencies' must be an object")
			}
			des, err := d.Elements()
			if err != nil {
				return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid dependencies: %v", err)
			}
			for _, de := range des {
				dep := schemaDep{prop: de.Key()}
				switch dv := de.Value(); dv.Type {
				case bsoncore.TypeEmbeddedDocument:
					if dep.s, err = subSchema(kw, dv, depth); err != nil {
						return nil, err
					}
				case bsoncore.TypeArray:
					vals, err := dv.Array().Values()
					if err != nil || len(vals) == 0 {
						return nil, schemaErr("property '%s' in $jsonSchema keyword 'dependencies' must be a non-empty array of strings", dep.prop)
					}
					for _, e := range vals {
						name, ok := e.StringValueOK()
						if !ok {
							return nil, schemaErr("property '%s' in $jsonSchema keyword 'dependencies' must be a non-empty array of strings", dep.prop)
						}
						dep.required = append(dep.required, name)
					}
				default:
					return nil, mongoerr.Newf(mongoerr.TypeMismatch,
						"property '%s' in $jsonSchema keyword 'dependencies' must be either an object or an array", dep.prop)
				}
				s.deps = append(s.deps, dep)
			}
		case "additionalProperties":
			switch v.Type {
			case bsoncore.TypeBoolean:
				s.addlFalse = !v.Boolean()
			case bsoncore.TypeEmbeddedDocument:
				if s.addl, err = subSchema(kw, v, depth); err != nil {
					return nil, err
				}
			default:
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$jsonSchema keyword 'additionalProperties' must be either an object or a boolean")
			}
		case "minimum", "maximum":
			if !bsonutil.IsNumber(v.Type) {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be a number", kw)
			}
			if kw == "minimum" {
				s.min = v
			} else {
				s.max = v
			}
		case "exclusiveMinimum", "exclusiveMaximum":
			b, ok := v.BooleanOK()
			if !ok {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be a boolean", kw)
			}
			if kw == "exclusiveMinimum" {
				s.exMin = b
			} else {
				s.exMax = b
			}
		case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
			n, err := nonNegInt(kw, v)
			if err != nil {
				return nil, err
			}
			*map[string]*int{"minLength": &s.minLen, "maxLength": &s.maxLen, "minItems": &s.minItems,
				"maxItems": &s.maxItems, "minProperties": &s.minProps, "maxProperties": &s.maxProps}[kw] = n
		case "pattern":
			str, ok := v.StringValueOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$jsonSchema keyword 'pattern' must be a string")
			}
			if s.pattern, err = compileRegex(str, ""); err != nil {
				return nil, err
			}
		case "enum":
			arr, ok := v.ArrayOK()
			vals, err := arr.Values()
			if !ok || err != nil || len(vals) == 0 {
				return nil, schemaErr("$jsonSchema keyword 'enum' cannot be an empty array")
			}
			s.enum = vals
		case "items":
			switch v.Type {
			case bsoncore.TypeEmbeddedDocument:
				if s.items, err = subSchema(kw, v, depth); err != nil {
					return nil, err
				}
			case bsoncore.TypeArray:
				if s.itemsList, err = parseSchemaList(kw, v, depth); err != nil {
					return nil, err
				}
			default:
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$jsonSchema keyword 'items' must be an array or an object")
			}
		case "additionalItems":
			switch v.Type {
			case bsoncore.TypeBoolean:
				s.addlItemsF = !v.Boolean()
			case bsoncore.TypeEmbeddedDocument:
				if s.addlItems, err = subSchema(kw, v, depth); err != nil {
					return nil, err
				}
			default:
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$jsonSchema keyword 'additionalItems' must be either an object or a boolean")
			}
		case "uniqueItems":
			b, ok := v.BooleanOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$jsonSchema keyword 'uniqueItems' must be a boolean")
			}
			s.unique = b
		case "allOf", "anyOf", "oneOf":
			list, err := parseSchemaList(kw, v, depth)
			if err != nil {
				return nil, err
			}
			*map[string]*[]*schema{"allOf": &s.allOf, "anyOf": &s.anyOf, "oneOf": &s.oneOf}[kw] = list
		case "not":
			if s.not, err = subSchema(kw, v, depth); err != nil {
				return nil, err
			}
		default:
			return nil, schemaErr("Unknown $jsonSchema keyword: %s", kw)
		}
	}
	if sawType && sawBSONType {
		return nil, schemaErr("Cannot specify both $jsonSchema keywords 'type' and 'bsonType'")
	}
	if (s.exMin && s.min.Type == 0) || (s.exMax && s.max.Type == 0) {
		return nil, schemaErr("$jsonSchema keyword 'exclusiveMinimum'/'exclusiveMaximum' requires 'minimum'/'maximum' to be present")
	}
	return s, nil
}

func forEachStringOrArray(kw string, v bsoncore.Value, fn func(string) error) error {
	if str, ok := v.StringValueOK(); ok {
		return fn(str)
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return mongoerr.Newf(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be either a string or an array of strings", kw)
	}
	vals, err := arr.Values()
	if err != nil || len(vals) == 0 {
		return schemaErr("$jsonSchema keyword '%s' must name at least one type", kw)
	}
	for _, e := range vals {
		str, ok := e.StringValueOK()
		if !ok {
			return mongoerr.Newf(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' array elements must be strings", kw)
		}
		if err := fn(str); err != nil {
			return err
		}
	}
	return nil
}

// valid reports whether v satisfies s.
func (s *schema) valid(v bsoncore.Value) bool {
	if s.typed && !(s.types[byte(v.Type)] || (s.number && bsonutil.IsNumber(v.Type))) {
		return false
	}
	if len(s.enum) > 0 {
		found := false
		for _, e := range s.enum {
			if bsonutil.Compare(v, e) == 0 && bsonutil.CanonicalTypeOrder(v.Type) == bsonutil.CanonicalTypeOrder(e.Type) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	switch {
	case bsonutil.IsNumber(v.Type):
		if s.min.Type != 0 {
			if c := bsonutil.Compare(v, s.min); c < 0 || (c == 0 && s.exMin) || isNaN(v) {
				return false
			}
		}
		if s.max.Type != 0 {
			if c := bsonutil.Compare(v, s.max); c > 0 || (c == 0 && s.exMax) || isNaN(v) {
				return false
			}
		}
	case v.Type == bsoncore.TypeString:
		str, _ := v.StringValueOK()
		n := utf8.RuneCountInString(str)
		if (s.minLen >= 0 && n < s.minLen) || (s.maxLen >= 0 && n > s.maxLen) {
			return false
		}
		if s.pattern != nil {
			if m, err := s.pattern.MatchString(str); err != nil || !m {
				return false
			}
		}
	case v.Type == bsoncore.TypeEmbeddedDocument:
		if !s.validObject(v.Data) {
			return false
		}
	case v.Type == bsoncore.TypeArray:
		if !s.validArray(v.Data) {
			return false
		}
	}
	for _, sub := range s.allOf {
		if !sub.valid(v) {
			return false
		}
	}
	if len(s.anyOf) > 0 {
		any := false
		for _, sub := range s.anyOf {
			if sub.valid(v) {
				any = true
				break
			}
		}
		if !any {
			return false
		}
	}
	if len(s.oneOf) > 0 {
		n := 0
		for _, sub := range s.oneOf {
			if sub.valid(v) {
				n++
			}
		}
		if n != 1 {
			return false
		}
	}
	return s.not == nil || !s.not.valid(v)
}

func (s *schema) validObject(doc []byte) bool {
	for _, r := range s.required {
		if _, ok := getField(doc, r); !ok {
			return false
		}
	}
	for _, d := range s.deps {
		if _, present := getField(doc, d.prop); !present {
			continue
		}
		for _, r := range d.required {
			if _, ok := getField(doc, r); !ok {
				return false
			}
		}
		if d.s != nil && !d.s.valid(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: doc}) {
			return false
		}
	}
	count := 0
	it := newElemIter(doc)
	for {
		key, v, ok := it.next()
		if !ok {
			break
		}
		count++
		name := string(key)
		matched := false
		for _, p := range s.props {
			if p.name == name {
				matched = true
				if !p.s.valid(v) {
					return false
				}
			}
		}
		for _, p := range s.patProps {
			if m, err := p.re.MatchString(name); err == nil && m {
				matched = true
				if !p.s.valid(v) {
					return false
				}
			}
		}
		if !matched {
			if s.addlFalse || (s.addl != nil && !s.addl.valid(v)) {
				return false
			}
		}
	}
	return (s.minProps < 0 || count >= s.minProps) && (s.maxProps < 0 || count <= s.maxProps)
}

func (s *schema) validArray(arr []byte) bool {
	vals, err := bsoncore.Array(arr).Values()
	if err != nil {
		return false
	}
	if (s.minItems >= 0 && len(vals) < s.minItems) || (s.maxItems >= 0 && len(vals) > s.maxItems) {
		return false
	}
	for i, e := range vals {
		switch {
		case s.items != nil:
			if !s.items.valid(e) {
				return false
			}
		case s.itemsList != nil && i < len(s.itemsList):
			if !s.itemsList[i].valid(e) {
				return false
			}
		case s.itemsList != nil:
			if s.addlItemsF || (s.addlItems != nil && !s.addlItems.valid(e)) {
				return false
			}
		}
	}
	if s.unique {
		for i := range vals {
			for j := i + 1; j < len(vals); j++ {
				if bsonutil.Compare(vals[i], vals[j]) == 0 {
					return false
				}
			}
		}
	}
	return true
}

type schemaNode struct {
	operand bsoncore.Value
	s       *schema
}

func (n *schemaNode) Kind() Kind                  { return KindJSONSchema }
func (n *schemaNode) Path() string                { return "" }
func (n *schemaNode) Value() bsoncore.Value       { return n.operand }
func (n *schemaNode) Children() []MatchExpression { return nil }
func (n *schemaNode) String() string              { return fmt.Sprintf("$jsonSchema %s", n.operand) }
func (n *schemaNode) match(doc []byte, _ *MatchDetails) (bool, error) {
	return n.s.valid(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: doc}), nil
}

func parseJSONSchemaMatch(val bsoncore.Value) (MatchExpression, error) {
	d, ok := val.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "$jsonSchema must be an object")
	}
	s, err := parseSchema(d, 0)
	if err != nil {
		return nil, err
	}
	return &schemaNode{operand: val, s: s}, nil
}
