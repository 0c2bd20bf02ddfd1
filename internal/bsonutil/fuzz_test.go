package bsonutil

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	. "humongo/internal/bsonutil/bsontest"
)

// FuzzCompareRaw splits random bytes into two documents and checks that comparing them (as
// documents, as object values, as array values, and as values of the type named by the first
// byte) never panics and is antisymmetric, and that Walk, Lookup and MultikeyComponents survive
// the same bytes.
func FuzzCompareRaw(f *testing.F) {
	seeds := []bsoncore.Document{
		D("a", Int32(1)),
		D("a", Arr(Doc("b", Decimal("1.5")), String("x")), "c", CodeWithScope("f", D("z", Null()))),
		D("r", Regex("a", "i"), "p", DBPointer("db.c", [12]byte{}), "b", Binary(2, []byte{1, 2})),
	}
	for i, a := range seeds {
		b := seeds[(i+1)%len(seeds)]
		f.Add(append(append([]byte{}, a...), b...), uint16(len(a)), byte(bsoncore.TypeEmbeddedDocument))
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16, typ byte) {
		cut := int(split) % (len(data) + 1)
		a, b := data[:cut], data[cut:]
		if c1, c2 := CompareDocuments(a, b), CompareDocuments(b, a); c1 != -c2 {
			t.Fatalf("CompareDocuments not antisymmetric: %d %d", c1, c2)
		}
		for _, ty := range []bsoncore.Type{bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray, bsoncore.Type(typ)} {
			va, vb := bsoncore.Value{Type: ty, Data: a}, bsoncore.Value{Type: ty, Data: b}
			if c1, c2 := Compare(va, vb), Compare(vb, va); c1 != -c2 {
				t.Fatalf("Compare(%#x) not antisymmetric: %d %d", typ, c1, c2)
			}
			if Compare(va, va) != 0 {
				t.Fatalf("Compare(%#x) not reflexive", typ)
			}
			_, _ = CompareErr(va, vb)
			_, _ = ToFloat64(va)
			_, _ = ToInt64Exact(va)
		}
		for _, p := range []string{"a", "a.b", "a.0", "a.0.b", "r.p"} {
			Walk(a, p, func(v bsoncore.Value, _ bool) bool { Compare(v, v); return true })
			Lookup(a, p)
			_, _ = MultikeyComponents(a, p)
		}
	})
}

// FuzzLookup runs Lookup, Walk and MultikeyComponents with fuzzed paths over fuzzed documents
// and checks that Lookup's result, when found, is a value Walk can also reach for paths
// without arrays on the way.
func FuzzLookup(f *testing.F) {
	f.Add([]byte(D("a", Doc("b", Int32(1)))), "a.b")
	f.Add([]byte(D("a", Arr(Doc("b", Int32(1)), Int32(2)))), "a.0.b")
	f.Add([]byte(D("a.b", Int32(3))), "a.b")
	f.Fuzz(func(t *testing.T, doc []byte, path string) {
		v, ok := Lookup(doc, path)
		if ok {
			Compare(v, v)
		}
		Walk(doc, path, func(v bsoncore.Value, _ bool) bool { Compare(v, v); return true })
		_, _ = MultikeyComponents(doc, path)
		_, _ = SplitPath(path)
		// Cross-check on well-formed documents whose path crosses only embedded documents:
		// Walk reports exactly the value Lookup finds.
		if ok && ValidatePath(path) == nil && bsoncore.Document(doc).Validate() == nil && noArrayOnPath(doc, path) && !literalDotted(doc, path) {
			n := 0
			Walk(doc, path, func(w bsoncore.Value, via bool) bool {
				n++
				if via || w.Type != v.Type || string(w.Data) != string(v.Data) {
					t.Fatalf("Walk gave %v (via %v), Lookup %v", w, via, v)
				}
				return true
			})
			if n != 1 {
				t.Fatalf("Walk reported %d values, Lookup found one", n)
			}
		}
	})
}

// noArrayOnPath reports whether every prefix of path resolves to a non-array value.
func noArrayOnPath(doc []byte, path string) bool {
	for i := 0; i < len(path); i++ {
		if path[i] == '.' {
			if v, ok := Lookup(doc, path[:i]); !ok || v.Type != bsoncore.TypeEmbeddedDocument {
				return false
			}
		}
	}
	return true
}

// literalDotted reports whether some level has a field literally named by a dotted suffix,
// where Lookup (getFieldDotted) and the matcher legitimately differ.
func literalDotted(doc []byte, path string) bool {
	for i := 0; i < len(path); i++ {
		if path[i] == '.' {
			if _, ok := getField(doc, path); ok {
				return true
			}
			v, ok := getField(doc, path[:i])
			if !ok {
				return false
			}
			return literalDotted(v.Data, path[i+1:])
		}
	}
	return false
}
