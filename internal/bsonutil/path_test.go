package bsonutil

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	. "humongo/internal/bsonutil/bsontest"
	"humongo/internal/mongoerr"
)

func TestSplitPath(t *testing.T) {
	good := map[string][]string{
		"a":       {"a"},
		"a.b":     {"a", "b"},
		"a.0.b":   {"a", "0", "b"},
		"$x.y":    {"$x", "y"},
		"a.$[].b": {"a", "$[]", "b"},
	}
	for p, want := range good {
		got, err := SplitPath(p)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitPath(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	bad := map[string]mongoerr.Code{
		"":       mongoerr.Location40352,
		".":      mongoerr.Location40353,
		"a..b":   mongoerr.Location15998,
		".a":     mongoerr.Location15998,
		"a.":     mongoerr.Location40353,
		"a\x00b": mongoerr.Location16411,
	}
	for p, code := range bad {
		if _, err := SplitPath(p); !mongoerr.Is(err, code) {
			t.Errorf("SplitPath(%q) err = %v, want code %v", p, err, code)
		}
	}
}

func TestLookup(t *testing.T) {
	doc := D(
		"a", Int32(1),
		"b", Doc("c", Doc("d", String("x"))),
		"arr", Arr(Int32(10), Doc("k", Int32(11)), Arr(Int32(12))),
		"x.y", Int32(99), // a field name containing a dot
		"x", Doc("y", Int32(5)),
		"dup", Int32(1), "dup", Int32(2),
	)
	cases := []struct {
		path string
		want bsoncore.Value
		ok   bool
	}{
		{"a", Int32(1), true},
		{"b.c.d", String("x"), true},
		{"b.c", Doc("d", String("x")), true},
		{"b.z", bsoncore.Value{}, false},
		{"a.b", bsoncore.Value{}, false}, // scalar in the middle
		{"arr.0", Int32(10), true},
		{"arr.1.k", Int32(11), true},
		{"arr.2.0", Int32(12), true},
		{"arr.3", bsoncore.Value{}, false},
		{"arr.k", bsoncore.Value{}, false}, // no fan-out
		{"arr.00", bsoncore.Value{}, false},
		{"x.y", Int32(99), true}, // literal dotted name wins, as in getFieldDotted
		{"dup", Int32(1), true},  // first match
		{"nope", bsoncore.Value{}, false},
	}
	for _, c := range cases {
		got, ok := Lookup(doc, c.path)
		if ok != c.ok || (ok && (got.Type != c.want.Type || string(got.Data) != string(c.want.Data))) {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", c.path, got, ok, c.want, c.ok)
		}
	}
}

// walkAll renders Walk's output: values as extended JSON, "missing" for the zero Value, and a
// "^" suffix when reached through an array.
func walkAll(doc bsoncore.Document, path string) string {
	var out []string
	Walk(doc, path, func(v bsoncore.Value, via bool) bool {
		s := "missing"
		if v.Type != 0 {
			s = v.String()
		}
		if via {
			s += "^"
		}
		out = append(out, s)
		return true
	})
	return strings.Join(out, " ")
}

func TestWalk(t *testing.T) {
	cases := []struct {
		doc  bsoncore.Document
		path string
		want string
	}{
		{D("a", Int32(1)), "a", `{"$numberInt":"1"}`},
		{D("a", Int32(1)), "b", `missing`},
		{D("a", Int32(5)), "a.b", `missing`},
		{D("a", Doc("b", Int32(1))), "a.b", `{"$numberInt":"1"}`},
		// The leaf array is reported whole, not expanded.
		{D("a", Arr(Int32(1), Int32(2))), "a", `[{"$numberInt":"1"},{"$numberInt":"2"}]`},
		// Fan-out over document elements; missing reported per document element.
		{D("a", Arr(Doc("b", Int32(1)), Doc("c", Int32(2)), Int32(3), Doc("b", Arr(Int32(4))))), "a.b",
			`{"$numberInt":"1"}^ missing^ [{"$numberInt":"4"}]^`},
		// Nested arrays are not traversed by a field name.
		{D("a", Arr(Arr(Doc("b", Int32(1))))), "a.b", ``},
		// Empty array: nothing.
		{D("a", Arr()), "a.b", ``},
		// Array of scalars: nothing.
		{D("a", Arr(Int32(1), Int32(2))), "a.b", ``},
		// Numeric component: positional element; documents also get "0" as a field name.
		{D("a", Arr(Int32(7), Int32(8))), "a.0", `{"$numberInt":"7"}^`},
		{D("a", Arr(Int32(7), Int32(8))), "a.1", `{"$numberInt":"8"}^`},
		{D("a", Arr(Int32(7))), "a.5", ``},
		{D("a", Arr(Doc("0", Int32(1)), Doc("x", Int32(2)))), "a.0",
			`{"$numberInt":"1"}^ {"0": {"$numberInt":"1"}}^ missing^`},
		{D("a", Arr(Doc("b", Int32(1)), Doc("b", Int32(2)))), "a.1.b",
			`missing^ missing^ {"$numberInt":"2"}^`},
		// Positional into a nested array, then fan-out inside it.
		{D("a", Arr(Arr(Doc("b", Int32(1)), Doc("b", Int32(2))))), "a.0.b",
			`{"$numberInt":"1"}^ {"$numberInt":"2"}^`},
		{D("a", Arr(Arr(Int32(5), Int32(6)))), "a.0.1", `{"$numberInt":"6"}^`},
		// Two levels of arrays.
		{D("a", Arr(Doc("b", Arr(Doc("c", Int32(1)), Doc("c", Int32(2)))))), "a.b.c",
			`{"$numberInt":"1"}^ {"$numberInt":"2"}^`},
		// An embedded document, then an array.
		{D("x", Doc("a", Arr(Doc("b", Int32(1))))), "x.a.b", `{"$numberInt":"1"}^`},
	}
	for _, c := range cases {
		if got := walkAll(c.doc, c.path); got != c.want {
			t.Errorf("Walk(%s, %q)\n got %s\nwant %s", c.doc, c.path, got, c.want)
		}
	}
}

func TestWalkStops(t *testing.T) {
	doc := D("a", Arr(Doc("b", Int32(1)), Doc("b", Int32(2)), Doc("b", Int32(3))))
	n := 0
	Walk(doc, "a.b", func(bsoncore.Value, bool) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("fn called %d times after returning false at 2", n)
	}
}

func TestMultikeyComponents(t *testing.T) {
	cases := []struct {
		doc  bsoncore.Document
		path string
		want []int
	}{
		{D("a", Int32(1)), "a", nil},
		{D("a", Arr(Int32(1))), "a", []int{0}},
		{D("a", Arr()), "a", []int{0}},
		{D("a", Arr(Doc("b", Int32(1)))), "a.b", []int{0}},
		{D("a", Arr(Doc("b", Arr(Int32(1))))), "a.b", []int{0, 1}},
		{D("a", Doc("b", Arr(Int32(1)))), "a.b", []int{1}},
		{D("a", Doc("b", Doc("c", Arr()))), "a.b.c", []int{2}},
		{D("a", Arr(Doc("b", Int32(1)))), "a.0.b", nil}, // positional: not multikey
		{D("a", Arr(Arr(Int32(1)))), "a.0", []int{1}},
		{D("b", Arr(Int32(1))), "a", nil},
		{D("a", Arr(Doc("x", Int32(1)), Doc("b", Arr()))), "a.b", []int{0, 1}},
	}
	for _, c := range cases {
		got, err := MultikeyComponents(c.doc, c.path)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("MultikeyComponents(%s, %q) = %v, %v; want %v", c.doc, c.path, got, err, c.want)
		}
	}
	if _, err := MultikeyComponents(D("a", Int32(1)), "a..b"); !mongoerr.Is(err, mongoerr.Location15998) {
		t.Errorf("bad path err = %v", err)
	}
	bad := D("a", Arr(Int32(1)))
	bad = bad[:len(bad)-3]
	if _, err := MultikeyComponents(bad, "a"); !mongoerr.Is(err, mongoerr.InvalidBSON) {
		t.Errorf("malformed doc err = %v", err)
	}
}

func TestExtractElements(t *testing.T) {
	doc := D("a", Arr(Doc("b", Arr(Int32(1), Int32(2))), Doc("b", Int32(3)), Doc("c", Int32(4))))
	var got []string
	var comps []int
	err := ExtractElements(doc, "a.b", true, func(v bsoncore.Value) { got = append(got, v.String()) },
		func(c int) { comps = append(comps, c) })
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != `[{"$numberInt":"1"} {"$numberInt":"2"} {"$numberInt":"3"}]` {
		t.Errorf("elements = %v", got)
	}
	if !slices.Contains(comps, 0) || !slices.Contains(comps, 1) {
		t.Errorf("components = %v", comps)
	}
	got = nil
	_ = ExtractElements(doc, "a.b", false, func(v bsoncore.Value) { got = append(got, v.String()) }, nil)
	if len(got) != 2 || !strings.HasPrefix(got[0], "[") {
		t.Errorf("unexpanded trailing = %v", got)
	}
}
