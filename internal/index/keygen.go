package index

import (
	"fmt"
	"math"
	"math/bits"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/query"
)

// MongoDB location codes that internal/mongoerr does not list yet (reported to its owner);
// they should move there as Location16766 / Location16746.
const (
	codeHashedArray         = mongoerr.Location16766 // array value in a hashed index
	codeAmbiguousPositional = mongoerr.Location16746 // numeric field name both in array and element
)

// MaxKeyFields is the server's limit on fields in a compound key pattern.
const MaxKeyFields = 32

// maxPathParts bounds the components of one indexed path so multikey components fit a uint64.
const maxPathParts = 64

// Filter is a partial index's filter (partialFilterExpression): a *query.Matcher from
// query.ParsePartialFilter, or a stub in key generation tests.
type Filter interface {
	Matches(doc bsoncore.Document) (bool, error)
}

var _ Filter = (*query.Matcher)(nil)

// keyField is one field of a key pattern.
type keyField struct {
	path   string
	parts  int  // number of dotted components
	desc   bool // descending
	hashed bool
}

// KeyGenOptions are the index options that affect which keys a document produces.
type KeyGenOptions struct {
	Sparse bool
	// Filter, when non-nil, restricts the index to documents it matches (partial index).
	Filter Filter
}

// KeyGenerator generates the index keys of documents for one key pattern, implementing
// MongoDB's BtreeKeyGenerator (arrays fan out, one key per element, with multikey path
// tracking and the parallel-arrays rule) and ExpressionKeysPrivate::getHashKeys for hashed
// patterns. Safe for concurrent use; per-call state lives in the caller's KeySet.
type KeyGenerator struct {
	fields []keyField
	sparse bool
	hashed bool // the pattern has a hashed field: hashed key generation for every field
	filter Filter
	// descMask has bit i set when field i is descending (keystring.Ordering's layout).
	descMask uint32
}

// NewKeyGenerator parses a key pattern such as {a: 1, "b.c": -1} or {s: "hashed"}.
func NewKeyGenerator(keyPattern bsoncore.Document, opts KeyGenOptions) (*KeyGenerator, error) {
	g := &KeyGenerator{sparse: opts.Sparse, filter: opts.Filter}
	it, err := newElemIter(keyPattern)
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.CannotCreateIndex, "invalid index key pattern: %v", err)
	}
	nHashed := 0
	for {
		name, v, ok, err := it.next()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.CannotCreateIndex, "invalid index key pattern: %v", err)
		}
		if !ok {
			break
		}
		f := keyField{path: string(name)}
		if f.path == "" || strings.HasPrefix(f.path, ".") || strings.HasSuffix(f.path, ".") ||
			strings.Contains(f.path, "..") {
			return nil, mongoerr.Newf(mongoerr.CannotCreateIndex,
				"Index key contains an illegal field name: '%s'", f.path)
		}
		f.parts = strings.Count(f.path, ".") + 1
		if f.parts > maxPathParts {
			return nil, mongoerr.Newf(mongoerr.CannotCreateIndex,
				"Index key path '%s' has more than %d components", f.path, maxPathParts)
		}
		switch v.Type {
		case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
			d, ok := v.AsFloat64OK()
			if !ok && v.Type != bsoncore.TypeDecimal128 {
				return nil, mongoerr.New(mongoerr.CannotCreateIndex, "invalid index key pattern")
			}
			if v.Type == bsoncore.TypeDecimal128 {
				d = decimalSign(v)
			}
			if d == 0 || math.IsNaN(d) {
				return nil, mongoerr.Newf(mongoerr.CannotCreateIndex,
					"Values in the index key pattern can't be all-zero: field %s", f.path)
			}
			f.desc = d < 0
		case bsoncore.TypeString:
			s := v.StringValue()
			if s != "hashed" {
				return nil, mongoerr.Newf(mongoerr.CannotCreateIndex,
					"Unknown or unsupported index type %q in key pattern field %s", s, f.path)
			}
			f.hashed = true
			nHashed++
		default:
			return nil, mongoerr.Newf(mongoerr.CannotCreateIndex,
				"Values in v:2 index key pattern cannot be of type %s. Only numbers > 0, numbers < 0, and strings are allowed.",
				v.Type)
		}
		if len(g.fields) == MaxKeyFields {
			return nil, mongoerr.Newf(mongoerr.CannotCreateIndex,
				"Index key pattern has more than %d fields", MaxKeyFields)
		}
		if f.desc {
			g.descMask |= 1 << len(g.fields)
		}
		g.fields = append(g.fields, f)
	}
	if len(g.fields) == 0 {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "Index keys cannot be an empty field")
	}
	if nHashed > 1 {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex,
			"A maximum of one index field is allowed to be hashed")
	}
	g.hashed = nHashed == 1
	return g, nil
}

func decimalSign(v bsoncore.Value) float64 {
	hi, lo, _, ok := bsoncore.ReadDecimal128(v.Data)
	if !ok {
		return 0
	}
	d := decimalToLongForHash(bson.NewDecimal128(hi, lo))
	switch {
	case d > 0:
		return 1
	case d < 0:
		return -1
	case hi>>63 == 1:
		return -1e-300 // tiny negative fraction such as -0.5
	}
	return 1e-300
}

// NumFields is the number of fields in the key pattern.
func (g *KeyGenerator) NumFields() int { return len(g.fields) }

// DescendingMask has bit i set when key field i is descending.
func (g *KeyGenerator) DescendingMask() uint32 { return g.descMask }

// Paths returns the key pattern's field paths in order.
func (g *KeyGenerator) Paths() []string {
	out := make([]string, len(g.fields))
	for i, f := range g.fields {
		out[i] = f.path
	}
	return out
}

// PathParts returns the number of dotted components of field i (for multikey paths).
func (g *KeyGenerator) PathParts(i int) int { return g.fields[i].parts }

// IsHashed reports whether the pattern has a hashed field.
func (g *KeyGenerator) IsHashed() bool { return g.hashed }

// Sparse reports whether the generator skips documents missing every key field.
func (g *KeyGenerator) Sparse() bool { return g.sparse }

// KeySet receives the keys of one document. Reuse one per goroutine: its buffers are recycled
// across calls so that steady-state key generation does not allocate. Values may point into
// the document, so the document must outlive the KeySet's use.
type KeySet struct {
	nf   int
	vals []bsoncore.Value // key i is vals[i*nf : (i+1)*nf]
	// multikey[i] has bit c set when component c of field i's path traversed an array.
	multikey []uint64
	frames   []frame
	hashBuf  [MaxKeyFields][8]byte
	// Skipped is true when a sparse or partial index does not index the document at all.
	Skipped bool
}

// frame is the per-recursion-depth copy of MongoDB's by-value fieldNames/fixed vectors.
type frame struct {
	names []string
	fixed []bsoncore.Value
	pos   []posInfo // positional info handed to the next depth
}

// posInfo is MongoDB's PositionalPathInfo: for paths like "a.1.b" the element at the numeric
// position is looked up once per array rather than once per array element.
type posInfo struct {
	has       bool
	posElt    bsoncore.Value // positionallyIndexedElt
	arrayObj  []byte
	dotted    bsoncore.Value
	dottedNm  string // field name of dotted, for error messages
	dottedOK  bool
	remaining string
}

// Len is the number of keys generated (before KeyString deduplication).
func (ks *KeySet) Len() int {
	if ks.nf == 0 {
		return 0
	}
	return len(ks.vals) / ks.nf
}

// Key returns the field values of key i.
func (ks *KeySet) Key(i int) []bsoncore.Value { return ks.vals[i*ks.nf : (i+1)*ks.nf] }

// MultikeyComponents returns, for field i, a bit mask of path components that traversed an
// array (MongoDB's MultikeyPaths entry for the field).
func (ks *KeySet) MultikeyComponents(i int) uint64 { return ks.multikey[i] }

// HasMultikeyPaths reports whether any indexed path traversed an array.
func (ks *KeySet) HasMultikeyPaths() bool {
	for _, m := range ks.multikey {
		if m != 0 {
			return true
		}
	}
	return false
}

func (ks *KeySet) reset(nf int) {
	ks.nf = nf
	ks.vals = ks.vals[:0]
	if cap(ks.multikey) < nf {
		ks.multikey = make([]uint64, nf)
	}
	ks.multikey = ks.multikey[:nf]
	clear(ks.multikey)
	ks.Skipped = false
}

func (ks *KeySet) frameAt(depth, nf int) *frame {
	for len(ks.frames) <= depth {
		ks.frames = append(ks.frames, frame{})
	}
	f := &ks.frames[depth]
	if cap(f.names) < nf {
		f.names = make([]string, nf)
		f.fixed = make([]bsoncore.Value, nf)
		f.pos = make([]posInfo, nf)
	}
	f.names, f.fixed, f.pos = f.names[:nf], f.fixed[:nf], f.pos[:nf]
	return f
}

// maxArrayDepth bounds recursion through nested arrays; BSON nesting is limited to 100 levels
// by the server, so this only stops adversarial input.
const maxArrayDepth = 200

// GetKeys generates doc's keys into ks (reset first). Errors: CannotIndexParallelArrays (171),
// 16766 for arrays in hashed fields, 16746 for ambiguous positional paths, and corrupt BSON.
// With a partial filter that rejects doc, or a sparse index and a doc missing every field,
// ks is empty and ks.Skipped is true.
func (g *KeyGenerator) GetKeys(doc bsoncore.Document, ks *KeySet) error {
	nf := len(g.fields)
	ks.reset(nf)
	if g.filter != nil {
		ok, err := g.filter.Matches(doc)
		if err != nil {
			return err
		}
		if !ok {
			ks.Skipped = true
			return nil
		}
	}
	if g.hashed {
		return g.getHashKeys(doc, ks)
	}
	// Frames: depth 2k holds the by-value state of recursion level k, depth 2k+1 the
	// positional info level k hands to its children. Level 0 gets no positional info; frame 1
	// is reused for level 0's own positional output only after level 0 has read its input.
	ks.frameAt(1, nf)
	top := ks.frameAt(0, nf)
	names, fixed := top.names, top.fixed
	for i := range g.fields {
		names[i] = g.fields[i].path
		fixed[i] = bsoncore.Value{}
	}
	noPos := ks.frames[1].posCleared()
	if err := g.getKeysWithArray(ks, 0, names, fixed, doc, 0, noPos); err != nil {
		ks.vals = ks.vals[:0]
		return err
	}
	if len(ks.vals) == 0 {
		ks.Skipped = true
	}
	return nil
}

// getKeysWithArray is BtreeKeyGenerator::_getKeysWithArray. names and fixed belong to this
// depth; positional belongs to the caller.
func (g *KeyGenerator) getKeysWithArray(ks *KeySet, depth int, names []string, fixed []bsoncore.Value,
	obj []byte, numNotFound int, positional []posInfo) error {
	if depth > maxArrayDepth {
		return mongoerr.New(mongoerr.CannotBuildIndexKeys, "document nested too deeply to index")
	}
	var (
		arrElt      bsoncore.Value
		arrName     string
		haveArr     bool
		arrIdxs     uint32 // fields whose path traverses arrElt
		mayExpandUn = ^uint32(0)
	)
	for i := range names {
		if names[i] == "" {
			continue
		}
		e, name, found, nestedArr, err := g.extractNext(obj, &positional[i], &names[i])
		if err != nil {
			return err
		}
		switch {
		case !found:
			fixed[i] = nullValue
			names[i] = ""
			numNotFound++
		case e.Type == bsoncore.TypeArray:
			arrIdxs |= 1 << i
			if !haveArr {
				arrElt, arrName, haveArr = e, name, true
			} else if !sameValue(e, arrElt) {
				return mongoerr.Newf(mongoerr.CannotIndexParallelArrays,
					"cannot index parallel arrays [%s] [%s]", name, arrName)
			}
			if nestedArr {
				mayExpandUn &^= 1 << i
			}
		default:
			fixed[i] = e
		}
	}

	if !haveArr {
		if g.sparse && numNotFound == len(names) {
			return nil
		}
		ks.vals = append(ks.vals, fixed...)
		return nil
	}

	first := bits.TrailingZeros32(arrIdxs)
	if isEmptyDoc(arrElt.Data) {
		if mayExpandUn&(1<<first) != 0 {
			// Indexed empty arrays are multikey, possibly mid-path: {"a.b.c": 1} has multikey
			// components {0, 1} for {a: [{b: []}, {b: 1}]}.
			for m := arrIdxs; m != 0; m &= m - 1 {
				i := bits.TrailingZeros32(m)
				ks.multikey[i] |= 1 << (g.fields[i].parts - numParts(names[i]) - 1)
			}
		}
		// Terminal empty arrays index as undefined.
		return g.getKeysArrEltFixed(ks, depth, names, fixed, undefinedValue, numNotFound, arrElt,
			arrIdxs, true, ks.frameAt(depth+1, len(names)).posCleared())
	}

	arrObj := arrElt.Data
	sub := ks.frameAt(depth+1, len(names)).posCleared()
	for i := range names {
		if arrIdxs&(1<<i) == 0 {
			continue
		}
		if names[i] == "" {
			// The array is the last component of the path.
			if mayExpandUn&(1<<i) != 0 {
				ks.multikey[i] |= 1 << (g.fields[i].parts - 1)
			}
			continue
		}
		part, _, _ := strings.Cut(names[i], ".")
		pe, ok, err := getField(arrObj, part)
		if err != nil {
			return err
		}
		if !ok {
			// Not a positional lookup: the path traverses the array.
			if mayExpandUn&(1<<i) != 0 {
				ks.multikey[i] |= 1 << (g.fields[i].parts - numParts(names[i]) - 1)
			}
			continue
		}
		p := &sub[i]
		p.has, p.posElt, p.arrayObj = true, pe, arrObj
		p.remaining = names[i]
		p.dotted, p.dottedNm, p.dottedOK, err = extractAtOrArray(arrObj, &p.remaining)
		if err != nil {
			return err
		}
	}

	it, err := newElemIter(arrObj)
	if err != nil {
		return err
	}
	expand := mayExpandUn&(1<<first) != 0
	for {
		_, v, ok, err := it.next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if err := g.getKeysArrEltFixed(ks, depth, names, fixed, v, numNotFound, arrElt, arrIdxs,
			expand, sub); err != nil {
			return err
		}
	}
}

func (f *frame) posCleared() []posInfo {
	clear(f.pos)
	return f.pos
}

// getKeysArrEltFixed is BtreeKeyGenerator::_getKeysArrEltFixed: copy the state to the next
// depth, fix terminal array fields to arrEntry, and recurse into arrEntry.
func (g *KeyGenerator) getKeysArrEltFixed(ks *KeySet, depth int, names []string, fixed []bsoncore.Value,
	arrEntry bsoncore.Value, numNotFound int, arrElt bsoncore.Value, arrIdxs uint32,
	mayExpandUnembedded bool, positional []posInfo) error {
	// The child frame is two levels down: depth+1 holds the positional info this level built.
	child := ks.frameAt(depth+2, len(names))
	// frameAt may have grown ks.frames; positional points into an element's slice, which
	// stays valid because frames hold slices, not arrays.
	copy(child.names, names)
	copy(child.fixed, fixed)
	for m := arrIdxs; m != 0; m &= m - 1 {
		i := bits.TrailingZeros32(m)
		if child.names[i] == "" {
			if mayExpandUnembedded {
				child.fixed[i] = arrEntry
			} else {
				child.fixed[i] = arrElt
			}
		}
	}
	var obj []byte
	if arrEntry.Type == bsoncore.TypeEmbeddedDocument {
		obj = arrEntry.Data
	}
	return g.getKeysWithArray(ks, depth+2, child.names, child.fixed, obj, numNotFound, positional)
}

// extractNext is BtreeKeyGenerator::_extractNextElement.
func (g *KeyGenerator) extractNext(obj []byte, pos *posInfo, field *string) (
	v bsoncore.Value, name string, found, nestedArr bool, err error) {
	if !pos.has {
		// Common case: no positional lookup pending, so the ambiguity check below cannot fire
		// and one walk of obj suffices.
		v, name, found, err = extractAtOrArray(obj, field)
		return v, name, found, false, err
	}
	firstField, _, _ := strings.Cut(*field, ".")
	_, haveObjField, err := getField(obj, firstField)
	if err != nil {
		return v, "", false, false, err
	}
	if haveObjField && pos.has {
		return v, "", false, false, mongoerr.Newf(codeAmbiguousPositional,
			"Ambiguous field name found in array (do not use numeric field names in embedded elements in an array), field: '%s' for array: %s",
			firstField, bsoncore.Document(pos.arrayObj).String())
	}
	if haveObjField {
		v, name, found, err = extractAtOrArray(obj, field)
		return v, name, found, false, err
	}
	if pos.has {
		*field = pos.remaining
		return pos.dotted, pos.dottedNm, pos.dottedOK, pos.posElt.Type == bsoncore.TypeArray, nil
	}
	return v, "", false, false, nil
}

// extractAtOrArray is dps::extractElementAtOrArrayAlongDottedPath: follow path through
// embedded documents, stopping at the end of the path or at the first array; path is left
// pointing at the components after the returned element. Scalars met mid-path mean "missing".
func extractAtOrArray(obj []byte, path *string) (bsoncore.Value, string, bool, error) {
	for {
		first, rest, _ := strings.Cut(*path, ".")
		sub, ok, err := getField(obj, first)
		*path = rest
		if err != nil || !ok {
			return bsoncore.Value{}, "", false, err
		}
		if sub.Type == bsoncore.TypeArray || rest == "" {
			return sub, first, true, nil
		}
		if sub.Type != bsoncore.TypeEmbeddedDocument {
			return bsoncore.Value{}, "", false, nil
		}
		obj = sub.Data
	}
}

func numParts(p string) int {
	if p == "" {
		return 0
	}
	return strings.Count(p, ".") + 1
}

// getHashKeys is ExpressionKeysPrivate::getHashKeys: one key per document; the hashed field is
// replaced by NumberLong(Hash64(value)); arrays are rejected in every field.
func (g *KeyGenerator) getHashKeys(doc []byte, ks *KeySet) error {
	found := false
	start := len(ks.vals)
	for i, f := range g.fields {
		p := f.path
		v, _, ok, err := extractAtOrArray(doc, &p)
		if err != nil {
			return err
		}
		if ok && v.Type == bsoncore.TypeArray {
			ks.vals = ks.vals[:start]
			arrPath := f.path
			if p != "" {
				arrPath = f.path[:len(f.path)-len(p)-1]
			}
			return mongoerr.Newf(codeHashedArray,
				"Error: hashed indexes do not currently support array values. Found array at path: %s", arrPath)
		}
		if ok {
			found = true
		} else {
			v = nullValue
		}
		if f.hashed {
			h, err := Hash64(v, DefaultHashSeed)
			if err != nil {
				return err
			}
			b := ks.hashBuf[i][:]
			putInt64LE(b, h)
			v = bsoncore.Value{Type: bsoncore.TypeInt64, Data: b}
		}
		ks.vals = append(ks.vals, v)
	}
	if !found && g.sparse {
		ks.vals = ks.vals[:start]
		ks.Skipped = true
	}
	return nil
}

func putInt64LE(b []byte, n int64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(n >> (8 * i))
	}
}

// IDValue returns the _id of doc, or found=false when it has none.
func IDValue(doc bsoncore.Document) (bsoncore.Value, bool, error) {
	return getField(doc, "_id")
}

func (g *KeyGenerator) String() string {
	var b strings.Builder
	b.WriteString("{")
	for i, f := range g.fields {
		if i > 0 {
			b.WriteString(", ")
		}
		switch {
		case f.hashed:
			fmt.Fprintf(&b, "%s: \"hashed\"", f.path)
		case f.desc:
			fmt.Fprintf(&b, "%s: -1", f.path)
		default:
			fmt.Fprintf(&b, "%s: 1", f.path)
		}
	}
	b.WriteString("}")
	return b.String()
}
