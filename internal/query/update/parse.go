package update

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
)

// ErrPipelineUpdate is returned by ParseValue for an update given as an array (a pipeline-style
// update). The command layer routes those to the aggregation engine.
var ErrPipelineUpdate = errors.New("update: pipeline-style update must be evaluated by the aggregation engine")

// ParseOptions carries what an update needs beyond its own document.
type ParseOptions struct {
	// ArrayFilters are the update command's arrayFilters, each a query whose top-level field
	// names all start with the same identifier ("x" in {"x.a": 1} or {x: {$gt: 5}}).
	ArrayFilters []bsoncore.Document
	// Now is the clock for $currentDate; nil means time.Now.
	Now func() time.Time
}

// opKind identifies a modifier.
type opKind uint8

const (
	opSet opKind = iota + 1
	opUnset
	opInc
	opMul
	opMin
	opMax
	opRenameSrc // the source side of $rename: an unset that also feeds opRenameDst
	opRenameDst // the destination side of $rename: a set of the source's value
	opSetOnInsert
	opCurrentDate
	opPush
	opAddToSet
	opPop
	opPull
	opPullAll
	opBit
)

var opsByName = map[string]opKind{
	"$set": opSet, "$unset": opUnset, "$inc": opInc, "$mul": opMul, "$min": opMin,
	"$max": opMax, "$rename": opRenameSrc, "$setOnInsert": opSetOnInsert,
	"$currentDate": opCurrentDate, "$push": opPush, "$addToSet": opAddToSet, "$pop": opPop,
	"$pull": opPull, "$pullAll": opPullAll, "$bit": opBit,
}

// leaf is one modifier applied at the end of a path.
type leaf struct {
	op   opKind
	arg  bsoncore.Value // $set/$inc/$min... argument
	path string         // the full path as written, for messages
	name string         // the path's last component

	timestamp bool // $currentDate {$type: "timestamp"}

	// $push / $addToSet
	each        []bsoncore.Value
	position    int64
	hasPosition bool
	slice       int64
	hasSlice    bool
	sort        *sortSpec

	popFirst bool      // $pop: -1
	pull     elemMatch // $pull
	bits     []bitOp   // $bit
	rename   int       // index into Update.renames for opRenameSrc/opRenameDst
}

type bitOp struct {
	kind byte // 'a', 'o', 'x'
	val  bsoncore.Value
}

type sortSpec struct {
	whole  int // 1 or -1 when sorting whole elements, 0 when by fields
	fields []sortField
}

type sortField struct {
	path string
	dir  int
}

// node is one path component of the update tree, MongoDB's UpdateObjectNode/UpdateArrayNode.
// A node is either a leaf (a modifier) or an interior node with children; parsing rejects
// updates where a leaf would sit above or on another path (ConflictingUpdateOperators).
type node struct {
	leaf *leaf
	path string // path up to and including this node, as written

	// fields holds named children (including numeric names, which index arrays), sorted in
	// MongoDB 5.0+'s processing order: numeric names numerically, others bytewise. New
	// fields are appended to a document in this order.
	fields     []*child
	positional *node            // "$": resolved from ApplyContext.MatchedArrayIndex
	all        *node            // "$[]"
	filtered   []*filteredChild // "$[id]"
}

type child struct {
	name string
	key  []byte // name as bytes, to write new fields without converting
	idx  int    // array index for all-digit names, -1 otherwise
	n    *node
}

type filteredChild struct {
	id string
	f  *query.Matcher
	n  *node
}

func (n *node) hasChildren() bool {
	return len(n.fields) > 0 || n.positional != nil || n.all != nil || len(n.filtered) > 0
}

func (n *node) field(name []byte) *node {
	// Children are few; a linear scan beats binary search with the numeric order.
	for _, c := range n.fields {
		if c.name == string(name) {
			return c.n
		}
	}
	return nil
}

// fieldOrder is MongoDB 5.0+'s order for processing (and creating) fields: names that are
// array indexes compare numerically and come before other names, which compare bytewise.
func fieldOrder(a, b *child) int {
	switch {
	case a.idx >= 0 && b.idx >= 0:
		if a.idx != b.idx {
			return a.idx - b.idx
		}
		return strings.Compare(a.name, b.name)
	case a.idx >= 0:
		return -1
	case b.idx >= 0:
		return 1
	}
	return strings.Compare(a.name, b.name)
}

type renameSpec struct {
	from, to string
}

// Update is a parsed update: a tree of modifiers, or a replacement document.
// It is immutable after Parse and safe for concurrent Apply calls.
type Update struct {
	root          *node
	replacement   bsoncore.Document
	isReplacement bool
	renames       []renameSpec
	now           func() time.Time
	source        bsoncore.Document
}

// IsReplacement reports whether the update is a replacement document.
func (u *Update) IsReplacement() bool { return u.isReplacement }

// ParseValue parses an update given as any BSON value: a document (Parse) or an array, which
// is a pipeline-style update and yields ErrPipelineUpdate.
func ParseValue(v bsoncore.Value, opts ParseOptions) (*Update, error) {
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument:
		return Parse(v.Data, opts)
	case bsoncore.TypeArray:
		return nil, ErrPipelineUpdate
	}
	return nil, mongoerr.Newf(mongoerr.FailedToParse,
		"Update argument must be either an object or an array, found %s", typeName(v.Type))
}

// parser holds state while one update is parsed.
type parser struct {
	u       *Update
	opts    *ParseOptions
	filters map[string]*arrayFilter
}

type arrayFilter struct {
	f    *query.Matcher
	used bool
}

// Parse parses an operator-style update ({$set: {...}, ...}) or a replacement document. The
// form is decided by the first field, as MongoDB does: a '$' prefix means operators.
func Parse(update bsoncore.Document, opts ParseOptions) (*Update, error) {
	update, err := checkBSON(update, "update")
	if err != nil {
		return nil, err
	}
	u := &Update{now: opts.Now, source: update, root: &node{}}
	if u.now == nil {
		u.now = time.Now
	}
	elems, _ := update.Elements()
	if len(elems) == 0 || !strings.HasPrefix(elems[0].Key(), "$") {
		if len(opts.ArrayFilters) > 0 {
			return nil, mongoerr.New(mongoerr.FailedToParse,
				"arrayFilters may not be specified for pipeline-style or replacement updates")
		}
		return u, u.parseReplacement(update, elems)
	}
	p := &parser{u: u, opts: &opts}
	if err := p.parseArrayFilters(); err != nil {
		return nil, err
	}
	for _, e := range elems {
		name := e.Key()
		op, ok := opsByName[name]
		if !ok {
			return nil, mongoerr.Newf(mongoerr.FailedToParse,
				"Unknown modifier: %s. Expected a valid update modifier or pipeline-style update specified as an array", name)
		}
		v := e.Value()
		if v.Type != bsoncore.TypeEmbeddedDocument {
			return nil, mongoerr.Newf(mongoerr.FailedToParse,
				"Modifiers operate on fields but we found type %s instead. For example: {$mod: {<field>: ...}} not {%s}",
				typeName(v.Type), formatElement(name, v))
		}
		fields, _ := v.Document().Elements()
		if len(fields) == 0 {
			return nil, mongoerr.Newf(mongoerr.FailedToParse,
				"'%s' is empty. You must specify a field like so: {%s: {<field>: ...}}", name, name)
		}
		for _, f := range fields {
			if err := p.parseModifier(op, f.Key(), f.Value()); err != nil {
				return nil, err
			}
		}
	}
	// Report unused filters in identifier order so the error is deterministic.
	ids := make([]string, 0, len(p.filters))
	for id, af := range p.filters {
		if !af.used {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		slices.Sort(ids)
		return nil, mongoerr.Newf(mongoerr.FailedToParse,
			"The array filter for identifier '%s' was not used in the update %s", ids[0], formatDoc(update))
	}
	return u, nil
}

func (u *Update) parseReplacement(doc bsoncore.Document, elems []bsoncore.Element) error {
	for _, e := range elems {
		if strings.HasPrefix(e.Key(), "$") {
			return mongoerr.Newf(mongoerr.DollarPrefixedFieldName,
				"The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.",
				e.Key(), e.Key())
		}
	}
	u.isReplacement = true
	u.replacement = doc
	return nil
}

// parseArrayFilters validates the array filters and parses each with the hook.
func (p *parser) parseArrayFilters() error {
	if len(p.opts.ArrayFilters) == 0 {
		return nil
	}
	p.filters = make(map[string]*arrayFilter, len(p.opts.ArrayFilters))
	for _, fd := range p.opts.ArrayFilters {
		fd, err := checkBSON(fd, "array filter")
		if err != nil {
			return err
		}
		id, err := filterIdentifier(fd)
		if err != nil {
			return err
		}
		if _, dup := p.filters[id]; dup {
			return mongoerr.Newf(mongoerr.FailedToParse,
				"Found multiple array filters with the same top-level field name %s", id)
		}
		f, err := parseFilter(fd)
		if err != nil {
			return mongoerr.Newf(mongoerr.CodeOf(err), "Error parsing array filter :: caused by :: %s", errMsg(err))
		}
		p.filters[id] = &arrayFilter{f: f}
	}
	return nil
}

func errMsg(err error) string {
	if me, ok := mongoerr.As(err); ok {
		return me.Msg
	}
	return err.Error()
}

// filterIdentifier returns the one identifier an array filter's top-level paths start with,
// looking through $and/$or/$nor as MongoDB's expression tree does.
func filterIdentifier(fd bsoncore.Document) (string, error) {
	id := ""
	var walk func(d bsoncore.Document, depth int) error
	walk = func(d bsoncore.Document, depth int) error {
		elems, _ := d.Elements()
		for _, e := range elems {
			k := e.Key()
			if k == "$and" || k == "$or" || k == "$nor" {
				arr, ok := e.Value().ArrayOK()
				if !ok || depth > 50 {
					return mongoerr.Newf(mongoerr.BadValue, "%s must be an array", k)
				}
				vals, _ := arr.Values()
				for _, v := range vals {
					sub, ok := v.DocumentOK()
					if !ok {
						return mongoerr.Newf(mongoerr.BadValue, "%s argument's entries must be objects", k)
					}
					if err := walk(sub, depth+1); err != nil {
						return err
					}
				}
				continue
			}
			if strings.HasPrefix(k, "$") {
				if k == "$comment" {
					continue
				}
				return mongoerr.New(mongoerr.FailedToParse,
					"Cannot use an expression without a top-level field name in arrayFilters")
			}
			head, _, _ := strings.Cut(k, ".")
			if !validIdentifier(head) {
				return mongoerr.Newf(mongoerr.BadValue,
					"Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '%s'", head)
			}
			if id != "" && id != head {
				return mongoerr.Newf(mongoerr.FailedToParse,
					"Error parsing array filter :: caused by :: Expected a single top-level field name, found '%s' and '%s'", id, head)
			}
			id = head
		}
		return nil
	}
	if err := walk(fd, 0); err != nil {
		return "", err
	}
	if id == "" {
		return "", mongoerr.New(mongoerr.FailedToParse,
			"Cannot use an expression without a top-level field name in arrayFilters")
	}
	return id, nil
}

func validIdentifier(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// component kinds of an update path.
const (
	compField = iota
	compPositional
	compAll
	compFiltered
)

func classify(c string) (kind int, id string) {
	switch {
	case c == "$":
		return compPositional, ""
	case c == "$[]":
		return compAll, ""
	case strings.HasPrefix(c, "$[") && strings.HasSuffix(c, "]"):
		return compFiltered, c[2 : len(c)-1]
	}
	return compField, ""
}

// splitUpdatePath validates an update path and splits it (FieldRef plus the checks of
// UpdateObjectNode::parseAndMerge).
func splitUpdatePath(path string, allowPositional bool) ([]string, error) {
	if path == "" {
		return nil, mongoerr.New(mongoerr.EmptyFieldName, "An empty update path is not valid.")
	}
	if n := strings.Count(path, "."); n >= maxPathComponents {
		return nil, mongoerr.Newf(mongoerr.Overflow,
			"The update path '%.100s...' has %d components; at most %d are allowed", path, n+1, maxPathComponents)
	}
	parts := strings.Split(path, ".")
	positionals := 0
	for i, c := range parts {
		if c == "" {
			return nil, mongoerr.Newf(mongoerr.EmptyFieldName,
				"The update path '%s' contains an empty field name, which is not allowed.", path)
		}
		if strings.IndexByte(c, 0) >= 0 {
			return nil, mongoerr.Newf(mongoerr.BadValue, "The update path '%s' contains a NUL byte", path)
		}
		if c[0] != '$' {
			continue
		}
		kind, _ := classify(c)
		if kind == compField {
			return nil, mongoerr.Newf(mongoerr.DollarPrefixedFieldName,
				"The dollar ($) prefixed field '%s' in '%s' is not valid for storage.", c, path)
		}
		if !allowPositional {
			return nil, errDynamic
		}
		if i == 0 {
			if kind == compPositional {
				return nil, mongoerr.Newf(mongoerr.BadValue,
					"Cannot have positional (i.e. '$') element in the first position in path '%s'", path)
			}
			return nil, mongoerr.Newf(mongoerr.BadValue,
				"Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '%s'", path)
		}
		if kind == compPositional {
			positionals++
			if positionals > 1 {
				return nil, mongoerr.Newf(mongoerr.BadValue,
					"Too many positional (i.e. '$') elements found in path '%s'", path)
			}
		}
	}
	return parts, nil
}

// maxPathComponents bounds update paths: a longer path could only build a document nested
// deeper than BSON's depth limit, and apply recursion follows the path.
const maxPathComponents = 200

// errDynamic is a sentinel for $rename paths with positional components; the caller words
// the message.
var errDynamic = errors.New("dynamic path")

// insert adds a leaf at path, creating interior nodes, and enforces that no path is a prefix
// of (or equal to) another: "Updating the path 'a.b' would create a conflict at 'a'".
func (p *parser) insert(parts []string, l *leaf) error {
	n := p.u.root
	for i, c := range parts {
		if n.leaf != nil {
			return conflict(l.path, strings.Join(parts[:i], "."))
		}
		next, err := p.childFor(n, c, l.path, strings.Join(parts[:i+1], "."))
		if err != nil {
			return err
		}
		n = next
	}
	if n.leaf != nil || n.hasChildren() {
		return conflict(l.path, l.path)
	}
	n.leaf = l
	return nil
}

func conflict(path, at string) error {
	return mongoerr.Newf(mongoerr.ConflictingUpdateOperators,
		"Updating the path '%s' would create a conflict at '%s'", path, at)
}

func (p *parser) childFor(n *node, c, fullPath, prefix string) (*node, error) {
	kind, id := classify(c)
	switch kind {
	case compPositional:
		if n.positional == nil {
			n.positional = &node{path: prefix}
		}
		return n.positional, nil
	case compAll:
		if n.all == nil {
			n.all = &node{path: prefix}
		}
		return n.all, nil
	case compFiltered:
		for _, fc := range n.filtered {
			if fc.id == id {
				return fc.n, nil
			}
		}
		af := p.filters[id]
		if af == nil {
			return nil, mongoerr.Newf(mongoerr.BadValue,
				"No array filter found for identifier '%s' in path '%s'", id, fullPath)
		}
		af.used = true
		fc := &filteredChild{id: id, f: af.f, n: &node{path: prefix}}
		n.filtered = append(n.filtered, fc)
		return fc.n, nil
	}
	if x := n.field([]byte(c)); x != nil {
		return x, nil
	}
	ch := &child{name: c, key: []byte(c), idx: arrayIndex(c), n: &node{path: prefix}}
	i, _ := slices.BinarySearchFunc(n.fields, ch, fieldOrder)
	n.fields = slices.Insert(n.fields, i, ch)
	return ch.n, nil
}

// maxArrayIndex bounds numeric path components treated as array indexes, so that a path
// such as "a.99999999999" cannot ask for an absurd amount of null padding.
const maxArrayIndex = 1<<31 - 1

// arrayIndex returns the array index a path component names, or -1. Like MongoDB, only
// canonical decimal numbers index arrays ("01" is a field name).
func arrayIndex(s string) int {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return -1
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
		n = n*10 + int(s[i]-'0')
	}
	if n > maxArrayIndex {
		return -1
	}
	return n
}

func (p *parser) parseModifier(op opKind, path string, arg bsoncore.Value) error {
	l := &leaf{op: op, arg: arg, path: path}
	if op == opRenameSrc {
		return p.parseRename(path, arg)
	}
	parts, err := splitUpdatePath(path, true)
	if err != nil {
		return err
	}
	l.name = parts[len(parts)-1]
	switch op {
	case opInc, opMul:
		if !bsonutil.IsNumber(arg.Type) {
			verb := "increment"
			if op == opMul {
				verb = "multiply"
			}
			return mongoerr.Newf(mongoerr.TypeMismatch, "Cannot %s with non-numeric argument: {%s}", verb, formatElement(path, arg))
		}
	case opCurrentDate:
		if err := parseCurrentDate(l, path, arg); err != nil {
			return err
		}
	case opPush, opAddToSet:
		if err := parsePush(l, path, arg); err != nil {
			return err
		}
	case opPop:
		f, ok := bsonutil.ToFloat64(arg)
		if !ok {
			return mongoerr.Newf(mongoerr.FailedToParse, "Expected a number in: %s", formatElement(path, arg))
		}
		if f != 1 && f != -1 {
			return mongoerr.Newf(mongoerr.FailedToParse, "$pop expects 1 or -1, found: %s", formatValue(arg))
		}
		l.popFirst = f == -1
	case opPull:
		m, err := p.parsePull(arg)
		if err != nil {
			return err
		}
		l.pull = m
	case opPullAll:
		arr, ok := arg.ArrayOK()
		if !ok {
			return mongoerr.Newf(mongoerr.BadValue, "$pullAll requires an array argument but was given a %s", typeName(arg.Type))
		}
		l.each, _ = arr.Values()
	case opBit:
		if err := parseBit(l, arg); err != nil {
			return err
		}
	}
	return p.insert(parts, l)
}

func (p *parser) parseRename(from string, arg bsoncore.Value) error {
	to, ok := arg.StringValueOK()
	if !ok {
		return mongoerr.Newf(mongoerr.BadValue, "The 'to' field for $rename must be a string: %s", formatElement(from, arg))
	}
	fromParts, err := splitUpdatePath(from, false)
	if err == errDynamic {
		return mongoerr.Newf(mongoerr.BadValue, "The source field for $rename may not be dynamic: %s", from)
	} else if err != nil {
		return err
	}
	toParts, err := splitUpdatePath(to, false)
	if err == errDynamic {
		return mongoerr.Newf(mongoerr.BadValue, "The destination field for $rename may not be dynamic: %s", to)
	} else if err != nil {
		return err
	}
	if from == to {
		return mongoerr.Newf(mongoerr.BadValue, "The source and target field for $rename must differ: %s", formatElement(from, arg))
	}
	if strings.HasPrefix(to, from+".") || strings.HasPrefix(from, to+".") {
		return mongoerr.Newf(mongoerr.BadValue, "The source and target field for $rename must not be on the same path: %s", formatElement(from, arg))
	}
	idx := len(p.u.renames)
	p.u.renames = append(p.u.renames, renameSpec{from: from, to: to})
	// Both sides join the conflict check, destination first as MongoDB's RenameNode does.
	if err := p.insert(toParts, &leaf{op: opRenameDst, path: to, name: toParts[len(toParts)-1], rename: idx}); err != nil {
		return err
	}
	return p.insert(fromParts, &leaf{op: opRenameSrc, path: from, name: fromParts[len(fromParts)-1], rename: idx})
}

func parseCurrentDate(l *leaf, path string, arg bsoncore.Value) error {
	switch arg.Type {
	case bsoncore.TypeBoolean:
		return nil
	case bsoncore.TypeEmbeddedDocument:
		elems, _ := arg.Document().Elements()
		for _, e := range elems {
			if e.Key() != "$type" {
				return mongoerr.Newf(mongoerr.BadValue, "Unrecognized $currentDate option: %s", e.Key())
			}
			s, _ := e.Value().StringValueOK()
			switch s {
			case "date":
				l.timestamp = false
			case "timestamp":
				l.timestamp = true
			default:
				return mongoerr.Newf(mongoerr.BadValue,
					"The '$type' string field is required to be 'date' or 'timestamp': {$type: %s}", formatValue(e.Value()))
			}
		}
		if len(elems) == 0 {
			return mongoerr.Newf(mongoerr.BadValue,
				"The '$type' string field is required to be 'date' or 'timestamp': {}")
		}
		return nil
	}
	return mongoerr.Newf(mongoerr.BadValue,
		"%s is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({$type: 'timestamp/date'}).",
		formatElement(path, arg))
}

// integral returns v as an int64 if it is a number with an integral value.
func integral(v bsoncore.Value) (int64, bool) {
	if n, ok := bsonutil.ToInt64Exact(v); ok {
		return n, true
	}
	// Huge doubles are integral too; clamp them (they only act as "very large").
	if f, ok := bsonutil.ToFloat64(v); ok && !math.IsNaN(f) && f == math.Trunc(f) {
		if f > 0 {
			return math.MaxInt64, true
		}
		return math.MinInt64, true
	}
	return 0, false
}

func parsePush(l *leaf, path string, arg bsoncore.Value) error {
	opName := "$push"
	if l.op == opAddToSet {
		opName = "$addToSet"
	}
	doc, isDoc := arg.DocumentOK()
	if !isDoc {
		l.each = []bsoncore.Value{arg}
		return nil
	}
	elems, _ := doc.Elements()
	hasEach := false
	for _, e := range elems {
		if e.Key() == "$each" {
			hasEach = true
		}
	}
	if !hasEach {
		if l.op == opPush {
			for _, e := range elems {
				switch e.Key() {
				case "$slice", "$sort", "$position":
					return mongoerr.Newf(mongoerr.BadValue, "%s in $push requires $each: %s", e.Key(), formatElement(path, arg))
				}
			}
		}
		l.each = []bsoncore.Value{arg}
		return nil
	}
	for _, e := range elems {
		v := e.Value()
		switch k := e.Key(); {
		case k == "$each":
			arr, ok := v.ArrayOK()
			if !ok {
				return mongoerr.Newf(mongoerr.BadValue,
					"The argument to $each in %s must be an array but it was of type: %s", opName, typeName(v.Type))
			}
			l.each, _ = arr.Values()
			if l.each == nil {
				l.each = []bsoncore.Value{}
			}
		case l.op == opAddToSet:
			return mongoerr.Newf(mongoerr.BadValue,
				"Found unexpected fields after $each in $addToSet: %s", formatValue(arg))
		case k == "$slice":
			n, ok := integral(v)
			if !ok {
				return mongoerr.Newf(mongoerr.BadValue,
					"The value for $slice must be an integral value but was given type: %s", typeName(v.Type))
			}
			l.slice, l.hasSlice = n, true
		case k == "$position":
			n, ok := integral(v)
			if !ok {
				return mongoerr.Newf(mongoerr.BadValue,
					"The value for $position must be an integer value, not of type: %s", typeName(v.Type))
			}
			l.position, l.hasPosition = n, true
		case k == "$sort":
			s, err := parseSort(v)
			if err != nil {
				return err
			}
			l.sort = s
		default:
			return mongoerr.Newf(mongoerr.BadValue, "Unrecognized clause in $push: %s", k)
		}
	}
	return nil
}

func parseSort(v bsoncore.Value) (*sortSpec, error) {
	invalid := mongoerr.New(mongoerr.BadValue,
		"The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields")
	if bsonutil.IsNumber(v.Type) {
		f, _ := bsonutil.ToFloat64(v)
		if f != 1 && f != -1 {
			return nil, invalid
		}
		return &sortSpec{whole: int(f)}, nil
	}
	doc, ok := v.DocumentOK()
	if !ok {
		return nil, invalid
	}
	elems, _ := doc.Elements()
	if len(elems) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "The $sort pattern is empty when it should be a set of fields.")
	}
	s := &sortSpec{}
	for _, e := range elems {
		k := e.Key()
		if err := bsonutil.ValidatePath(k); err != nil {
			return nil, mongoerr.Newf(mongoerr.BadValue, "The $sort field is a dotted field but has an empty part: %s", k)
		}
		if strings.HasPrefix(k, "$") {
			return nil, invalid
		}
		f, ok := bsonutil.ToFloat64(e.Value())
		if !ok || (f != 1 && f != -1) {
			return nil, mongoerr.Newf(mongoerr.BadValue,
				"The $sort element value must be either 1 or -1")
		}
		s.fields = append(s.fields, sortField{path: k, dir: int(f)})
	}
	return s, nil
}

func parseBit(l *leaf, arg bsoncore.Value) error {
	doc, ok := arg.DocumentOK()
	if !ok {
		return mongoerr.Newf(mongoerr.BadValue,
			"The $bit modifier is not compatible with a %s. You must pass in an embedded document: {$bit: {field: {and/or/xor: #}}", typeName(arg.Type))
	}
	elems, _ := doc.Elements()
	if len(elems) == 0 {
		return mongoerr.Newf(mongoerr.BadValue,
			"You must pass in at least one bitwise operation. The format is: {$bit: {field: {and/or/xor: #}}")
	}
	for _, e := range elems {
		var kind byte
		switch e.Key() {
		case "and":
			kind = 'a'
		case "or":
			kind = 'o'
		case "xor":
			kind = 'x'
		default:
			return mongoerr.Newf(mongoerr.BadValue,
				"The $bit modifier only supports 'and', 'or', and 'xor', not '%s' which is an unknown operator: {%s}",
				e.Key(), formatElement(e.Key(), e.Value()))
		}
		v := e.Value()
		if v.Type != bsoncore.TypeInt32 && v.Type != bsoncore.TypeInt64 {
			return mongoerr.Newf(mongoerr.BadValue,
				"The $bit modifier field must be an Integer(32/64 bit); a '%s' is not supported here: {%s}",
				typeName(v.Type), formatElement(e.Key(), v))
		}
		l.bits = append(l.bits, bitOp{kind: kind, val: v})
	}
	return nil
}

// elemMatch decides whether $pull removes an array element.
type elemMatch struct {
	eq      bsoncore.Value // equality form (EqualityMatcher)
	filter  *query.Matcher
	wrapped bool // filter expects {"v": element} (WrapperMatcher); otherwise element docs only (ObjectMatcher)
}

// pullWrapField is the field name $pull conditions such as {$gte: 6} are wrapped in, so the
// matcher sees an ordinary query {v: {$gte: 6}} against {v: element}.
const pullWrapField = "v"

func (m *elemMatch) matches(elem bsoncore.Value, scratch *[]byte) (bool, error) {
	if m.filter == nil {
		return bsonutil.Compare(m.eq, elem) == 0, nil
	}
	if !m.wrapped {
		d, ok := elem.DocumentOK()
		if !ok {
			return false, nil
		}
		return m.filter.Matches(d)
	}
	*scratch = wrapValue((*scratch)[:0], pullWrapField, elem)
	return m.filter.Matches(*scratch)
}

// wrapValue builds {key: v} into dst.
func wrapValue(dst []byte, key string, v bsoncore.Value) []byte {
	idx, dst := bsoncore.AppendDocumentStart(dst)
	dst = bsoncore.AppendValueElement(dst, key, v)
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

// isQueryOperator reports whether a $-name is a path-accepting query operator ($gt, $in,
// $elemMatch...), as opposed to a top-level one ($and, $or, $expr...).
func isQueryOperator(name string) bool {
	switch name {
	case "$and", "$or", "$nor", "$expr", "$where", "$text", "$comment", "$jsonSchema", "$alwaysTrue", "$alwaysFalse":
		return false
	}
	return strings.HasPrefix(name, "$")
}

func (p *parser) parsePull(arg bsoncore.Value) (elemMatch, error) {
	switch arg.Type {
	case bsoncore.TypeEmbeddedDocument:
		doc := arg.Document()
		first, err := doc.IndexErr(0)
		if err == nil && isQueryOperator(first.Key()) {
			return wrappedPull(arg)
		}
		f, err := parseFilter(doc)
		if err != nil {
			return elemMatch{}, err
		}
		return elemMatch{filter: f}, nil
	case bsoncore.TypeRegex:
		return wrappedPull(arg)
	}
	return elemMatch{eq: arg}, nil
}

// parseFilter parses an array filter or a $pull condition with the query matcher: neither
// accepts $expr or $jsonSchema. Comparisons are binary (see "Known deviations" in doc.go).
func parseFilter(q bsoncore.Document) (*query.Matcher, error) {
	return query.Parse(q, query.ParseOptions{})
}

func wrappedPull(arg bsoncore.Value) (elemMatch, error) {
	f, err := parseFilter(wrapValue(nil, pullWrapField, arg))
	if err != nil {
		return elemMatch{}, err
	}
	return elemMatch{filter: f, wrapped: true}, nil
}

// itoa is strconv.Itoa; kept short for the array-key hot path.
func itoa(dst []byte, i int) []byte { return strconv.AppendInt(dst, int64(i), 10) }

// Paths returns the paths the update's operators name, as written ("a.b", "arr.$[x].c"; nil
// for a replacement). The oplog writer logs a changed field whole when an operator named it
// and as a sub-diff when operators named paths below it, as MongoDB's update log builder
// does, so change streams report {$set: {"a.b": 1}} as updatedFields {"a.b": 1}.
func (u *Update) Paths() []string {
	if u.root == nil {
		return nil
	}
	var out []string
	var walk func(n *node)
	walk = func(n *node) {
		if n.leaf != nil {
			out = append(out, n.leaf.path)
		}
		for _, c := range n.fields {
			walk(c.n)
		}
		if n.positional != nil {
			walk(n.positional)
		}
		if n.all != nil {
			walk(n.all)
		}
		for _, f := range n.filtered {
			walk(f.n)
		}
	}
	walk(u.root)
	return out
}
