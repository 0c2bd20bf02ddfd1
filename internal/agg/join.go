package agg

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/collation"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/query/expr"
)

// namespace parses a "from"/"coll"/"into" value: a collection name or {db, coll}.
func namespace(v value, defDB, stageName string) (db, coll string, err error) {
	switch v.Type {
	case bsoncore.TypeString:
		db, coll = defDB, v.StringValue()
	case bsoncore.TypeEmbeddedDocument:
		db, coll = defDB, ""
		els, err := expr.DocElems(v.Document())
		if err != nil {
			return "", "", err
		}
		for _, el := range els {
			s, ok := el.Value().StringValueOK()
			if !ok {
				return "", "", mongoerr.Newf(mongoerr.TypeMismatch, "%s: '%s' must be a string", stageName, el.Key())
			}
			switch el.Key() {
			case "db":
				db = s
			case "coll":
				coll = s
			default:
				return "", "", mongoerr.Newf(mongoerr.Location40415, "BSON field '%s.%s' is an unknown field.", stageName, el.Key())
			}
		}
	default:
		return "", "", mongoerr.Newf(mongoerr.FailedToParse, "%s: namespace must be a string or an object", stageName)
	}
	if coll == "" || strings.ContainsAny(coll, "\x00$") || strings.HasPrefix(coll, ".") || strings.HasSuffix(coll, ".") {
		return "", "", mongoerr.Newf(mongoerr.InvalidNamespace, "%s: invalid collection name '%s'", stageName, coll)
	}
	if db == "" || strings.ContainsAny(db, "/\\. \"$\x00") {
		return "", "", mongoerr.Newf(mongoerr.InvalidNamespace, "%s: invalid database name '%s'", stageName, db)
	}
	return db, coll, nil
}

func (rc *runCtx) open(ctx context.Context, db, coll string) (Source, error) {
	if rc.ac.Resolver == nil {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "this pipeline cannot read other collections here")
	}
	return rc.ac.Resolver.Open(ctx, db, coll)
}

// ---- $lookup ----

type lookupStage struct {
	raw          value
	db, coll     string
	localField   []string
	foreignField []string
	as           []string
	letNames     []string
	letXs        []expr.Expression
	pipeline     []stage
	hasPipeline  bool
	// eqField and eqVar: the pipeline starts with {$match: {$expr: {$eq: ["$eqField",
	// "$$eqVar"]}}} on a let variable, so its probes can ask for eqField equal to the
	// variable's value (a superset of what the $match keeps, which still runs).
	eqField []string
	eqVar   string
}

func parseLookup(spec value, p *pctx) (stage, error) {
	els, err := objectElems(spec, mongoerr.Location40319, "the $lookup stage specification must be an object")
	if err != nil {
		return nil, err
	}
	s := &lookupStage{raw: spec}
	var fromV, pipeV value
	var letDoc bsoncore.Document
	for _, el := range els {
		v := el.Value()
		switch el.Key() {
		case "from":
			fromV = v
		case "localField", "foreignField", "as":
			str, ok := v.StringValueOK()
			if !ok {
				return nil, mongoerr.Newf(mongoerr.Location4570, "$lookup argument '%s: %s' must be a string, is type %s", el.Key(), v, expr.TypeName(v))
			}
			path, err := expr.SplitFieldPath(str)
			if err != nil {
				return nil, err
			}
			switch el.Key() {
			case "localField":
				s.localField = path
			case "foreignField":
				s.foreignField = path
			default:
				s.as = path
			}
		case "let":
			ld, ok := v.DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup argument 'let' must be an object")
			}
			letDoc = ld
		case "pipeline":
			if v.Type != bsoncore.TypeArray {
				return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup argument 'pipeline' must be an array")
			}
			pipeV = v
		default:
			return nil, mongoerr.Newf(mongoerr.FailedToParse, "unknown argument to $lookup: %s", el.Key())
		}
	}
	if s.as == nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "must specify 'as' field for a $lookup")
	}
	if fromV.Type == 0 {
		if pipeV.Type == 0 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "must specify 'from' field for a $lookup")
		}
	} else if s.db, s.coll, err = namespace(fromV, p.pc.DB, "$lookup"); err != nil {
		return nil, err
	}
	if (s.localField == nil) != (s.foreignField == nil) {
		return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup requires both or neither of 'localField' and 'foreignField' to be specified")
	}
	if pipeV.Type == 0 && s.localField == nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified")
	}
	if letDoc != nil {
		lels, err := expr.DocElems(letDoc)
		if err != nil {
			return nil, err
		}
		for _, el := range lels {
			if err := expr.CheckVarName(el.Key()); err != nil {
				return nil, err
			}
			x, err := p.parseExpr(el.Value())
			if err != nil {
				return nil, err
			}
			s.letNames = append(s.letNames, el.Key())
			s.letXs = append(s.letXs, x)
		}
	}
	if pipeV.Type != 0 {
		s.hasPipeline = true
		sub, err := subPipeline(pipeV, p.withVars(s.letNames...))
		if err != nil {
			return nil, err
		}
		for _, st := range sub {
			switch st.name() {
			case "$out", "$merge":
				return nil, mongoerr.Newf(mongoerr.Location51047, "%s is not allowed within a $lookup's sub-pipeline", st.name())
			}
		}
		s.pipeline = optimize(sub, p.pc.Collator)
		if s.localField == nil && len(s.pipeline) > 0 {
			if m, ok := s.pipeline[0].(*matchStage); ok {
				s.eqField, s.eqVar = exprEqJoin(m.filter, s.letNames)
			}
		}
	}
	return s, nil
}

// exprEqJoin recognises {$expr: {$eq: ["$field", "$$var"]}} (either order) on a top-level
// field and one of lets. Whatever $expr's $eq keeps, an equality query on field for the
// variable's value also returns: the field holds exactly that value.
func exprEqJoin(filter bsoncore.Document, lets []string) (field []string, name string) {
	els, err := filter.Elements()
	if err != nil || len(els) != 1 || els[0].Key() != "$expr" {
		return nil, ""
	}
	xd, ok := els[0].Value().DocumentOK()
	if !ok {
		return nil, ""
	}
	xels, err := xd.Elements()
	if err != nil || len(xels) != 1 || xels[0].Key() != "$eq" {
		return nil, ""
	}
	arr, ok := xels[0].Value().ArrayOK()
	if !ok {
		return nil, ""
	}
	vals, err := arr.Values()
	if err != nil || len(vals) != 2 {
		return nil, ""
	}
	a, okA := vals[0].StringValueOK()
	b, okB := vals[1].StringValueOK()
	if !okA || !okB {
		return nil, ""
	}
	if strings.HasPrefix(a, "$$") {
		a, b = b, a
	}
	if !strings.HasPrefix(b, "$$") || strings.HasPrefix(a, "$$") || !strings.HasPrefix(a, "$") {
		return nil, ""
	}
	f, v := a[1:], b[2:]
	if f == "" || strings.ContainsAny(f, ".$") || v == "" || strings.Contains(v, ".") {
		return nil, ""
	}
	for _, l := range lets {
		if l == v {
			return []string{f}, v
		}
	}
	return nil, ""
}

func subPipeline(v value, p *pctx) ([]stage, error) {
	docs, err := docArray(v, func(value) error {
		return mongoerr.New(mongoerr.TypeMismatch, "each element of a pipeline must be an object")
	})
	if err != nil {
		return nil, err
	}
	q := *p
	q.depth++
	return parseStages(docs, &q)
}

func (s *lookupStage) name() string { return "$lookup" }
func (s *lookupStage) spec() value  { return s.raw }

// run probes the foreign side (foreign.go) for each input document: with localField, for the
// documents whose foreignField equals one of its values; without, for the whole collection.
// The pipeline form runs its sub-pipeline over what the probe returns. The matches of one
// document are bounded by LookupMaxResultBytes (4568).
func (s *lookupStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	fs := &foreignSide{rc: rc, db: s.db, coll: s.coll, path: s.foreignField}
	if s.eqField != nil {
		fs.path = s.eqField
	}
	ec := rc.evalCtx(nil)
	maxBytes := rc.lookupMaxResultBytes()
	return eachDoc(in, func(ctx context.Context, d bsoncore.Document) (bsoncore.Document, bool, error) {
		var sub *runCtx
		if s.hasPipeline {
			var err error
			if sub, err = rc.withLet(ec, d, s.letNames, s.letXs); err != nil {
				return nil, false, err
			}
		}
		var vals []value
		switch {
		case s.localField != nil:
			vals = matchValues(d, s.localField)
		case s.eqField != nil:
			vals = []value{sub.vars[s.eqVar]}
		}
		src, err := fs.probe(ctx, vals)
		if err != nil {
			return nil, false, err
		}
		if s.hasPipeline {
			if src, err = runStages(ctx, s.pipeline, src, sub); err != nil {
				return nil, false, err
			}
		}
		defer src.Close()
		matched := []value{}
		var size int64
		for {
			if err := ctx.Err(); err != nil {
				return nil, false, context.Cause(ctx)
			}
			fd, ok, err := src.Next(ctx)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				break
			}
			// MongoDB checks the total before each further match (document_source_lookup.cpp).
			if size > maxBytes {
				return nil, false, mongoerr.Newf(mongoerr.Location4568,
					"Total size of documents in %s matching pipeline's $lookup stage exceeds %d bytes", s.coll, maxBytes)
			}
			size += int64(len(fd))
			matched = append(matched, expr.Doc(fd))
		}
		return setPath(d, s.as, expr.Array(matched)), true, nil
	}), nil
}

// foreignIndex is a foreign collection held in memory, indexed by the KeyStrings of the
// values of one field (foreignSide's hash join).
type foreignIndex struct {
	coll  *collation.Collator
	docs  []bsoncore.Document
	byKey map[string][]int // KeyString → positions in docs, ascending
	kb    keystring.Builder
}

// key is the KeyString of v (missing as null). Under a collation, strings equal under it
// share a key.
func (fi *foreignIndex) key(v value) string {
	fi.kb.Reset(keystring.AllAscending)
	if v.Type == 0 {
		v = expr.Null
	}
	fi.kb.AppendValue(expr.CollKey(fi.coll, v))
	return string(fi.kb.Bytes())
}

// withLet is the run context of a sub-pipeline ($lookup's, $merge's whenMatched): rc's
// variables and those of "let", evaluated on d.
func (rc *runCtx) withLet(ec *expr.EvalContext, d bsoncore.Document, names []string, xs []expr.Expression) (*runCtx, error) {
	sub := newRunCtx(rc.ac)
	sub.coll = rc.coll
	sub.now = rc.now
	for k, v := range rc.vars {
		sub.vars[k] = v
	}
	ec.Root, ec.Current = d, nil
	for i, x := range xs {
		v, err := x.Eval(ec)
		if err != nil {
			return nil, err
		}
		sub.vars[names[i]] = v
	}
	return sub, nil
}

// matchValues are the values the local side of an equality join compares with: each value
// reached, an array's elements in its place (an empty array as missing), missing as null.
func matchValues(d bsoncore.Document, path []string) []value {
	var out []value
	walkPath(d, path, func(v value) {
		if v.Type != bsoncore.TypeArray {
			out = append(out, v)
			return
		}
		vals, _ := expr.ArrayValues(v)
		out = append(out, vals...)
		if len(vals) == 0 {
			out = append(out, expr.Missing)
		}
	})
	return out
}

// walkPath calls leaf with each value path reaches in d, descending into arrays of documents
// on the way, and with missing where the path stops at a non-document.
func walkPath(d bsoncore.Document, path []string, leaf func(v value)) {
	var walk func(v value, i int)
	walk = func(v value, i int) {
		if i == len(path) {
			leaf(v)
			return
		}
		switch v.Type {
		case bsoncore.TypeEmbeddedDocument:
			walk(expr.Field(v.Data, path[i]), i+1)
		case bsoncore.TypeArray:
			vals, _ := expr.ArrayValues(v)
			for _, e := range vals {
				if e.Type == bsoncore.TypeEmbeddedDocument {
					walk(e, i)
				}
			}
		default:
			leaf(expr.Missing)
		}
	}
	walk(expr.Doc(d), 0)
}

// ---- $unionWith ----

type unionWithStage struct {
	raw      value
	db, coll string
	pipeline []stage
}

func parseUnionWith(spec value, p *pctx) (stage, error) {
	s := &unionWithStage{raw: spec}
	var err error
	switch spec.Type {
	case bsoncore.TypeString:
		if s.db, s.coll, err = namespace(spec, p.pc.DB, "$unionWith"); err != nil {
			return nil, err
		}
	case bsoncore.TypeEmbeddedDocument:
		els, err := expr.DocElems(spec.Document())
		if err != nil {
			return nil, err
		}
		for _, el := range els {
			switch el.Key() {
			case "coll":
				if s.db, s.coll, err = namespace(el.Value(), p.pc.DB, "$unionWith"); err != nil {
					return nil, err
				}
			case "pipeline":
				if s.pipeline, err = subPipeline(el.Value(), p); err != nil {
					return nil, err
				}
			default:
				return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field '$unionWith.%s' is an unknown field.", el.Key())
			}
		}
		if s.coll == "" && (len(s.pipeline) == 0 || s.pipeline[0].name() != "$documents") {
			return nil, mongoerr.New(mongoerr.Location40414, "BSON field '$unionWith.coll' is missing but a required field")
		}
	default:
		return nil, mongoerr.Newf(mongoerr.FailedToParse, "the $unionWith stage specification must be an object or string, but found %s", expr.TypeName(spec))
	}
	return s, nil
}

func (s *unionWithStage) name() string { return "$unionWith" }
func (s *unionWithStage) spec() value  { return s.raw }
func (s *unionWithStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	var second Source
	firstDone := false
	return &funcSrc{closeFn: func() {
		in.Close()
		if second != nil {
			second.Close()
		}
	}, next: func(ctx context.Context) (bsoncore.Document, bool, error) {
		if !firstDone {
			d, ok, err := in.Next(ctx)
			if err != nil || ok {
				return d, ok, err
			}
			firstDone = true
			var src Source = sliceSource(nil)
			if s.coll != "" {
				if src, err = rc.open(ctx, s.db, s.coll); err != nil {
					return nil, false, err
				}
			}
			if second, err = runStages(ctx, s.pipeline, src, rc); err != nil {
				return nil, false, err
			}
		}
		return second.Next(ctx)
	}}, nil
}

// ---- $graphLookup ----

type graphLookupStage struct {
	raw         value
	db, coll    string
	startWith   expr.Expression
	connectFrom []string
	connectTo   []string
	as          string
	maxDepth    int64
	depthField  string
	restrict    *query.Matcher
	restrictDoc bsoncore.Document
}

func parseGraphLookup(spec value, p *pctx) (stage, error) {
	els, err := objectElems(spec, mongoerr.Location40327, "the $graphLookup stage specification must be an object")
	if err != nil {
		return nil, err
	}
	s := &graphLookupStage{raw: spec, maxDepth: -1}
	for _, el := range els {
		v := el.Value()
		str, isStr := v.StringValueOK()
		switch el.Key() {
		case "from":
			if s.db, s.coll, err = namespace(v, p.pc.DB, "$graphLookup"); err != nil {
				return nil, err
			}
		case "startWith":
			if s.startWith, err = p.parseExpr(v); err != nil {
				return nil, err
			}
		case "connectFromField", "connectToField", "as", "depthField":
			if !isStr {
				return nil, mongoerr.Newf(mongoerr.Location40103, "expected string as argument for %s, found: %s", el.Key(), v)
			}
			path, err := expr.SplitFieldPath(str)
			if err != nil {
				return nil, err
			}
			switch el.Key() {
			case "connectFromField":
				s.connectFrom = path
			case "connectToField":
				s.connectTo = path
			case "as":
				s.as = str
			default:
				s.depthField = str
			}
		case "maxDepth":
			n, ok := v.AsInt64OK()
			if !ok || n < 0 {
				return nil, mongoerr.Newf(mongoerr.Location40101, "maxDepth requires a nonnegative argument, found: %s", v)
			}
			s.maxDepth = n
		case "restrictSearchWithMatch":
			md, ok := v.DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.Location40185, "restrictSearchWithMatch must be an object")
			}
			if s.restrict, err = query.Parse(md, matchOpts(query.ParseOptions{}, p.pc.Collator)); err != nil {
				return nil, err
			}
			s.restrictDoc = md
		default:
			return nil, mongoerr.Newf(mongoerr.Location40104, "Unknown argument to $graphLookup: %s", el.Key())
		}
	}
	if s.coll == "" || s.startWith == nil || s.connectFrom == nil || s.connectTo == nil || s.as == "" {
		return nil, mongoerr.New(mongoerr.Location40105, "$graphLookup requires 'from', 'startWith', 'connectFromField', 'connectToField' and 'as'")
	}
	return s, nil
}

func (s *graphLookupStage) name() string { return "$graphLookup" }
func (s *graphLookupStage) spec() value  { return s.raw }

// run does a breadth-first search per input document, one probe of the foreign side
// (foreign.go) per depth for the frontier's values. Foreign documents are told apart by _id
// (MongoDB's visited set); the visited documents and the frontier are bounded by
// GraphLookupMaxMemoryBytes (40099).
func (s *graphLookupStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	fs := &foreignSide{rc: rc, db: s.db, coll: s.coll, path: s.connectTo,
		restrict: s.restrict, restrictDoc: s.restrictDoc, skipMissing: true}
	ec := rc.evalCtx(nil)
	maxBytes := rc.graphLookupMaxMemoryBytes()
	var kb keystring.Builder
	return eachDoc(in, func(ctx context.Context, d bsoncore.Document) (bsoncore.Document, bool, error) {
		ec.Root, ec.Current = d, nil
		start, err := s.startWith.Eval(ec)
		if err != nil {
			return nil, false, err
		}
		frontier := []value{start}
		if start.Type == bsoncore.TypeArray {
			frontier, _ = expr.ArrayValues(start)
		}
		var frontierBytes, visitedBytes int64
		for _, v := range frontier {
			frontierBytes += int64(len(v.Data)) + 16
		}
		visited := map[string]bool{}
		var found []value
		for depth := int64(0); len(frontier) > 0 && (s.maxDepth < 0 || depth <= s.maxDepth); depth++ {
			src, err := fs.probe(ctx, frontier)
			if err != nil {
				return nil, false, err
			}
			var next []value
			frontierBytes = 0
			for {
				if err := ctx.Err(); err != nil {
					src.Close()
					return nil, false, context.Cause(ctx)
				}
				fd, ok, err := src.Next(ctx)
				if err != nil {
					src.Close()
					return nil, false, err
				}
				if !ok {
					break
				}
				id := expr.Field(fd, "_id")
				if id.Type == 0 {
					src.Close()
					return nil, false, mongoerr.Newf(mongoerr.Location40271,
						"Documents in the '%s.%s' namespace must contain an _id for de-duplication in $graphLookup", s.db, s.coll)
				}
				// _id equality is binary, whatever the collation (MongoDB's visited map).
				kb.Reset(keystring.AllAscending)
				kb.AppendValue(id)
				if k := string(kb.Bytes()); visited[k] {
					continue
				} else {
					visited[k] = true
				}
				out := fd
				if s.depthField != "" {
					out = expr.SetField(fd, s.depthField, expr.Int64(depth))
				}
				found = append(found, expr.Doc(out))
				visitedBytes += int64(len(id.Data)) + int64(len(out)) + 16
				cv := expr.GetPath(fd, s.connectFrom)
				if cv.Type == bsoncore.TypeArray {
					vals, _ := expr.ArrayValues(cv)
					next = append(next, vals...)
					for _, v := range vals {
						frontierBytes += int64(len(v.Data)) + 16
					}
				} else if cv.Type != 0 {
					next = append(next, cv)
					frontierBytes += int64(len(cv.Data)) + 16
				}
				if visitedBytes+frontierBytes >= maxBytes {
					src.Close()
					return nil, false, mongoerr.New(mongoerr.Location40099, "$graphLookup reached maximum memory consumption")
				}
			}
			src.Close()
			frontier = next
		}
		if found == nil {
			found = []value{}
		}
		return expr.SetField(d, s.as, expr.Array(found)), true, nil
	}), nil
}

// ---- $facet ----

type facetStage struct {
	raw    value
	names  []string
	stages [][]stage
}

func parseFacet(spec value, p *pctx) (stage, error) {
	els, err := objectElems(spec, mongoerr.Location15947, "the $facet specification must be a non-empty object")
	if err != nil {
		return nil, err
	}
	if len(els) == 0 {
		return nil, mongoerr.New(mongoerr.Location40169, "the $facet specification must be a non-empty object")
	}
	s := &facetStage{raw: spec}
	for _, el := range els {
		if el.Value().Type != bsoncore.TypeArray {
			return nil, mongoerr.Newf(mongoerr.Location40170, "arguments to $facet must be arrays, %s is type %s", el.Key(), expr.TypeName(el.Value()))
		}
		sub, err := subPipeline(el.Value(), p)
		if err != nil {
			return nil, err
		}
		for _, st := range sub {
			switch st.name() {
			case "$out", "$merge", "$facet", "$documents", "$unionWith":
				return nil, mongoerr.Newf(mongoerr.Location40600, "%s is not allowed to be used within a $facet stage", st.name())
			}
		}
		s.names = append(s.names, el.Key())
		s.stages = append(s.stages, optimize(sub, p.pc.Collator))
	}
	return s, nil
}

func (s *facetStage) name() string { return "$facet" }
func (s *facetStage) spec() value  { return s.raw }
func (s *facetStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	return blocking(in, func(ctx context.Context) ([]bsoncore.Document, error) {
		docs, err := Drain(ctx, in)
		if err != nil {
			return nil, err
		}
		// $facet holds its whole input: account it like the other blocking stages.
		var mem int64
		for _, d := range docs {
			mem += int64(len(d)) + 64
		}
		if mem > rc.maxMem() && !rc.ac.AllowDiskUse {
			return nil, errMemory("$facet")
		}
		out := expr.NewDoc()
		for i, st := range s.stages {
			src, err := runStages(ctx, st, sliceSource(docs), rc)
			if err != nil {
				return nil, err
			}
			res, err := Drain(ctx, src)
			if err != nil {
				return nil, err
			}
			vals := make([]value, len(res))
			for j, r := range res {
				vals[j] = expr.Doc(r)
			}
			out.Add(s.names[i], expr.Array(vals))
			if out.Len() > maxFacetOutputBytes {
				return nil, mongoerr.Newf(mongoerr.Location4031700,
					"document constructed by $facet is %d bytes, which exceeds the limit of %d bytes", out.Len(), maxFacetOutputBytes)
			}
		}
		return []bsoncore.Document{out.Done()}, nil
	}), nil
}

// ---- $out / $merge ----

type outStage struct {
	raw      value
	db, coll string
}

func parseOut(spec value, p *pctx) (stage, error) {
	s := &outStage{raw: spec}
	var err error
	if s.db, s.coll, err = namespace(spec, p.pc.DB, "$out"); err != nil {
		return nil, err
	}
	if strings.HasPrefix(s.coll, "system.") {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid $out target namespace, %s.%s", s.db, s.coll)
	}
	return s, nil
}

func (s *outStage) name() string { return "$out" }
func (s *outStage) spec() value  { return s.raw }
func (s *outStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	return blocking(in, func(ctx context.Context) ([]bsoncore.Document, error) {
		if rc.ac.Resolver == nil {
			return nil, mongoerr.New(mongoerr.IllegalOperation, "$out is not supported here")
		}
		w, err := rc.ac.Resolver.OpenWriter(ctx, s.db, s.coll, true)
		if err != nil {
			return nil, err
		}
		for {
			d, ok, err := in.Next(ctx)
			if err == nil && ok {
				err = w.Insert(ctx, d)
			}
			if err != nil {
				w.Abort(ctx)
				return nil, err
			}
			if !ok {
				break
			}
		}
		return nil, w.Commit(ctx)
	}), nil
}

type mergeStage struct {
	raw            value
	db, coll       string
	on             []string
	whenMatched    string // replace, keepExisting, merge, fail, pipeline
	matchedPipe    []stage
	letNames       []string
	letXs          []expr.Expression
	whenNotMatched string // insert, discard, fail
}

func parseMerge(spec value, p *pctx) (stage, error) {
	s := &mergeStage{raw: spec, whenMatched: "merge", whenNotMatched: "insert"}
	var err error
	switch spec.Type {
	case bsoncore.TypeString:
		if s.db, s.coll, err = namespace(spec, p.pc.DB, "$merge"); err != nil {
			return nil, err
		}
	case bsoncore.TypeEmbeddedDocument:
		els, err := expr.DocElems(spec.Document())
		if err != nil {
			return nil, err
		}
		var letDoc bsoncore.Document
		var pipeV value
		for _, el := range els {
			v := el.Value()
			switch el.Key() {
			case "into":
				if s.db, s.coll, err = namespace(v, p.pc.DB, "$merge"); err != nil {
					return nil, err
				}
			case "on":
				switch v.Type {
				case bsoncore.TypeString:
					s.on = []string{v.StringValue()}
				case bsoncore.TypeArray:
					vals, _ := expr.ArrayValues(v)
					for _, e := range vals {
						str, ok := e.StringValueOK()
						if !ok {
							return nil, mongoerr.New(mongoerr.Location51134, "$merge 'on' array elements must be strings")
						}
						s.on = append(s.on, str)
					}
					if len(s.on) == 0 {
						return nil, mongoerr.New(mongoerr.Location51187, "If explicitly specifying $merge 'on', must include at least one field")
					}
				default:
					return nil, mongoerr.New(mongoerr.Location51186, "$merge 'on' field must be either a string or an array of strings")
				}
			case "whenMatched":
				if v.Type == bsoncore.TypeArray {
					s.whenMatched, pipeV = "pipeline", v
					continue
				}
				str, _ := v.StringValueOK()
				switch str {
				case "replace", "keepExisting", "merge", "fail":
					s.whenMatched = str
				default:
					return nil, mongoerr.Newf(mongoerr.BadValue, "Enumeration value '%s' for field 'whenMatched' is not a valid value.", str)
				}
			case "whenNotMatched":
				str, _ := v.StringValueOK()
				switch str {
				case "insert", "discard", "fail":
					s.whenNotMatched = str
				default:
					return nil, mongoerr.Newf(mongoerr.BadValue, "Enumeration value '%s' for field 'whenNotMatched' is not a valid value.", str)
				}
			case "let":
				if letDoc, _ = v.DocumentOK(); letDoc == nil {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "$merge 'let' must be an object")
				}
			default:
				return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field '$merge.%s' is an unknown field.", el.Key())
			}
		}
		if s.coll == "" {
			return nil, mongoerr.New(mongoerr.Location40414, "BSON field '$merge.into' is missing but a required field")
		}
		if !mergeModes[s.whenMatched+"/"+s.whenNotMatched] {
			wm := s.whenMatched
			if wm == "pipeline" {
				wm = "[pipeline]"
			}
			return nil, mongoerr.Newf(mongoerr.Location51181,
				"Combination of $merge modes 'whenMatched: %s' and 'whenNotMatched: %s' is not supported", wm, s.whenNotMatched)
		}
		names := []string{"new"}
		if letDoc != nil {
			if s.whenMatched != "pipeline" {
				return nil, mongoerr.New(mongoerr.Location51199, "Cannot use 'let' variables with 'whenMatched: "+s.whenMatched+"' mode")
			}
			lels, err := expr.DocElems(letDoc)
			if err != nil {
				return nil, err
			}
			names = nil
			for _, el := range lels {
				x, err := p.parseExpr(el.Value())
				if err != nil {
					return nil, err
				}
				s.letNames = append(s.letNames, el.Key())
				s.letXs = append(s.letXs, x)
				names = append(names, el.Key())
			}
		} else if s.whenMatched == "pipeline" {
			cur := expr.Expression(currentX{})
			s.letNames, s.letXs = []string{"new"}, []expr.Expression{cur}
		}
		if pipeV.Type != 0 {
			if s.matchedPipe, err = subPipeline(pipeV, p.withVars(names...)); err != nil {
				return nil, err
			}
		}
	default:
		return nil, mongoerr.New(mongoerr.Location51182, "$merge requires a string or object argument")
	}
	if s.on == nil {
		s.on = []string{"_id"}
	}
	return s, nil
}

// currentX evaluates to $$CURRENT (the default "new" variable of $merge pipelines).
type currentX struct{}

func (currentX) Eval(ec *expr.EvalContext) (value, error) {
	if ec.Current != nil {
		return expr.Doc(ec.Current), nil
	}
	return expr.Doc(ec.Root), nil
}

// mergeModes are the supported (whenMatched, whenNotMatched) pairs (document_source_merge.cpp's
// strategy descriptors); whenMatched "fail" goes only with "insert".
var mergeModes = map[string]bool{
	"replace/insert":      true,
	"replace/fail":        true,
	"replace/discard":     true,
	"merge/insert":        true,
	"merge/fail":          true,
	"merge/discard":       true,
	"keepExisting/insert": true,
	"pipeline/insert":     true,
	"pipeline/fail":       true,
	"pipeline/discard":    true,
	"fail/insert":         true,
}

func (s *mergeStage) name() string { return "$merge" }
func (s *mergeStage) spec() value  { return s.raw }
func (s *mergeStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	return blocking(in, func(ctx context.Context) ([]bsoncore.Document, error) {
		if rc.ac.Resolver == nil {
			return nil, mongoerr.New(mongoerr.IllegalOperation, "$merge is not supported here")
		}
		w, err := rc.ac.Resolver.OpenWriter(ctx, s.db, s.coll, false)
		if err != nil {
			return nil, err
		}
		ec := rc.evalCtx(nil)
		for {
			d, ok, err := in.Next(ctx)
			if err == nil && ok {
				err = s.mergeOne(ctx, w, d, ec, rc)
			}
			if err != nil {
				w.Abort(ctx)
				return nil, err
			}
			if !ok {
				break
			}
		}
		return nil, w.Commit(ctx)
	}), nil
}

func (s *mergeStage) mergeOne(ctx context.Context, w Writer, d bsoncore.Document, ec *expr.EvalContext, rc *runCtx) error {
	filter := expr.NewDoc()
	for _, f := range s.on {
		v := expr.GetPath(d, strings.Split(f, "."))
		if expr.IsNullish(v) || v.Type == bsoncore.TypeArray {
			return mongoerr.Newf(mongoerr.Location51132, "$merge write error: 'on' field '%s' cannot be missing, null or an array", f)
		}
		filter.Add(f, v)
	}
	fd := filter.Done()
	if s.whenMatched == "fail" {
		// MongoDB's insert strategy: a plain insert, so a match surfaces as the insert's own
		// E11000 with the index's keyPattern and keyValue.
		return w.Insert(ctx, d)
	}
	existing, found, err := w.FindOne(ctx, fd)
	if err != nil {
		return err
	}
	if !found {
		switch s.whenNotMatched {
		case "insert":
			return w.Insert(ctx, d)
		case "fail":
			return mongoerr.New(mongoerr.Location13113, "$merge could not find a matching document in the target collection for at least one document in the source collection")
		}
		return nil
	}
	var nd bsoncore.Document
	switch s.whenMatched {
	case "keepExisting":
		return nil
	case "replace":
		nd = d
	case "merge":
		nd = expr.MergeDocs(existing, d)
	case "pipeline":
		sub, err := rc.withLet(ec, d, s.letNames, s.letXs)
		if err != nil {
			return err
		}
		out, err := runStages(ctx, s.matchedPipe, sliceSource([]bsoncore.Document{existing}), sub)
		if err != nil {
			return err
		}
		docs, err := Drain(ctx, out)
		if err != nil {
			return err
		}
		if len(docs) != 1 {
			return mongoerr.New(mongoerr.Location51151, "$merge pipeline must produce exactly one document")
		}
		nd = docs[0]
	}
	// The _id of the target document is kept.
	if id := expr.Field(existing, "_id"); id.Type != 0 {
		if expr.Field(nd, "_id").Type != 0 {
			nd = expr.SetField(nd, "_id", id)
		} else {
			d := expr.NewDoc()
			d.Add("_id", id)
			els, _ := nd.Elements()
			for _, el := range els {
				d.AddElement(el)
			}
			nd = d.Done()
		}
	}
	return w.Replace(ctx, fd, nd)
}
