package plan

import (
	"context"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/collation"
	"humongo/internal/index"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/storage"
)

// Trial-run budget (MongoDB: internalQueryPlanEvaluationWorks = 10000,
// internalQueryPlanEvaluationMaxResults = 101).
const (
	trialWorks   = 10000
	trialResults = 101
	// maxPointCombos bounds the cartesian product of point intervals turned into ranges.
	maxPointCombos = 1000
)

func splitDots(p string) []string    { return strings.Split(p, ".") }
func joinDots(parts []string) string { return strings.Join(parts, ".") }

// prepared is the validated request.
type prepared struct {
	req        Request
	matcher    *query.Matcher
	filterDoc  bsoncore.Document
	sort       []sortField
	natural    int // $natural sort direction (0 = none)
	proj       *query.Projection
	projSimple bool
	// projFields are the projection's included top-level fields when it is a simple inclusion
	// (covered candidates); projID tells whether _id is output.
	projFields []string
	projID     bool
	hintIx     *index.Index
	hintNat    int // hint {$natural: d}
}

func badValue(msg string) error { return mongoerr.New(mongoerr.BadValue, msg) }

// parseSort validates a sort pattern as MongoDB's SortPattern does.
func parseSort(spec bsoncore.Document) ([]sortField, int, error) {
	elems, err := spec.Elements()
	if err != nil {
		return nil, 0, mongoerr.Newf(mongoerr.InvalidBSON, "invalid sort: %v", err)
	}
	var out []sortField
	natural := 0
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if v.Type == bsoncore.TypeEmbeddedDocument {
			meta, err := v.Document().LookupErr("$meta")
			if err != nil {
				return nil, 0, mongoerr.New(mongoerr.Location17312, "$meta is the only expression supported by $sort right now")
			}
			if meta.Type == bsoncore.TypeString && meta.StringValue() == "textScore" {
				return nil, 0, mongoerr.New(mongoerr.Location40218, "query requires text score metadata, but it is not available")
			}
			return nil, 0, mongoerr.Newf(mongoerr.Location31138, "Illegal $meta sort: %s", v)
		}
		if !bsonutil.IsNumber(v.Type) {
			return nil, 0, mongoerr.Newf(mongoerr.Location15974, "Illegal key in $sort specification: %s: %s", k, v)
		}
		f, _ := bsonutil.ToFloat64(v)
		if f != 1 && f != -1 {
			return nil, 0, mongoerr.New(mongoerr.Location15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		if k == "$natural" {
			natural = int(f)
			continue
		}
		if k == "" {
			return nil, 0, mongoerr.New(mongoerr.Location40352, "FieldPath cannot be constructed with empty string")
		}
		if strings.HasPrefix(k, "$") {
			return nil, 0, mongoerr.Newf(mongoerr.Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
		if err := bsonutil.ValidatePath(k); err != nil {
			return nil, 0, err
		}
		out = append(out, sortField{path: k, desc: f < 0, keyPos: -1})
	}
	return out, natural, nil
}

// simpleInclusion returns the fields of a projection made only of top-level 1/true
// inclusions (plus an optional _id: 0), the only projections a covered plan serves.
func simpleInclusion(spec bsoncore.Document) (fields []string, withID, ok bool) {
	elems, err := spec.Elements()
	if err != nil || len(elems) == 0 {
		return nil, false, false
	}
	withID = true
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if strings.ContainsAny(k, ".$") {
			return nil, false, false
		}
		if !bsonutil.IsNumber(v.Type) && v.Type != bsoncore.TypeBoolean {
			return nil, false, false
		}
		on := v.Type == bsoncore.TypeBoolean && v.Boolean()
		if bsonutil.IsNumber(v.Type) {
			f, _ := bsonutil.ToFloat64(v)
			on = f != 0
		}
		if k == "_id" {
			withID = on
			continue
		}
		if !on {
			return nil, false, false
		}
		fields = append(fields, k)
	}
	if len(fields) == 0 {
		return nil, false, false
	}
	return fields, withID, true
}

// isSimpleProjection: only inclusions/exclusions of plain (possibly dotted) fields.
func isSimpleProjection(spec bsoncore.Document) bool {
	elems, err := spec.Elements()
	if err != nil {
		return false
	}
	for _, e := range elems {
		if strings.Contains(e.Key(), "$") {
			return false
		}
		v := e.Value()
		if !bsonutil.IsNumber(v.Type) && v.Type != bsoncore.TypeBoolean {
			return false
		}
	}
	return true
}

func (p *prepared) validate(coll *index.Collection, meta *catalog.CollectionMeta) error {
	r := &p.req
	if r.Skip < 0 {
		return mongoerr.New(mongoerr.Location51024, "BSON field 'skip' value must be >= 0, actual value '"+i64(r.Skip)+"'")
	}
	if r.Limit < 0 {
		return mongoerr.New(mongoerr.Location51024, "BSON field 'limit' value must be >= 0, actual value '"+i64(r.Limit)+"'")
	}
	p.filterDoc = r.Filter
	if p.filterDoc == nil {
		p.filterDoc = bsoncore.Document{5, 0, 0, 0, 0}
	}
	p.matcher = r.Matcher
	if p.matcher == nil || r.Collation != nil {
		// A matcher parsed by the caller compares strings bytewise: re-parse under the
		// collation (the collection default may only be known here).
		po := query.ParseOptions{AllowExpr: true, AllowJSONSchema: true, Vars: r.Vars}
		if r.Collation != nil {
			po.Collator = r.Collation
		}
		m, err := query.Parse(p.filterDoc, po)
		if err != nil {
			return err
		}
		p.matcher = m
	}
	if r.Sort != nil {
		s, nat, err := parseSort(r.Sort)
		if err != nil {
			return err
		}
		p.sort, p.natural = s, nat
	}
	if r.Projection != nil && len(r.Projection) > 5 && !r.ForWrite {
		pr, err := query.ParseProjection(r.Projection, p.matcher)
		if err != nil {
			return err
		}
		p.proj = pr
		p.projSimple = isSimpleProjection(r.Projection)
		p.projFields, p.projID, _ = simpleInclusion(r.Projection)
	}
	if (r.Min != nil || r.Max != nil) && r.Hint.Type == 0 {
		return mongoerr.New(mongoerr.Location51173, "When using min()/max() a hint of which index to use must be provided")
	}
	if r.Hint.Type != 0 {
		if err := p.resolveHint(coll, meta); err != nil {
			return err
		}
	}
	if (r.Min != nil || r.Max != nil) && p.hintNat != 0 {
		return mongoerr.New(mongoerr.Location51175, "When using min()/max() the hint must not be $natural")
	}
	return nil
}

func i64(n int64) string {
	if n < 0 {
		return "-" + itoa(int(-n))
	}
	return itoa(int(n))
}

var errBadHint = func() error {
	return mongoerr.New(mongoerr.BadValue, "hint provided does not correspond to an existing index")
}

func (p *prepared) resolveHint(coll *index.Collection, meta *catalog.CollectionMeta) error {
	h := p.req.Hint
	switch h.Type {
	case bsoncore.TypeString:
		if meta == nil {
			return nil
		}
		if h.StringValue() == "$natural" {
			return errBadHint()
		}
		im, ok := meta.Index(h.StringValue())
		if !ok || !im.Ready || im.Hidden {
			return errBadHint()
		}
		ix, found, err := coll.Index(im.Name)
		if err != nil {
			return err
		}
		if !found {
			return errBadHint()
		}
		p.hintIx = ix
		return nil
	case bsoncore.TypeEmbeddedDocument:
		d := h.Document()
		if nat, err := d.LookupErr("$natural"); err == nil {
			f, _ := bsonutil.ToFloat64(nat)
			p.hintNat = 1
			if f < 0 {
				p.hintNat = -1
			}
			return nil
		}
		if len(d) <= 5 {
			// An empty hint means no hint.
			p.req.Hint = bsoncore.Value{}
			return nil
		}
		if meta == nil {
			return nil
		}
		ixs, err := coll.Indexes()
		if err != nil {
			return err
		}
		for _, ix := range ixs {
			if ix.Meta().Hidden {
				continue
			}
			if bsonutil.CompareDocuments(ix.Meta().KeyPattern, d) == 0 && sameKeys(ix.Meta().KeyPattern, d) {
				p.hintIx = ix
				return nil
			}
		}
		return errBadHint()
	}
	return errBadHint()
}

// sameKeys compares field names in order (CompareDocuments already compared values).
func sameKeys(a, b bsoncore.Document) bool {
	ea, _ := a.Elements()
	eb, _ := b.Elements()
	if len(ea) != len(eb) {
		return false
	}
	for i := range ea {
		if ea[i].Key() != eb[i].Key() {
			return false
		}
	}
	return true
}

// predicates collects the indexable leaves of the filter's top-level conjunction, keyed by
// path. elemMatch leaves from one $elemMatch share a group id > 0 (their bounds may be
// intersected on multikey paths).
type pred struct {
	path  string
	e     query.MatchExpression
	group int
}

func collectPreds(e query.MatchExpression, out []pred, group *int) []pred {
	switch e.Kind() {
	case query.KindAnd:
		for _, c := range e.Children() {
			out = collectPreds(c, out, group)
		}
	case query.KindOr:
		// A one-branch $or is its branch (MongoDB simplifies it away).
		if ch := e.Children(); len(ch) == 1 {
			out = collectPreds(ch[0], out, group)
		}
	case query.KindElemMatchValue:
		*group++
		g := *group
		for _, c := range e.Children() {
			if _, ok := boundable(c); ok {
				out = append(out, pred{path: e.Path(), e: c, group: g})
			}
		}
	case query.KindElemMatchObject:
		*group++
		g := *group
		for _, c := range e.Children() {
			out = collectElemObject(c, e.Path(), out, g)
		}
	default:
		if e.Path() != "" {
			if _, ok := boundable(e); ok {
				out = append(out, pred{path: e.Path(), e: e})
			}
		}
	}
	return out
}

func collectElemObject(e query.MatchExpression, prefix string, out []pred, g int) []pred {
	if e.Kind() == query.KindAnd {
		for _, c := range e.Children() {
			out = collectElemObject(c, prefix, out, g)
		}
		return out
	}
	if e.Path() == "" || e.Kind() == query.KindNot {
		return out
	}
	if _, ok := boundable(e); ok {
		out = append(out, pred{path: prefix + "." + e.Path(), e: e, group: g})
	}
	return out
}

// coverable reports whether every leaf of e can be evaluated on index key values alone
// (no null/array/object semantics that keys lose) and names only fields in names.
func coverable(e query.MatchExpression, names map[string]bool) bool {
	switch e.Kind() {
	case query.KindAlwaysTrue:
		return true
	case query.KindAnd, query.KindOr:
		for _, c := range e.Children() {
			if !coverable(c, names) {
				return false
			}
		}
		return true
	case query.KindEq, query.KindLt, query.KindLte, query.KindGt, query.KindGte, query.KindIn:
		if !names[e.Path()] {
			return false
		}
		exact, ok := boundable(e)
		return ok && exact
	}
	return false
}

// multikeyField reports whether field i of the index has an array component.
func multikeyField(im *catalog.IndexMeta, i int) bool {
	if !im.Multikey {
		return false
	}
	if im.MultikeyPaths == nil || i >= len(im.MultikeyPaths) {
		return true
	}
	for _, mk := range im.MultikeyPaths[i] {
		if mk {
			return true
		}
	}
	return false
}

// multikeyPrefix returns the shortest multikey prefix of field i ("" if none).
func multikeyPrefix(im *catalog.IndexMeta, names []string, i int) string {
	if !multikeyField(im, i) {
		return ""
	}
	parts := splitDots(names[i])
	if im.MultikeyPaths == nil || i >= len(im.MultikeyPaths) {
		return parts[0]
	}
	for j, mk := range im.MultikeyPaths[i] {
		if mk && j < len(parts) {
			return joinDots(parts[:j+1])
		}
	}
	return ""
}

// candidate is a planned index access.
type candidate struct {
	ix          *index.Index
	names       []string
	desc        []bool
	hashed      []bool // per field: hashed (bounds are in the hash space)
	bounds      []oil
	exactPreds  bool
	bounded     bool // some field has a non-full bound
	providesSrt bool
	reverse     bool
	covered     bool
	keyPos      map[string]int
}

// keyNames returns the fields of a key pattern, their directions and which one is hashed;
// ok is false for key patterns the planner does not handle (text, 2dsphere, ...).
func keyNames(kp bsoncore.Document) (names []string, desc, hashed []bool, ok bool) {
	elems, err := kp.Elements()
	if err != nil {
		return nil, nil, nil, false
	}
	for _, e := range elems {
		v := e.Value()
		h := false
		if v.Type == bsoncore.TypeString {
			if v.StringValue() != "hashed" {
				return nil, nil, nil, false
			}
			h = true
		}
		f, _ := bsonutil.ToFloat64(v)
		names = append(names, e.Key())
		desc = append(desc, f < 0)
		hashed = append(hashed, h)
	}
	return names, desc, hashed, true
}

// planIndex computes bounds and properties of using ix for the query; ok false when the index
// cannot serve it (unless hinted, in which case it scans fully).
func (p *prepared) planIndex(ix *index.Index, preds []pred, hinted bool) (*candidate, bool) {
	im := ix.Meta()
	names, desc, hashed, ok := keyNames(im.KeyPattern)
	if !ok {
		return nil, false
	}
	c := &candidate{ix: ix, names: names, desc: desc, hashed: hashed, keyPos: map[string]int{}}
	c.bounds = make([]oil, len(names))
	// An index compares strings under its own collation: bounds on strings are only right
	// when the query's collation is the same (hashed fields hash raw strings, so never).
	sameColl := collation.Equal(p.req.Collation, ix.Collator())
	for i, n := range names {
		c.keyPos[n] = i
		var b oil
		group := -1
		mk := multikeyField(im, i)
		for _, pr := range preds {
			if pr.path != n {
				continue
			}
			lb, _, _ := leafBounds(pr.e)
			if touchesStrings(lb) && (!sameColl || (hashed[i] && ix.Collator() != nil)) {
				continue
			}
			pb := lb
			if hashed[i] {
				// Only equalities translate into the hash space; ranges cannot use it.
				hb, ok := hashedBounds(pr.e)
				if !ok {
					continue
				}
				pb = hb
			}
			switch {
			case b == nil:
				b, group = pb, pr.group
			case !mk || (pr.group > 0 && pr.group == group):
				b = intersect(b, pb)
			}
		}
		if b == nil {
			b = full
		}
		c.bounds[i] = b
	}
	// Compound bounds across fields sharing a multikey array: only the first keeps its bounds.
	for i := 1; i < len(names); i++ {
		pi := multikeyPrefix(im, names, i)
		if pi == "" {
			continue
		}
		for j := 0; j < i; j++ {
			if multikeyPrefix(im, names, j) == pi && !c.bounds[j].isFull() {
				c.bounds[i] = full
				break
			}
		}
	}
	for _, b := range c.bounds {
		if !b.isFull() {
			c.bounded = true
		}
	}
	if im.Sparse && !hinted {
		// A sparse index lacks documents without the field: only predicates excluding null
		// (missing) on some field may use it.
		excl := false
		for i, b := range c.bounds {
			null := bsoncore.Value{Type: bsoncore.TypeNull}
			if hashed[i] {
				null = hashedNull
			}
			if !b.isFull() && !b.contains(null) {
				excl = true
			}
		}
		if !excl {
			return nil, false
		}
	}
	c.providesSrt, c.reverse = p.indexSort(c, im)
	if !sameColl {
		// The index orders strings differently from the requested sort.
		c.providesSrt, c.reverse = false, false
	}
	if !hinted && c.bounds[0].isFull() && !c.providesSrt {
		return nil, false
	}
	if !hinted && c.bounds[0].isFull() && c.providesSrt && !c.bounded && len(p.sort) == 0 {
		return nil, false
	}
	// A collated index holds sort keys, not strings: documents must be fetched.
	c.covered = ix.Collator() == nil && p.isCovered(c, im)
	return c, true
}

// touchesStrings reports whether some interval of o can hold a string, or a document or
// array that may contain one: the values a collation affects.
func touchesStrings(o oil) bool {
	str := bsonutil.CanonicalTypeOrder(bsoncore.TypeString)
	arr := bsonutil.CanonicalTypeOrder(bsoncore.TypeArray)
	for _, iv := range o {
		if bsonutil.CanonicalTypeOrder(iv.low.Type) <= arr && bsonutil.CanonicalTypeOrder(iv.high.Type) >= str {
			return true
		}
	}
	return false
}

// indexSort reports whether scanning c in some direction returns documents in sort order.
func (p *prepared) indexSort(c *candidate, im *catalog.IndexMeta) (provides, reverse bool) {
	if len(p.sort) == 0 {
		return false, false
	}
	// Leading fields fixed to a single point don't disturb the order.
	start := 0
	for start < len(c.names) && len(c.bounds[start]) == 1 && c.bounds[start][0].isPoint() &&
		c.names[start] != p.sort[0].path {
		start++
	}
	if start+len(p.sort) > len(c.names) {
		return false, false
	}
	dir := 0
	for k, sf := range p.sort {
		i := start + k
		if c.names[i] != sf.path || multikeyField(im, i) || c.hashed[i] {
			return false, false
		}
		d := 1
		if sf.desc != c.desc[i] {
			d = -1
		}
		if dir == 0 {
			dir = d
		} else if d != dir {
			return false, false
		}
	}
	// Multi-interval fields before the sorted ones would interleave runs.
	for i := 0; i < start; i++ {
		if len(c.bounds[i]) != 1 {
			return false, false
		}
	}
	return true, dir < 0
}

func (p *prepared) isCovered(c *candidate, im *catalog.IndexMeta) bool {
	// Under an ownership filter the SHARDING_FILTER needs the document (see OwnershipFilter).
	if p.req.ForWrite || p.req.ReturnKey || p.req.ShowRecordID || p.projFields == nil || im.Multikey ||
		p.req.Ownership != nil {
		return false
	}
	names := map[string]bool{}
	for i, n := range c.names {
		if strings.Contains(n, ".") || c.hashed[i] {
			return false
		}
		names[n] = true
	}
	for _, f := range p.projFields {
		if !names[f] {
			return false
		}
	}
	if p.projID && !names["_id"] {
		return false
	}
	for _, sf := range p.sort {
		if !names[sf.path] {
			return false
		}
	}
	return coverable(p.matcher.Expression(), names)
}

// ranges turns the per-field bounds into scan ranges in key order; fields after the returned
// index are not enforced by the ranges and must be checked per key.
func (c *candidate) ranges() ([]scanRange, int) {
	n := len(c.names)
	// Leading all-point fields form a cartesian product of prefixes.
	k := 0
	combos := 1
	for k < n && c.bounds[k].allPoints() && combos*len(c.bounds[k]) <= maxPointCombos {
		combos *= len(c.bounds[k])
		k++
	}
	for i := 0; i < n; i++ {
		if len(c.bounds[i]) == 0 {
			return nil, n // an empty interval list matches nothing
		}
	}
	prefixes := [][]bsoncore.Value{nil}
	for i := 0; i < k; i++ {
		pts := keyOrder(c.bounds[i], c.desc[i])
		var next [][]bsoncore.Value
		for _, pre := range prefixes {
			for _, iv := range pts {
				next = append(next, append(append([]bsoncore.Value(nil), pre...), iv.low))
			}
		}
		prefixes = next
	}
	var out []scanRange
	for _, pre := range prefixes {
		if k == n {
			out = append(out, scanRange{
				low:  &index.Bound{Values: pre, Inclusive: true},
				high: &index.Bound{Values: pre, Inclusive: true},
			})
			continue
		}
		if c.bounds[k].isFull() {
			out = append(out, scanRange{
				low:  prefixBound(pre, true),
				high: prefixBound(pre, true),
			})
			continue
		}
		for _, iv := range keyOrder(c.bounds[k], c.desc[k]) {
			// keyOrder already swapped ends for descending fields.
			lo := append(append([]bsoncore.Value(nil), pre...), iv.low)
			hi := append(append([]bsoncore.Value(nil), pre...), iv.high)
			out = append(out, scanRange{
				low:  &index.Bound{Values: lo, Inclusive: iv.lowInc},
				high: &index.Bound{Values: hi, Inclusive: iv.highInc},
			})
		}
	}
	return out, k
}

func prefixBound(pre []bsoncore.Value, inc bool) *index.Bound {
	if len(pre) == 0 {
		return nil
	}
	return &index.Bound{Values: pre, Inclusive: inc}
}

// keyOrder returns the intervals in index key order: reversed, with ends swapped, for a
// descending field.
func keyOrder(o oil, desc bool) oil {
	if !desc {
		return o
	}
	out := make(oil, len(o))
	for i, iv := range o {
		out[len(o)-1-i] = interval{low: iv.high, high: iv.low, lowInc: iv.highInc, highInc: iv.lowInc}
	}
	return out
}

// Prepare plans req over the collection; see api.go.
func Prepare(ctx context.Context, ru *storage.RecoveryUnit, meta *catalog.CollectionMeta,
	coll *index.Collection, req Request) (*Executor, error) {
	if req.MaxBlockingSortBytes <= 0 {
		req.MaxBlockingSortBytes = DefaultMaxBlockingSortBytes
	}
	if !req.CollationSet && meta != nil {
		if v, err := meta.Options.LookupErr("collation"); err == nil && v.Type == bsoncore.TypeEmbeddedDocument {
			c, err := collation.Parse(v.Document())
			if err != nil {
				return nil, err
			}
			req.Collation = c
		}
	}
	p := &prepared{req: req}
	if err := p.validate(coll, meta); err != nil {
		return nil, err
	}
	// Parsing and bounds building are O(n log n) in a $in's size but still take a while for
	// a huge one: check between the phases.
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	ex := &Executor{p: p, meta: meta, ns: req.NS}
	if meta == nil || coll == nil {
		ex.root = &eofStage{}
		ex.env = &execEnv{ru: ru}
		return ex, nil
	}
	ex.env = &execEnv{ru: ru, coll: coll, rs: coll.RecordStore(), dedup: req.ForWrite}
	builders, err := p.candidates(coll, meta)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if len(builders) == 1 {
		ex.root, ex.ixName = builders[0].build(ex.env)
		return ex, nil
	}
	// Trial runs: each candidate works until it produces trialResults documents, reaches
	// EOF or spends trialWorks; the most productive wins (MongoDB's plan ranker).
	best, bestScore := -1, math.Inf(-1)
	var trials []stage
	var firstErr error
	for i, b := range builders {
		root, _ := b.build(ex.env)
		trials = append(trials, root)
		score, err := trial(ctx, ex.env, root, b)
		// Release the trial's storage cursors now (it is kept only for its statistics): a
		// later candidate waiting out a prepare conflict inside a unit of work can then
		// refresh the unit's view.
		root.save()
		if err != nil {
			if ctx.Err() != nil {
				closeAll(trials)
				return nil, context.Cause(ctx)
			}
			if storage.IsPrepareConflict(err) || mongoerr.Is(err, mongoerr.WriteConflict) {
				// The unit must be rolled back (or the transaction retried): any plan
				// would meet the same document.
				closeAll(trials)
				return nil, err
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		closeAll(trials)
		return nil, firstErr
	}
	for i, t := range trials {
		t.close()
		if i != best {
			ex.rejected = append(ex.rejected, t)
		}
	}
	ex.trialWinner = trials[best]
	ex.root, ex.ixName = builders[best].build(ex.env)
	return ex, nil
}

func closeAll(ss []stage) {
	for _, s := range ss {
		s.close()
	}
}

func trial(ctx context.Context, env *execEnv, root stage, b *builder) (float64, error) {
	var works, adv int64
	eof := false
	for works < trialWorks && adv < trialResults {
		if works%128 == 0 && ctx.Err() != nil {
			return 0, context.Cause(ctx)
		}
		_, st, err := root.work(ctx)
		works++
		if err != nil && storage.IsPrepareConflict(err) {
			// Wait, as the chosen plan would: a candidate that gave up here would lose
			// the trial (or fail the query) for a document it has not seen yet.
			if err = waitPrepared(ctx, env, root, b.p.req.InTransaction, err); err == nil {
				continue
			}
		}
		if err != nil {
			return 0, err
		}
		if st == advanced {
			adv++
		}
		if st == isEOF {
			eof = true
			break
		}
	}
	score := 1 + float64(adv)/float64(max(works, 1))
	if eof {
		score++
	}
	const tie = 1e-4
	if b.cand != nil && b.cand.covered {
		score += tie
	}
	if len(b.p.sort) == 0 || (b.cand != nil && b.cand.providesSrt) {
		score += tie
	}
	return score, nil
}

// builder builds one plan's stage tree (again after trials).
type builder struct {
	p      *prepared
	cand   *candidate // nil: collection scan or IDHACK
	idhack bool
	// collscan direction
	reverse bool
	// minMax bounds for hinted min/max scans
	minMax *scanRange
	// or: one index scan per branch of the filter's top-level $or, under an OR stage
	or []*candidate
}

func (p *prepared) candidates(coll *index.Collection, meta *catalog.CollectionMeta) ([]*builder, error) {
	r := p.req
	if r.Tailable || p.hintNat != 0 || p.natural != 0 {
		dir := p.natural
		if p.hintNat != 0 {
			dir = p.hintNat
		}
		return []*builder{{p: p, reverse: dir < 0}}, nil
	}
	if p.hintIx != nil {
		var preds []pred
		g := 0
		preds = collectPreds(p.matcher.Expression(), preds, &g)
		c, _ := p.planIndex(p.hintIx, preds, true)
		// A partial index the query does not imply would miss documents (MongoDB rejects
		// the hint the same way).
		if c == nil || !partialUsable(p.hintIx.Meta(), p.matcher.Expression()) {
			return nil, errBadHint()
		}
		b := &builder{p: p, cand: c}
		if r.Min != nil || r.Max != nil {
			rng, err := minMaxRange(c, r.Min, r.Max)
			if err != nil {
				return nil, err
			}
			b.minMax = rng
			c.providesSrt = false
			c.covered = false
		}
		return []*builder{b}, nil
	}
	if id, ok := idHackValue(p); ok {
		if ix, err := coll.IDIndex(); err == nil && ix != nil && collation.Equal(p.req.Collation, ix.Collator()) {
			_ = id
			return []*builder{{p: p, idhack: true}}, nil
		}
	}
	var preds []pred
	g := 0
	preds = collectPreds(p.matcher.Expression(), preds, &g)
	ixs, err := coll.Indexes()
	if err != nil {
		return nil, err
	}
	var out []*builder
	for _, ix := range ixs {
		im := ix.Meta()
		if im.Hidden || !im.Ready || !partialUsable(im, p.matcher.Expression()) {
			continue
		}
		if c, ok := p.planIndex(ix, preds, false); ok {
			out = append(out, &builder{p: p, cand: c})
		}
	}
	if branches := p.orPlan(ixs); branches != nil {
		out = append(out, &builder{p: p, or: branches})
	}
	// The collection scan competes unless an index bounds the query (MongoDB only falls back
	// to COLLSCAN when no index applies).
	if len(out) == 0 {
		out = append(out, &builder{p: p})
	}
	return out, nil
}

// idHackValue: {_id: <scalar>} alone, no sort/projection constraints that need more.
func idHackValue(p *prepared) (bsoncore.Value, bool) {
	if p.req.ReturnKey || p.req.Min != nil || p.req.Max != nil {
		return bsoncore.Value{}, false
	}
	e := p.matcher.Expression()
	if e.Kind() == query.KindAnd && len(e.Children()) == 1 {
		e = e.Children()[0]
	}
	if e.Kind() != query.KindEq || e.Path() != "_id" {
		return bsoncore.Value{}, false
	}
	v := e.Value()
	switch v.Type {
	case bsoncore.TypeArray, bsoncore.TypeEmbeddedDocument, bsoncore.TypeRegex, bsoncore.TypeNull,
		bsoncore.TypeUndefined, bsoncore.TypeMinKey, bsoncore.TypeMaxKey:
		return bsoncore.Value{}, false
	}
	// Only when the filter is exactly that one predicate.
	elems, err := p.filterDoc.Elements()
	if err != nil || len(elems) != 1 || elems[0].Key() != "_id" {
		return bsoncore.Value{}, false
	}
	return v, true
}

// minMaxRange turns find's min/max into one key-order range of the hinted index.
func minMaxRange(c *candidate, minDoc, maxDoc bsoncore.Document) (*scanRange, error) {
	conv := func(d bsoncore.Document) ([]bsoncore.Value, error) {
		if d == nil {
			return nil, nil
		}
		elems, err := d.Elements()
		if err != nil {
			return nil, err
		}
		if len(elems) != len(c.names) {
			return nil, mongoerr.New(mongoerr.Location51176, "min and max must have the same field names as the index key pattern")
		}
		var vals []bsoncore.Value
		for i, e := range elems {
			if e.Key() != c.names[i] {
				return nil, mongoerr.New(mongoerr.Location51174, "The index chosen is not consistent with min/max")
			}
			vals = append(vals, e.Value())
		}
		return vals, nil
	}
	lo, err := conv(minDoc)
	if err != nil {
		return nil, err
	}
	hi, err := conv(maxDoc)
	if err != nil {
		return nil, err
	}
	r := &scanRange{}
	if lo != nil {
		r.low = &index.Bound{Values: lo, Inclusive: true}
	}
	if hi != nil {
		r.high = &index.Bound{Values: hi, Inclusive: false}
	}
	if lo != nil && hi != nil {
		ord := c.ix.Ordering()
		a, _ := keystring.Encode(lo, ord, nilRID)
		b, _ := keystring.Encode(hi, ord, nilRID)
		if keystring.Compare(a, b) > 0 {
			return nil, mongoerr.New(mongoerr.Location51175, "min() must be less than max()")
		}
	}
	return r, nil
}
