package agg

import (
	"context"
	"os"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/collation"
	"humongo/internal/index/sorter"
	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
)

// Source is a stream of documents. Next returns ok=false at the end. A document returned by
// Next stays valid after later calls (see the package comment). Close releases resources and
// may be called more than once.
type Source interface {
	Next(ctx context.Context) (doc bsoncore.Document, ok bool, err error)
	Close()
}

// Writer receives the output of $out and $merge for one target collection.
type Writer interface {
	// FindOne returns the target document matching filter ($merge's "on" fields).
	FindOne(ctx context.Context, filter bsoncore.Document) (bsoncore.Document, bool, error)
	Insert(ctx context.Context, doc bsoncore.Document) error
	// Replace replaces the document matching filter with doc.
	Replace(ctx context.Context, filter, doc bsoncore.Document) error
	// Commit makes the writes visible; for $out it atomically replaces the target's contents.
	Commit(ctx context.Context) error
	// Abort discards what Commit would have published (for $out: the temporary collection).
	Abort(ctx context.Context)
}

// CollectionResolver gives the stages that read or write other collections access to them.
type CollectionResolver interface {
	// Open scans db.coll (an empty stream for a collection that does not exist).
	Open(ctx context.Context, db, coll string) (Source, error)
	// OpenWriter opens a writer for db.coll; replace is $out's whole-collection replacement.
	OpenWriter(ctx context.Context, db, coll string, replace bool) (Writer, error)
}

// Querier is implemented by a CollectionResolver that can run a filtered read of a foreign
// collection through the query planner, so that the collection's indexes serve $lookup's and
// $graphLookup's per-document reads.
type Querier interface {
	// Query streams the documents of db.coll (a collection or a view) matching filter, a
	// find filter, and reports the index the plan uses ("" for a collection scan).
	Query(ctx context.Context, db, coll string, filter bsoncore.Document) (src Source, index string, err error)
}

// Context is what a pipeline runs with.
type Context struct {
	Now         time.Time                 // $$NOW (zero: time.Now() at Run)
	ClusterTime bsoncore.Value            // $$CLUSTER_TIME (a timestamp); zero: derived from Now
	Vars        map[string]bsoncore.Value // the command's "let" variables, by name without "$$"
	// AllowDiskUse lets blocking stages spill instead of failing above MaxMemoryBytes.
	AllowDiskUse bool
	// MaxMemoryBytes bounds each blocking stage (<= 0: 100 MB, MongoDB's default).
	MaxMemoryBytes int64
	TempDir        string // spill files (os.TempDir() when empty)
	Resolver       CollectionResolver
	// Bounds of the $lookup family (<= 0: MongoDB's default, 100 MB each).
	// LookupCacheBytes bounds a foreign collection held in memory for hash joins
	// (internalDocumentSourceLookupCacheSizeBytes): a larger one is read per input document
	// instead. LookupMaxResultBytes bounds one $lookup's matches for one document
	// (internalLookupStageIntermediateDocumentMaxSizeBytes, error 4568).
	// GraphLookupMaxMemoryBytes bounds $graphLookup's visited set and frontier for one
	// document (internalDocumentSourceGraphLookupMaxMemoryBytes, error 40099).
	LookupCacheBytes          int64
	LookupMaxResultBytes      int64
	GraphLookupMaxMemoryBytes int64
	// Rand supplies $rand and $sample (nil: math/rand/v2's global source).
	Rand func() float64
	// Collator overrides, for run-time comparisons, the collation the pipeline was parsed
	// with (ParseContext.Collator); nil keeps it. $match filters are built at Parse, so the
	// two should agree: callers normally set only ParseContext.Collator.
	Collator *collation.Collator
}

// ParseContext is what parsing a pipeline needs.
type ParseContext struct {
	DB string // the database of unqualified namespaces ($lookup from, $out, ...)
	// Vars names the command's "let" variables, so references to them parse.
	Vars []string
	// Collectionless is set for "aggregate: 1" (a pipeline that must start with $documents
	// or another source stage).
	Collectionless bool
	// Collator is the operation's collation (nil: simple, binary comparison). It applies to
	// every string comparison in the pipeline: $match, $sort, group keys, $addToSet and set
	// operators, joins, window partitions and the comparison expressions; sub-pipelines
	// ($lookup, $facet, $unionWith) inherit it, as in MongoDB.
	Collator *collation.Collator
}

// Bounds on hostile pipelines ("Bad input: deep or huge pipelines bounded", issue 6).
const (
	// maxStages bounds a pipeline's length (MongoDB's internalPipelineLengthLimit default;
	// error 7749501 as in 7.0). It applies to each (sub-)pipeline.
	maxStages = 1000
	// maxSubPipelineDepth bounds nesting through $lookup/$facet/$unionWith sub-pipelines
	// (MongoDB's internalMaxSubPipelineViewDepth default; MaxSubPipelineDepthExceeded).
	maxSubPipelineDepth = 20
	// maxStageDepth bounds the BSON nesting of one stage specification, so parsing deeply
	// nested expressions (whose parser recurses per operator) stays shallow. The wire layer
	// admits 220 levels; MongoDB's own limit on user nesting is 200.
	maxStageDepth = 200
	// maxFacetOutputBytes bounds the document $facet builds (MongoDB's
	// internalQueryFacetMaxOutputDocSizeBytes default, error 4031700).
	maxFacetOutputBytes = 100 << 20
)

// Pipeline is a parsed, optimised pipeline. It is immutable and may be Run many times.
type Pipeline struct {
	stages []stage
	pc     ParseContext
}

// stage is one parsed stage.
type stage interface {
	name() string
	// run wraps in; the returned Source owns in (closing it closes in).
	run(ctx context.Context, in Source, rc *runCtx) (Source, error)
	// spec renders the stage as explain shows it ({$name: spec}).
	spec() value
}

// runCtx is the per-Run state shared by the stages.
type runCtx struct {
	ac   *Context
	vars map[string]value
	now  time.Time
	coll *collation.Collator // nil: binary comparison
}

func (rc *runCtx) evalCtx(doc bsoncore.Document) *expr.EvalContext {
	ec := &expr.EvalContext{Root: doc, Now: rc.now, Vars: rc.vars}
	if rc.coll != nil {
		// Only a non-nil collator goes into the interface, so ec.Collator == nil keeps
		// meaning binary comparison.
		ec.Collator = rc.coll
	}
	return ec
}

func (rc *runCtx) maxMem() int64 {
	if rc.ac.MaxMemoryBytes > 0 {
		return rc.ac.MaxMemoryBytes
	}
	return 100 << 20
}

func (rc *runCtx) tempDir() string {
	if rc.ac.TempDir != "" {
		return rc.ac.TempDir
	}
	return os.TempDir()
}

func errMemory(stage string) error {
	return mongoerr.Newf(mongoerr.QueryExceededMemoryLimitNoDiskUseAllowed,
		"Exceeded memory limit for %s, but didn't allow external spilling; pass allowDiskUse:true to opt in", stage)
}

// spillSorter is what a blocking stage does once its memory passes the limit: without
// allowDiskUse it fails (292); with it, it goes on in an external sorter ordering keys by
// compare (nil: bytewise).
func (rc *runCtx) spillSorter(stageName string, compare func(a, b []byte) int) (*sorter.Sorter, error) {
	if !rc.ac.AllowDiskUse {
		return nil, errMemory(stageName)
	}
	return sorter.New(sorter.Options{MaxMemoryBytes: rc.maxMem(), TempDir: rc.tempDir(), Compare: compare}), nil
}

// pctx is the parse-time state: the variables in scope.
type pctx struct {
	pc   ParseContext
	vars map[string]bool
	// depth bounds nesting through $facet/$lookup/$unionWith sub-pipelines.
	depth int
}

func (p *pctx) exprPC() *expr.ParseContext { return &expr.ParseContext{Vars: p.vars} }

func (p *pctx) parseExpr(v value) (expr.Expression, error) {
	return expr.Parse(v, p.exprPC())
}

// withVars returns a copy of p with more variables in scope.
func (p *pctx) withVars(names ...string) *pctx {
	q := *p
	q.vars = make(map[string]bool, len(p.vars)+len(names))
	for k := range p.vars {
		q.vars[k] = true
	}
	for _, n := range names {
		q.vars[n] = true
	}
	return &q
}

// builtinVars are variables every expression may reference beyond the language's own
// (ROOT/CURRENT/NOW/REMOVE): the core does not know them, so they are declared as user
// variables and bound at Run.
var builtinVars = []string{"CLUSTER_TIME", "DESCEND", "PRUNE", "KEEP", "SEARCH_META", "USER_ROLES"}

// Parse parses and optimises a pipeline.
func Parse(pipeline []bsoncore.Document, pc ParseContext) (*Pipeline, error) {
	p := &pctx{pc: pc}
	p = p.withVars(append(append([]string{}, builtinVars...), pc.Vars...)...)
	stages, err := parseStages(pipeline, p)
	if err != nil {
		return nil, err
	}
	if pc.Collectionless {
		if len(stages) == 0 || stages[0].name() != "$documents" {
			name := "an empty pipeline"
			if len(stages) > 0 {
				name = "'" + stages[0].name() + "'"
			}
			return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "{aggregate: 1} is not valid for %s; a collection is required.", name)
		}
	}
	return &Pipeline{stages: optimize(stages, pc.Collator), pc: pc}, nil
}

func parseStages(pipeline []bsoncore.Document, p *pctx) ([]stage, error) {
	if len(pipeline) > maxStages {
		return nil, mongoerr.Newf(mongoerr.Location7749501, "Pipeline length must be no longer than %d stages", maxStages)
	}
	if p.depth > maxSubPipelineDepth {
		return nil, mongoerr.Newf(mongoerr.MaxSubPipelineDepthExceeded,
			"Maximum number of nested sub-pipelines exceeded. Limit is %d", maxSubPipelineDepth)
	}
	var out []stage
	for i, d := range pipeline {
		if err := d.Validate(); err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid pipeline stage: %v", err)
		}
		if nestingDepth(d, 0) > maxStageDepth {
			return nil, mongoerr.Newf(mongoerr.Overflow,
				"pipeline stage %d exceeds the maximum nesting depth of %d", i, maxStageDepth)
		}
		els, _ := d.Elements()
		if len(els) != 1 {
			return nil, mongoerr.Newf(mongoerr.Location40323, "A pipeline stage specification object must contain exactly one field.")
		}
		name := els[0].Key()
		parser, ok := stageParsers[name]
		if !ok && name == "$listSearchIndexes" {
			// Search indexes live in Atlas's mongot: MongoDB 7.0 without it refuses the stage so.
			return nil, mongoerr.New(mongoerr.Location6047401, "$listSearchIndexes stage is only allowed on MongoDB Atlas")
		}
		if !ok {
			return nil, mongoerr.Newf(mongoerr.Location40324, "Unrecognized pipeline stage name: '%s'", name)
		}
		s, err := parser(els[0].Value(), p)
		if err != nil {
			return nil, err
		}
		switch name {
		case "$out", "$merge":
			if i != len(pipeline)-1 {
				return nil, mongoerr.Newf(mongoerr.Location40601, "%s can only be the final stage in the pipeline", name)
			}
		case "$documents":
			if i != 0 {
				return nil, mongoerr.New(mongoerr.Location40602, "$documents is only valid as the first stage in a pipeline")
			}
		}
		out = append(out, s)
	}
	return out, nil
}

type stageParser func(spec value, p *pctx) (stage, error)

var stageParsers map[string]stageParser

func init() {
	stageParsers = map[string]stageParser{
		"$match":           parseMatch,
		"$project":         parseProject,
		"$addFields":       parseAddFields("$addFields"),
		"$set":             parseAddFields("$set"),
		"$unset":           parseUnset,
		"$group":           parseGroup,
		"$sort":            parseSort,
		"$limit":           parseLimit,
		"$skip":            parseSkip,
		"$count":           parseCount,
		"$unwind":          parseUnwind,
		"$lookup":          parseLookup,
		"$graphLookup":     parseGraphLookup,
		"$facet":           parseFacet,
		"$bucket":          parseBucket,
		"$bucketAuto":      parseBucketAuto,
		"$sortByCount":     parseSortByCount,
		"$replaceRoot":     parseReplaceRoot("$replaceRoot"),
		"$replaceWith":     parseReplaceRoot("$replaceWith"),
		"$sample":          parseSample,
		"$unionWith":       parseUnionWith,
		"$redact":          parseRedact,
		"$densify":         parseDensify,
		"$fill":            parseFill,
		"$setWindowFields": parseSetWindowFields,
		"$documents":       parseDocuments,
		"$out":             parseOut,
		"$merge":           parseMerge,
	}
}

// Run runs the pipeline over input (nil for a collectionless pipeline starting with
// $documents). The returned Source owns input.
func (pl *Pipeline) Run(ctx context.Context, input Source, ac *Context) (Source, error) {
	if ac == nil {
		ac = &Context{}
	}
	rc := newRunCtx(ac)
	if rc.coll == nil {
		rc.coll = pl.pc.Collator
	}
	if input == nil {
		input = sliceSource(nil)
	}
	return runStages(ctx, pl.stages, input, rc)
}

func newRunCtx(ac *Context) *runCtx {
	rc := &runCtx{ac: ac, now: ac.Now, coll: ac.Collator}
	if rc.now.IsZero() {
		rc.now = time.Now()
	}
	rc.vars = make(map[string]value, len(ac.Vars)+4)
	for k, v := range ac.Vars {
		rc.vars[k] = v
	}
	ct := ac.ClusterTime
	if ct.Type == 0 {
		ct = value{Type: bsoncore.TypeTimestamp, Data: bsoncore.AppendTimestamp(nil, uint32(rc.now.Unix()), 1)}
	}
	rc.vars["CLUSTER_TIME"] = ct
	rc.vars["DESCEND"] = expr.String("descend")
	rc.vars["PRUNE"] = expr.String("prune")
	rc.vars["KEEP"] = expr.String("keep")
	return rc
}

func runStages(ctx context.Context, stages []stage, in Source, rc *runCtx) (Source, error) {
	cur := in
	for _, s := range stages {
		next, err := s.run(ctx, interruptible{cur}, rc)
		if err != nil {
			cur.Close()
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// interruptible checks the operation's context before each pull from the stage below, so
// every stage loop that consumes its input ($group, $sort, $bucket, $match over a long run
// of rejected documents...) stops at killOp, maxTimeMS or shutdown with the cause.
type interruptible struct{ Source }

func (s interruptible) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	if ctx.Err() != nil {
		return nil, false, context.Cause(ctx)
	}
	return s.Source.Next(ctx)
}

// Explain renders the stages after optimisation, as the "stages"/"pipeline" of explain.
func (pl *Pipeline) Explain() bsoncore.Document {
	vals := make([]value, len(pl.stages))
	for i, s := range pl.stages {
		vals[i] = expr.Doc(expr.DocOf(s.name(), s.spec()))
	}
	return expr.DocOf("pipeline", expr.Array(vals))
}

// Stages returns the optimised stages, one document each.
func (pl *Pipeline) Stages() []bsoncore.Document {
	out := make([]bsoncore.Document, len(pl.stages))
	for i, s := range pl.stages {
		out[i] = expr.DocOf(s.name(), s.spec())
	}
	return out
}

// LeadingMatch returns what the query layer can do instead of the pipeline's first stages:
// a leading $match's filter, then a $sort's pattern and a limit (-1 when none). A caller that
// pushes them down runs Trimmed() over its query's output.
func (pl *Pipeline) LeadingMatch() (filter bsoncore.Document, sort bsoncore.Document, limit int64) {
	limit = -1
	i := 0
	if i < len(pl.stages) {
		if m, ok := pl.stages[i].(*matchStage); ok && !m.usesVars {
			filter = m.filter
			i++
		}
	}
	if i < len(pl.stages) {
		if s, ok := pl.stages[i].(*sortStage); ok {
			sort = s.pattern
			if s.limit > 0 {
				limit = s.limit
			}
			i++
		}
	}
	if i < len(pl.stages) && limit < 0 {
		if l, ok := pl.stages[i].(*limitStage); ok {
			limit = l.n
		}
	}
	return filter, sort, limit
}

// Trimmed returns the pipeline without the stages LeadingMatch reported (the filter and the
// sort; a limit is kept, as it is harmless to apply twice).
func (pl *Pipeline) Trimmed() *Pipeline {
	i := 0
	if i < len(pl.stages) {
		if m, ok := pl.stages[i].(*matchStage); ok && !m.usesVars {
			i++
		}
	}
	if i < len(pl.stages) {
		if s, ok := pl.stages[i].(*sortStage); ok {
			if s.limit > 0 {
				return &Pipeline{stages: append([]stage{&limitStage{n: s.limit}}, pl.stages[i+1:]...), pc: pl.pc}
			}
			i++
		}
	}
	return &Pipeline{stages: pl.stages[i:], pc: pl.pc}
}

// EvalLet evaluates a command's "let" document (constant expressions; $$NOW allowed) into
// Context.Vars, and returns the names for ParseContext.Vars.
func EvalLet(let bsoncore.Document, now time.Time) (map[string]bsoncore.Value, []string, error) {
	els, err := expr.DocElems(let)
	if err != nil {
		return nil, nil, err
	}
	vars := map[string]value{}
	var names []string
	p := (&pctx{}).withVars(builtinVars...)
	rc := newRunCtx(&Context{Now: now})
	for _, el := range els {
		if err := expr.CheckVarName(el.Key()); err != nil {
			// variables.cpp's validateVariable: the system variables are internal constants
			// a client may not set; other bad names fail with the name check's error.
			switch el.Key() {
			case "NOW", "CLUSTER_TIME", "JS_SCOPE", "IS_MR", "USER_ROLES":
				return nil, nil, mongoerr.Newf(mongoerr.Location4738901, "Attempt to set internal constant: %s", el.Key())
			}
			me, _ := mongoerr.As(err)
			return nil, nil, mongoerr.Newf(me.Code, "Invalid 'let' parameter :: caused by :: %s", me.Msg)
		}
		if letReadsDocument(el.Value()) {
			// The message is MongoDB's, two literals joined without a space.
			return nil, nil, mongoerr.New(mongoerr.Location4890500, "Command let Expression tried to access a field, "+
				"but this is not allowed becauseCommand let Expressions run before the query examines any documents.")
		}
		x, err := p.parseExpr(el.Value())
		if err != nil {
			return nil, nil, err
		}
		v, err := x.Eval(rc.evalCtx(expr.EmptyDoc))
		if err != nil {
			return nil, nil, err
		}
		vars[el.Key()] = v
		names = append(names, el.Key())
	}
	return vars, names, nil
}

// letReadsDocument reports whether a let expression depends on the document: a field path
// ("$a"), $$ROOT or $$CURRENT, or $getField without an input (which reads $$CURRENT) outside
// $literal. MongoDB refuses such a command let (the expression's dependencies must have no
// requirements), as command let expressions run before any document is read.
func letReadsDocument(v value) bool {
	switch v.Type {
	case bsoncore.TypeString:
		s := v.StringValue()
		if !strings.HasPrefix(s, "$") {
			return false
		}
		if !strings.HasPrefix(s, "$$") {
			return true
		}
		name, _, _ := strings.Cut(s[2:], ".")
		return name == "ROOT" || name == "CURRENT"
	case bsoncore.TypeArray:
		vals, _ := v.Array().Values()
		for _, x := range vals {
			if letReadsDocument(x) {
				return true
			}
		}
	case bsoncore.TypeEmbeddedDocument:
		els, _ := v.Document().Elements()
		for _, el := range els {
			switch el.Key() {
			case "$literal":
				continue
			case "$getField":
				if d, ok := el.Value().DocumentOK(); !ok || d.Lookup("input").Type == 0 {
					return true
				}
			}
			if letReadsDocument(el.Value()) {
				return true
			}
		}
	}
	return false
}

// ---- sources ----

type sliceSrc struct {
	docs []bsoncore.Document
	i    int
}

// sliceSource streams docs.
func sliceSource(docs []bsoncore.Document) Source { return &sliceSrc{docs: docs} }

// SliceSource streams an in-memory slice of documents (tests, $documents, benchmarks).
func SliceSource(docs []bsoncore.Document) Source { return sliceSource(docs) }

func (s *sliceSrc) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	if s.i >= len(s.docs) {
		return nil, false, nil
	}
	if s.i&1023 == 0 {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
	}
	d := s.docs[s.i]
	s.i++
	return d, true, nil
}

func (s *sliceSrc) Close() { s.docs = nil }

// funcSrc adapts a closure; closeFn closes the upstream.
type funcSrc struct {
	next    func(ctx context.Context) (bsoncore.Document, bool, error)
	closeFn func()
}

func (f *funcSrc) Next(ctx context.Context) (bsoncore.Document, bool, error) { return f.next(ctx) }
func (f *funcSrc) Close() {
	if f.closeFn != nil {
		f.closeFn()
		f.closeFn = nil
	}
}

// eachDoc is a Source that passes each input document through fn: its output, or nothing
// when keep is false (the next input document is then tried).
func eachDoc(in Source, fn func(ctx context.Context, d bsoncore.Document) (out bsoncore.Document, keep bool, err error)) Source {
	return &funcSrc{closeFn: in.Close, next: func(ctx context.Context) (bsoncore.Document, bool, error) {
		for {
			d, ok, err := in.Next(ctx)
			if !ok || err != nil {
				return nil, false, err
			}
			out, keep, err := fn(ctx, d)
			if err != nil {
				return nil, false, err
			}
			if keep {
				return out, true, nil
			}
		}
	}}
}

// Drain reads a source to the end and closes it.
func Drain(ctx context.Context, s Source) ([]bsoncore.Document, error) {
	defer s.Close()
	var out []bsoncore.Document
	for {
		d, ok, err := s.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, d)
	}
}

// specDoc marshals a Go value into a document for explain output.
func specDoc(m bson.D) value {
	b, err := bson.Marshal(m)
	if err != nil {
		return expr.Null
	}
	return expr.Doc(b)
}

// OutputNamespace reports the collection a final $out or $merge writes (for the command
// layer's locking, write concern and view checks).
func (pl *Pipeline) OutputNamespace() (db, coll string, ok bool) {
	if len(pl.stages) == 0 {
		return "", "", false
	}
	switch s := pl.stages[len(pl.stages)-1].(type) {
	case *outStage:
		return s.db, s.coll, true
	case *mergeStage:
		return s.db, s.coll, true
	}
	return "", "", false
}

// ForeignNamespaces lists the "db.coll" namespaces the pipeline reads besides its input
// ($lookup, $graphLookup, $unionWith, also inside $facet and sub-pipelines), so the command
// layer can resolve views and take locks before Run.
func (pl *Pipeline) ForeignNamespaces() []string {
	seen := map[string]bool{}
	var out []string
	var walk func([]stage)
	add := func(db, coll string) {
		if coll == "" {
			return
		}
		ns := db + "." + coll
		if !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	walk = func(stages []stage) {
		for _, st := range stages {
			switch s := st.(type) {
			case *lookupStage:
				add(s.db, s.coll)
				walk(s.pipeline)
			case *graphLookupStage:
				add(s.db, s.coll)
			case *unionWithStage:
				add(s.db, s.coll)
				walk(s.pipeline)
			case *facetStage:
				for _, sub := range s.stages {
					walk(sub)
				}
			case *seqStage:
				walk(s.stages)
			}
		}
	}
	walk(pl.stages)
	return out
}

// nestingDepth is the document/array nesting of d (1 for a flat document), counting no
// further than maxStageDepth+1 so the recursion itself stays bounded.
func nestingDepth(d []byte, depth int) int {
	depth++
	if depth > maxStageDepth {
		return depth
	}
	deepest := depth
	els, err := bsoncore.Document(d).Elements()
	if err != nil {
		return depth
	}
	for _, e := range els {
		v := e.Value()
		if v.Type == bsoncore.TypeEmbeddedDocument || v.Type == bsoncore.TypeArray {
			if n := nestingDepth(v.Data, depth); n > deepest {
				deepest = n
				if deepest > maxStageDepth {
					return deepest
				}
			}
		}
	}
	return deepest
}
