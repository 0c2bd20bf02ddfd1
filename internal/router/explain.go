package router

// explain through the router (MongoDB's ClusterExplain and cluster_explain_cmd): the inner
// find, count or distinct is targeted as it would run, each targeted shard explains its
// part, and the router wraps the shards' plans under a stage naming how it combines them:
// SINGLE_SHARD (one shard), SHARD_MERGE_SORT (a sorted merge) or SHARD_MERGE. An aggregate
// explains as 7.0's mongos does: mergeType, splitPipeline (null when passed through) and
// shards by name.

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
)

func runExplain(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	arg := firstArg(cmd)
	inner, ok := arg.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'explain.explain' is the wrong type '%s', expected type 'object'", bsonutil.TypeName(arg.Type))
	}
	verbosity := "allPlansExecution"
	if vv := cmd.Lookup("verbosity"); vv.Type != 0 {
		s, ok := vv.StringValueOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'explain.verbosity' is the wrong type '%s', expected type 'string'", bsonutil.TypeName(vv.Type))
		}
		switch s {
		case "queryPlanner", "executionStats", "allPlansExecution":
			verbosity = s
		default:
			return nil, mongoerr.Newf(mongoerr.BadValue, "Enumeration value '%s' for field 'explain.verbosity' is not a valid value.", s)
		}
	}
	name, _ := stageName(inner)
	switch name {
	case "find", "count", "distinct":
	case "aggregate":
		if isChangeStreamCmd(inner) {
			r, err := parseChangeStream(env, inner)
			if err != nil {
				return nil, err
			}
			if _, err := r.userPipeline(inner); err != nil {
				return nil, err
			}
			return explainChangeStream(ctx, c, env, r)
		}
		req, err := parseAggregate(env, inner, true)
		if err != nil {
			return nil, err
		}
		return explainAggregate(ctx, c, env, inner, req, verbosity)
	case "":
		return nil, mongoerr.New(mongoerr.FailedToParse, "explain command requires a nested object")
	default:
		if env.Registry.Lookup(name) == nil {
			return nil, mongoerr.Newf(mongoerr.CommandNotFound, "Explain failed due to unknown command: %s", name)
		}
		return nil, mongoerr.Newf(mongoerr.CommandNotSupported, "explain of %s is not supported by humongos yet", name)
	}
	ns, err := collectionArg(env, inner)
	if err != nil {
		return nil, err
	}
	filterField := "query"
	if name == "find" {
		filterField = "filter"
	}
	filter, err := docArg(name, inner, filterField)
	if err != nil {
		return nil, err
	}
	_, collated, err := readCollation(name, inner)
	if err != nil {
		return nil, err
	}
	sorted := false
	if s, _ := inner.Lookup("sort").DocumentOK(); len(s) > 5 {
		sorted = true
	}
	start := time.Now()
	var shards []string
	var replies []bsoncore.Document
	err = c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
		if shards, err = targetShards(r, filter, collated); err != nil {
			return err
		}
		in := forward(inner, nil, nil)
		if len(shards) > 1 && (name == "find" || name == "count") {
			skip, _, _ := intField(name, inner, "skip")
			limit, _, _ := intField(name, inner, "limit")
			set := bsoncore.NewDocumentBuilder()
			if limit < 0 {
				limit = -limit
			}
			if limit > 0 {
				set.AppendInt64("limit", limit+skip)
			}
			in = forward(inner, map[string]bool{"skip": true, "singleBatch": true}, set.Build())
		}
		cmds := map[string]bsoncore.Document{}
		for _, s := range shards {
			cmds[s] = Versioned(bsoncore.NewDocumentBuilder().AppendDocument("explain", in).AppendString("verbosity", verbosity).Build(), r, s)
		}
		replies, err = runOnShards(ctx, c, env.DB, shards, cmds)
		return err
	})
	if err != nil {
		return nil, err
	}
	stage := "SHARD_MERGE"
	switch {
	case len(shards) == 1:
		stage = "SINGLE_SHARD"
	case sorted:
		stage = "SHARD_MERGE_SORT"
	}
	return mergeExplain(ctx, c, stage, shards, replies, verbosity, inner, time.Since(start)), nil
}

// mergeExplain builds the router's explain from the shards' (ClusterExplain::buildExplainResult).
func mergeExplain(ctx context.Context, c *Cluster, stage string, shards []string, replies []bsoncore.Document,
	verbosity string, inner bsoncore.Document, elapsed time.Duration) bsoncore.Document {
	plans := bsoncore.NewArrayBuilder()
	execs := bsoncore.NewArrayBuilder()
	var nReturned, keys, docs int64
	for i, rep := range replies {
		conn := ""
		if s, err := c.Shards.Lookup(ctx, shards[i]); err == nil {
			conn = s.Host
		}
		qp, _ := rep.Lookup("queryPlanner").DocumentOK()
		b := bsoncore.NewDocumentBuilder().AppendString("shardName", shards[i]).AppendString("connectionString", conn)
		if si, ok := rep.Lookup("serverInfo").DocumentOK(); ok {
			b.AppendDocument("serverInfo", si)
		}
		appendElements(b, qp)
		plans.AppendDocument(b.Build())
		if es, ok := rep.Lookup("executionStats").DocumentOK(); ok {
			eb := bsoncore.NewDocumentBuilder().AppendString("shardName", shards[i]).AppendBoolean("executionSuccess", true)
			appendElements(eb, es)
			execs.AppendDocument(eb.Build())
			n, _ := es.Lookup("nReturned").AsInt64OK()
			k, _ := es.Lookup("totalKeysExamined").AsInt64OK()
			d, _ := es.Lookup("totalDocsExamined").AsInt64OK()
			nReturned, keys, docs = nReturned+n, keys+k, docs+d
		}
	}
	out := bsoncore.NewDocumentBuilder().
		AppendDocument("queryPlanner", bsoncore.NewDocumentBuilder().AppendInt32("mongosPlannerVersion", 1).
			AppendDocument("winningPlan", bsoncore.NewDocumentBuilder().AppendString("stage", stage).
				AppendArray("shards", plans.Build()).Build()).Build())
	if verbosity != "queryPlanner" {
		ms := elapsed.Milliseconds()
		stages := bsoncore.NewDocumentBuilder().AppendString("stage", stage).AppendInt64("nReturned", nReturned).
			AppendInt64("executionTimeMillis", ms).AppendInt64("totalKeysExamined", keys).
			AppendInt64("totalDocsExamined", docs).AppendInt64("totalChildMillis", ms).
			AppendArray("shards", execs.Build()).Build()
		out.AppendDocument("executionStats", bsoncore.NewDocumentBuilder().AppendInt64("nReturned", nReturned).
			AppendInt64("executionTimeMillis", ms).AppendInt64("totalKeysExamined", keys).
			AppendInt64("totalDocsExamined", docs).AppendDocument("executionStages", stages).Build())
	}
	out.AppendDocument("command", forward(inner, nil, nil))
	return out.Build()
}

func appendElements(b *bsoncore.DocumentBuilder, d bsoncore.Document) {
	els, _ := d.Elements()
	for _, el := range els {
		b.AppendValue(el.Key(), el.Value())
	}
}

// explainAggregate explains a pipeline as mongos 7.0: passed through to one shard
// (splitPipeline null) or split (mergeType "mongos", shardsPart and mergerPart).
func explainAggregate(ctx context.Context, c *Cluster, env *service.Env, cmd bsoncore.Document, req *aggRequest, verbosity string) (bsoncore.Document, error) {
	_, collated, err := readCollation("aggregate", cmd)
	if err != nil {
		return nil, err
	}
	var shards []string
	var replies []bsoncore.Document
	var sp *splitPipeline
	err = c.WithRouting(ctx, req.ns, func(r *catalogcache.Routing) error {
		colocated, err := othersColocated(ctx, c, r, req)
		if err != nil {
			return err
		}
		if shards, err = targetShards(r, leadingFilter(req.stages), collated); err != nil {
			return err
		}
		inner := forward(cmd, map[string]bool{"explain": true, "cursor": true}, bsoncore.NewDocumentBuilder().
			AppendDocument("cursor", bsoncore.NewDocumentBuilder().Build()).Build())
		sp = nil
		if len(shards) > 1 || !colocated {
			s := split(req.stages)
			sp = &s
			inner = forward(inner, map[string]bool{"pipeline": true}, bsoncore.NewDocumentBuilder().
				AppendArray("pipeline", pipelineArray(s.shards)).Build())
		}
		cmds := map[string]bsoncore.Document{}
		for _, s := range shards {
			cmds[s] = Versioned(bsoncore.NewDocumentBuilder().AppendDocument("explain", inner).AppendString("verbosity", verbosity).Build(), r, s)
		}
		replies, err = runOnShards(ctx, c, env.DB, shards, cmds)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := bsoncore.NewDocumentBuilder()
	if sp == nil {
		out.AppendString("mergeType", "primaryShard").AppendNull("splitPipeline")
	} else {
		mc := bsoncore.NewDocumentBuilder()
		if sp.sortSpec != nil {
			mc.AppendDocument("sort", sp.sortSpec)
		}
		merger := bsoncore.NewArrayBuilder().AppendDocument(stageDocRaw("$mergeCursors", mc.Build()))
		for _, st := range sp.merge {
			merger.AppendDocument(st)
		}
		out.AppendString("mergeType", "mongos").AppendDocument("splitPipeline", bsoncore.NewDocumentBuilder().
			AppendArray("shardsPart", pipelineArray(sp.shards)).AppendArray("mergerPart", merger.Build()).Build())
	}
	sb := bsoncore.NewDocumentBuilder()
	for i, rep := range replies {
		host := ""
		if s, err := c.Shards.Lookup(ctx, shards[i]); err == nil {
			host = s.Host
		}
		eb := bsoncore.NewDocumentBuilder().AppendString("host", host)
		appendElements(eb, filterDoc(rep, func(k string) bool { return !replyFields[k] }))
		sb.AppendDocument(shards[i], eb.Build())
	}
	out.AppendDocument("shards", sb.Build())
	return out.Build(), nil
}

func stageDocRaw(name string, spec bsoncore.Document) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendDocument(name, spec).Build()
}
