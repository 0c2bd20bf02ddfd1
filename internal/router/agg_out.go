package router

// $out and $merge run on the router (MongoDB's sharded $out/$merge to an unsharded target):
// when the pipeline's collection, or a namespace it joins, is not on the target's primary
// shard, the pipeline's merging part runs on the router and its output goes through the
// router to the target's primary shard, as ordinary versioned commands (the target's
// databaseVersion; a stale answer refreshes the cache and the command is sent again, which
// is safe since the shard checks the version before it writes).
//
// $out follows MongoDB's DocumentSourceOut: it reads the target's options and indexes from
// the primary shard, creates a temporary collection there with those options, inserts the
// output into it in batches, builds the target's indexes on it and renames it over the target
// with dropTarget; on failure the temporary collection is dropped. $merge runs
// internal/agg's per-document whenMatched/whenNotMatched logic over a writer whose find,
// insert and update are those commands, so its modes behave exactly as on one node.
//
// A sharded target: $out is refused with MongoDB 7.0's error (28769, "... cannot be
// sharded"); $merge into a sharded collection, which 7.0 allows, is not routed yet and is
// refused with CommandNotSupported.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
)

// outBatchBytes and outBatchDocs bound one insert command of the output.
const (
	outBatchBytes = 8 << 20
	outBatchDocs  = 500
)

// checkOutputTarget refuses a sharded $out/$merge target.
func checkOutputTarget(ctx context.Context, c *Cluster, req *aggRequest) error {
	if req.out == "" {
		return nil
	}
	r, err := c.Cache.Routing(ctx, req.out)
	if err != nil {
		if missingDatabase(err) {
			return nil // created by the first write
		}
		return err
	}
	if !r.Sharded() {
		return nil
	}
	if isOut(req.stages) {
		return mongoerr.Newf(mongoerr.Location28769, "%s cannot be sharded", req.out)
	}
	return mongoerr.Newf(mongoerr.CommandNotSupported,
		"humongos cannot yet run $merge into the sharded collection %s", req.out)
}

// isOut reports whether the pipeline ends with $out (else, with an output, $merge).
func isOut(stages []bsoncore.Document) bool {
	if len(stages) == 0 {
		return false
	}
	name, _ := stageName(stages[len(stages)-1])
	return name == "$out"
}

// newRouterResolver is the resolver of a pipeline run on the router for aggregate cmd.
func newRouterResolver(c *Cluster, cmd bsoncore.Document) *routerResolver {
	rr := &routerResolver{c: c}
	rr.collation, _ = cmd.Lookup("collation").DocumentOK()
	rr.writeConcern, _ = cmd.Lookup("writeConcern").DocumentOK()
	rr.bypass, _ = cmd.Lookup("bypassDocumentValidation").BooleanOK()
	rr.readConcern, _ = cmd.Lookup("readConcern").DocumentOK()
	return rr
}

// OpenWriter implements agg.CollectionResolver for $out (replace) and $merge.
func (rr *routerResolver) OpenWriter(ctx context.Context, db, coll string, replace bool) (agg.Writer, error) {
	if _, err := rr.c.ensureDatabase(ctx, db); err != nil {
		return nil, err
	}
	if r, err := rr.c.Cache.Routing(ctx, db+"."+coll); err != nil {
		return nil, err
	} else if r.Sharded() {
		// Sharded since the command was checked.
		if replace {
			return nil, mongoerr.Newf(mongoerr.Location28769, "%s.%s cannot be sharded", db, coll)
		}
		return nil, mongoerr.Newf(mongoerr.CommandNotSupported, "humongos cannot yet run $merge into the sharded collection %s.%s", db, coll)
	}
	rw := &routerWriter{rr: rr, db: db, target: coll}
	w := &agg.CommandWriter{Run: rw.run, DB: db, Target: coll, Out: replace, Bypass: rr.bypass,
		WriteConcern: rr.writeConcern, BatchBytes: outBatchBytes, BatchDocs: outBatchDocs}
	if err := w.Open(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// routerWriter sends the commands of $out/$merge run on the router (agg.CommandWriter's Run)
// to the target database's primary shard.
type routerWriter struct {
	rr         *routerResolver
	db, target string
}

// run sends cmd to database db on the primary shard of w.db, versioned by the database's
// version, refreshing and sending again on a stale answer. Command errors, the first write
// error and a write concern error come back as *mongoerr.Error.
func (w *routerWriter) run(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	c := w.rr.c
	ns := w.db + "." + w.target
	var reply bsoncore.Document
	err := c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
		var err error
		if reply, err = c.runOn(ctx, r.DB.Primary, db, routedCmd(cmd, r, r.DB.Primary)); err != nil {
			return err
		}
		// A stale version comes back as a write error too: WithRouting retries it.
		if wes, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
			if vals, _ := wes.Values(); len(vals) > 0 {
				we, _ := vals[0].DocumentOK()
				return writeErrorAsError(we)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if wce, ok := reply.Lookup("writeConcernError").DocumentOK(); ok {
		code, _ := wce.Lookup("code").AsInt64OK()
		msg, _ := wce.Lookup("errmsg").StringValueOK()
		return nil, mongoerr.New(mongoerr.Code(code), msg)
	}
	return reply, nil
}
