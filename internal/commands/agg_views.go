package commands

// Views (issue 6 item 4; MongoDB's ViewCatalog): a view is a document
// {_id: "db.v", viewOn: "coll", pipeline: [...]} in <db>.system.views, a plain collection
// created implicitly by the first view of a database. Reads of a view resolve it to the
// backing collection plus the concatenation of the pipelines along the viewOn chain
// (viewResolve), and run as an aggregation; writes to a view fail with 166
// CommandNotSupportedOnView (the write path asks viewLookup).

import (
	"bytes"
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/catalog"
	"humongo/internal/collation"
	"humongo/internal/index"
	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/query/plan"
	"humongo/internal/service"
)

// viewsColl is the per-database collection that stores view definitions.
const viewsColl = "system.views"

// viewMaxDepth is MongoDB's ViewGraph::kMaxViewDepth.
const viewMaxDepth = 20

// viewLookup reports whether ns ("db.v") is a view and, if so, the collection name it is
// defined on (in the same database, as MongoDB stores it) and its own pipeline (not the
// resolved chain; see viewResolve). A namespace that is a collection, or that does not exist,
// is not a view. The returned documents own their bytes.
func viewLookup(ctx context.Context, env *service.Env, ns string) (viewOn string, pipeline []bsoncore.Document, isView bool, err error) {
	if env.State == nil || env.State.DB == nil {
		return "", nil, false, nil
	}
	db := env.State.DB
	dbName, coll, ok := strings.Cut(ns, ".")
	if !ok || coll == viewsColl {
		return "", nil, false, nil
	}
	cat := db.Catalog.Latest()
	if _, ok := cat.ByNS(ns); ok {
		// Fast path: a real collection is never a view (create refuses the clash).
		return "", nil, false, nil
	}
	if _, ok := cat.ByNS(dbName + "." + viewsColl); !ok {
		return "", nil, false, nil
	}
	op := db.NewOp(ctx)
	defer op.Close()
	_, vc, release, err := op.ReadCollection(ctx, dbName+"."+viewsColl)
	if err != nil {
		return "", nil, false, err
	}
	defer release()
	if vc == nil {
		return "", nil, false, nil
	}
	_, doc, found, err := vc.FindByID(op.RU, bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, ns)})
	if err != nil || !found {
		return "", nil, false, err
	}
	doc = bytes.Clone(doc)
	return viewParseDef(ns, doc)
}

// viewParseDef decodes a system.views document.
func viewParseDef(ns string, doc bsoncore.Document) (string, []bsoncore.Document, bool, error) {
	on := lookup(doc, "viewOn")
	if on.Type != bsoncore.TypeString {
		return "", nil, false, mongoerr.Newf(mongoerr.InvalidViewDefinition, "invalid view definition for %s: viewOn is not a string", ns)
	}
	var pipe []bsoncore.Document
	if pv := lookup(doc, "pipeline"); pv.Type == bsoncore.TypeArray {
		vals, err := pv.Array().Values()
		if err != nil {
			return "", nil, false, mongoerr.Newf(mongoerr.InvalidViewDefinition, "invalid view definition for %s: %v", ns, err)
		}
		for _, v := range vals {
			if v.Type != bsoncore.TypeEmbeddedDocument {
				return "", nil, false, mongoerr.Newf(mongoerr.InvalidViewDefinition, "invalid view definition for %s: pipeline stage is not an object", ns)
			}
			pipe = append(pipe, v.Document())
		}
	}
	return on.StringValue(), pipe, true, nil
}

// viewResolveColl is viewResolve plus the view's default collation (nil: simple, and for
// a namespace that is not a view). A view's collation is its own (create's "collation"
// option), not inherited from the collection it is defined on, as in MongoDB.
func viewResolveColl(ctx context.Context, env *service.Env, ns string) (backing string, pipeline []bsoncore.Document, isView bool, coll *collation.Collator, err error) {
	backing, pipeline, isView, err = viewResolve(ctx, env, ns)
	if err != nil || !isView {
		return backing, pipeline, isView, nil, err
	}
	coll, err = viewCollation(ctx, env, ns)
	return backing, pipeline, isView, coll, err
}

// viewCollation reads the default collation of view ns from its definition.
func viewCollation(ctx context.Context, env *service.Env, ns string) (*collation.Collator, error) {
	dbName, _, _ := strings.Cut(ns, ".")
	op := env.State.DB.NewOp(ctx)
	defer op.Close()
	_, vc, release, err := op.ReadCollection(ctx, dbName+"."+viewsColl)
	if err != nil {
		return nil, err
	}
	defer release()
	if vc == nil {
		return nil, nil
	}
	_, d, found, err := vc.FindByID(op.RU, bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, ns)})
	if err != nil || !found {
		return nil, err
	}
	v := lookup(d, "collation")
	if v.Type != bsoncore.TypeEmbeddedDocument {
		return nil, nil
	}
	c, err := collation.Parse(bytes.Clone(v.Document()))
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidViewDefinition, "invalid view definition for %s: %v", ns, err)
	}
	return c, nil
}

// viewResolve follows ns's viewOn chain. It returns the collection that backs ns (ns itself
// when it is not a view) and, for a view, the pipeline to run over that collection: the
// innermost view's pipeline first.
func viewResolve(ctx context.Context, env *service.Env, ns string) (backing string, pipeline []bsoncore.Document, isView bool, err error) {
	dbName, _, _ := strings.Cut(ns, ".")
	cur := ns
	var chain [][]bsoncore.Document
	for depth := 0; ; depth++ {
		on, p, v, err := viewLookup(ctx, env, cur)
		if err != nil {
			return "", nil, false, err
		}
		if !v {
			break
		}
		if depth >= viewMaxDepth {
			return "", nil, false, mongoerr.Newf(mongoerr.ViewDepthLimitExceeded,
				"View depth too deep or view cycle detected. Maximum depth is %d", viewMaxDepth)
		}
		chain = append(chain, p)
		cur = dbName + "." + on
	}
	for i := len(chain) - 1; i >= 0; i-- {
		pipeline = append(pipeline, chain[i]...)
	}
	return cur, pipeline, len(chain) > 0, nil
}

// viewDeps lists the namespaces a view definition reads: its viewOn and the collections of
// its pipeline's $lookup/$graphLookup/$unionWith stages (MongoDB's view graph edges).
func viewDeps(dbName, viewOn string, pipe []bsoncore.Document) []string {
	deps := []string{dbName + "." + viewOn}
	if pl, err := agg.Parse(pipe, agg.ParseContext{DB: dbName}); err == nil {
		deps = append(deps, pl.ForeignNamespaces()...)
	}
	return deps
}

// viewCheckGraph rejects a definition of ns that would close a cycle (GraphContainsCycle) or
// nest views deeper than viewMaxDepth (ViewDepthLimitExceeded).
func viewCheckGraph(ctx context.Context, env *service.Env, ns, viewOn string, pipe []bsoncore.Document) error {
	dbName, _, _ := strings.Cut(ns, ".")
	var visit func(n string, depth int, path []string) error
	visit = func(n string, depth int, path []string) error {
		if n == ns {
			return mongoerr.Newf(mongoerr.GraphContainsCycle, "View cycle detected: %s",
				strings.Join(append(path, n), " => "))
		}
		if depth > viewMaxDepth {
			return mongoerr.Newf(mongoerr.ViewDepthLimitExceeded,
				"View depth too deep or view cycle detected. Maximum depth is %d", viewMaxDepth)
		}
		on, p, isView, err := viewLookup(ctx, env, n)
		if err != nil || !isView {
			return err
		}
		d, _, _ := strings.Cut(n, ".")
		for _, dep := range viewDeps(d, on, p) {
			if err := visit(dep, depth+1, append(path, n)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, dep := range viewDeps(dbName, viewOn, pipe) {
		if err := visit(dep, 1, []string{ns}); err != nil {
			return err
		}
	}
	return nil
}

// viewCreate is create with viewOn/pipeline: it validates the definition and stores it in
// <db>.system.views (created on first use). An identical existing view is not an error, as
// for collections.
func viewCreate(ctx context.Context, env *service.Env, ns string, cmd bsoncore.Document) (bsoncore.Document, error) {
	db := env.State.DB
	const c = "create"
	for _, f := range []string{"capped", "size", "max", "autoIndexId", "idIndex", "storageEngine",
		"indexOptionDefaults", "validator", "validationLevel", "validationAction", "timeseries",
		"clusteredIndex", "expireAfterSeconds", "encryptedFields",
		"temp", "flags", "recordPreImages"} {
		if lookup(cmd, f).Type != 0 {
			return nil, mongoerr.Newf(mongoerr.InvalidOptions, "option '%s' is not supported on a view", f)
		}
	}
	// {enabled: false} is accepted on a view, as in MongoDB (_createView).
	if v := lookup(cmd, ddlPreAndPostImagesField); v.Type != 0 {
		enabled, err := ddlParsePreAndPostImages(c, v)
		if err != nil {
			return nil, err
		}
		if enabled {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "option not supported on a view: "+ddlPreAndPostImagesField)
		}
	}
	ov := lookup(cmd, "viewOn")
	if ov.Type == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "'pipeline' requires 'viewOn' to also be specified")
	}
	if ov.Type != bsoncore.TypeString {
		return nil, typeMismatch(c, "viewOn", ov.Type, "string")
	}
	viewOn := ov.StringValue()
	if viewOn == "" {
		return nil, mongoerr.New(mongoerr.BadValue, "'viewOn' cannot be empty")
	}
	dbName, coll, _ := strings.Cut(ns, ".")
	if err := catalog.ValidateNS(dbName + "." + viewOn); err != nil {
		return nil, err
	}
	if strings.HasPrefix(coll, "system.") {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace for a view: %s", ns)
	}
	pipe, err := viewParsePipeline(c, lookup(cmd, "pipeline"))
	if err != nil {
		return nil, err
	}
	// The view's default collation (stored normalised; simple is not stored). A view on a
	// view must have the same collation, as in MongoDB.
	var creq plan.Request
	if err := findParseCollation(c, lookup(cmd, "collation"), &creq); err != nil {
		return nil, err
	}
	def, err := viewDefinition(ctx, env, ns, viewOn, pipe, creq.Collation)
	if err != nil {
		return nil, err
	}
	op := db.NewOp(ctx)
	defer op.Close()
	// The view's own namespace is X-locked so a concurrent create of a collection with the
	// same name cannot interleave with the check below.
	scope, err := op.Locker.CollectionLock(ctx, ns, lock.ModeX)
	if err != nil {
		return nil, err
	}
	defer func() { _ = scope.Release() }()
	if _, ok := db.Catalog.Latest().ByNS(ns); ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceExists, "Namespace %s already exists", ns)
	}
	// The same Locker takes system.views' locks: a second Locker of this goroutine could queue
	// behind a waiting database X lock that waits for our first one.
	wop := op
	err = wop.WriteCollection(ctx, dbName+"."+viewsColl, true, func(vc *index.Collection) error {
		_, old, found, err := vc.FindByID(wop.RU, lookup(def, "_id"))
		if err != nil {
			return err
		}
		if found {
			if bytes.Equal(old, def) {
				return nil
			}
			return mongoerr.Newf(mongoerr.NamespaceExists, "Namespace %s already exists", ns)
		}
		_, err = vc.InsertDocument(wop.RU, def)
		return err
	})
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// viewParsePipeline reads a view definition's pipeline argument (absent: none).
func viewParsePipeline(c string, pv bsoncore.Value) ([]bsoncore.Document, error) {
	var pipe []bsoncore.Document
	switch pv.Type {
	case 0:
	case bsoncore.TypeArray:
		vals, err := pv.Array().Values()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid pipeline: %v", err)
		}
		for _, v := range vals {
			if v.Type != bsoncore.TypeEmbeddedDocument {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
			}
			pipe = append(pipe, v.Document())
		}
	default:
		return nil, typeMismatch(c, "pipeline", pv.Type, "array")
	}
	return pipe, nil
}

// viewDefinition validates view ns's definition (viewOn, pipe, its collation vcoll) as
// create and collMod do, and returns its system.views document.
func viewDefinition(ctx context.Context, env *service.Env, ns, viewOn string, pipe []bsoncore.Document, vcoll *collation.Collator) (bsoncore.Document, error) {
	dbName, _, _ := strings.Cut(ns, ".")
	if _, _, onView, err := viewLookup(ctx, env, dbName+"."+viewOn); err != nil {
		return nil, err
	} else if onView {
		other, err := viewCollation(ctx, env, dbName+"."+viewOn)
		if err != nil {
			return nil, err
		}
		if !collation.Equal(vcoll, other) {
			return nil, mongoerr.Newf(mongoerr.OptionNotSupportedOnView,
				"View %s has conflicting collation with view %s.%s", ns, dbName, viewOn)
		}
	}
	pl, err := agg.Parse(pipe, agg.ParseContext{DB: dbName, Collator: vcoll})
	if err != nil {
		return nil, err
	}
	if _, _, ok := pl.OutputNamespace(); ok {
		return nil, mongoerr.New(mongoerr.OptionNotSupportedOnView,
			"$out and $merge cannot be used in a view definition")
	}
	for i, st := range pipe {
		if name, _, ok := aggServerStage(st); ok {
			return nil, mongoerr.Newf(mongoerr.OptionNotSupportedOnView,
				"The aggregation stage %s in location %d of the pipeline cannot be used in the view definition", name, i)
		}
	}
	if err := viewCheckGraph(ctx, env, ns, viewOn, pipe); err != nil {
		return nil, err
	}
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "_id", ns)
		b = bsoncore.AppendStringElement(b, "viewOn", viewOn)
		ai, b := bsoncore.AppendArrayElementStart(b, "pipeline")
		for i, st := range pipe {
			b = bsoncore.AppendDocumentElement(b, itoa(int64(i)), st)
		}
		b, _ = bsoncore.AppendArrayEnd(b, ai)
		if vcoll != nil {
			b = bsoncore.AppendDocumentElement(b, "collation", vcoll.Spec())
		}
		return b
	}), nil
}

// viewDrop removes the view ns from system.views; found is false when ns is not a view.
func viewDrop(ctx context.Context, env *service.Env, ns string) (found bool, err error) {
	if _, _, isView, err := viewLookup(ctx, env, ns); err != nil || !isView {
		return false, err
	}
	dbName, _, _ := strings.Cut(ns, ".")
	op := env.State.DB.NewOp(ctx)
	defer op.Close()
	err = op.WriteCollection(ctx, dbName+"."+viewsColl, false, func(vc *index.Collection) error {
		if vc == nil {
			return nil
		}
		rid, d, ok, err := vc.FindByID(op.RU, bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, ns)})
		if err != nil || !ok {
			return err
		}
		found = true
		return vc.DeleteDocument(op.RU, rid, d)
	})
	return found, err
}

// viewList returns the views of database dbName as listCollections entries.
func viewList(ctx context.Context, env *service.Env, dbName string, nameOnly bool) ([]bsoncore.Document, error) {
	defs, err := aggScan(ctx, env.State.DB, dbName+"."+viewsColl, nil)
	if err != nil {
		return nil, err
	}
	var out []bsoncore.Document
	for _, d := range defs {
		id := lookup(d, "_id")
		if id.Type != bsoncore.TypeString {
			continue
		}
		_, name, _ := strings.Cut(id.StringValue(), ".")
		out = append(out, doc(func(b []byte) []byte {
			b = bsoncore.AppendStringElement(b, "name", name)
			b = bsoncore.AppendStringElement(b, "type", "view")
			if nameOnly {
				return b
			}
			b = bsoncore.AppendDocumentElement(b, "options", ddlWithout(d, "_id"))
			ii, b := bsoncore.AppendDocumentElementStart(b, "info")
			b = bsoncore.AppendBooleanElement(b, "readOnly", true)
			b, _ = bsoncore.AppendDocumentEnd(b, ii)
			return b
		}))
	}
	return out, nil
}

// viewReadRequest rewrites a find, count or distinct on a view into the aggregation MongoDB
// runs for it (the view's pipeline is prepended by aggPrepare). cmd must be owned.
func viewReadRequest(env *service.Env, name string, cmd bsoncore.Document) (*aggRequest, error) {
	r := &aggRequest{db: env.DB, batchSize: -1, cmd: cmd, verbosity: "queryPlanner"}
	// The command's let variables carry over to the aggregation (the parsers below checked it).
	r.let, _ = lookup(cmd, "let").DocumentOK()
	stage := func(k string, v bsoncore.Value) {
		r.pipeline = append(r.pipeline, bsoncore.NewDocumentBuilder().AppendValue(k, v).Build())
	}
	docV := func(d bsoncore.Document) bsoncore.Value {
		return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d}
	}
	i64 := func(n int64) bsoncore.Value {
		return bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, n)}
	}
	switch name {
	case "find":
		req, o, err := findParse(env, cmd)
		if err != nil {
			return nil, err
		}
		if o.tailable {
			return nil, mongoerr.New(mongoerr.CommandNotSupportedOnView, "tailable cursors are not supported on views")
		}
		r.ns, r.hint, r.allowDiskUse = o.ns, req.Hint, req.AllowDiskUse
		if len(req.Filter) > 5 {
			stage("$match", docV(req.Filter))
		}
		if len(req.Sort) > 5 {
			stage("$sort", docV(req.Sort))
		}
		if req.Skip > 0 {
			stage("$skip", i64(req.Skip))
		}
		if req.Limit > 0 {
			stage("$limit", i64(req.Limit))
		}
		if len(req.Projection) > 5 {
			stage("$project", docV(req.Projection))
		}
		if o.hasBatchSize {
			r.batchSize = o.batchSize
		}
		if req.Limit > 0 && (r.batchSize < 0 || req.Limit < r.batchSize) {
			r.batchSize = req.Limit
		}
		r.singleBatch, r.limit = o.singleBatch, req.Limit
		r.coll, r.collSet = req.Collation, req.CollationSet
	case "count":
		a, err := countParse(env, cmd)
		if err != nil {
			return nil, err
		}
		r.ns, r.hint = a.ns, a.req.Hint
		r.coll, r.collSet = a.req.Collation, a.req.CollationSet
		if len(a.req.Filter) > 5 {
			stage("$match", docV(a.req.Filter))
		}
		if a.req.Skip > 0 {
			stage("$skip", i64(a.req.Skip))
		}
		if a.req.Limit > 0 {
			stage("$limit", i64(a.req.Limit))
		}
		stage("$count", bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "count")})
	case "distinct":
		ns, _, req, err := distinctParse(env, cmd)
		if err != nil {
			return nil, err
		}
		r.ns, r.hint = ns, req.Hint
		r.coll, r.collSet = req.Collation, req.CollationSet
		if len(req.Filter) > 5 {
			stage("$match", docV(req.Filter))
		}
	}
	return r, nil
}

// viewCollMod is collMod on view ns: viewOn and pipeline replace the definition's (the other
// is kept; its collation stays), validated as create validates one. The definition is
// rewritten whole (a replacement entry, which change streams report as modify).
func viewCollMod(ctx context.Context, env *service.Env, ns string, cmd bsoncore.Document) (bsoncore.Document, error) {
	const c = "collMod"
	els, err := cmd.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid collMod: %v", err)
	}
	for _, e := range els[1:] {
		switch k := e.Key(); k {
		case "viewOn", "pipeline":
		default:
			if !service.GenericArguments[k] {
				return nil, mongoerr.New(mongoerr.InvalidOptions, "option not supported on a view: "+k)
			}
		}
	}
	viewOn, pipe, _, err := viewLookup(ctx, env, ns)
	if err != nil {
		return nil, err
	}
	if v := lookup(cmd, "viewOn"); v.Type != 0 {
		s, ok := v.StringValueOK()
		if !ok {
			return nil, typeMismatch(c, "viewOn", v.Type, "string")
		}
		if s == "" {
			return nil, mongoerr.New(mongoerr.BadValue, "'viewOn' cannot be empty")
		}
		dbName, _, _ := strings.Cut(ns, ".")
		if err := catalog.ValidateNS(dbName + "." + s); err != nil {
			return nil, err
		}
		viewOn = s
	}
	if v := lookup(cmd, "pipeline"); v.Type != 0 {
		if pipe, err = viewParsePipeline(c, v); err != nil {
			return nil, err
		}
	}
	vcoll, err := viewCollation(ctx, env, ns)
	if err != nil {
		return nil, err
	}
	def, err := viewDefinition(ctx, env, ns, viewOn, pipe, vcoll)
	if err != nil {
		return nil, err
	}
	dbName, _, _ := strings.Cut(ns, ".")
	op := env.State.DB.NewOp(ctx)
	defer op.Close()
	scope, err := op.Locker.CollectionLock(ctx, ns, lock.ModeX)
	if err != nil {
		return nil, err
	}
	defer func() { _ = scope.Release() }()
	err = op.WriteCollection(ctx, dbName+"."+viewsColl, false, func(vc *index.Collection) error {
		if vc == nil {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist")
		}
		rid, old, found, err := vc.FindByID(op.RU, lookup(def, "_id"))
		if err != nil {
			return err
		}
		if !found {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist")
		}
		return vc.UpdateDocumentAs(op.RU, rid, bytes.Clone(old), def, index.UpdateKind{Replacement: true})
	})
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}
