package bsonutil

import (
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// ValidateUTF8 checks that every field name and every string-like value (string, symbol,
// JavaScript code, regex pattern and options, dbPointer namespace) in doc is valid UTF-8,
// recursively. doc must already be structurally valid (Validate). MongoDB's default
// validation does not check UTF-8, but a string that is not UTF-8 cannot round-trip through
// any driver, so Humongo refuses it at the command boundary rather than store it.
func ValidateUTF8(doc bsoncore.Document) error {
	if path, ok := utf8Doc(doc, 0); !ok {
		return mongoerr.Newf(mongoerr.InvalidBSON, "invalid UTF-8 in field %q", path)
	}
	return nil
}

func utf8Doc(doc bsoncore.Document, depth int) (string, bool) {
	if depth > MaxDepth {
		return "", true // Validate bounds depth; nothing more to check here
	}
	if len(doc) < 5 {
		return "", true
	}
	// Iterate in place: this runs on every command, so no per-level slices.
	for it := doc[4 : len(doc)-1]; len(it) > 0; {
		e, rest, read := bsoncore.ReadElement(it)
		if !read {
			return "", true // structure is Validate's business
		}
		it = rest
		k := e.Key()
		if !utf8.ValidString(k) {
			return "<field name>", false
		}
		v := e.Value()
		ok := true
		switch v.Type {
		case bsoncore.TypeString, bsoncore.TypeSymbol, bsoncore.TypeJavaScript:
			s, _, rok := bsoncore.ReadString(v.Data)
			ok = !rok || utf8.ValidString(s)
		case bsoncore.TypeRegex:
			p, o, rok := v.RegexOK()
			ok = !rok || utf8.ValidString(p) && utf8.ValidString(o)
		case bsoncore.TypeDBPointer:
			ns, _, rok := v.DBPointerOK()
			ok = !rok || utf8.ValidString(ns)
		case bsoncore.TypeCodeWithScope:
			code, scope, rok := v.CodeWithScopeOK()
			if rok {
				if !utf8.ValidString(code) {
					return k, false
				}
				if p, good := utf8Doc(scope, depth+1); !good {
					return k + "." + p, false
				}
			}
		case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
			if p, good := utf8Doc(v.Data, depth+1); !good {
				return k + "." + p, false
			}
		}
		if !ok {
			return k, false
		}
	}
	return "", true
}
