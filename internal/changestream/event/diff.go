package event

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// An update event's updateDescription comes from the entry's $v:2 diff (internal/repl/oplog's
// diff.go; MongoDB's change_stream_document_diff_parser.cpp):
//
//	object diff {u: {f: v}, i: {f: v}, d: {f: false}, s<f>: <sub diff>}
//	array diff  {a: true, l: <new length>, u<n>: v, s<n>: <sub diff>}
//
// At each level of an object diff, u's then i's fields become updatedFields, then d's become
// removedFields, then the sub diffs are walked in order; an array diff's l becomes a
// truncatedArrays entry {field, newSize} (the differ writes l only when the array shrinks;
// elements added at its end are u<n> entries, so updatedFields "a.3"), then its u<n> and
// s<n> entries in order. Paths are dotted; a path that a dotted string cannot say
// unambiguously (a field name containing a dot, or a field name other than the first that is
// all digits and so reads as an array index) is also listed in disambiguatedPaths as an array
// of its components, array indexes as ints.

// maxDiffDepth bounds the recursion over nested sub diffs (a document cannot nest deeper than
// BSON's depth limit anyway).
const maxDiffDepth = 200

// pathPart is one component of the path being walked.
type pathPart struct {
	name  string
	index bool // an array index (from an array diff), not a field name
	// ambiguous: the path up to here cannot be told from its dotted string.
	ambiguous bool
}

// updateDesc accumulates an updateDescription.
type updateDesc struct {
	path      []pathPart
	updated   []byte // elements of updatedFields
	removed   []string
	truncated []truncation
	disamb    []byte // elements of disambiguatedPaths
}

type truncation struct {
	field   string
	newSize int32
}

func (u *updateDesc) push(name string, index bool) {
	amb := false
	if n := len(u.path); n > 0 && u.path[n-1].ambiguous {
		amb = true
	} else if !index {
		// FieldRef::isNumericPathComponentStrict, but not for the first component (a
		// top-level field cannot be an array index), or an embedded dot.
		amb = (len(u.path) > 0 && numericStrict(name)) || strings.Contains(name, ".")
	}
	u.path = append(u.path, pathPart{name: name, index: index, ambiguous: amb})
}

func (u *updateDesc) pop() { u.path = u.path[:len(u.path)-1] }

func numericStrict(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (u *updateDesc) dotted() string {
	var b strings.Builder
	for i, p := range u.path {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p.name)
	}
	return b.String()
}

// noteAmbiguous adds the current path to disambiguatedPaths if it is ambiguous.
func (u *updateDesc) noteAmbiguous(dotted string) {
	if len(u.path) == 0 || !u.path[len(u.path)-1].ambiguous {
		return
	}
	ai, d := bsoncore.AppendArrayElementStart(u.disamb, dotted)
	for i, p := range u.path {
		if p.index {
			n, _ := strconv.Atoi(p.name)
			d = bsoncore.AppendInt32Element(d, strconv.Itoa(i), int32(n))
		} else {
			d = bsoncore.AppendStringElement(d, strconv.Itoa(i), p.name)
		}
	}
	u.disamb, _ = bsoncore.AppendArrayEnd(d, ai)
}

func (u *updateDesc) addUpdated(name string, index bool, v bsoncore.Value) {
	u.push(name, index)
	p := u.dotted()
	u.updated = bsoncore.AppendValueElement(u.updated, p, v)
	u.noteAmbiguous(p)
	u.pop()
}

func (u *updateDesc) addRemoved(name string) {
	u.push(name, false)
	p := u.dotted()
	u.removed = append(u.removed, p)
	u.noteAmbiguous(p)
	u.pop()
}

func badDiff(format string, args ...any) error {
	return mongoerr.Newf(mongoerr.BadValue, "invalid $v:2 update diff in the oplog: "+format, args...)
}

// walkObject walks an object diff at the current path.
func (u *updateDesc) walkObject(diff bsoncore.Document, depth int) error {
	if depth > maxDiffDepth {
		return badDiff("nested too deeply")
	}
	els, err := diff.Elements()
	if err != nil {
		return badDiff("%v", err)
	}
	section := func(k string) ([]bsoncore.Element, error) {
		for _, e := range els {
			if e.Key() != k {
				continue
			}
			d, ok := e.Value().DocumentOK()
			if !ok {
				return nil, badDiff("%q is not an object", k)
			}
			fs, err := d.Elements()
			if err != nil {
				return nil, badDiff("%v", err)
			}
			return fs, nil
		}
		return nil, nil
	}
	for _, k := range [...]string{"u", "i"} {
		fs, err := section(k)
		if err != nil {
			return err
		}
		for _, f := range fs {
			u.addUpdated(f.Key(), false, f.Value())
		}
	}
	fs, err := section("d")
	if err != nil {
		return err
	}
	for _, f := range fs {
		u.addRemoved(f.Key())
	}
	for _, e := range els {
		k := e.Key()
		switch {
		case k == "u" || k == "i" || k == "d":
		case strings.HasPrefix(k, "s"):
			sd, ok := e.Value().DocumentOK()
			if !ok {
				return badDiff("%q is not an object", k)
			}
			u.push(k[1:], false)
			if err := u.walkSub(sd, depth+1); err != nil {
				return err
			}
			u.pop()
		default:
			return badDiff("unknown field %q", k)
		}
	}
	return nil
}

// walkSub walks a sub diff: an array diff ({a: true, ...}) or an object diff.
func (u *updateDesc) walkSub(sd bsoncore.Document, depth int) error {
	if isArray, _ := sd.Lookup("a").BooleanOK(); isArray {
		return u.walkArray(sd, depth)
	}
	return u.walkObject(sd, depth)
}

// walkArray walks an array diff at the current path (the array's).
func (u *updateDesc) walkArray(diff bsoncore.Document, depth int) error {
	if depth > maxDiffDepth {
		return badDiff("nested too deeply")
	}
	els, err := diff.Elements()
	if err != nil {
		return badDiff("%v", err)
	}
	if v, err := diff.LookupErr("l"); err == nil {
		n, ok := v.AsInt64OK()
		if !ok || n < 0 || n > 1<<31-1 {
			return badDiff("bad array length %v", v)
		}
		p := u.dotted()
		u.truncated = append(u.truncated, truncation{field: p, newSize: int32(n)})
		u.noteAmbiguous(p)
	}
	for _, e := range els {
		k := e.Key()
		switch {
		case k == "a" || k == "l":
		case len(k) > 1 && (k[0] == 'u' || k[0] == 's'):
			i, err := strconv.Atoi(k[1:])
			if err != nil || i < 0 {
				return badDiff("bad array index %q", k)
			}
			idx := strconv.Itoa(i)
			if k[0] == 'u' {
				u.addUpdated(idx, true, e.Value())
				continue
			}
			sd, ok := e.Value().DocumentOK()
			if !ok {
				return badDiff("%q is not an object", k)
			}
			u.push(idx, true)
			if err := u.walkSub(sd, depth+1); err != nil {
				return err
			}
			u.pop()
		default:
			return badDiff("unknown array diff field %q", k)
		}
	}
	return nil
}

// appendUpdateDescription appends the updateDescription element for the $v:2 diff
// (disambiguatedPaths only with expanded events, as MongoDB).
func appendUpdateDescription(dst []byte, diff bsoncore.Document, expanded bool) ([]byte, error) {
	var u updateDesc
	if err := u.walkObject(diff, 0); err != nil {
		return nil, err
	}
	di, dst := bsoncore.AppendDocumentElementStart(dst, "updateDescription")
	dst = appendSubDoc(dst, "updatedFields", u.updated)
	ai, dst := bsoncore.AppendArrayElementStart(dst, "removedFields")
	for i, p := range u.removed {
		dst = bsoncore.AppendStringElement(dst, strconv.Itoa(i), p)
	}
	dst, _ = bsoncore.AppendArrayEnd(dst, ai)
	ti, dst := bsoncore.AppendArrayElementStart(dst, "truncatedArrays")
	for i, t := range u.truncated {
		var ei int32
		ei, dst = bsoncore.AppendDocumentElementStart(dst, strconv.Itoa(i))
		dst = bsoncore.AppendStringElement(dst, "field", t.field)
		dst = bsoncore.AppendInt32Element(dst, "newSize", t.newSize)
		dst, _ = bsoncore.AppendDocumentEnd(dst, ei)
	}
	dst, _ = bsoncore.AppendArrayEnd(dst, ti)
	if expanded {
		dst = appendSubDoc(dst, "disambiguatedPaths", u.disamb)
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, di)
	return dst, nil
}

// appendSubDoc appends key: {elems}.
func appendSubDoc(dst []byte, key string, elems []byte) []byte {
	i, dst := bsoncore.AppendDocumentElementStart(dst, key)
	dst = append(dst, elems...)
	dst, _ = bsoncore.AppendDocumentEnd(dst, i)
	return dst
}
