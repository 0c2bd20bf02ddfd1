package query

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
)

// Projection is a parsed find projection (MongoDB 4.4+ semantics). It is immutable and safe
// for concurrent use.
//
// A projection is either an inclusion (only the named fields, plus _id unless excluded, plus
// computed fields) or an exclusion (everything but the named fields). $slice and $meta do not
// choose the mode; positional "a.$", $elemMatch and computed values (literals and aggregation
// expressions) are inclusions.
type Projection struct {
	inclusion bool
	identity  bool // {} : the document unchanged
	root      *projNode
	vars      map[string]bsoncore.Value // the command's let variables (the matcher's)
}

type projKind int

const (
	projInclude projKind = iota
	projExclude
	projSub        // a dotted path continues below
	projSlice      // {$slice: n} / {$slice: [skip, n]}
	projElemMatch  // {$elemMatch: {...}}
	projPositional // "a.b.$": 1 (the leaf "b")
	projMeta       // {$meta: "..."}
	projExpr       // a literal or an aggregation expression (computed field)
)

// projNode is one level of the projection tree: its fields in spec order.
type projNode struct {
	fields []*projField
	// positional is set on the nodes along a positional path: the first array met below
	// them is indexed by the query's elemMatchKey.
	positional bool
}

type projField struct {
	name string
	kind projKind
	sub  *projNode
	// $slice
	skip, limit int
	hasSkip     bool
	// $elemMatch
	em leaf
	// $meta
	meta string
	// computed field: an aggregation expression (internal/query/expr) evaluated against the
	// whole document.
	expr expr.Expression
}

func (n *projNode) find(name string) *projField {
	for _, f := range n.fields {
		if f.name == name {
			return f
		}
	}
	return nil
}

// ParseProjection parses a find projection. matcher is the query's (needed by the positional
// operator); it may be nil when the projection has none.
func ParseProjection(spec bsoncore.Document, matcher *Matcher) (*Projection, error) {
	// Validating once up front lets the parser use bsoncore's panicking accessors safely.
	if err := spec.Validate(); err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid projection: %v", err)
	}
	elems, err := spec.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid projection: %v", err)
	}
	pr := &Projection{root: &projNode{}}
	if matcher != nil {
		pr.vars = matcher.vars
	}
	if len(elems) == 0 {
		pr.identity = true
		return pr, nil
	}
	b := projBuilder{pr: pr, matcher: matcher}
	if err := b.parseLevel("", spec, 0); err != nil {
		return nil, err
	}
	switch b.mode {
	case modeInclusion:
		pr.inclusion = true
	case modeNone:
		// Only _id, $slice and $meta fields: {_id: 1} alone is an inclusion, anything else
		// (including {_id: 0}) an exclusion.
		pr.inclusion = b.idIncluded
	}
	// _id is included by default in an inclusion unless the projection names it.
	if pr.inclusion && !b.idMentioned {
		pr.root.fields = append([]*projField{{name: "_id", kind: projInclude}}, pr.root.fields...)
	}
	if pr.inclusion {
		return pr, nil
	}
	// In an exclusion, an explicit {_id: 1} is the default: drop inclusions of _id.
	pr.root.fields = removeIncludes(pr.root.fields)
	return pr, nil
}

func removeIncludes(fs []*projField) []*projField {
	out := fs[:0]
	for _, f := range fs {
		if f.kind != projInclude {
			out = append(out, f)
		}
	}
	return out
}

type projMode int

const (
	modeNone projMode = iota
	modeInclusion
	modeExclusion
)

type projBuilder struct {
	pr           *Projection
	matcher      *Matcher
	mode         projMode
	idMentioned  bool
	idIncluded   bool
	positionals  int
	hasElemMatch bool
}

func errPositionalAndElemMatch() error {
	return mongoerr.New(mongoerr.Location31255, "Cannot specify positional operator and $elemMatch.")
}

// parseLevel parses the fields of spec (a sub-projection when prefix is non-empty).
func (b *projBuilder) parseLevel(prefix string, spec bsoncore.Document, depth int) error {
	if depth > maxDepth {
		return depthErr()
	}
	elems, err := spec.Elements()
	if err != nil {
		return mongoerr.Newf(mongoerr.InvalidBSON, "invalid projection: %v", err)
	}
	for _, el := range elems {
		path := el.Key()
		if prefix != "" {
			path = prefix + "." + el.Key()
		}
		if err := b.parseField(path, el.Value(), depth); err != nil {
			return err
		}
	}
	return nil
}

func (b *projBuilder) setMode(path string, m projMode, isExpr bool) error {
	if path == "_id" || strings.HasPrefix(path, "_id.") {
		// _id may be excluded from an inclusion and included in an exclusion.
		if m == modeExclusion || (!isExpr && b.mode != modeInclusion) {
			return nil
		}
	}
	switch {
	case b.mode == modeNone:
		b.mode = m
	case b.mode != m && m == modeExclusion:
		return mongoerr.Newf(mongoerr.Location31254, "Cannot do exclusion on field %s in inclusion projection", path)
	case b.mode != m && isExpr:
		return mongoerr.New(mongoerr.Location31252, "Cannot use expression other than $meta in exclusion projection")
	case b.mode != m:
		return mongoerr.Newf(mongoerr.Location31253, "Cannot do inclusion on field %s in exclusion projection", path)
	}
	return nil
}

func (b *projBuilder) parseField(path string, v bsoncore.Value, depth int) error {
	if err := bsonutil.ValidatePath(path); err != nil {
		return err
	}
	if path == "_id" || strings.HasPrefix(path, "_id.") {
		b.idMentioned = true
	}
	// Positional: "a.b.$". The checks and their order are projection_parser.cpp's
	// parseElement and parseInclusion; whether the query can supply the matching element is
	// only known per document (51246/51247 in positionalElem).
	if strings.Contains(path, ".$.") {
		return errPositionalMiddle()
	}
	if base, ok := strings.CutSuffix(path, ".$"); ok {
		switch {
		case v.Type == bsoncore.TypeEmbeddedDocument:
			return mongoerr.New(mongoerr.Location31271, "positional projection cannot be used with an expression or sub object")
		case v.Type != bsoncore.TypeBoolean && !bsonutil.IsNumber(v.Type):
			return mongoerr.New(mongoerr.Location31308, "positional projection cannot be used with a literal")
		case !bsonutil.TrueValue(v):
			return mongoerr.New(mongoerr.Location31395, "positional projection cannot be used with exclusion")
		}
		if b.positionals++; b.positionals > 1 {
			return mongoerr.New(mongoerr.Location31276, "Cannot specify more than one positional projection per query.")
		}
		if b.hasElemMatch {
			return errPositionalAndElemMatch()
		}
		if b.matcher == nil {
			return mongoerr.New(mongoerr.Location51050, "Projections with a positional operator require a matcher")
		}
		if strings.Contains(base, ".$") || strings.HasPrefix(base, "$") {
			return errPositionalMiddle()
		}
		if err := b.setMode(path, modeInclusion, false); err != nil {
			return err
		}
		return b.insert(base, &projField{kind: projPositional}, true)
	}
	for _, part := range strings.Split(path, ".") {
		if part == "$" {
			return errPositionalMiddle()
		}
		if strings.HasPrefix(part, "$") {
			return mongoerr.Newf(mongoerr.Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
	}

	switch {
	case v.Type == bsoncore.TypeBoolean || bsonutil.IsNumber(v.Type):
		if bsonutil.TrueValue(v) {
			if path == "_id" {
				b.idIncluded = true
			}
			if err := b.setMode(path, modeInclusion, false); err != nil {
				return err
			}
			return b.insert(path, &projField{kind: projInclude}, false)
		}
		if err := b.setMode(path, modeExclusion, false); err != nil {
			return err
		}
		return b.insert(path, &projField{kind: projExclude}, false)
	case v.Type == bsoncore.TypeEmbeddedDocument:
		d := v.Document()
		first, err := d.IndexErr(0)
		if err != nil {
			return mongoerr.Newf(mongoerr.Location51270, "An empty sub-projection is not a valid value. Found empty object at path %s", path)
		}
		switch first.Key() {
		case "$slice":
			return b.parseSlice(path, first.Value())
		case "$elemMatch":
			return b.parseElemMatchProj(path, first.Value())
		case "$meta":
			return b.parseMeta(path, first.Value())
		}
		if strings.HasPrefix(first.Key(), "$") {
			return b.parseExprField(path, v)
		}
		// A nested projection: {a: {b: 1}} is "a.b": 1.
		return b.parseLevel(path, d, depth+1)
	}
	// Anything else is a literal or an expression (a "$path" string): a computed field.
	return b.parseExprField(path, v)
}

func errPositionalMiddle() error {
	return mongoerr.New(mongoerr.Location31394, "As of 4.4, it's illegal to specify positional operator in the middle of a path.Positional projection may only be used at the end, for example: a.b.$. If the query previously used a form like a.b.$.d, remove the parts following the '$' and the results will be equivalent.")
}

func (b *projBuilder) parseExprField(path string, v bsoncore.Value) error {
	if err := b.setMode(path, modeInclusion, true); err != nil {
		return err
	}
	x, err := expr.Parse(v, varsParseContext(b.pr.vars))
	if err != nil {
		return err
	}
	return b.insert(path, &projField{kind: projExpr, expr: x}, false)
}

func (b *projBuilder) parseSlice(path string, v bsoncore.Value) error {
	f := &projField{kind: projSlice}
	switch {
	case bsonutil.IsNumber(v.Type):
		n, ok := truncInt64(v)
		if !ok {
			return mongoerr.New(mongoerr.Location28667, "$slice only supports numbers and [skip, limit] arrays")
		}
		f.limit = clampInt(n)
	case v.Type == bsoncore.TypeArray:
		vals, err := v.Array().Values()
		if err != nil || len(vals) != 2 || !bsonutil.IsNumber(vals[0].Type) || !bsonutil.IsNumber(vals[1].Type) {
			return mongoerr.New(mongoerr.Location28667, "$slice only supports numbers and [skip, limit] arrays")
		}
		skip, _ := truncInt64(vals[0])
		limit, _ := truncInt64(vals[1])
		if limit <= 0 {
			return mongoerr.New(mongoerr.Location28724, "$slice limit must be positive")
		}
		f.skip, f.limit, f.hasSkip = clampInt(skip), clampInt(limit), true
	default:
		return mongoerr.New(mongoerr.Location28667, "$slice only supports numbers and [skip, limit] arrays")
	}
	return b.insert(path, f, false)
}

func clampInt(n int64) int {
	const lim = 1 << 31
	return int(max(-lim, min(lim, n)))
}

func (b *projBuilder) parseElemMatchProj(path string, v bsoncore.Value) error {
	if strings.Contains(path, ".") {
		return mongoerr.New(mongoerr.Location31275, "Cannot use $elemMatch projection on a nested field.")
	}
	if v.Type != bsoncore.TypeEmbeddedDocument {
		return mongoerr.New(mongoerr.Location31274, "elemMatch: Invalid argument, object required.")
	}
	if b.positionals > 0 {
		return errPositionalAndElemMatch()
	}
	b.hasElemMatch = true
	if err := b.setMode(path, modeInclusion, false); err != nil {
		return err
	}
	p := &parser{opts: ParseOptions{}}
	node, err := p.parseElemMatch("", v, 0)
	if err != nil {
		return err
	}
	return b.insert(path, &projField{kind: projElemMatch, em: node.(leaf)}, false)
}

func (b *projBuilder) parseMeta(path string, v bsoncore.Value) error {
	name, ok := v.StringValueOK()
	if !ok {
		return mongoerr.New(mongoerr.Location17307, "$meta only supports string arguments")
	}
	switch name {
	case "textScore":
		// There is never text score metadata: $text is not supported.
		return mongoerr.New(mongoerr.Location40218, "query requires text score metadata, but it is not available")
	case "indexKey", "recordId", "sortKey", "searchScore", "searchHighlights", "searchScoreDetails",
		"geoNearDistance", "geoNearPoint", "randVal":
	default:
		return mongoerr.Newf(mongoerr.Location17308, "Unsupported argument to $meta: %s", name)
	}
	return b.insert(path, &projField{kind: projMeta, meta: name}, false)
}

// insert adds f at path, creating sub-levels and detecting path collisions.
func (b *projBuilder) insert(path string, f *projField, positional bool) error {
	parts := strings.Split(path, ".")
	n := b.pr.root
	for _, part := range parts[:len(parts)-1] {
		if positional {
			n.positional = true
		}
		existing := n.find(part)
		switch {
		case existing == nil:
			existing = &projField{name: part, kind: projSub, sub: &projNode{}}
			n.fields = append(n.fields, existing)
		case existing.kind != projSub:
			// MongoDB's message names the path without its first component (FieldPath::tail).
			return mongoerr.Newf(mongoerr.Location31249, "Path collision at %s remaining portion %s",
				path, strings.Join(parts[1:], "."))
		}
		n = existing.sub
	}
	if positional {
		n.positional = true
	}
	last := parts[len(parts)-1]
	if n.find(last) != nil {
		return mongoerr.Newf(mongoerr.Location31250, "Path collision at %s", path)
	}
	f.name = last
	n.fields = append(n.fields, f)
	return nil
}

// Apply appends the projection of doc to dst. details carries the elemMatchKey of the query
// match for the positional operator (nil when there is none).
func (p *Projection) Apply(doc bsoncore.Document, details *MatchDetails, dst []byte) ([]byte, error) {
	if p.identity {
		return append(dst, doc...), nil
	}
	a := applier{root: doc, details: details, vars: p.vars}
	if p.inclusion {
		return a.include(p.root, doc, dst, false)
	}
	return a.exclude(p.root, doc, dst)
}

type applier struct {
	root    bsoncore.Document
	details *MatchDetails
	vars    map[string]bsoncore.Value
}

// include projects a document in inclusion mode. posDone is true once the positional index
// has been applied on this branch.
func (a *applier) include(n *projNode, doc []byte, dst []byte, posDone bool) ([]byte, error) {
	idx, dst := bsoncore.AppendDocumentStart(dst)
	seen := make([]bool, len(n.fields))
	it := newElemIter(doc)
	for {
		key, v, ok := it.next()
		if !ok {
			break
		}
		i := fieldIndex(n, key)
		if i < 0 || seen[i] {
			continue
		}
		seen[i] = true
		f := n.fields[i]
		var err error
		if dst, err = a.includeField(n, f, string(key), v, dst, posDone); err != nil {
			return nil, err
		}
	}
	// Computed fields come after the document's fields, in projection order; sub-levels that
	// hold computed fields are created when the document lacks them.
	for i, f := range n.fields {
		if seen[i] && f.kind != projSub && f.kind != projExpr {
			continue
		}
		switch {
		case f.kind == projExpr:
			val, err := f.expr.Eval(&expr.EvalContext{Root: a.root, Vars: evalVars(a.vars)})
			if err != nil {
				return nil, err
			}
			if val.Type != 0 {
				dst = bsoncore.AppendValueElement(dst, f.name, val)
			}
		case f.kind == projSub && !seen[i] && hasComputed(f.sub):
			var err error
			dst = appendElemHeader(dst, bsoncore.TypeEmbeddedDocument, f.name)
			if dst, err = a.include(f.sub, emptyDoc, dst, posDone); err != nil {
				return nil, err
			}
		}
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst, nil
}

var emptyDoc = []byte{5, 0, 0, 0, 0}

func hasComputed(n *projNode) bool {
	for _, f := range n.fields {
		if f.kind == projExpr || (f.kind == projSub && hasComputed(f.sub)) {
			return true
		}
	}
	return false
}

func fieldIndex(n *projNode, key []byte) int {
	for i, f := range n.fields {
		if f.name == string(key) {
			return i
		}
	}
	return -1
}

func (a *applier) includeField(n *projNode, f *projField, name string, v bsoncore.Value, dst []byte, posDone bool) ([]byte, error) {
	switch f.kind {
	case projInclude:
		return bsoncore.AppendValueElement(dst, name, v), nil
	case projExclude, projMeta:
		return dst, nil
	case projExpr:
		return dst, nil // appended after the document's fields
	case projSlice:
		return bsoncore.AppendValueElement(dst, name, sliceValue(v, f)), nil
	case projElemMatch:
		if v.Type != bsoncore.TypeArray {
			return dst, nil
		}
		it := newElemIter(v.Data)
		for {
			_, e, ok := it.next()
			if !ok {
				return dst, nil
			}
			if elemMatches(f.em, e) {
				return bsoncore.AppendArrayElement(dst, name, bsoncore.BuildArray(nil, e)), nil
			}
		}
	case projPositional:
		if v.Type != bsoncore.TypeArray || posDone {
			return bsoncore.AppendValueElement(dst, name, v), nil
		}
		e, err := a.positionalElem(v)
		if err != nil {
			return nil, err
		}
		return bsoncore.AppendArrayElement(dst, name, bsoncore.BuildArray(nil, e)), nil
	}
	// projSub
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument:
		dst = appendElemHeader(dst, bsoncore.TypeEmbeddedDocument, name)
		return a.include(f.sub, v.Data, dst, posDone)
	case bsoncore.TypeArray:
		if f.sub.positional && !posDone {
			e, err := a.positionalElem(v)
			if err != nil {
				return nil, err
			}
			arr, err := a.includeArray(f.sub, bsoncore.BuildArray(nil, e), true)
			if err != nil {
				return nil, err
			}
			return bsoncore.AppendArrayElement(dst, name, arr), nil
		}
		arr, err := a.includeArray(f.sub, v.Data, posDone)
		if err != nil {
			return nil, err
		}
		return bsoncore.AppendArrayElement(dst, name, arr), nil
	}
	if hasComputed(f.sub) {
		dst = appendElemHeader(dst, bsoncore.TypeEmbeddedDocument, name)
		return a.include(f.sub, emptyDoc, dst, posDone)
	}
	// A scalar where the projection goes deeper: nothing to include.
	return dst, nil
}

// includeArray applies a sub-projection to each element: documents are projected, nested
// arrays recursed into, and scalars dropped (an inclusion of "a.b" keeps no scalars of a).
func (a *applier) includeArray(n *projNode, arr []byte, posDone bool) ([]byte, error) {
	return mapArray(arr, func(out []byte, key string, e bsoncore.Value) ([]byte, bool, error) {
		switch e.Type {
		case bsoncore.TypeEmbeddedDocument:
			out = appendElemHeader(out, bsoncore.TypeEmbeddedDocument, key)
			out, err := a.include(n, e.Data, out, posDone)
			return out, true, err
		case bsoncore.TypeArray:
			sub, err := a.includeArray(n, e.Data, posDone)
			return bsoncore.AppendArrayElement(out, key, sub), true, err
		}
		if !hasComputed(n) {
			return out, false, nil
		}
		out = appendElemHeader(out, bsoncore.TypeEmbeddedDocument, key)
		out, err := a.include(n, emptyDoc, out, posDone)
		return out, true, err
	})
}

// mapArray builds an array from the elements of arr: elem appends each one's projection to
// out under key, its position in the result, or reports that it is dropped.
func mapArray(arr []byte, elem func(out []byte, key string, e bsoncore.Value) ([]byte, bool, error)) ([]byte, error) {
	idx, out := bsoncore.AppendArrayStart(nil)
	i := 0
	it := newElemIter(arr)
	for {
		_, e, ok := it.next()
		if !ok {
			break
		}
		var kept bool
		var err error
		if out, kept, err = elem(out, itoa(i), e); err != nil {
			return nil, err
		}
		if kept {
			i++
		}
	}
	out, _ = bsoncore.AppendArrayEnd(out, idx)
	return out, nil
}

// positionalElem is the element of arr the query matched (projection_executor_utils.cpp's
// applyFindPositionalProjection): 51246 if the query recorded no array position, 51247 if
// the position it recorded (in another array) is past the end of this one.
func (a *applier) positionalElem(arr bsoncore.Value) (bsoncore.Value, error) {
	if a.details == nil || !a.details.HasElemMatchKey {
		return bsoncore.Value{}, mongoerr.New(mongoerr.Location51246,
			"Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array")
	}
	if e, ok := getField(arr.Data, a.details.ElemMatchKey); ok {
		return e, nil
	}
	return bsoncore.Value{}, mongoerr.New(mongoerr.Location51247,
		"Executor error during find command :: caused by :: positional operator '.$' element mismatch")
}

// exclude projects a document in exclusion mode.
func (a *applier) exclude(n *projNode, doc []byte, dst []byte) ([]byte, error) {
	idx, dst := bsoncore.AppendDocumentStart(dst)
	it := newElemIter(doc)
	for {
		key, v, ok := it.next()
		if !ok {
			break
		}
		i := fieldIndex(n, key)
		if i < 0 {
			dst = bsoncore.AppendValueElement(dst, string(key), v)
			continue
		}
		f := n.fields[i]
		switch f.kind {
		case projExclude:
		case projSlice:
			dst = bsoncore.AppendValueElement(dst, f.name, sliceValue(v, f))
		case projMeta:
			// The document's own field of that name is replaced by the metadata, which is
			// not available here: see below.
		case projSub:
			switch v.Type {
			case bsoncore.TypeEmbeddedDocument:
				dst = appendElemHeader(dst, bsoncore.TypeEmbeddedDocument, f.name)
				var err error
				if dst, err = a.exclude(f.sub, v.Data, dst); err != nil {
					return nil, err
				}
			case bsoncore.TypeArray:
				arr, err := a.excludeArray(f.sub, v.Data)
				if err != nil {
					return nil, err
				}
				dst = bsoncore.AppendArrayElement(dst, f.name, arr)
			default:
				dst = bsoncore.AppendValueElement(dst, f.name, v)
			}
		default:
			dst = bsoncore.AppendValueElement(dst, f.name, v)
		}
	}
	// $meta fields would be appended here; indexKey, recordId and the search metadata are
	// not produced by this executor, and MongoDB omits a $meta field whose metadata is absent.
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst, nil
}

func (a *applier) excludeArray(n *projNode, arr []byte) ([]byte, error) {
	return mapArray(arr, func(out []byte, key string, e bsoncore.Value) ([]byte, bool, error) {
		switch e.Type {
		case bsoncore.TypeEmbeddedDocument:
			out = appendElemHeader(out, bsoncore.TypeEmbeddedDocument, key)
			out, err := a.exclude(n, e.Data, out)
			return out, true, err
		case bsoncore.TypeArray:
			sub, err := a.excludeArray(n, e.Data)
			if err != nil {
				return nil, false, err
			}
			return bsoncore.AppendArrayElement(out, key, sub), true, nil
		}
		return bsoncore.AppendValueElement(out, key, e), true, nil
	})
}

// sliceValue applies $slice; non-arrays are returned unchanged.
func sliceValue(v bsoncore.Value, f *projField) bsoncore.Value {
	if v.Type != bsoncore.TypeArray {
		return v
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return v
	}
	vals, err := arr.Values()
	if err != nil {
		return v
	}
	n := len(vals)
	var from, to int
	switch {
	case f.hasSkip:
		from = f.skip
		if from < 0 {
			from = max(0, n+from)
		}
		from = min(from, n)
		to = min(n, from+f.limit)
	case f.limit >= 0:
		from, to = 0, min(n, f.limit)
	default:
		from, to = max(0, n+f.limit), n
	}
	return bsoncore.Value{Type: bsoncore.TypeArray, Data: bsoncore.BuildArray(nil, vals[from:to]...)}
}

// elemMatches tests one array element against an $elemMatch projection: the object form
// matches document (and array) elements as documents; the value form tests the value.
func elemMatches(l leaf, e bsoncore.Value) bool {
	switch n := l.(type) {
	case *elemMatchObjectNode:
		if !isArrayOrDoc(e) {
			return false
		}
		m, err := n.sub.match(e.Data, nil)
		return err == nil && m
	case *elemMatchValueNode:
		for _, c := range n.children {
			if !c.(leaf).matchesSingle(e, nil) {
				return false
			}
		}
		return true
	}
	return false
}

func appendElemHeader(dst []byte, t bsoncore.Type, name string) []byte {
	dst = append(dst, byte(t))
	dst = append(dst, name...)
	return append(dst, 0)
}

func itoa(i int) string { return strconv.Itoa(i) }
