package oplog

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// This file computes and applies MongoDB 5.0+'s `$v: 2` update diffs (doc_diff.h):
//
//	object diff: {d: {f: false, ...}, u: {f: v, ...}, i: {f: v, ...}, s<f>: <sub diff>, ...}
//	array diff:  {a: true, l: <new length>, u<idx>: v, s<idx>: <sub diff>, ...}
//
// Applying an object diff keeps the document's field order: fields in d or i are dropped,
// fields in u are replaced in place, fields in s<f> are patched in place, then i's fields
// are appended in order. The differ only keeps in place a prefix of the post image whose
// fields appear in the pre image in the same order; every later post field goes to i. So
// applying the diff to the post image again yields the post image: entries are idempotent
// (an $inc is logged as its resulting value), which replay after a crash and initial sync
// need.

// errDiffShape reports a diff that does not fit the document it is applied to (a sub-diff
// for a field that is neither an object nor an array). Only initial sync tolerates it.
var errDiffShape = errors.New("oplog: $v:2 diff does not match the document")

// errDupField makes the differ fall back to a replacement for documents with duplicate
// field names, which a by-name diff cannot express.
var errDupField = errors.New("oplog: duplicate field name")

// DiffDocuments returns the $v:2 object diff turning pre into post.
func DiffDocuments(pre, post bsoncore.Document) (bsoncore.Document, error) {
	return diffObject(pre, post, guide{})
}

// DiffUpdate is DiffDocuments for an update whose operators named paths (update.Paths): a
// changed field an operator named is logged whole (an array that only grew as its appended
// elements, as $push), one with named paths below it as a sub-diff, whatever their sizes,
// as MongoDB's update log builder logs them. Change streams derive updatedFields from it.
func DiffUpdate(pre, post bsoncore.Document, paths []string) (bsoncore.Document, error) {
	return diffObject(pre, post, guide{on: true, paths: paths})
}

// guide carries the operators' paths below the document being diffed (on: a guided diff).
type guide struct {
	on    bool
	paths []string
}

// below returns the guide for field name: whole when an operator named the field itself,
// and the paths below it (a "$" component, positional or filtered, matches any name).
func (g guide) below(name string) (sub guide, whole bool) {
	sub.on = true
	for _, p := range g.paths {
		first, rest, deeper := strings.Cut(p, ".")
		if first != name && !strings.HasPrefix(first, "$") {
			continue
		}
		if !deeper {
			whole = true
			continue
		}
		sub.paths = append(sub.paths, rest)
	}
	return sub, whole
}

// appended reports whether array post is array pre with elements added at its end.
func appended(pre, post bsoncore.Array) bool {
	pv, err1 := pre.Values()
	nv, err2 := post.Values()
	if err1 != nil || err2 != nil || len(nv) <= len(pv) {
		return false
	}
	for i, v := range pv {
		if v.Type != nv[i].Type || !bytes.Equal(v.Data, nv[i].Data) {
			return false
		}
	}
	return true
}

func diffObject(pre, post bsoncore.Document, g guide) (bsoncore.Document, error) {
	preEls, err := pre.Elements()
	if err != nil {
		return nil, err
	}
	postEls, err := post.Elements()
	if err != nil {
		return nil, err
	}
	preIdx := make(map[string]int, len(preEls))
	for i, e := range preEls {
		k := e.Key()
		if _, dup := preIdx[k]; dup {
			return nil, errDupField
		}
		preIdx[k] = i
	}
	postKeys := make(map[string]struct{}, len(postEls))
	for _, e := range postEls {
		k := e.Key()
		if _, dup := postKeys[k]; dup {
			return nil, errDupField
		}
		postKeys[k] = struct{}{}
	}
	// The kept prefix: post fields that exist in pre in increasing pre order.
	kept := 0
	last := -1
	for kept < len(postEls) {
		j, ok := preIdx[postEls[kept].Key()]
		if !ok || j <= last {
			break
		}
		last = j
		kept++
	}
	var del, upd, ins, sub []byte
	for _, e := range preEls {
		if _, ok := postKeys[e.Key()]; !ok {
			del = bsoncore.AppendBooleanElement(del, e.Key(), false)
		}
	}
	for _, e := range postEls[:kept] {
		k := e.Key()
		nv := e.Value()
		ov := preEls[preIdx[k]].Value()
		if ov.Type == nv.Type && bytes.Equal(ov.Data, nv.Data) {
			continue
		}
		sd, err := diffValue(ov, nv, g, k)
		if err != nil {
			return nil, err
		}
		if sd != nil {
			sub = bsoncore.AppendDocumentElement(sub, "s"+k, sd)
			continue
		}
		upd = bsoncore.AppendValueElement(upd, k, nv)
	}
	for _, e := range postEls[kept:] {
		ins = bsoncore.AppendValueElement(ins, e.Key(), e.Value())
	}
	start, out := bsoncore.AppendDocumentStart(nil)
	if del != nil {
		out = appendSubDoc(out, "d", del)
	}
	if upd != nil {
		out = appendSubDoc(out, "u", upd)
	}
	if ins != nil {
		out = appendSubDoc(out, "i", ins)
	}
	out = append(out, sub...)
	out, err = bsoncore.AppendDocumentEnd(out, start)
	return out, err
}

// appendSubDoc appends key: {elems}.
func appendSubDoc(dst []byte, key string, elems []byte) []byte {
	var idx int32
	idx, dst = bsoncore.AppendDocumentElementStart(dst, key)
	dst = append(dst, elems...)
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

// diffValue returns the sub-diff for the changed field name (ov → nv), or nil to log nv whole:
// unguided, when both are objects or arrays and the sub-diff is smaller than nv; guided, as
// DiffUpdate says.
func diffValue(ov, nv bsoncore.Value, g guide, name string) (bsoncore.Document, error) {
	objs := ov.Type == bsoncore.TypeEmbeddedDocument && nv.Type == bsoncore.TypeEmbeddedDocument
	arrs := ov.Type == bsoncore.TypeArray && nv.Type == bsoncore.TypeArray
	if !objs && !arrs {
		return nil, nil
	}
	sg := guide{}
	if g.on {
		var whole bool
		sg, whole = g.below(name)
		switch {
		case whole && arrs && appended(ov.Data, nv.Data):
			sg = guide{} // the appended elements, as u<i> entries
		case whole || len(sg.paths) == 0:
			return nil, nil
		}
	}
	var sd bsoncore.Document
	var err error
	if objs {
		sd, err = diffObject(ov.Data, nv.Data, sg)
	} else {
		sd, err = diffArray(ov.Data, nv.Data, sg)
	}
	switch {
	case errors.Is(err, errDupField):
		return nil, nil
	case err != nil:
		return nil, err
	case g.on || len(sd) < len(nv.Data):
		return sd, nil
	}
	return nil, nil
}

func diffArray(pre, post bsoncore.Array, g guide) (bsoncore.Document, error) {
	pv, err := pre.Values()
	if err != nil {
		return nil, err
	}
	nv, err := post.Values()
	if err != nil {
		return nil, err
	}
	start, out := bsoncore.AppendDocumentStart(nil)
	out = bsoncore.AppendBooleanElement(out, "a", true)
	// l (the new length) only when the array shrinks, as MongoDB's differ: elements added at
	// the end are u<n> entries, which grow the array when applied. Change streams report l as
	// a truncation (truncatedArrays), so growth must not carry it.
	if len(nv) < len(pv) {
		out = bsoncore.AppendInt32Element(out, "l", int32(len(nv)))
	}
	for i, v := range nv {
		idx := strconv.Itoa(i)
		if i < len(pv) {
			o := pv[i]
			if o.Type == v.Type && bytes.Equal(o.Data, v.Data) {
				continue
			}
			sd, err := diffValue(o, v, g, idx)
			if err != nil {
				return nil, err
			}
			if sd != nil {
				out = bsoncore.AppendDocumentElement(out, "s"+idx, sd)
				continue
			}
		}
		out = bsoncore.AppendValueElement(out, "u"+idx, v)
	}
	return bsoncore.AppendDocumentEnd(out, start)
}

// ApplyDiff applies the $v:2 object diff to doc and returns the new document.
func ApplyDiff(doc, diff bsoncore.Document) (bsoncore.Document, error) {
	return applyObject(doc, diff, 0)
}

const maxDiffDepth = 200

// objectDiff is a parsed object diff.
type objectDiff struct {
	del  map[string]struct{}
	upd  []bsoncore.Element
	ins  []bsoncore.Element
	sub  map[string]bsoncore.Document
	subK []string // s-keys in diff order (for fields missing from the document)
}

func parseObjectDiff(diff bsoncore.Document) (*objectDiff, error) {
	els, err := diff.Elements()
	if err != nil {
		return nil, err
	}
	od := &objectDiff{}
	for _, e := range els {
		k := e.Key()
		v := e.Value()
		switch {
		case k == "d" || k == "u" || k == "i":
			d, ok := v.DocumentOK()
			if !ok {
				return nil, fmt.Errorf("%w: %q is not an object", errDiffShape, k)
			}
			fs, err := d.Elements()
			if err != nil {
				return nil, err
			}
			switch k {
			case "d":
				od.del = make(map[string]struct{}, len(fs))
				for _, f := range fs {
					od.del[f.Key()] = struct{}{}
				}
			case "u":
				od.upd = fs
			case "i":
				od.ins = fs
			}
		case len(k) >= 1 && k[0] == 's':
			d, ok := v.DocumentOK()
			if !ok {
				return nil, fmt.Errorf("%w: %q is not an object", errDiffShape, k)
			}
			if od.sub == nil {
				od.sub = map[string]bsoncore.Document{}
			}
			od.sub[k[1:]] = d
			od.subK = append(od.subK, k[1:])
		default:
			return nil, fmt.Errorf("%w: unknown diff field %q", errDiffShape, k)
		}
	}
	return od, nil
}

func applyObject(doc, diff bsoncore.Document, depth int) (bsoncore.Document, error) {
	if depth > maxDiffDepth {
		return nil, fmt.Errorf("%w: nested too deeply", errDiffShape)
	}
	od, err := parseObjectDiff(diff)
	if err != nil {
		return nil, err
	}
	inIns := make(map[string]struct{}, len(od.ins))
	for _, e := range od.ins {
		inIns[e.Key()] = struct{}{}
	}
	updUsed := make([]bool, len(od.upd))
	subUsed := map[string]bool{}
	els, err := doc.Elements()
	if err != nil {
		return nil, err
	}
	start, out := bsoncore.AppendDocumentStart(nil)
	for _, e := range els {
		k := e.Key()
		if _, ok := od.del[k]; ok {
			continue
		}
		if _, ok := inIns[k]; ok {
			continue
		}
		if i := findElem(od.upd, k); i >= 0 {
			updUsed[i] = true
			out = bsoncore.AppendValueElement(out, k, od.upd[i].Value())
			continue
		}
		if sd, ok := od.sub[k]; ok {
			subUsed[k] = true
			nv, err := applySub(e.Value(), sd, depth)
			if err != nil {
				return nil, err
			}
			out = bsoncore.AppendValueElement(out, k, nv)
			continue
		}
		out = append(out, e...)
	}
	// Updates of fields the document lacks and sub-diffs of missing fields append, so a
	// replay over a document that is behind still converges (initial sync, recovery).
	for i, e := range od.upd {
		if !updUsed[i] {
			out = bsoncore.AppendValueElement(out, e.Key(), e.Value())
		}
	}
	for _, k := range od.subK {
		if subUsed[k] {
			continue
		}
		if _, ok := od.del[k]; ok {
			continue
		}
		nv, err := applySub(bsoncore.Value{}, od.sub[k], depth)
		if err != nil {
			return nil, err
		}
		out = bsoncore.AppendValueElement(out, k, nv)
	}
	for _, e := range od.ins {
		out = append(out, e...)
	}
	return bsoncore.AppendDocumentEnd(out, start)
}

func findElem(els []bsoncore.Element, k string) int {
	for i, e := range els {
		if e.Key() == k {
			return i
		}
	}
	return -1
}

// applySub applies sub-diff sd to v (the zero Value when the field is missing).
func applySub(v bsoncore.Value, sd bsoncore.Document, depth int) (bsoncore.Value, error) {
	isArr := false
	if a, err := sd.LookupErr("a"); err == nil {
		isArr = a.Type == bsoncore.TypeBoolean && a.Boolean()
	}
	if isArr {
		var arr bsoncore.Array
		switch v.Type {
		case bsoncore.TypeArray:
			arr = v.Data
		case 0:
			arr = bsoncore.Array(bsoncore.BuildArray(nil))
		default:
			return bsoncore.Value{}, fmt.Errorf("%w: array diff applied to %s", errDiffShape, v.Type)
		}
		na, err := applyArray(arr, sd, depth+1)
		if err != nil {
			return bsoncore.Value{}, err
		}
		return bsoncore.Value{Type: bsoncore.TypeArray, Data: na}, nil
	}
	var d bsoncore.Document
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument:
		d = v.Data
	case 0:
		d = bsoncore.BuildDocument(nil)
	default:
		return bsoncore.Value{}, fmt.Errorf("%w: object diff applied to %s", errDiffShape, v.Type)
	}
	nd, err := applyObject(d, sd, depth+1)
	if err != nil {
		return bsoncore.Value{}, err
	}
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: nd}, nil
}

var nullValue = bsoncore.Value{Type: bsoncore.TypeNull}

func applyArray(arr bsoncore.Array, diff bsoncore.Document, depth int) (bsoncore.Array, error) {
	if depth > maxDiffDepth {
		return nil, fmt.Errorf("%w: nested too deeply", errDiffShape)
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, err
	}
	els, err := diff.Elements()
	if err != nil {
		return nil, err
	}
	grow := func(n int) {
		for len(vals) < n {
			vals = append(vals, nullValue)
		}
	}
	for _, e := range els {
		k := e.Key()
		v := e.Value()
		switch {
		case k == "a":
		case k == "l":
			n, ok := v.AsInt64OK()
			if !ok || n < 0 || n > 1<<24 {
				return nil, fmt.Errorf("%w: bad array length", errDiffShape)
			}
			if int(n) < len(vals) {
				vals = vals[:n]
			} else {
				grow(int(n))
			}
		case len(k) > 1 && (k[0] == 'u' || k[0] == 's'):
			i, err := strconv.Atoi(k[1:])
			if err != nil || i < 0 || i > 1<<24 {
				return nil, fmt.Errorf("%w: bad array index %q", errDiffShape, k)
			}
			grow(i + 1)
			if k[0] == 'u' {
				vals[i] = v
				continue
			}
			sd, ok := v.DocumentOK()
			if !ok {
				return nil, fmt.Errorf("%w: %q is not an object", errDiffShape, k)
			}
			cur := vals[i]
			if cur.Type == bsoncore.TypeNull {
				cur = bsoncore.Value{}
			}
			nv, err := applySub(cur, sd, depth)
			if err != nil {
				return nil, err
			}
			vals[i] = nv
		default:
			return nil, fmt.Errorf("%w: unknown array diff field %q", errDiffShape, k)
		}
	}
	return bsoncore.Array(bsoncore.BuildArray(nil, vals...)), nil
}
