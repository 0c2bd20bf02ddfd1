package agg

import (
	"context"
	"math/rand/v2"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/collation"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/query/expr"
)

// ---- $match ----

type matchStage struct {
	filter bsoncore.Document
	m      *query.Matcher
	// usesVars: the filter's $expr references pipeline variables (the command's let, a
	// $lookup's let), bound per run: it is matched with them and cannot be pushed down.
	usesVars bool
}

func parseMatch(spec value, p *pctx) (stage, error) {
	d, ok := spec.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.Location15959, "the match filter must be an expression in an object")
	}
	return newMatch(d, p)
}

func newMatch(d bsoncore.Document, p *pctx) (*matchStage, error) {
	opts := matchOpts(query.ParseOptions{AllowExpr: true, AllowJSONSchema: true}, p.pc.Collator)
	m, err := query.Parse(d, opts)
	if err == nil {
		return &matchStage{filter: d, m: m}, nil
	}
	if mongoerr.CodeOf(err) != mongoerr.Location17276 {
		return nil, err
	}
	// The filter's $expr reads the pipeline's variables: declare them; matches binds their
	// values for each run (MatchDetails.Vars).
	for k := range p.vars {
		opts.VarNames = append(opts.VarNames, k)
	}
	if m, err = query.Parse(d, opts); err != nil {
		return nil, err
	}
	return &matchStage{filter: d, m: m, usesVars: true}, nil
}

func (s *matchStage) name() string { return "$match" }
func (s *matchStage) spec() value  { return expr.Doc(s.filter) }

func (s *matchStage) matches(ctx context.Context, d bsoncore.Document, ec *expr.EvalContext, md *query.MatchDetails) (bool, error) {
	// md carries the context so that one long match (a filter of many clauses) is
	// interruptible too.
	md.Interrupt = ctx
	if s.usesVars {
		md.Vars, md.Now = ec.Vars, ec.Now
	}
	return s.m.MatchesWithDetails(d, md)
}

func (s *matchStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	ec := rc.evalCtx(nil)
	var md query.MatchDetails
	return eachDoc(in, func(ctx context.Context, d bsoncore.Document) (bsoncore.Document, bool, error) {
		m, err := s.matches(ctx, d, ec, &md)
		return d, m, err
	}), nil
}

// topFields lists the first components of the paths the filter reads; ok is false when the
// filter reads something that cannot be attributed to fields ($expr, $where, $jsonSchema...).
func topFields(d bsoncore.Document) (fields []string, ok bool) {
	els, err := d.Elements()
	if err != nil {
		return nil, false
	}
	for _, el := range els {
		k := el.Key()
		switch k {
		case "$and", "$or", "$nor":
			vals, err := expr.ArrayValues(el.Value())
			if err != nil {
				return nil, false
			}
			for _, v := range vals {
				sd, isDoc := v.DocumentOK()
				if !isDoc {
					return nil, false
				}
				f, ok := topFields(sd)
				if !ok {
					return nil, false
				}
				fields = append(fields, f...)
			}
		case "$comment":
		default:
			if strings.HasPrefix(k, "$") {
				return nil, false
			}
			head, _, _ := strings.Cut(k, ".")
			fields = append(fields, head)
		}
	}
	return fields, true
}

// ---- $limit, $skip ----

type limitStage struct{ n int64 }

func positiveInt(spec value, stageName string, allowZero bool) (int64, error) {
	n, ok := bsonutil.ToInt64Exact(spec)
	if !ok || !expr.IsNumber(spec) {
		return 0, mongoerr.Newf(mongoerr.Location15957, "the %s must be specified as a number", strings.TrimPrefix(stageName, "$"))
	}
	if n < 0 || (n == 0 && !allowZero) {
		return 0, mongoerr.Newf(mongoerr.Location15958, "the %s must be positive", strings.TrimPrefix(stageName, "$"))
	}
	return n, nil
}

func parseLimit(spec value, _ *pctx) (stage, error) {
	n, err := positiveInt(spec, "$limit", false)
	if err != nil {
		return nil, err
	}
	return &limitStage{n: n}, nil
}

func (s *limitStage) name() string { return "$limit" }
func (s *limitStage) spec() value  { return expr.Int64(s.n) }
func (s *limitStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	var seen int64
	return &funcSrc{closeFn: in.Close, next: func(ctx context.Context) (bsoncore.Document, bool, error) {
		if seen >= s.n {
			return nil, false, nil
		}
		seen++
		return in.Next(ctx)
	}}, nil
}

type skipStage struct{ n int64 }

func parseSkip(spec value, _ *pctx) (stage, error) {
	n, err := positiveInt(spec, "$skip", true)
	if err != nil {
		return nil, err
	}
	return &skipStage{n: n}, nil
}

func (s *skipStage) name() string { return "$skip" }
func (s *skipStage) spec() value  { return expr.Int64(s.n) }
func (s *skipStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	skipped := false
	return &funcSrc{closeFn: in.Close, next: func(ctx context.Context) (bsoncore.Document, bool, error) {
		if !skipped {
			skipped = true
			for i := int64(0); i < s.n; i++ {
				if _, ok, err := in.Next(ctx); !ok || err != nil {
					return nil, false, err
				}
			}
		}
		return in.Next(ctx)
	}}, nil
}

// ---- $count ----

type countStage struct{ field string }

func parseCount(spec value, _ *pctx) (stage, error) {
	s, ok := spec.StringValueOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.Location40156, "the count field must be a non-empty string")
	}
	switch {
	case s == "":
		return nil, mongoerr.New(mongoerr.Location40157, "the count field must be a non-empty string")
	case strings.HasPrefix(s, "$"):
		return nil, mongoerr.New(mongoerr.Location40158, "the count field cannot be a $-prefixed path")
	case strings.Contains(s, "."):
		return nil, mongoerr.New(mongoerr.Location40160, "the count field cannot contain '.'")
	case strings.IndexByte(s, 0) >= 0:
		return nil, mongoerr.New(mongoerr.Location16411, "FieldPath field names may not contain '\\0'.")
	}
	return &countStage{field: s}, nil
}

func (s *countStage) name() string { return "$count" }
func (s *countStage) spec() value  { return expr.String(s.field) }
func (s *countStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	done := false
	return &funcSrc{closeFn: in.Close, next: func(ctx context.Context) (bsoncore.Document, bool, error) {
		if done {
			return nil, false, nil
		}
		done = true
		var n int64
		for {
			_, ok, err := in.Next(ctx)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				break
			}
			n++
		}
		if n == 0 {
			return nil, false, nil
		}
		return expr.DocOf(s.field, expr.Int(n)), true, nil
	}}, nil
}

// ---- $unwind ----

type unwindStage struct {
	path       []string
	pathStr    string
	preserve   bool
	includeIdx string
}

func parseUnwind(spec value, _ *pctx) (stage, error) {
	s := &unwindStage{}
	var path string
	switch spec.Type {
	case bsoncore.TypeString:
		path = spec.StringValue()
	case bsoncore.TypeEmbeddedDocument:
		els, err := expr.DocElems(spec.Document())
		if err != nil {
			return nil, err
		}
		for _, el := range els {
			v := el.Value()
			switch el.Key() {
			case "path":
				p, ok := v.StringValueOK()
				if !ok {
					return nil, mongoerr.Newf(mongoerr.Location28808, "expected a string as the path for $unwind stage, got %s", expr.TypeName(v))
				}
				path = p
			case "preserveNullAndEmptyArrays":
				b, ok := v.BooleanOK()
				if !ok {
					return nil, mongoerr.Newf(mongoerr.Location28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got %s", expr.TypeName(v))
				}
				s.preserve = b
			case "includeArrayIndex":
				p, ok := v.StringValueOK()
				if !ok || p == "" || strings.HasPrefix(p, "$") {
					return nil, mongoerr.Newf(mongoerr.Location28810, "expected a non-empty string for the includeArrayIndex option to $unwind stage")
				}
				if _, err := expr.SplitFieldPath(p); err != nil {
					return nil, err
				}
				s.includeIdx = p
			default:
				return nil, mongoerr.Newf(mongoerr.Location28811, "unrecognized option to $unwind stage: %s", el.Key())
			}
		}
		if path == "" {
			return nil, mongoerr.New(mongoerr.Location28812, "no path specified to $unwind stage")
		}
	default:
		return nil, mongoerr.Newf(mongoerr.Location15981, "expected either a string or an object as specification for $unwind stage, got %s", expr.TypeName(spec))
	}
	if !strings.HasPrefix(path, "$") {
		return nil, mongoerr.Newf(mongoerr.Location28818, "path option to $unwind stage should be prefixed with a '$': %s", path)
	}
	parts, err := expr.SplitFieldPath(path[1:])
	if err != nil {
		return nil, err
	}
	s.path, s.pathStr = parts, path
	return s, nil
}

func (s *unwindStage) name() string { return "$unwind" }
func (s *unwindStage) spec() value {
	d := expr.NewDoc()
	d.Add("path", expr.String(s.pathStr))
	if s.preserve {
		d.Add("preserveNullAndEmptyArrays", expr.True)
	}
	if s.includeIdx != "" {
		d.Add("includeArrayIndex", expr.String(s.includeIdx))
	}
	return expr.Doc(d.Done())
}

func (s *unwindStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	var cur bsoncore.Document
	var elems []value
	pos := 0
	idxPath := []string{s.includeIdx}
	if s.includeIdx != "" {
		idxPath = strings.Split(s.includeIdx, ".")
	}
	return &funcSrc{closeFn: in.Close, next: func(ctx context.Context) (bsoncore.Document, bool, error) {
		for {
			if pos < len(elems) {
				d := setPath(cur, s.path, elems[pos])
				if s.includeIdx != "" {
					d = setPath(d, idxPath, expr.Int64(int64(pos)))
				}
				pos++
				return d, true, nil
			}
			d, ok, err := in.Next(ctx)
			if !ok || err != nil {
				return nil, false, err
			}
			v := lookupPlain(d, s.path)
			switch {
			case v.Type == bsoncore.TypeArray:
				vals, err := expr.ArrayValues(v)
				if err != nil {
					return nil, false, err
				}
				if len(vals) == 0 {
					if s.preserve {
						out := removePath(d, s.path)
						if s.includeIdx != "" {
							out = setPath(out, idxPath, expr.Null)
						}
						return out, true, nil
					}
					continue
				}
				cur, elems, pos = d, vals, 0
			case expr.IsNullish(v):
				if s.preserve {
					if s.includeIdx != "" {
						d = setPath(d, idxPath, expr.Null)
					}
					return d, true, nil
				}
			default:
				// A non-array, non-null value is treated as a single-element array.
				if s.includeIdx != "" {
					d = setPath(d, idxPath, expr.Null)
				}
				return d, true, nil
			}
		}
	}}, nil
}

// lookupPlain follows a path through documents only (arrays on the way are not traversed),
// as $unwind and $lookup's "as" do.
func lookupPlain(d bsoncore.Document, path []string) value {
	v := expr.Doc(d)
	for _, p := range path {
		if v.Type != bsoncore.TypeEmbeddedDocument {
			return expr.Missing
		}
		v = expr.Field(v.Data, p)
	}
	return v
}

// ---- $replaceRoot / $replaceWith ----

type replaceRootStage struct {
	stageName string
	raw       value
	x         expr.Expression
}

func parseReplaceRoot(name string) stageParser {
	return func(spec value, p *pctx) (stage, error) {
		newRoot := spec
		if name == "$replaceRoot" {
			els, err := objectElems(spec, mongoerr.Location40228, "expected an object as specification for $replaceRoot stage")
			if err != nil {
				return nil, err
			}
			newRoot = expr.Missing
			for _, el := range els {
				if el.Key() != "newRoot" {
					return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field '$replaceRoot.%s' is an unknown field.", el.Key())
				}
				newRoot = el.Value()
			}
			if newRoot.Type == 0 {
				return nil, mongoerr.New(mongoerr.Location40414, "BSON field '$replaceRoot.newRoot' is missing but a required field")
			}
		}
		x, err := p.parseExpr(newRoot)
		if err != nil {
			return nil, err
		}
		return &replaceRootStage{stageName: name, raw: spec, x: x}, nil
	}
}

func (s *replaceRootStage) name() string { return s.stageName }
func (s *replaceRootStage) spec() value  { return s.raw }
func (s *replaceRootStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	ec := rc.evalCtx(nil)
	return eachDoc(in, func(_ context.Context, d bsoncore.Document) (bsoncore.Document, bool, error) {
		ec.Root, ec.Current = d, nil
		v, err := s.x.Eval(ec)
		if err != nil {
			return nil, false, err
		}
		nd, isDoc := v.DocumentOK()
		if !isDoc {
			return nil, false, mongoerr.Newf(mongoerr.Location40228,
				"'newRoot' expression must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'. Input document: %s",
				v, expr.TypeName(v), d)
		}
		return nd, true, nil
	}), nil
}

// ---- $sortByCount ----

func parseSortByCount(spec value, p *pctx) (stage, error) {
	if s, ok := spec.StringValueOK(); !ok || !strings.HasPrefix(s, "$") {
		if !expr.IsOperatorDoc(spec) {
			return nil, mongoerr.New(mongoerr.Location40148, "the sortByCount field must be defined as a $-prefixed path or an expression")
		}
	}
	g, err := parseGroup(expr.Doc(expr.DocOf("_id", spec, "count", expr.Doc(expr.DocOf("$sum", expr.Int32(1))))), p)
	if err != nil {
		return nil, err
	}
	srt, err := parseSort(expr.Doc(expr.DocOf("count", expr.Int32(-1))), p)
	if err != nil {
		return nil, err
	}
	return &seqStage{stageName: "$sortByCount", raw: spec, stages: []stage{g, srt}}, nil
}

// seqStage is a stage that desugars into others (explain shows the parts).
type seqStage struct {
	stageName string
	raw       value
	stages    []stage
}

func (s *seqStage) name() string { return s.stageName }
func (s *seqStage) spec() value  { return s.raw }
func (s *seqStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	return runStages(ctx, s.stages, in, rc)
}

// ---- $documents ----

// exprSpec is the specification of a stage that is one expression ($documents, $redact).
type exprSpec struct {
	raw value
	x   expr.Expression
}

func parseExprSpec(spec value, p *pctx) (exprSpec, error) {
	x, err := p.parseExpr(spec)
	return exprSpec{raw: spec, x: x}, err
}

func (s *exprSpec) spec() value { return s.raw }

type documentsStage struct{ exprSpec }

func parseDocuments(spec value, p *pctx) (stage, error) {
	e, err := parseExprSpec(spec, p)
	if err != nil {
		return nil, err
	}
	return &documentsStage{e}, nil
}

func (s *documentsStage) name() string { return "$documents" }
func (s *documentsStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	in.Close()
	v, err := s.x.Eval(rc.evalCtx(expr.EmptyDoc))
	if err != nil {
		return nil, err
	}
	if v.Type != bsoncore.TypeArray {
		return nil, mongoerr.Newf(mongoerr.Location5858203, "error during $documents evaluation: an array is expected, got %s", expr.TypeName(v))
	}
	docs, err := docArray(v, func(e value) error {
		return mongoerr.Newf(mongoerr.Location5858202, "error during $documents evaluation: expected an array of objects, found %s", expr.TypeName(e))
	})
	if err != nil {
		return nil, err
	}
	return sliceSource(docs), nil
}

// ---- $sample ----

type sampleStage struct{ size int64 }

func parseSample(spec value, _ *pctx) (stage, error) {
	els, err := objectElems(spec, mongoerr.Location28745, "the $sample stage specification must be an object")
	if err != nil {
		return nil, err
	}
	s := &sampleStage{size: -1}
	for _, el := range els {
		if el.Key() != "size" {
			return nil, mongoerr.Newf(mongoerr.Location28748, "unrecognized option to $sample: %s", el.Key())
		}
		n, ok := bsonutil.ToInt64Exact(el.Value())
		if !ok || !expr.IsNumber(el.Value()) {
			return nil, mongoerr.New(mongoerr.Location28746, "size argument to $sample must be a number")
		}
		if n < 0 {
			return nil, mongoerr.New(mongoerr.Location28747, "size argument to $sample must not be negative")
		}
		s.size = n
	}
	if s.size < 0 {
		return nil, mongoerr.New(mongoerr.Location28749, "$sample stage must specify a size")
	}
	return s, nil
}

func (s *sampleStage) name() string { return "$sample" }
func (s *sampleStage) spec() value  { return expr.Doc(expr.DocOf("size", expr.Int64(s.size))) }

// run keeps a reservoir of size documents (algorithm R), then shuffles it.
func (s *sampleStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	rnd := rc.ac.Rand
	if rnd == nil {
		rnd = rand.Float64
	}
	var res []bsoncore.Document
	loaded := false
	i := 0
	return &funcSrc{closeFn: in.Close, next: func(ctx context.Context) (bsoncore.Document, bool, error) {
		if !loaded {
			loaded = true
			var n int64
			for {
				d, ok, err := in.Next(ctx)
				if err != nil {
					return nil, false, err
				}
				if !ok {
					break
				}
				n++
				if int64(len(res)) < s.size {
					res = append(res, d)
				} else if j := int64(rnd() * float64(n)); j < s.size {
					res[j] = d
				}
			}
			for k := len(res) - 1; k > 0; k-- {
				j := int(rnd() * float64(k+1))
				res[k], res[j] = res[j], res[k]
			}
		}
		if i >= len(res) {
			return nil, false, nil
		}
		i++
		return res[i-1], true, nil
	}}, nil
}

// ---- $redact ----

type redactStage struct{ exprSpec }

func parseRedact(spec value, p *pctx) (stage, error) {
	e, err := parseExprSpec(spec, p)
	if err != nil {
		return nil, err
	}
	return &redactStage{e}, nil
}

func (s *redactStage) name() string { return "$redact" }

func (s *redactStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	ec := rc.evalCtx(nil)
	return eachDoc(in, func(_ context.Context, d bsoncore.Document) (bsoncore.Document, bool, error) {
		ec.Root = d
		return s.redact(d, ec, 0)
	}), nil
}

func (s *redactStage) redact(d bsoncore.Document, ec *expr.EvalContext, depth int) (bsoncore.Document, bool, error) {
	if depth > 150 {
		return nil, false, mongoerr.New(mongoerr.BadValue, "$redact: document too deep")
	}
	ec.Current = d
	v, err := s.x.Eval(ec)
	if err != nil {
		return nil, false, err
	}
	act, _ := v.StringValueOK()
	switch act {
	case "prune":
		return nil, false, nil
	case "keep":
		return d, true, nil
	case "descend":
	default:
		return nil, false, mongoerr.Newf(mongoerr.Location17053, "$redact's expression should not return anything aside from the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned %s", v)
	}
	out := expr.NewDoc()
	els, _ := d.Elements()
	for _, el := range els {
		v := el.Value()
		switch v.Type {
		case bsoncore.TypeEmbeddedDocument:
			sd, keep, err := s.redact(v.Data, ec, depth+1)
			if err != nil {
				return nil, false, err
			}
			if keep {
				out.Add(el.Key(), expr.Doc(sd))
			}
		case bsoncore.TypeArray:
			vals, _ := expr.ArrayValues(v)
			kept := make([]value, 0, len(vals))
			for _, e := range vals {
				if e.Type == bsoncore.TypeEmbeddedDocument {
					sd, keep, err := s.redact(e.Data, ec, depth+1)
					if err != nil {
						return nil, false, err
					}
					if keep {
						kept = append(kept, expr.Doc(sd))
					}
					continue
				}
				kept = append(kept, e)
			}
			out.Add(el.Key(), expr.Array(kept))
		default:
			out.AddElement(el)
		}
	}
	return out.Done(), true, nil
}

// ---- optimisation ----

// optimize applies MongoDB's pipeline rewrites that matter here: adjacent $match stages are
// merged, $match moves ahead of $sort and of projections that leave its fields unchanged,
// and $sort followed by $limit becomes a top-k sort.
func optimize(stages []stage, coll *collation.Collator) []stage {
	changed := true
	for changed {
		changed = false
		for i := 0; i+1 < len(stages); i++ {
			a, b := stages[i], stages[i+1]
			m, isMatch := b.(*matchStage)
			switch x := a.(type) {
			case *matchStage:
				if isMatch && !x.usesVars && !m.usesVars {
					merged := expr.DocOf("$and", expr.Array([]value{expr.Doc(x.filter), expr.Doc(m.filter)}))
					if nm, err := query.Parse(merged, matchOpts(query.ParseOptions{AllowExpr: true, AllowJSONSchema: true}, coll)); err == nil {
						stages[i] = &matchStage{filter: merged, m: nm}
						stages = append(stages[:i+1], stages[i+2:]...)
						changed = true
					}
				}
			case *sortStage:
				// A top-k sort has absorbed a $limit: filtering must stay after it.
				if isMatch && x.limit == 0 {
					stages[i], stages[i+1] = b, a
					changed = true
				} else if l, ok := b.(*limitStage); ok && (x.limit == 0 || l.n < x.limit) {
					x2 := *x
					x2.limit = l.n
					stages[i] = &x2
					stages = append(stages[:i+1], stages[i+2:]...)
					changed = true
				}
			case *skipStage:
				// $skip n, $limit m → $limit n+m, $skip n: lets a preceding $sort become top-k.
				if l, ok := b.(*limitStage); ok && x.n+l.n > x.n {
					stages[i], stages[i+1] = &limitStage{n: x.n + l.n}, x
					changed = true
				}
			case *projectStage:
				if isMatch && !m.usesVars {
					if fields, ok := topFields(m.filter); ok && len(fields) > 0 {
						safe := true
						for _, f := range fields {
							if !x.preserves(f) {
								safe = false
								break
							}
						}
						if safe {
							stages[i], stages[i+1] = b, a
							changed = true
						}
					}
				}
			}
		}
	}
	return stages
}
