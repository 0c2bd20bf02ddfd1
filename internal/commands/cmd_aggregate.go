package commands

import (
	"bytes"
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/catalog"
	"humongo/internal/collation"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query/plan"
	"humongo/internal/service"
)

func addAggregate(r *service.Registry) {
	add(r, &service.Command{
		Name:        "aggregate",
		Auth:        service.AuthAggregate(false),
		Handler:     runAggregate,
		Help:        "Runs the aggregation command. See http://dochub.mongodb.org/core/aggregation for more details.",
		SecondaryOk: true,
	})
}

// aggRequest is a parsed aggregate command (or a find/count/distinct on a view rewritten
// into one).
type aggRequest struct {
	// ns is the namespace the client named: "db.coll", or "db.$cmd.aggregate" for
	// collectionless "aggregate: 1".
	ns             string
	db             string
	collectionless bool
	pipeline       []bsoncore.Document
	explain        bool
	verbosity      plan.Verbosity
	batchSize      int64 // -1: the default first batch
	singleBatch    bool  // find's singleBatch (finds on views): no cursor after the first batch
	limit          int64 // find's limit (finds on views): the cursor ends after that many
	allowDiskUse   bool
	bypass         bool
	hint           bsoncore.Value
	let            bsoncore.Document
	// coll is the command's collation (nil: simple or none); collSet says the command gave
	// one (possibly simple). Without one, the collection's or the view's default applies.
	coll    *collation.Collator
	collSet bool
	// cmd is the originating command (owned copy), for the cursor and explain.
	cmd bsoncore.Document
}

// aggParse validates an aggregate command. cmd must be owned by the caller (cloned).
func aggParse(env *service.Env, cmd bsoncore.Document) (*aggRequest, error) {
	const name = "aggregate"
	if err := checkStrict(cmd, name, "pipeline", "explain", "allowDiskUse", "cursor", "maxTimeMS",
		"bypassDocumentValidation", "readConcern", "collation", "hint", "comment", "let",
		"writeConcern", "needsMerge", "fromMongos", "fromRouter", "exchange", "runtimeConstants",
		"isMapReduceCommand", "collectionUUID", "$_requestReshardingResumeToken",
		"encryptionInformation", "includeQueryStatsMetrics", "$readPreference"); err != nil {
		return nil, err
	}
	r := &aggRequest{db: env.DB, batchSize: -1, cmd: cmd, verbosity: plan.QueryPlanner}
	arg := commandArg(cmd)
	switch arg.Type {
	case bsoncore.TypeString:
		ns, err := findCollName(env, name, arg)
		if err != nil {
			return nil, err
		}
		r.ns = ns
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble:
		if n, ok := arg.AsInt64OK(); !ok || n != 1 {
			if arg.Type != bsoncore.TypeDouble || arg.Double() != 1 {
				return nil, mongoerr.New(mongoerr.FailedToParse,
					"Invalid command format: the 'aggregate' field must specify a collection name or 1")
			}
		}
		r.collectionless = true
		r.ns = env.DB + ".$cmd.aggregate"
	default:
		return nil, mongoerr.New(mongoerr.FailedToParse,
			"Invalid command format: the 'aggregate' field must specify a collection name or 1")
	}
	pv := lookup(cmd, "pipeline")
	if pv.Type == 0 {
		return nil, mongoerr.New(codeMissingField, "BSON field 'aggregate.pipeline' is missing but a required field")
	}
	if pv.Type != bsoncore.TypeArray {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "'pipeline' option must be specified as an array")
	}
	vals, err := pv.Array().Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid pipeline: %v", err)
	}
	for _, v := range vals {
		if v.Type != bsoncore.TypeEmbeddedDocument {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		r.pipeline = append(r.pipeline, v.Document())
	}
	if r.explain, err = findBoolArg(name, "explain", lookup(cmd, "explain")); err != nil {
		return nil, err
	}
	if r.allowDiskUse, err = findBoolArg(name, "allowDiskUse", lookup(cmd, "allowDiskUse")); err != nil {
		return nil, err
	}
	r.allowDiskUse = allowDiskUse(env, cmd, r.allowDiskUse)
	if r.bypass, err = findBoolArg(name, "bypassDocumentValidation", lookup(cmd, "bypassDocumentValidation")); err != nil {
		return nil, err
	}
	cv := lookup(cmd, "cursor")
	switch cv.Type {
	case 0:
		if !r.explain {
			return nil, mongoerr.New(mongoerr.FailedToParse,
				"The 'cursor' option is required, except for aggregate with the explain argument")
		}
	case bsoncore.TypeEmbeddedDocument:
		if r.explain {
			// MongoDB accepts an empty cursor document with explain (mongosh sends one).
			break
		}
		bs := lookup(cv.Document(), "batchSize")
		if bs.Type != 0 {
			n, err := intArg(name, "cursor.batchSize", bs)
			if err != nil {
				return nil, err
			}
			if n < 0 {
				return nil, mongoerr.Newf(mongoerr.Location51024,
					"BSON field 'batchSize' value must be >= 0, actual value '%d'", n)
			}
			r.batchSize = n
		}
	default:
		return nil, typeMismatch(name, "cursor", cv.Type, "object")
	}
	if r.hint, err = findHintArg(name, lookup(cmd, "hint")); err != nil {
		return nil, err
	}
	if r.let, err = findDocArg(name, "let", lookup(cmd, "let")); err != nil {
		return nil, err
	}
	var creq plan.Request
	if err := findParseCollation(name, lookup(cmd, "collation"), &creq); err != nil {
		return nil, err
	}
	r.coll, r.collSet = creq.Collation, creq.CollationSet
	return r, nil
}

func runAggregate(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if env.State.DB == nil {
		return nil, mongoerr.New(mongoerr.InternalError, "server has no storage")
	}
	// The parsed pipeline keeps slices of cmd and may outlive this call in a cursor, but cmd
	// aliases the connection's read buffer: own the bytes.
	cmd = bytes.Clone(cmd)
	r, err := aggParse(env, cmd)
	if err != nil {
		return nil, err
	}
	if isChangeStream(r.pipeline) {
		return aggChangeStream(ctx, env, r)
	}
	if r.explain {
		return aggExplain(ctx, env, r)
	}
	return aggCursorReply(ctx, env, r)
}

// aggPrepared is a pipeline ready to run: its optimised form, the leaf that feeds it, and
// what explain reports.
type aggPrepared struct {
	pl       *agg.Pipeline // the pipeline after pushdown (what runs over input)
	full     *agg.Pipeline // the whole optimised pipeline
	req      *plan.Request // the pushed-down query; nil when not reading a collection
	backing  string        // the collection read ("" when none)
	source   []bsoncore.Document
	leading  string // a server source stage handled here ($collStats...), or ""
	leadSpec bsoncore.Document
	ac       *agg.Context
	coll     *collation.Collator // the operation's effective collation (nil: simple)
}

// aggCollectionCollation is the default collation of collection ns (nil: simple or no such
// collection).
func aggCollectionCollation(ctx context.Context, env *service.Env, ns string) (*collation.Collator, error) {
	snap := env.State.DB.Catalog.Latest()
	if t := operation.TxnOf(ctx); t != nil {
		snap = env.State.DB.Catalog.LatestFor(t.RU) // a collection the transaction created
	}
	meta, ok := snap.ByNS(ns)
	if !ok || meta == nil {
		return nil, nil
	}
	v, err := meta.Options.LookupErr("collation")
	if err != nil || v.Type != bsoncore.TypeEmbeddedDocument {
		return nil, nil
	}
	return collation.Parse(v.Document())
}

// aggPrepare resolves views, handles server source stages and pushes the leading
// $match/$sort/$limit down to the planner.
func aggPrepare(ctx context.Context, env *service.Env, r *aggRequest) (*aggPrepared, error) {
	now := time.Now()
	var vars map[string]bsoncore.Value
	var names []string
	if r.let != nil {
		var err error
		if vars, names, err = agg.EvalLet(r.let, now); err != nil {
			return nil, err
		}
	}
	p := &aggPrepared{}
	pipeline := r.pipeline
	// The collation of the whole operation: the command's, else the view's default (a
	// view's, even simple, is fixed: MongoDB 7.0 refuses a different explicit one), else the
	// collection's default. It also governs the pushed-down query.
	coll := r.coll
	if !r.collectionless {
		backing, viewPipe, isView, viewColl, err := viewResolveColl(ctx, env, r.ns)
		if err != nil {
			return nil, err
		}
		p.backing = backing
		switch {
		case isView:
			if r.collSet && !collation.Equal(r.coll, viewColl) {
				return nil, mongoerr.New(mongoerr.OptionNotSupportedOnView, "Cannot override a view's default collation")
			}
			coll = viewColl
			pipeline = append(append([]bsoncore.Document(nil), viewPipe...), r.pipeline...)
		case !r.collSet:
			if coll, err = aggCollectionCollation(ctx, env, backing); err != nil {
				return nil, err
			}
		}
	}
	p.coll = coll
	collectionless := r.collectionless
	for _, st := range pipeline {
		if err := aggLiteParse(st); err != nil {
			return nil, err
		}
	}
	for i := 1; i < len(pipeline); i++ {
		if n, _, ok := aggServerStage(pipeline[i]); ok {
			return nil, mongoerr.Newf(mongoerr.Location40602, "%s is only valid as the first stage in a pipeline", n)
		}
		if isChangeStream(pipeline[i:]) {
			return nil, mongoerr.New(mongoerr.Location40602, "$changeStream is only valid as the first stage in a pipeline")
		}
	}
	if len(pipeline) > 0 {
		if name, spec, ok := aggServerStage(pipeline[0]); ok {
			docs, err := aggRunServerStage(ctx, env, r, name, spec)
			if err != nil {
				return nil, err
			}
			p.leading, p.leadSpec, p.source = name, spec, docs
			pipeline = pipeline[1:]
			collectionless = false
		}
	}
	full, err := agg.Parse(pipeline, agg.ParseContext{DB: r.db, Vars: names, Collectionless: collectionless, Collator: coll})
	if err != nil {
		return nil, err
	}
	if db, coll, ok := full.OutputNamespace(); ok {
		if err := aggCheckOutputNS(ctx, env, db+"."+coll); err != nil {
			return nil, err
		}
	}
	for _, ns := range full.ForeignNamespaces() {
		if err := catalog.ValidateNS(ns); err != nil {
			return nil, err
		}
	}
	p.full, p.pl = full, full
	p.ac = aggLookupLimits(env)
	p.ac.Now, p.ac.Vars, p.ac.AllowDiskUse, p.ac.TempDir = now, vars, r.allowDiskUse, env.State.DB.TempDir
	p.ac.Resolver = &aggResolver{env: env, bypassValidation: r.bypass, coll: coll, writeConcern: aggWriteConcern(r.cmd)}
	if p.leading != "" || collectionless {
		p.backing = ""
		return p, nil
	}
	filter, sort, limit := full.LeadingMatch()
	req := plan.Request{NS: p.backing, Filter: filter, Sort: sort, Hint: r.hint, AllowDiskUse: r.allowDiskUse,
		Collation: coll, CollationSet: true}
	if limit > 0 {
		req.Limit = limit
	}
	findFillRequestDefaults(env, &req)
	p.req = &req
	p.pl = full.Trimmed()
	return p, nil
}

// aggStart prepares r and starts the pipeline; the returned source is locked (ready for the
// first batch) and owned by the caller.
func aggStart(ctx context.Context, env *service.Env, r *aggRequest) (*aggCursor, error) {
	p, err := aggPrepare(ctx, env, r)
	if err != nil {
		return nil, err
	}
	c := &aggCursor{}
	var input agg.Source
	switch {
	case p.req != nil:
		in, err := aggOpenInput(ctx, env.State, p.backing, *p.req)
		if err != nil {
			return nil, err
		}
		c.in, input = in, in
		p.ac.Resolver.(*aggResolver).in = in
	case p.leading != "":
		input = agg.SliceSource(p.source)
	}
	out, err := p.pl.Run(ctx, input, p.ac)
	if err != nil {
		// Run closed input on failure.
		return nil, err
	}
	c.out, c.coll = out, p.coll
	return c, nil
}

// aggCursorReply runs r and answers with its first batch, registering a cursor for the rest.
func aggCursorReply(ctx context.Context, env *service.Env, r *aggRequest) (bsoncore.Document, error) {
	src, err := aggStart(ctx, env, r)
	if err != nil {
		return nil, err
	}
	c := &cursor.Cursor{NS: r.ns, Source: src, Command: r.cmd}
	n := r.batchSize
	if n < 0 {
		n = cursor.DefaultFirstBatch
	}
	b, exhausted, err := cursor.FillBatch(ctx, c, n)
	if err != nil {
		src.Close()
		return nil, err
	}
	var id int64
	if exhausted || r.singleBatch || (r.limit > 0 && c.NReturned >= r.limit) {
		src.Close()
	} else {
		src.SaveState()
		id = registerCursor(ctx, env, c)
	}
	env.State.Counters.DocsReturned.Add(int64(b.Len()))
	return cursor.AppendReply(b, id, r.ns, cursor.ReplyOptions{First: true, BatchBeforeID: true}), nil
}

// aggDrain runs r to the end and returns every result (count and distinct on views).
func aggDrain(ctx context.Context, env *service.Env, r *aggRequest) ([]bsoncore.Document, error) {
	src, err := aggStart(ctx, env, r)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	var out []bsoncore.Document
	for {
		d, ok, err := src.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, bytes.Clone(d))
	}
}

// aggExplain answers explain for an aggregation, in MongoDB 7.0's shapes: the find-like
// {queryPlanner, ...} when the query layer does the whole pipeline, otherwise
// {stages: [{$cursor: {queryPlanner, executionStats}}, ...stages after pushdown]}.
func aggExplain(ctx context.Context, env *service.Env, r *aggRequest) (bsoncore.Document, error) {
	p, err := aggPrepare(ctx, env, r)
	if err != nil {
		return nil, err
	}
	var qp, es bsoncore.Document
	if p.req != nil {
		if qp, es, err = explainPlan(ctx, env, p.backing, *p.req, r.verbosity); err != nil {
			return nil, err
		}
	}
	inner := ddlWithout(r.cmd, "explain", "lsid", "$clusterTime", "$readPreference")
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "explainVersion", "1")
		if p.req != nil && len(p.pl.Stages()) == 0 {
			b = bsoncore.AppendDocumentElement(b, "queryPlanner", qp)
			if es != nil {
				b = bsoncore.AppendDocumentElement(b, "executionStats", es)
			}
		} else {
			ai, bb := bsoncore.AppendArrayElementStart(b, "stages")
			b = bb
			i := 0
			if p.req != nil {
				ci, bb := bsoncore.AppendDocumentElementStart(b, itoa(int64(i)))
				di, bb := bsoncore.AppendDocumentElementStart(bb, "$cursor")
				bb = bsoncore.AppendDocumentElement(bb, "queryPlanner", qp)
				if es != nil {
					bb = bsoncore.AppendDocumentElement(bb, "executionStats", es)
				}
				bb, _ = bsoncore.AppendDocumentEnd(bb, di)
				b, _ = bsoncore.AppendDocumentEnd(bb, ci)
				i++
			}
			if p.leading != "" {
				b = bsoncore.AppendDocumentElement(b, itoa(int64(i)),
					bsoncore.NewDocumentBuilder().AppendDocument(p.leading, p.leadSpec).Build())
				i++
			}
			for _, st := range p.pl.Stages() {
				b = bsoncore.AppendDocumentElement(b, itoa(int64(i)), st)
				i++
			}
			b, _ = bsoncore.AppendArrayEnd(b, ai)
		}
		b = bsoncore.AppendDocumentElement(b, "command", inner)
		b = bsoncore.AppendDocumentElement(b, "serverInfo", findServerInfo(env))
		b = bsoncore.AppendDocumentElement(b, "serverParameters", findServerParams(env))
		return b
	}), nil
}

// aggExplainCommand is the explain command's entry for aggregations and for reads of views
// (find, count, distinct on a view explain as the aggregation they run). handled is false
// when the command is not one of these.
func aggExplainCommand(ctx context.Context, env *service.Env, name string, cmd bsoncore.Document, v plan.Verbosity) (reply bsoncore.Document, handled bool, err error) {
	cmd = bytes.Clone(cmd)
	var r *aggRequest
	switch name {
	case "aggregate":
		sub := appendBoolField(cmd, "explain")
		if r, err = aggParse(env, sub); err != nil {
			return nil, true, err
		}
		r.cmd = cmd
	case "find", "count", "distinct":
		arg := commandArg(cmd)
		if arg.Type != bsoncore.TypeString {
			return nil, false, nil
		}
		if _, _, isView, err := viewLookup(ctx, env, env.DB+"."+arg.StringValue()); err != nil || !isView {
			return nil, err != nil, err
		}
		if r, err = viewReadRequest(env, name, cmd); err != nil {
			return nil, true, err
		}
	default:
		return nil, false, nil
	}
	r.explain, r.verbosity = true, v
	reply, err = aggExplain(ctx, env, r)
	return reply, true, err
}

// appendBoolField returns d with key: true appended unless present.
func appendBoolField(d bsoncore.Document, key string) bsoncore.Document {
	if lookup(d, key).Type != 0 {
		return d
	}
	out := append(bsoncore.Document(nil), d[:len(d)-1]...)
	out = bsoncore.AppendBooleanElement(out, key, true)
	out = append(out, 0)
	out[0], out[1], out[2], out[3] = byte(len(out)), byte(len(out)>>8), byte(len(out)>>16), byte(len(out)>>24)
	return out
}

// aggWriteConcern is the command's writeConcern document (nil when absent).
func aggWriteConcern(cmd bsoncore.Document) bsoncore.Document {
	if wc, ok := lookup(cmd, "writeConcern").DocumentOK(); ok {
		return wc
	}
	return nil
}
