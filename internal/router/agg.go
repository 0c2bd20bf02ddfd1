package router

// aggregate through the router (MongoDB's cluster_aggregate and sharded_agg_helpers): a
// pipeline whose shards part targets one shard is passed through; otherwise it is split at
// the first stage that needs all the shards' documents:
//
//   - $match, $project, $addFields/$set, $unset, $unwind, $replaceRoot/$replaceWith and
//     $redact run on the shards (streaming stages, per document);
//   - $limit runs on the shards and again on the router;
//   - $sort runs on the shards (with a $limit of the skip+limit that follows, when one
//     does) and the router merges the sorted streams by sort key;
//   - $group splits into a partial $group on the shards and a final one on the router when
//     every accumulator allows it ($sum, $min, $max, $first, $last, $count, $avg as sum and
//     count, $push and $addToSet as arrays concatenated or unioned); otherwise it and what
//     follows run on the router over the shards' documents;
//   - $count becomes a partial count per shard summed on the router;
//   - any other stage, and everything after it, runs on the router (internal/agg over the
//     merged stream).
//
// Stages that read or write other collections ($lookup, $graphLookup, $unionWith, $out,
// $merge) are passed through, with the whole pipeline, when one shard holds everything: the
// collection and every other namespace unsharded with the same primary shard. Otherwise they,
// and everything after them, run in the router's merging part, reading the foreign side
// through the router's routing (agg_lookup.go) and writing $out/$merge output to the
// unsharded target's primary shard (agg_out.go); a sharded output is refused there.
//
// A pipeline led by $changeStream does not split: it opens the stream on every shard and
// merges the shards' streams in resume token order on the router, where the user's stages
// after $changeStream run (agg_changestream.go), unless it ends with
// $changeStreamSplitLargeEvent, which the shards run with the user's stages. Explain of a
// change stream is refused (CommandNotSupported).

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/collation"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
)

// refusedStages are the stages the router does not run outside a change stream
// ($changeStreamSplitLargeEvent only ends a change stream's pipeline, agg_changestream.go).
var refusedStages = map[string]bool{"$changeStreamSplitLargeEvent": true}

// shardStreamingStages run on the shards before the split point.
var shardStreamingStages = map[string]bool{"$match": true, "$project": true, "$addFields": true, "$set": true,
	"$unset": true, "$unwind": true, "$replaceRoot": true, "$replaceWith": true, "$redact": true}

// shardFirstStages must run on the shards and only as a pipeline's first stage.
var shardFirstStages = map[string]bool{"$collStats": true, "$indexStats": true, "$planCacheStats": true}

// splitPipeline is a pipeline split for several shards.
type splitPipeline struct {
	shards []bsoncore.Document // the shards' part
	merge  []bsoncore.Document // the router's part (may be empty)
	// sortSpec is the sort the router merges the shards' streams by (nil: concatenation).
	sortSpec bsoncore.Document
}

func stageName(st bsoncore.Document) (string, bsoncore.Value) {
	el, err := st.IndexErr(0)
	if err != nil {
		return "", bsoncore.Value{}
	}
	return el.Key(), el.Value()
}

func stageDoc(name string, v any) bsoncore.Document {
	b, err := bson.Marshal(bson.D{{Key: name, Value: v}})
	if err != nil {
		panic(fmt.Sprintf("router: marshal stage %s: %v", name, err)) // only fixed, valid shapes reach here
	}
	return b
}

// checkStages refuses the stages the router cannot run, also inside $facet. A pipeline led
// by $changeStream never gets here but through explain (agg_changestream.go serves it).
func checkStages(stages []bsoncore.Document) error {
	for i, st := range stages {
		name, v := stageName(st)
		if refusedStages[name] {
			return mongoerr.Newf(mongoerr.CommandNotSupported, "%s is not supported through humongos yet", name)
		}
		if name == "$changeStream" {
			if i == 0 {
				return mongoerr.New(mongoerr.CommandNotSupported, "explain of a $changeStream is not supported by humongos yet")
			}
			return mongoerr.New(mongoerr.Location40602, "$changeStream is only valid as the first stage in a pipeline")
		}
		if name == "$facet" {
			if d, ok := v.DocumentOK(); ok {
				els, _ := d.Elements()
				for _, el := range els {
					if arr, ok := el.Value().ArrayOK(); ok {
						sub, err := pipelineDocs(arr)
						if err != nil {
							return err
						}
						if err := checkStages(sub); err != nil {
							return err
						}
					}
				}
			}
		}
	}
	return nil
}

func pipelineDocs(arr bsoncore.Array) ([]bsoncore.Document, error) {
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid pipeline: %v", err)
	}
	out := make([]bsoncore.Document, 0, len(vals))
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		out = append(out, d)
	}
	return out, nil
}

// split splits stages for a scatter-gather (see the file comment).
func split(stages []bsoncore.Document) splitPipeline {
	var sp splitPipeline
	for i := 0; i < len(stages); i++ {
		st := stages[i]
		name, v := stageName(st)
		switch {
		case shardStreamingStages[name] || shardFirstStages[name] && i == 0:
			sp.shards = append(sp.shards, st)
			continue
		case name == "$limit":
			sp.shards = append(sp.shards, st)
			sp.merge = append(sp.merge, stages[i:]...)
		case name == "$sort":
			sp.shards = append(sp.shards, st)
			if n, ok := limitAfter(stages[i+1:]); ok {
				sp.shards = append(sp.shards, stageDoc("$limit", n))
			}
			sp.sortSpec, _ = v.DocumentOK()
			sp.merge = append(sp.merge, stages[i+1:]...)
		case name == "$group":
			spec, _ := v.DocumentOK()
			if partial, final, ok := splitGroup(spec); ok {
				sp.shards = append(sp.shards, partial)
				sp.merge = append(append(sp.merge, final...), stages[i+1:]...)
			} else {
				sp.merge = append(sp.merge, stages[i:]...)
			}
		case name == "$count":
			field, _ := v.StringValueOK()
			sp.shards = append(sp.shards, stageDoc("$group", bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}))
			sp.merge = append(sp.merge,
				stageDoc("$group", bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: bson.D{{Key: "$sum", Value: "$n"}}}}),
				stageDoc("$project", bson.D{{Key: "_id", Value: 0}, {Key: field, Value: "$n"}}))
			sp.merge = append(sp.merge, stages[i+1:]...)
		default:
			sp.merge = append(sp.merge, stages[i:]...)
		}
		return sp
	}
	return sp
}

// limitAfter is how many sorted documents the stages after a $sort can consume when they
// start with $skip/$limit stages ending in a $limit.
func limitAfter(stages []bsoncore.Document) (int64, bool) {
	var skipped int64
	for _, st := range stages {
		name, v := stageName(st)
		n, ok := v.AsInt64OK()
		if !ok || n < 0 {
			return 0, false
		}
		switch name {
		case "$skip":
			skipped += n
		case "$limit":
			return skipped + n, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// splitGroup returns the shards' partial $group and the router's final stages for a $group
// whose accumulators all merge; ok is false otherwise.
func splitGroup(spec bsoncore.Document) (partial bsoncore.Document, final []bsoncore.Document, ok bool) {
	els, err := spec.Elements()
	if err != nil {
		return nil, nil, false
	}
	part := bson.D{}
	fin := bson.D{{Key: "_id", Value: "$_id"}}
	post := bson.D{{Key: "_id", Value: "$_id"}}
	needPost := false
	for _, el := range els {
		f := el.Key()
		if f == "_id" {
			part = append(bson.D{{Key: "_id", Value: bson.RawValue{Type: bson.Type(el.Value().Type), Value: el.Value().Data}}}, part...)
			continue
		}
		acc, ok := el.Value().DocumentOK()
		if !ok {
			return nil, nil, false
		}
		aels, _ := acc.Elements()
		if len(aels) != 1 {
			return nil, nil, false
		}
		op := aels[0].Key()
		arg := bson.RawValue{Type: bson.Type(aels[0].Value().Type), Value: aels[0].Value().Data}
		ref := "$" + f
		switch op {
		case "$sum", "$min", "$max", "$first", "$last":
			part = append(part, bson.E{Key: f, Value: bson.D{{Key: op, Value: arg}}})
			fin = append(fin, bson.E{Key: f, Value: bson.D{{Key: op, Value: ref}}})
			post = append(post, bson.E{Key: f, Value: ref})
		case "$count":
			part = append(part, bson.E{Key: f, Value: bson.D{{Key: "$sum", Value: 1}}})
			fin = append(fin, bson.E{Key: f, Value: bson.D{{Key: "$sum", Value: ref}}})
			post = append(post, bson.E{Key: f, Value: ref})
		case "$avg":
			s, n := "__avg_sum_"+f, "__avg_n_"+f
			part = append(part, bson.E{Key: s, Value: bson.D{{Key: "$sum", Value: arg}}},
				bson.E{Key: n, Value: bson.D{{Key: "$sum", Value: bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$isNumber", Value: arg}}, 1, 0}}}}}})
			fin = append(fin, bson.E{Key: s, Value: bson.D{{Key: "$sum", Value: "$" + s}}},
				bson.E{Key: n, Value: bson.D{{Key: "$sum", Value: "$" + n}}})
			post = append(post, bson.E{Key: f, Value: bson.D{{Key: "$cond", Value: bson.A{
				bson.D{{Key: "$eq", Value: bson.A{"$" + n, 0}}}, nil, bson.D{{Key: "$divide", Value: bson.A{"$" + s, "$" + n}}}}}}})
			needPost = true
		case "$push", "$addToSet":
			combine := "$concatArrays"
			if op == "$addToSet" {
				combine = "$setUnion"
			}
			part = append(part, bson.E{Key: f, Value: bson.D{{Key: op, Value: arg}}})
			fin = append(fin, bson.E{Key: f, Value: bson.D{{Key: "$push", Value: ref}}})
			post = append(post, bson.E{Key: f, Value: bson.D{{Key: "$reduce", Value: bson.D{
				{Key: "input", Value: ref}, {Key: "initialValue", Value: bson.A{}},
				{Key: "in", Value: bson.D{{Key: combine, Value: bson.A{"$$value", "$$this"}}}}}}}})
			needPost = true
		default:
			return nil, nil, false
		}
	}
	if len(part) == 0 || part[0].Key != "_id" {
		return nil, nil, false
	}
	final = []bsoncore.Document{stageDoc("$group", fin)}
	if needPost {
		final = append(final, stageDoc("$project", post))
	}
	return stageDoc("$group", part), final, true
}

// aggRequest is a parsed aggregate command.
type aggRequest struct {
	ns        string
	stages    []bsoncore.Document
	batchSize int64
	hasBatch  bool
	explain   bool
	allowDisk bool
	let       bsoncore.Document
	// others are the namespaces the pipeline reads or writes besides its own collection.
	others []string
	out    string // the $out/$merge target ("" for none)
}

// parseAggregate parses an aggregate command; inExplain is the explain command's inner
// aggregate, which needs no cursor option.
func parseAggregate(env *service.Env, cmd bsoncore.Document, inExplain bool) (*aggRequest, error) {
	v := firstArg(cmd)
	if v.Type != bsoncore.TypeString {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "aggregate: 1 (collectionless) is not supported by humongos yet")
	}
	ns, err := collectionArg(env, cmd)
	if err != nil {
		return nil, err
	}
	req := &aggRequest{ns: ns}
	pv := cmd.Lookup("pipeline")
	arr, ok := pv.ArrayOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "'pipeline' option must be specified as an array")
	}
	if req.stages, err = pipelineDocs(arr); err != nil {
		return nil, err
	}
	req.explain, _ = cmd.Lookup("explain").BooleanOK()
	req.allowDisk, _ = cmd.Lookup("allowDiskUse").BooleanOK()
	req.let, _ = cmd.Lookup("let").DocumentOK()
	if cur, ok := cmd.Lookup("cursor").DocumentOK(); ok {
		if n, ok := cur.Lookup("batchSize").AsInt64OK(); ok {
			if n < 0 {
				return nil, mongoerr.Newf(mongoerr.Location51024, "BSON field 'batchSize' value must be >= 0, actual value '%d'", n)
			}
			req.batchSize, req.hasBatch = n, true
		}
	} else if !req.explain && !inExplain {
		return nil, mongoerr.New(mongoerr.FailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	}
	if err := checkStages(req.stages); err != nil {
		return nil, err
	}
	if err := checkShardSourcePosition(req.stages); err != nil {
		return nil, err
	}
	// Parse the whole pipeline first: a bad stage fails with its own error rather than one
	// about the stages a split rewrites it into.
	pl, err := agg.Parse(routerParsedStages(req.stages), agg.ParseContext{DB: env.DB, Vars: letNames(req.let)})
	if err != nil {
		return nil, err
	}
	req.others = pl.ForeignNamespaces()
	if db, coll, ok := pl.OutputNamespace(); ok {
		req.out = db + "." + coll
		req.others = append(req.others, req.out)
	}
	return req, nil
}

// othersColocated reports whether the shard holding the pipeline's collection holds every
// other namespace it reads or writes too (all unsharded with the same primary shard), so the
// whole pipeline can be passed through to it. Otherwise the stages reading or writing them
// run on the router (agg_lookup.go, agg_out.go); a sharded output is refused here.
func othersColocated(ctx context.Context, c *Cluster, r *catalogcache.Routing, req *aggRequest) (bool, error) {
	if err := checkOutputTarget(ctx, c, req); err != nil {
		return false, err
	}
	if len(req.others) == 0 {
		return true, nil
	}
	if r.Sharded() {
		return false, nil
	}
	for _, ns := range req.others {
		o, err := c.Cache.Routing(ctx, ns)
		if err != nil {
			if missingDatabase(err) {
				return false, nil
			}
			return false, err
		}
		if o.Sharded() || o.DB.Primary != r.DB.Primary {
			return false, nil
		}
	}
	return true, nil
}

// leadingFilter is the filter of the pipeline's leading $match, for targeting.
func leadingFilter(stages []bsoncore.Document) bsoncore.Document {
	if len(stages) > 0 {
		if name, v := stageName(stages[0]); name == "$match" {
			if d, ok := v.DocumentOK(); ok {
				return d
			}
		}
	}
	return nil
}

func pipelineArray(stages []bsoncore.Document) bsoncore.Array {
	ab := bsoncore.NewArrayBuilder()
	for _, st := range stages {
		ab.AppendDocument(st)
	}
	return ab.Build()
}

func runAggregate(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	if isDataDistribution(cmd) {
		return runDataDistribution(ctx, c, env, cmd)
	}
	if isChangeStreamCmd(cmd) {
		return runChangeStream(ctx, c, env, cmd)
	}
	req, err := parseAggregate(env, cmd, false)
	if err != nil {
		return nil, err
	}
	if req.explain {
		return explainAggregate(ctx, c, env, cmd, req, "queryPlanner")
	}
	coll, collated, err := readCollation("aggregate", cmd)
	if err != nil {
		return nil, err
	}
	count := int64(cursor.DefaultFirstBatch)
	if req.hasBatch {
		count = req.batchSize // 0 opens the cursor with an empty first batch
	}
	if _, ok := shardSourceStage(req.stages); ok {
		return runShardSourceAggregate(ctx, c, env, cmd, req, count)
	}
	var reply bsoncore.Document
	err = c.WithRouting(ctx, req.ns, func(r *catalogcache.Routing) error {
		colocated, err := othersColocated(ctx, c, r, req)
		if err != nil {
			return err
		}
		shards, err := targetShards(r, leadingFilter(req.stages), collated)
		if err != nil {
			return err
		}
		if len(shards) == 1 && colocated {
			cursors, err := openCursors(ctx, c, env.DB, shards, versionedFor(forward(cmd, nil, nil), r, shards))
			if err != nil {
				return err
			}
			reply, err = firstBatchReply(ctx, env, cmd, req.ns, &mergeSource{cursors: cursors}, count, false, true)
			return err
		}
		sp := split(req.stages)
		shardCmd := forward(cmd, map[string]bool{"pipeline": true, "cursor": true},
			bsoncore.NewDocumentBuilder().AppendArray("pipeline", pipelineArray(sp.shards)).
				AppendDocument("cursor", bsoncore.NewDocumentBuilder().Build()).Build())
		cursors, err := openCursors(ctx, c, env.DB, shards, versionedFor(shardCmd, r, shards))
		if err != nil {
			return err
		}
		src := &mergeSource{cursors: cursors, collator: coll}
		if sp.sortSpec != nil {
			if src.sort, err = expr.NewSortKey(sp.sortSpec); err != nil {
				src.Close()
				return err
			}
		}
		var out routerSource = src
		if len(sp.merge) > 0 {
			if out, err = mergePipeline(ctx, sp.merge, src, req, coll, env.DB, c, cmd); err != nil {
				src.Close()
				return err
			}
		}
		reply, err = firstBatchReply(ctx, env, cmd, req.ns, out, count, false, true)
		return err
	})
	if missingDatabase(err) {
		return emptyCursorReply(req.ns), nil
	}
	return reply, err
}

// letNames are the names of an aggregate's let variables.
func letNames(let bsoncore.Document) []string {
	els, _ := let.Elements()
	names := make([]string, 0, len(els))
	for _, el := range els {
		names = append(names, el.Key())
	}
	return names
}

// mergePipeline runs the router's part of a split pipeline over the merged shard streams.
func mergePipeline(ctx context.Context, stages []bsoncore.Document, in *mergeSource, req *aggRequest, coll *collation.Collator, db string, c *Cluster, cmd bsoncore.Document) (*aggSource, error) {
	ac := &agg.Context{AllowDiskUse: req.allowDisk, Resolver: newRouterResolver(c, cmd)}
	pc := agg.ParseContext{DB: db, Collator: coll}
	if len(req.let) > 5 {
		vars, names, err := agg.EvalLet(req.let, ac.Now)
		if err != nil {
			return nil, err
		}
		ac.Vars, pc.Vars = vars, names
	}
	pl, err := agg.Parse(stages, pc)
	if err != nil {
		return nil, err
	}
	out, err := pl.Run(ctx, aggInput{in}, ac)
	if err != nil {
		return nil, err
	}
	return &aggSource{out: out, in: in}, nil
}

// aggInput adapts the merged shard streams to agg.Source (the pipeline owns it).
type aggInput struct{ m *mergeSource }

func (a aggInput) Next(ctx context.Context) (bsoncore.Document, bool, error) { return a.m.Next(ctx) }
func (a aggInput) Close()                                                    {}

// aggSource is a router cursor's source running the merging part of a pipeline.
type aggSource struct {
	out  agg.Source
	in   *mergeSource
	done bool
}

// Next implements cursor.Source.
func (s *aggSource) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	if s.done {
		return nil, false, nil
	}
	d, ok, err := s.out.Next(ctx)
	if !ok && err == nil {
		s.done = true
	}
	return d, ok, err
}

func (s *aggSource) SaveState()                         {}
func (s *aggSource) RestoreState(context.Context) error { return nil }
func (s *aggSource) Close() {
	s.out.Close()
	s.in.Close()
}
func (s *aggSource) exhausted() bool      { return s.done }
func (s *aggSource) setBatchSize(n int64) { s.in.batchSize = n }
