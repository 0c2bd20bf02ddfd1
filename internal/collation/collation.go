// Package collation implements MongoDB collations (the `collation` option of find, aggregate,
// count, distinct, update, delete, findAndModify, of indexes and of collection defaults) on
// golang.org/x/text/collate. It is MongoDB behaviour, not a spec section: the execution spec's
// KeyString section only fixes that an index with a collation stores ICU sort keys for strings.
//
// A Collator is parsed from a collation document (Parse) and turns strings into sort keys
// (Key): two strings compare under the collation as their keys compare bytewise. Every
// comparison goes through keys, so the matcher, the sort stage and index bounds agree exactly
// with what an index stores (x/text's own Compare can disagree with its keys in edge cases).
//
// Only strings (and symbols) are affected by a collation; numbers, dates, ObjectIds etc.
// compare as usual, and $regex ignores collation, as in MongoDB.
//
// x/text has no switch for caseFirst or maxVariable; keys.go adds them on top of its keys:
//
//   - caseFirst "upper"/"lower" rewrites the tertiary weights of the key (present at strength
//     3 and above, or with caseLevel): every weight of an uppercase collation element (the
//     DUCET's uppercase tertiary variants) sorts before, or after, every other one, ties kept
//     in x/text's order. So with "upper", "A" < "a" < "b" at strength 3, and "Ａ" (wide) < "a".
//   - alternate "shifted" is x/text's own ka-shifted, whose variable range is ICU's default
//     maxVariable "punct" (spaces and punctuation, not symbols or currency). With
//     maxVariable "space" the key is the non-ignorable key of the string without its White_Space
//     characters, so only whitespace is ignored at levels 1-3; at strength 4 a quaternary level
//     like ICU's follows (each space's primary weight, 0xFF per other primary weight).
//
// Remaining differences from ICU: with maxVariable "space", a combining mark right after a
// space is not ignored with it, and contractions spanning a space are not formed; caseLevel
// (x/text) at strength 1-2 compares the whole tertiary level, so width and other tertiary
// variants count too, not only case; normalization is always on (x/text always normalises
// to NFD, which only matters for non-normalised input).
package collation

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"golang.org/x/text/collate"
	"golang.org/x/text/language"

	"humongo/internal/mongoerr"
)

// Version is the ICU version MongoDB 7.0 reports in normalised collation specs.
const Version = "57.1"

// Collator compares strings under one collation. It is immutable and safe for concurrent
// use: x/text collators keep per-call iterator state, so each call borrows one from a pool.
type Collator struct {
	spec      bsoncore.Document // normalised, as echoed by listIndexes/listCollections
	strength  int
	identical bool
	// caseFirst is 'u' (upper first), 'l' (lower first) or 0 (off: x/text's order).
	caseFirst byte
	// tertiary: x/text's keys have a tertiary level (strength >= 3 or caseLevel).
	tertiary bool
	// spaceOnly: alternate "shifted" with maxVariable "space" (keys.go).
	spaceOnly bool
	pool      sync.Pool // of *worker
}

// worker is one x/text collator with its key buffers.
type worker struct {
	c      *collate.Collator
	buf    collate.Buffer
	ka, kb []byte // CompareStrings' keys
}

// settings are the parsed options of a spec.
type settings struct {
	locale          string
	caseLevel       bool
	caseFirst       string
	strength        int
	numericOrdering bool
	alternate       string
	maxVariable     string
	normalization   bool
	backwards       bool
}

var knownFields = map[string]bool{"locale": true, "caseLevel": true, "caseFirst": true, "strength": true,
	"numericOrdering": true, "alternate": true, "maxVariable": true, "normalization": true,
	"backwards": true, "version": true}

// Parse validates a collation document and returns its Collator; {locale: "simple"} (binary
// comparison, MongoDB's default) returns nil, nil. Errors carry MongoDB's codes and messages.
func Parse(spec bsoncore.Document) (*Collator, error) {
	// Collections and indexes re-parse their stored specs on every query: keep the parsed
	// collators (they are immutable) for the few distinct specs a deployment uses.
	if c, ok := cache.Load(string(spec)); ok {
		return c.(*Collator), nil
	}
	c, err := parse(spec)
	if err == nil && c != nil && cacheSize.Add(1) <= maxCached {
		cache.Store(string(spec), c)
	}
	return c, err
}

var (
	cache     sync.Map // string(spec) -> *Collator
	cacheSize atomic.Int64
)

const maxCached = 1024

func parse(spec bsoncore.Document) (*Collator, error) {
	elems, err := spec.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid collation: %v", err)
	}
	s := settings{caseFirst: "off", strength: 3, alternate: "non-ignorable", maxVariable: "punct"}
	hasLocale := false
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if !knownFields[k] {
			return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field 'collation.%s' is an unknown field.", k)
		}
		switch k {
		case "locale", "caseFirst", "alternate", "maxVariable", "version":
			str, ok := v.StringValueOK()
			if !ok {
				return nil, wrongType(k, v, "string")
			}
			switch k {
			case "locale":
				s.locale, hasLocale = str, true
			case "caseFirst":
				if str != "upper" && str != "lower" && str != "off" {
					return nil, mongoerr.Newf(mongoerr.FailedToParse,
						"Field 'caseFirst' must be 'upper', 'lower', or 'off'. Got: %s", str)
				}
				s.caseFirst = str
			case "alternate":
				if str != "non-ignorable" && str != "shifted" {
					return nil, mongoerr.Newf(mongoerr.FailedToParse,
						"Field 'alternate' must be 'non-ignorable' or 'shifted'. Got: %s", str)
				}
				s.alternate = str
			case "maxVariable":
				if str != "punct" && str != "space" {
					return nil, mongoerr.Newf(mongoerr.FailedToParse,
						"Field 'maxVariable' must be 'punct' or 'space'. Got: %s", str)
				}
				s.maxVariable = str
			case "version":
				if str != Version {
					return nil, mongoerr.Newf(mongoerr.IncompatibleCollationVersion,
						"Requested collation version %s but the only available collator version was %s. Requested collation spec: %s",
						str, Version, spec)
				}
			}
		case "strength":
			n, ok := integral(v)
			if !ok {
				return nil, wrongType(k, v, "int")
			}
			if n < 1 || n > 5 {
				return nil, mongoerr.Newf(mongoerr.FailedToParse,
					"Field 'strength' must be an integer 1 through 5. Got: %d", n)
			}
			s.strength = int(n)
		default: // booleans
			b, ok := v.BooleanOK()
			if !ok {
				return nil, wrongType(k, v, "bool")
			}
			switch k {
			case "caseLevel":
				s.caseLevel = b
			case "numericOrdering":
				s.numericOrdering = b
			case "normalization":
				s.normalization = b
			case "backwards":
				s.backwards = b
			}
		}
	}
	if !hasLocale {
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'collation.locale' is missing but a required field")
	}
	if s.locale == "simple" {
		if len(elems) > 1 {
			return nil, mongoerr.Newf(mongoerr.FailedToParse,
				"If locale=simple, no other fields should be present in: %s", spec)
		}
		return nil, nil
	}
	bcp, ukw, ok := localeTag(s.locale)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.BadValue, "Field 'locale' is invalid in: %s", spec)
	}
	if !hasField(elems, "backwards") && (s.locale == "fr_CA" || strings.HasPrefix(s.locale, "fr_CA@")) {
		s.backwards = true // ICU's fr_CA default (French accent order)
	}
	return newCollator(s, bcp, ukw), nil
}

func hasField(elems []bsoncore.Element, name string) bool {
	for _, e := range elems {
		if e.Key() == name {
			return true
		}
	}
	return false
}

func wrongType(field string, v bsoncore.Value, want string) error {
	return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'collation.%s' is the wrong type '%s', expected type '%s'",
		field, typeName(v.Type), want)
}

func typeName(t bsoncore.Type) string {
	switch t {
	case bsoncore.TypeString:
		return "string"
	case bsoncore.TypeBoolean:
		return "bool"
	case bsoncore.TypeInt32:
		return "int"
	case bsoncore.TypeInt64:
		return "long"
	case bsoncore.TypeDouble:
		return "double"
	case bsoncore.TypeNull:
		return "null"
	case bsoncore.TypeEmbeddedDocument:
		return "object"
	case bsoncore.TypeArray:
		return "array"
	}
	return t.String()
}

// integral reads an int32, int64 or integral double.
func integral(v bsoncore.Value) (int64, bool) {
	switch v.Type {
	case bsoncore.TypeInt32:
		return int64(v.Int32()), true
	case bsoncore.TypeInt64:
		return v.Int64(), true
	case bsoncore.TypeDouble:
		f := v.Double()
		if f != float64(int64(f)) {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

// locales are the ICU locale IDs MongoDB 7.0 accepts (its documented list), without the
// optional "@collation=<variant>" suffix.
var locales = func() map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Fields(`af sq am ar hy as az bn be bs bs_Cyrl bg my ca chr zh zh_Hant
		hr cs da nl dz en en_US en_US_POSIX eo et ee fo fil fi fi_FI fr fr_CA gl ka de de_AT el gu
		ha haw he hi hu is ig smn id ga it ja kl kn kk km kok ko ky lk lo lv li lt dsb lb mk ms ml
		mt mr mn ne se nb nn or om ps fa fa_AF pl pt pa ro ru sr sr_Latn si sk sl es sw sv ta te
		th bo to tr uk hsb ur ug vi wae cy yi yo zu`) {
		m[l] = true
	}
	return m
}()

// bcpCollation maps ICU collation variant names to their BCP 47 -u-co- spellings.
var bcpCollation = map[string]string{"phonebook": "phonebk", "traditional": "trad",
	"dictionary": "dict", "gb2312han": "gb2312"}

// localeTag maps a MongoDB (ICU) locale ID such as "de_AT" or "de@collation=phonebook" to a
// BCP 47 language tag and its -u- keywords ("co-phonebook").
func localeTag(id string) (bcp string, ukw []string, ok bool) {
	base, variant, hasVariant := strings.Cut(id, "@")
	if !locales[base] {
		return "", nil, false
	}
	bcp = strings.ReplaceAll(base, "_", "-")
	if base == "en_US_POSIX" {
		bcp, ukw = "en-US", []string{"va-posix"}
	}
	if hasVariant {
		k, co, ok := strings.Cut(variant, "=")
		if alias, ok := bcpCollation[co]; ok {
			co = alias
		}
		if !ok || k != "collation" || len(co) < 3 || len(co) > 8 {
			return "", nil, false
		}
		for _, r := range co {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
				return "", nil, false
			}
		}
		ukw = append(ukw, "co-"+co)
	}
	if _, err := language.Parse(bcp); err != nil {
		return "", nil, false
	}
	return bcp, ukw, true
}

func newCollator(s settings, bcp string, ukw []string) *Collator {
	c := &Collator{strength: s.strength, identical: s.strength == 5,
		tertiary:  s.strength >= 3 || s.caseLevel,
		spaceOnly: s.alternate == "shifted" && s.maxVariable == "space"}
	switch s.caseFirst {
	case "upper":
		c.caseFirst = 'u'
	case "lower":
		c.caseFirst = 'l'
	}
	// Options travel as BCP 47 -u- keywords, the only way x/text exposes strength, caseLevel,
	// backwards and alternate handling.
	kw := append([]string(nil), ukw...)
	kw = append(kw, "ks-"+[]string{"", "level1", "level2", "level3", "level4", "identic"}[s.strength])
	if s.caseLevel {
		kw = append(kw, "kc-true")
	}
	if s.backwards {
		kw = append(kw, "kb-true")
	}
	if s.numericOrdering {
		kw = append(kw, "kn-true")
	}
	if s.alternate == "shifted" && !c.spaceOnly {
		// x/text's variable range is ICU's "punct"; "space" is done in keys.go over a
		// non-ignorable collator.
		kw = append(kw, "ka-shifted")
	}
	tag, err := language.Parse(bcp + "-u-" + strings.Join(kw, "-"))
	if err != nil {
		// Unreachable for the fixed locale list and keywords above; fall back to the locale.
		tag = language.Make(bcp)
	}
	c.pool.New = func() any { return &worker{c: collate.New(tag)} }
	b := bsoncore.NewDocumentBuilder().
		AppendString("locale", s.locale).
		AppendBoolean("caseLevel", s.caseLevel).
		AppendString("caseFirst", s.caseFirst).
		AppendInt32("strength", int32(s.strength)).
		AppendBoolean("numericOrdering", s.numericOrdering).
		AppendString("alternate", s.alternate).
		AppendString("maxVariable", s.maxVariable).
		AppendBoolean("normalization", s.normalization).
		AppendBoolean("backwards", s.backwards).
		AppendString("version", Version)
	c.spec = b.Build()
	return c
}

// Spec returns the normalised spec: every option with its effective value, as MongoDB echoes
// it in listIndexes, listCollections and explain. The caller must not modify it.
func (c *Collator) Spec() bsoncore.Document { return c.spec }

// String is the spec in extended JSON, for messages.
func (c *Collator) String() string { return c.spec.String() }

// Strength returns the comparison level, 1 to 5.
func (c *Collator) Strength() int { return c.strength }

// Equal reports whether a and b collate identically; nil is the simple collation.
func Equal(a, b *Collator) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a == b || bytes.Equal(a.spec, b.spec)
}

// AppendKey appends the sort key of s to dst. Two strings compare under the collation as
// their keys compare with bytes.Compare.
func (c *Collator) AppendKey(dst []byte, s []byte) []byte {
	w := c.pool.Get().(*worker)
	dst = c.appendKey(w, dst, s)
	c.pool.Put(w)
	if c.identical {
		// Identical strength breaks remaining ties by the code points; the separator sorts
		// below any continuation so a key that is a prefix still sorts first.
		dst = append(dst, 0, 0)
		dst = append(dst, s...)
	}
	return dst
}

// Key returns the sort key of s.
func (c *Collator) Key(s string) []byte { return c.AppendKey(nil, []byte(s)) }

// Compare compares two strings under the collation: -1, 0 or 1.
func (c *Collator) Compare(a, b string) int { return c.CompareStrings([]byte(a), []byte(b)) }

// CompareStrings compares two UTF-8 strings under the collation; it does not retain them.
// It implements bsonutil.StringComparer.
// A nil Collator compares bytewise (the simple collation), so a nil *Collator stored in an
// interface is harmless.
func (c *Collator) CompareStrings(a, b []byte) int {
	if c == nil {
		return bytes.Compare(a, b)
	}
	if bytes.Equal(a, b) {
		return 0
	}
	w := c.pool.Get().(*worker)
	w.ka = c.appendKey(w, w.ka[:0], a)
	w.kb = c.appendKey(w, w.kb[:0], b)
	r := bytes.Compare(w.ka, w.kb)
	c.pool.Put(w)
	if r == 0 && c.identical {
		r = bytes.Compare(a, b)
	}
	return r
}

// GoString helps tests print collators.
func (c *Collator) GoString() string { return fmt.Sprintf("collation.Collator(%s)", c.spec) }
