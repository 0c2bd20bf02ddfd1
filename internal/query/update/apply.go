package update

import (
	"bytes"
	"encoding/binary"
	"iter"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// MaxDocumentSize is BSONObjMaxUserSize. Apply does not enforce it (the caller reports
// BSONObjectTooLarge with the namespace and _id); len(newDoc) is the size to check.
const MaxDocumentSize = 16 * 1024 * 1024

// MaxNestingDepth is BSONDepth's limit for stored documents, checked when
// ApplyContext.Validate is set.
const MaxNestingDepth = 100

// maxPadding is MongoDB's limit on nulls added to reach an array index (kMaxPaddingAllowed).
const maxPadding = 1500000

// ApplyContext describes one application of an update to one document.
type ApplyContext struct {
	// IsInsert is set when the document is being created by an upsert: $setOnInsert applies
	// and the result gets _id first.
	IsInsert bool
	// MatchedArrayIndex resolves the positional operator "$": the array index the query
	// matched (the matcher's ElemMatchKey). Empty when the query matched no array element.
	MatchedArrayIndex string
	// Validate checks the result is storable: nesting depth and _id type.
	Validate bool
}

// applyState is the per-Apply state. It lives on Apply's stack.
type applyState struct {
	u          *Update
	ctx        ApplyContext
	doc        bsoncore.Document
	renameVals []bsoncore.Value // source values of $rename, Type 0 when absent
	now        time.Time
	nowSet     bool
	num        [24]byte // scratch for arithmetic results
	wrap       []byte   // scratch for {"id": element} filter wrapping
}

var emptyDoc = []byte{5, 0, 0, 0, 0}

// Apply applies the update to doc and returns the new document and whether it differs from
// doc byte for byte (MongoDB's no-op detection: nModified counts only changed documents).
// When nothing changed, newDoc is doc itself. doc is never modified.
//
// Field order: existing fields keep their position; fields created by the update are
// appended in MongoDB 5.0+'s processing order, which is not the order of the update's
// fields: names that are array indexes numerically first, then the others bytewise. So
// {$set: {z: 1, a: 1}} on {_id: 1} gives {_id: 1, a: 1, z: 1}.
func (u *Update) Apply(doc bsoncore.Document, ctx ApplyContext) (newDoc bsoncore.Document, changed bool, err error) {
	doc, err = checkBSON(doc, "document")
	if err != nil {
		return nil, false, err
	}
	if u.isReplacement {
		return u.applyReplacement(doc, &ctx)
	}
	s := applyState{u: u, ctx: ctx, doc: doc}
	if len(u.renames) > 0 {
		if err := s.lookupRenames(); err != nil {
			return nil, false, err
		}
	}
	dst := make([]byte, 0, len(doc)+len(u.source)+16)
	dst, err = s.applyDoc(dst, u.root, doc)
	if err != nil {
		return nil, false, err
	}
	oldID, hadID := topLevelField(doc, "_id")
	newID, hasID := topLevelField(dst, "_id")
	if hadID && (!hasID || oldID.Type != newID.Type || !bytes.Equal(oldID.Data, newID.Data)) {
		return nil, false, mongoerr.New(mongoerr.ImmutableField,
			"Performing an update on the path '_id' would modify the immutable field '_id'")
	}
	if ctx.IsInsert && hasID {
		dst = idFirst(dst)
	}
	return finish(doc, dst, ctx.Validate)
}

func (u *Update) applyReplacement(doc bsoncore.Document, ctx *ApplyContext) (bsoncore.Document, bool, error) {
	oldID, hadID := topLevelField(doc, "_id")
	newID, hasID := topLevelField(u.replacement, "_id")
	if hadID && hasID && (oldID.Type != newID.Type || !bytes.Equal(oldID.Data, newID.Data)) {
		return nil, false, mongoerr.Newf(mongoerr.ImmutableField,
			"After applying the update, the (immutable) field '_id' was found to have been altered to %s",
			formatElement("_id", newID))
	}
	// The result is _id (the replacement's, else the old document's) followed by the
	// replacement's other fields in their order.
	dst := make([]byte, 0, len(u.replacement)+len(oldID.Data)+8)
	dst = append(dst, 0, 0, 0, 0)
	if hasID {
		dst = appendElem(dst, "_id", newID)
	} else if hadID {
		dst = appendElem(dst, "_id", oldID)
	}
	for e := range elems(u.replacement) {
		if string(e.KeyBytes()) == "_id" {
			continue
		}
		dst = append(dst, e...)
	}
	dst = append(dst, 0)
	binary.LittleEndian.PutUint32(dst, uint32(len(dst)))
	return finish(doc, dst, ctx.Validate)
}

// finish is the result of an update of doc that produced dst: dst checked for storage when
// validate is set, and doc itself when nothing changed.
func finish(doc, dst bsoncore.Document, validate bool) (bsoncore.Document, bool, error) {
	if validate {
		if err := validateStorage(dst); err != nil {
			return nil, false, err
		}
	}
	if bytes.Equal(dst, doc) {
		return doc, false, nil
	}
	return dst, true, nil
}

// elems iterates over the elements of a valid document or array (it stops at malformed
// bytes, which validated input never has, rather than loop forever).
func elems(doc []byte) iter.Seq[bsoncore.Element] {
	return func(yield func(bsoncore.Element) bool) {
		it := doc[4 : len(doc)-1]
		for len(it) > 0 {
			e, rest, ok := bsoncore.ReadElement(it)
			if !ok || !yield(e) {
				return
			}
			it = rest
		}
	}
}

// topLevelField returns the first top-level field named name of a valid document.
func topLevelField(doc []byte, name string) (bsoncore.Value, bool) {
	for e := range elems(doc) {
		if string(e.KeyBytes()) == name {
			return e.Value(), true
		}
	}
	return bsoncore.Value{}, false
}

// idFirst moves the _id field to the front of a valid document (inserts store _id first).
func idFirst(doc []byte) []byte {
	first, _, ok := bsoncore.ReadElement(doc[4:])
	if ok && string(first.KeyBytes()) == "_id" {
		return doc
	}
	out := make([]byte, 4, len(doc))
	var others []byte
	for e := range elems(doc) {
		if string(e.KeyBytes()) == "_id" {
			out = append(out, e...)
		} else {
			others = append(others, e...)
		}
	}
	out = append(out, others...)
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// validateStorage applies the storage checks MongoDB runs on an updated document.
func validateStorage(doc []byte) error {
	if id, ok := topLevelField(doc, "_id"); ok {
		switch id.Type {
		case bsoncore.TypeArray, bsoncore.TypeRegex, bsoncore.TypeUndefined:
			return mongoerr.Newf(mongoerr.InvalidIdField, "The '_id' value cannot be of type %s", typeName(id.Type))
		}
	}
	// The top-level document is level 1 ("each object or array adds a level").
	if depthExceeds(doc, 1) {
		return mongoerr.Newf(mongoerr.Overflow, "Document exceeds maximum nesting depth of %d", MaxNestingDepth)
	}
	return nil
}

// depthExceeds reports whether a valid document nests deeper than MaxNestingDepth.
func depthExceeds(doc []byte, depth int) bool {
	if depth > MaxNestingDepth {
		return true
	}
	for e := range elems(doc) {
		if t := bsoncore.Type(e[0]); t == bsoncore.TypeEmbeddedDocument || t == bsoncore.TypeArray {
			if depthExceeds(e.Value().Data, depth+1) {
				return true
			}
		}
	}
	return false
}

func (s *applyState) timeNow() time.Time {
	if !s.nowSet {
		s.now, s.nowSet = s.u.now(), true
	}
	return s.now
}

func (s *applyState) idString() string {
	if id, ok := topLevelField(s.doc, "_id"); ok {
		return formatElement("_id", id)
	}
	return ""
}

// lookupRenames reads every $rename source from the original document before anything
// changes (conflict checking guarantees no other modifier touches those paths) and checks
// that neither path goes through an array.
func (s *applyState) lookupRenames() error {
	s.renameVals = make([]bsoncore.Value, len(s.u.renames))
	for i, r := range s.u.renames {
		v, arrName := lookupNoArrays(s.doc, r.from)
		if arrName != "" {
			return mongoerr.Newf(mongoerr.BadValue,
				"The source field cannot be an array element, '%s' in doc with %s has an array field called '%s'",
				r.from, s.idOrNone(), arrName)
		}
		if v.Type == 0 {
			continue
		}
		if _, arrName := lookupNoArrays(s.doc, r.to); arrName != "" {
			return mongoerr.Newf(mongoerr.BadValue,
				"The destination field cannot be an array element, '%s' in doc with %s has an array field called '%s'",
				r.to, s.idOrNone(), arrName)
		}
		s.renameVals[i] = v
	}
	return nil
}

func (s *applyState) idOrNone() string {
	if id := s.idString(); id != "" {
		return id
	}
	return "no id"
}

// lookupNoArrays follows a dotted path through embedded documents. If an array is met before
// the last component, it returns that array field's name.
func lookupNoArrays(doc []byte, path string) (bsoncore.Value, string) {
	cur := doc
	for {
		head, rest, more := cutDot(path)
		v, ok := topLevelField(cur, head)
		if !ok {
			return bsoncore.Value{}, ""
		}
		if !more {
			return v, ""
		}
		switch v.Type {
		case bsoncore.TypeArray:
			return bsoncore.Value{}, head
		case bsoncore.TypeEmbeddedDocument:
			cur, path = v.Data, rest
		default:
			return bsoncore.Value{}, ""
		}
	}
}

func cutDot(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// appendHeader appends an element's type byte and key.
func appendHeader[K string | []byte](dst []byte, t bsoncore.Type, key K) []byte {
	dst = append(dst, byte(t))
	dst = append(dst, key...)
	return append(dst, 0)
}

func appendElem[K string | []byte](dst []byte, key K, v bsoncore.Value) []byte {
	dst = appendHeader(dst, v.Type, key)
	return append(dst, v.Data...)
}

func finishDoc(dst []byte, start int) []byte {
	dst = append(dst, 0)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// applyDoc writes the result of applying interior node n to the document doc.
func (s *applyState) applyDoc(dst []byte, n *node, doc []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var posName string
	if n.positional != nil {
		if s.ctx.MatchedArrayIndex == "" {
			return nil, errPositionalNotFound
		}
		posName = s.ctx.MatchedArrayIndex
	}
	var seenSmall uint64
	var seenBig []bool
	if len(n.fields) > 64 {
		seenBig = make([]bool, len(n.fields))
	}
	posSeen := false
	var err error
	for e := range elems(doc) {
		key := e.KeyBytes()
		ci := -1
		for i, c := range n.fields {
			if c.name == string(key) {
				ci = i
				break
			}
		}
		var c *node
		if ci >= 0 {
			c = n.fields[ci].n
			if seenBig != nil {
				seenBig[ci] = true
			} else {
				seenSmall |= 1 << ci
			}
		}
		if n.positional != nil && posName == string(key) && !posSeen {
			posSeen = true
			if c, err = mergeNodes(c, n.positional, n.positional.path); err != nil {
				return nil, err
			}
		}
		if c == nil {
			dst = append(dst, e...)
			continue
		}
		if dst, err = s.applyElem(dst, key, c, e.Value(), true, false); err != nil {
			return nil, err
		}
	}
	for i, ch := range n.fields {
		if (seenBig != nil && seenBig[i]) || (seenBig == nil && seenSmall&(1<<i) != 0) {
			continue
		}
		c := ch.n
		if n.positional != nil && !posSeen && posName == ch.name {
			posSeen = true
			if c, err = mergeNodes(c, n.positional, n.positional.path); err != nil {
				return nil, err
			}
		}
		if dst, err = s.applyElem(dst, ch.key, c, bsoncore.Value{}, false, false); err != nil {
			return nil, err
		}
	}
	if n.positional != nil && !posSeen {
		if dst, err = s.applyElem(dst, []byte(posName), n.positional, bsoncore.Value{}, false, false); err != nil {
			return nil, err
		}
	}
	return finishDoc(dst, start), nil
}

var errPositionalNotFound = mongoerr.New(mongoerr.BadValue,
	"The positional operator did not find the match needed from the query.")

// applyArray writes the result of applying interior node n to the array arr, the value of
// the field key (for messages).
func (s *applyState) applyArray(dst []byte, n *node, key []byte, arr []byte) ([]byte, error) {
	for _, c := range n.fields {
		if c.idx < 0 {
			if creates, _ := s.creates(c.n); creates || c.n.leaf != nil && s.leafCreates(c.n.leaf) {
				return nil, mongoerr.Newf(mongoerr.PathNotViable, "Cannot create field '%s' in element {%s}",
					c.name, formatElement(string(key), bsoncore.Value{Type: bsoncore.TypeArray, Data: arr}))
			}
		}
	}
	posIdx := -1
	if n.positional != nil {
		if s.ctx.MatchedArrayIndex == "" {
			return nil, errPositionalNotFound
		}
		posIdx = arrayIndex(s.ctx.MatchedArrayIndex)
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	it := arr[4 : len(arr)-1]
	i := 0
	var keyBuf [12]byte
	var err error
	for ; len(it) > 0; i++ {
		e, rest, ok := bsoncore.ReadElement(it)
		if !ok {
			break // unreachable for validated input; never loop forever
		}
		it = rest
		v := e.Value()
		var c *node
		for _, ch := range n.fields {
			if ch.idx == i {
				c = ch.n
				break
			}
		}
		if posIdx == i {
			if c, err = mergeNodes(c, n.positional, n.positional.path); err != nil {
				return nil, err
			}
		}
		if n.all != nil {
			if c, err = mergeNodes(c, n.all, n.all.path); err != nil {
				return nil, err
			}
		}
		for _, fc := range n.filtered {
			s.wrap = wrapValue(s.wrap[:0], fc.id, v)
			ok, ferr := fc.f.Matches(s.wrap)
			if ferr != nil {
				return nil, ferr
			}
			if ok {
				if c, err = mergeNodes(c, fc.n, fc.n.path); err != nil {
					return nil, err
				}
			}
		}
		if c == nil {
			// Array keys are rewritten to canonical indexes only when elements change,
			// so untouched elements are copied verbatim.
			dst = append(dst, e...)
			continue
		}
		if dst, err = s.applyElem(dst, itoa(keyBuf[:0], i), c, v, true, true); err != nil {
			return nil, err
		}
	}
	// Indexes past the end: pad with nulls, but only if the child creates something.
	for _, ch := range n.fields {
		if ch.idx < i {
			continue
		}
		c := ch.n
		if posIdx == ch.idx {
			if c, err = mergeNodes(c, n.positional, n.positional.path); err != nil {
				return nil, err
			}
		}
		if dst, i, err = s.applyPastEnd(dst, c, i, ch.idx); err != nil {
			return nil, err
		}
	}
	if posIdx >= i && n.field([]byte(s.ctx.MatchedArrayIndex)) == nil {
		if dst, _, err = s.applyPastEnd(dst, n.positional, i, posIdx); err != nil {
			return nil, err
		}
	}
	return finishDoc(dst, start), nil
}

// applyPastEnd applies c at array index idx >= length, padding with nulls; it returns the
// new length.
func (s *applyState) applyPastEnd(dst []byte, c *node, length, idx int) ([]byte, int, error) {
	if creates := c.leaf != nil && s.leafCreates(c.leaf); !creates && c.leaf == nil {
		creates, _ = s.creates(c)
		if !creates {
			return dst, length, nil
		}
	} else if !creates {
		return dst, length, nil
	}
	if idx-length > maxPadding {
		return nil, length, mongoerr.Newf(mongoerr.CannotBackfillArray,
			"can't backfill more than %d elements", maxPadding)
	}
	var keyBuf [12]byte
	mark := len(dst)
	for j := length; j < idx; j++ {
		dst = appendHeader(dst, bsoncore.TypeNull, itoa(keyBuf[:0], j))
	}
	before := len(dst)
	dst, err := s.applyElem(dst, itoa(keyBuf[:0], idx), c, bsoncore.Value{}, false, true)
	if err != nil {
		return nil, length, err
	}
	if len(dst) == before {
		return dst[:mark], length, nil
	}
	return dst, idx + 1, nil
}

// mergeNodes combines two subtrees that apply to the same array element (an explicit index,
// "$", "$[]" and matching "$[id]"s). Two modifiers on one path are a conflict, detected here
// at apply time as MongoDB does: "Update created a conflict at 'a.0'".
func mergeNodes(a, b *node, path string) (*node, error) {
	if a == nil {
		return b, nil
	}
	if b == nil {
		return a, nil
	}
	if a.leaf != nil || b.leaf != nil {
		return nil, mongoerr.Newf(mongoerr.ConflictingUpdateOperators, "Update created a conflict at '%s'", path)
	}
	m := &node{path: a.path, fields: slices.Clone(a.fields)}
	for _, bc := range b.fields {
		found := false
		for i, ac := range m.fields {
			if ac.name == bc.name {
				mc, err := mergeNodes(ac.n, bc.n, bc.n.path)
				if err != nil {
					return nil, err
				}
				m.fields[i] = &child{name: ac.name, key: ac.key, idx: ac.idx, n: mc}
				found = true
				break
			}
		}
		if !found {
			i, _ := slices.BinarySearchFunc(m.fields, bc, fieldOrder)
			m.fields = slices.Insert(m.fields, i, bc)
		}
	}
	var err error
	if m.positional, err = mergeNodes(a.positional, b.positional, path+".$"); err != nil {
		return nil, err
	}
	if m.all, err = mergeNodes(a.all, b.all, path+".$[]"); err != nil {
		return nil, err
	}
	m.filtered = slices.Clone(a.filtered)
	for _, bf := range b.filtered {
		found := false
		for i, af := range m.filtered {
			if af.id == bf.id {
				mc, err := mergeNodes(af.n, bf.n, bf.n.path)
				if err != nil {
					return nil, err
				}
				m.filtered[i] = &filteredChild{id: af.id, f: af.f, n: mc}
				found = true
				break
			}
		}
		if !found {
			m.filtered = append(m.filtered, bf)
		}
	}
	return m, nil
}

// leafCreates reports whether a modifier creates its field when the path is missing (and
// so fails when the path cannot be created). $unset, $pop, $pull, $pullAll and a $rename
// source never create; $setOnInsert only on insert; a $rename destination only when the
// source exists.
func (s *applyState) leafCreates(l *leaf) bool {
	switch l.op {
	case opUnset, opRenameSrc, opPop, opPull, opPullAll:
		return false
	case opSetOnInsert:
		return s.ctx.IsInsert
	case opRenameDst:
		return s.renameVals[l.rename].Type != 0
	}
	return true
}

// creates reports whether any modifier under interior node n creates fields, and the name
// of the first child that does (for PathNotViable messages).
func (s *applyState) creates(n *node) (bool, string) {
	check := func(c *node) bool {
		if c.leaf != nil {
			return s.leafCreates(c.leaf)
		}
		ok, _ := s.creates(c)
		return ok
	}
	for _, c := range n.fields {
		if check(c.n) {
			return true, c.name
		}
	}
	if n.positional != nil && check(n.positional) {
		return true, "$"
	}
	if n.all != nil && check(n.all) {
		return true, "$[]"
	}
	for _, fc := range n.filtered {
		if check(fc.n) {
			return true, "$[" + fc.id + "]"
		}
	}
	return false, ""
}

// applyElem writes the element that results from applying n to the field key whose current
// value is v (exists false when missing). It writes nothing when the field is removed or not
// created. inArray is set for array elements ($unset writes null there).
func (s *applyState) applyElem(dst []byte, key []byte, n *node, v bsoncore.Value, exists, inArray bool) ([]byte, error) {
	if n.leaf != nil {
		return s.applyLeaf(dst, key, n.leaf, v, exists, inArray)
	}
	arrayNode := n.all != nil || len(n.filtered) > 0
	if !exists {
		creates, _ := s.creates(n)
		if !creates {
			return dst, nil
		}
		if arrayNode {
			return nil, mongoerr.Newf(mongoerr.BadValue,
				"The path '%s' must exist in the document in order to apply array updates.", n.path)
		}
		mark := len(dst)
		dst = appendHeader(dst, bsoncore.TypeEmbeddedDocument, key)
		before := len(dst)
		dst, err := s.applyDoc(dst, n, emptyDoc)
		if err != nil {
			return nil, err
		}
		if len(dst)-before == len(emptyDoc) {
			dst = dst[:mark]
		}
		return dst, nil
	}
	switch v.Type {
	case bsoncore.TypeArray:
		dst = appendHeader(dst, bsoncore.TypeArray, key)
		return s.applyArray(dst, n, key, v.Data)
	case bsoncore.TypeEmbeddedDocument:
		if arrayNode {
			return nil, mongoerr.Newf(mongoerr.BadValue,
				"Cannot apply array updates to non-array element %s", formatElement(string(key), v))
		}
		dst = appendHeader(dst, bsoncore.TypeEmbeddedDocument, key)
		return s.applyDoc(dst, n, v.Data)
	}
	if arrayNode {
		return nil, mongoerr.Newf(mongoerr.BadValue,
			"Cannot apply array updates to non-array element %s", formatElement(string(key), v))
	}
	if creates, name := s.creates(n); creates {
		return nil, mongoerr.Newf(mongoerr.PathNotViable, "Cannot create field '%s' in element {%s}",
			name, formatElement(string(key), v))
	}
	return appendElem(dst, key, v), nil
}

// keep writes the field unchanged (or nothing if it is missing).
func keep(dst []byte, key []byte, v bsoncore.Value, exists bool) []byte {
	if !exists {
		return dst
	}
	return appendElem(dst, key, v)
}

func (s *applyState) applyLeaf(dst []byte, key []byte, l *leaf, v bsoncore.Value, exists, inArray bool) ([]byte, error) {
	switch l.op {
	case opSet:
		return appendElem(dst, key, l.arg), nil
	case opSetOnInsert:
		if s.ctx.IsInsert {
			return appendElem(dst, key, l.arg), nil
		}
		return keep(dst, key, v, exists), nil
	case opUnset, opRenameSrc:
		if exists && inArray {
			return appendHeader(dst, bsoncore.TypeNull, key), nil
		}
		return dst, nil
	case opRenameDst:
		if rv := s.renameVals[l.rename]; rv.Type != 0 {
			return appendElem(dst, key, rv), nil
		}
		return keep(dst, key, v, exists), nil
	case opInc, opMul:
		return s.applyArith(dst, key, l, v, exists)
	case opMin, opMax:
		if exists {
			c := bsonutil.Compare(l.arg, v)
			if (l.op == opMin && c >= 0) || (l.op == opMax && c <= 0) {
				return appendElem(dst, key, v), nil
			}
		}
		return appendElem(dst, key, l.arg), nil
	case opCurrentDate:
		now := s.timeNow()
		if l.timestamp {
			// A fresh timestamp; MongoDB takes the next oplog time, here (seconds, 1).
			dst = appendHeader(dst, bsoncore.TypeTimestamp, key)
			return bsoncore.AppendTimestamp(dst, uint32(now.Unix()), 1), nil
		}
		dst = appendHeader(dst, bsoncore.TypeDateTime, key)
		return bsoncore.AppendDateTime(dst, now.UnixMilli()), nil
	case opPush:
		return s.applyPush(dst, key, l, v, exists)
	case opAddToSet:
		return s.applyAddToSet(dst, key, l, v, exists)
	case opPop:
		return s.applyPop(dst, key, l, v, exists)
	case opPull, opPullAll:
		return s.applyPull(dst, key, l, v, exists)
	case opBit:
		cur := v
		if !exists {
			cur = bsoncore.Value{Type: bsoncore.TypeInt32, Data: []byte{0, 0, 0, 0}}
		} else if v.Type != bsoncore.TypeInt32 && v.Type != bsoncore.TypeInt64 {
			return nil, mongoerr.Newf(mongoerr.BadValue,
				"Cannot apply $bit to a value of non-integral type.{%s} has the field %s of non-integer type %s",
				s.idString(), l.name, typeName(v.Type))
		}
		r, _ := bitApply(s.num[:0], cur, l.bits)
		return appendElem(dst, key, r), nil
	}
	return nil, mongoerr.Newf(mongoerr.InternalError, "update: unknown modifier kind %d", l.op)
}

func (s *applyState) applyArith(dst []byte, key []byte, l *leaf, v bsoncore.Value, exists bool) ([]byte, error) {
	opName, op := "$inc", byte('+')
	if l.op == opMul {
		opName, op = "$mul", '*'
	}
	if !exists {
		if l.op == opInc {
			return appendElem(dst, key, l.arg), nil
		}
		// $mul on a missing field sets 0 of the multiplier's type.
		zero := bsoncore.Value{Type: bsoncore.TypeInt32, Data: []byte{0, 0, 0, 0}}
		r, _, _ := arith(s.num[:0], '*', l.arg, zero)
		return appendElem(dst, key, r), nil
	}
	if !bsonutil.IsNumber(v.Type) {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch,
			"Cannot apply %s to a value of non-numeric type. {%s} has the field '%s' of non-numeric type %s",
			opName, s.idString(), l.name, typeName(v.Type))
	}
	r, _, ok := arith(s.num[:0], op, v, l.arg)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.BadValue,
			"Failed to apply %s operations to current value (%s) for document {%s}",
			opName, debugNumber(v), s.idString())
	}
	return appendElem(dst, key, r), nil
}

// debugNumber renders a number like SafeNum::debugString: "(NumberLong)5".
func debugNumber(v bsoncore.Value) string {
	switch v.Type {
	case bsoncore.TypeInt32:
		return "(NumberInt)" + formatValue(v)
	case bsoncore.TypeInt64:
		return "(NumberLong)" + formatValue(v)
	case bsoncore.TypeDouble:
		return "(NumberDouble)" + formatValue(v)
	}
	return "(NumberDecimal)" + formatValue(v)
}

// arrayValues returns the elements of a valid array.
func arrayValues(arr []byte) []bsoncore.Value {
	var out []bsoncore.Value
	for e := range elems(arr) {
		out = append(out, e.Value())
	}
	return out
}

// appendArray writes key: [vals...].
func appendArray(dst []byte, key []byte, vals []bsoncore.Value) []byte {
	dst = appendHeader(dst, bsoncore.TypeArray, key)
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var kb [12]byte
	for i, v := range vals {
		dst = appendElem(dst, itoa(kb[:0], i), v)
	}
	return finishDoc(dst, start)
}

func (s *applyState) applyPush(dst []byte, key []byte, l *leaf, v bsoncore.Value, exists bool) ([]byte, error) {
	var vals []bsoncore.Value
	if exists {
		if v.Type != bsoncore.TypeArray {
			return nil, mongoerr.Newf(mongoerr.BadValue,
				"The field '%s' must be an array but is of type %s in document {%s}", l.name, typeName(v.Type), s.idString())
		}
		vals = arrayValues(v.Data)
	}
	// $position: where $each goes; negative counts from the end; past either end clamps.
	pos := int64(len(vals))
	if l.hasPosition {
		pos = l.position
		if pos < 0 {
			pos = max(0, int64(len(vals))+pos)
		}
		pos = min(pos, int64(len(vals)))
	}
	vals = slices.Insert(vals, int(pos), l.each...)
	if l.sort != nil {
		sortValues(vals, l.sort)
	}
	if l.hasSlice {
		n := int64(len(vals))
		switch {
		case l.slice >= 0 && l.slice < n:
			vals = vals[:l.slice]
		case l.slice < 0 && -l.slice < n:
			vals = vals[n+l.slice:]
		}
	}
	return appendArray(dst, key, vals), nil
}

// sortValues is $push's $sort: whole elements by BSON order, or documents by fields
// (non-documents sort as if the fields were missing, i.e. null).
func sortValues(vals []bsoncore.Value, spec *sortSpec) {
	slices.SortStableFunc(vals, func(a, b bsoncore.Value) int {
		if spec.whole != 0 {
			return spec.whole * bsonutil.Compare(a, b)
		}
		for _, f := range spec.fields {
			var x, y bsoncore.Value
			if d, ok := a.DocumentOK(); ok {
				x, _ = bsonutil.Lookup(d, f.path)
			}
			if d, ok := b.DocumentOK(); ok {
				y, _ = bsonutil.Lookup(d, f.path)
			}
			if c := bsonutil.Compare(x, y); c != 0 {
				return f.dir * c
			}
		}
		return 0
	})
}

func containsValue(vals []bsoncore.Value, v bsoncore.Value) bool {
	for _, x := range vals {
		if bsonutil.Compare(x, v) == 0 {
			return true
		}
	}
	return false
}

func (s *applyState) applyAddToSet(dst []byte, key []byte, l *leaf, v bsoncore.Value, exists bool) ([]byte, error) {
	var vals []bsoncore.Value
	if exists {
		if v.Type != bsoncore.TypeArray {
			return nil, mongoerr.Newf(mongoerr.BadValue,
				"Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s", l.name, typeName(v.Type))
		}
		vals = arrayValues(v.Data)
	}
	n := len(vals)
	for _, x := range l.each {
		if !containsValue(vals, x) {
			vals = append(vals, x)
		}
	}
	if exists && len(vals) == n {
		return appendElem(dst, key, v), nil
	}
	if vals == nil {
		vals = []bsoncore.Value{}
	}
	return appendArray(dst, key, vals), nil
}

func (s *applyState) applyPop(dst []byte, key []byte, l *leaf, v bsoncore.Value, exists bool) ([]byte, error) {
	if !exists {
		return dst, nil
	}
	if v.Type != bsoncore.TypeArray {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch,
			"Path '%s' contains an element of non-array type '%s'", l.path, typeName(v.Type))
	}
	vals := arrayValues(v.Data)
	if len(vals) == 0 {
		return appendElem(dst, key, v), nil
	}
	if l.popFirst {
		vals = vals[1:]
	} else {
		vals = vals[:len(vals)-1]
	}
	return appendArray(dst, key, vals), nil
}

func (s *applyState) applyPull(dst []byte, key []byte, l *leaf, v bsoncore.Value, exists bool) ([]byte, error) {
	if !exists {
		return dst, nil
	}
	if v.Type != bsoncore.TypeArray {
		return nil, mongoerr.New(mongoerr.BadValue, "Cannot apply $pull to a non-array value")
	}
	vals := arrayValues(v.Data)
	kept := vals[:0]
	for _, x := range vals {
		var remove bool
		if l.op == opPullAll {
			remove = containsValue(l.each, x)
		} else {
			var err error
			if remove, err = l.pull.matches(x, &s.wrap); err != nil {
				return nil, err
			}
		}
		if !remove {
			kept = append(kept, x)
		}
	}
	if len(kept) == len(vals) {
		return appendElem(dst, key, v), nil
	}
	return appendArray(dst, key, kept), nil
}
