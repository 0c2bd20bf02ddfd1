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

	"go.mongodb.org/mongo-driver/v2/bson"
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
	w := &routerWriter{rr: rr, db: db, target: coll, writeTo: coll, replace: replace}
	if r, err := rr.c.Cache.Routing(ctx, db+"."+coll); err != nil {
		return nil, err
	} else if r.Sharded() {
		// Sharded since the command was checked.
		if replace {
			return nil, mongoerr.Newf(mongoerr.Location28769, "%s.%s cannot be sharded", db, coll)
		}
		return nil, mongoerr.Newf(mongoerr.CommandNotSupported, "humongos cannot yet run $merge into the sharded collection %s.%s", db, coll)
	}
	if !replace {
		return w, nil
	}
	opts, exists, err := w.targetOptions(ctx)
	if err != nil {
		return nil, err
	}
	if exists {
		if w.indexes, err = w.targetIndexes(ctx); err != nil {
			return nil, err
		}
	}
	w.writeTo = "tmp.agg_out." + bson.NewObjectID().Hex()
	b := bsoncore.NewDocumentBuilder().AppendString("create", w.writeTo)
	if els, err := opts.Elements(); err == nil {
		for _, e := range els {
			switch e.Key() {
			case "uuid", "create", "idIndex":
				continue
			}
			b.AppendValue(e.Key(), e.Value())
		}
	}
	if _, err := w.run(ctx, db, b.Build()); err != nil {
		return nil, err
	}
	w.created = true
	return w, nil
}

// routerWriter is the agg.Writer of $out/$merge run on the router: commands to the target
// database's primary shard.
type routerWriter struct {
	rr       *routerResolver
	db       string
	target   string // collection name
	writeTo  string // target, or $out's temporary collection
	replace  bool
	indexes  []bsoncore.Document // $out: the target's index specs (without _id_)
	buf      []bsoncore.Document
	bufBytes int
	created  bool // $out: the temporary collection exists
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

// targetOptions reads the target's listCollections options from its primary shard.
func (w *routerWriter) targetOptions(ctx context.Context) (bsoncore.Document, bool, error) {
	cmd := bsoncore.NewDocumentBuilder().AppendInt32("listCollections", 1).
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendString("name", w.target).Build()).Build()
	reply, err := w.run(ctx, w.db, cmd)
	if err != nil {
		return nil, false, err
	}
	batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := batch.Values()
	if len(vals) == 0 {
		return nil, false, nil
	}
	info, _ := vals[0].DocumentOK()
	if t, _ := info.Lookup("type").StringValueOK(); t == "view" {
		return nil, false, mongoerr.Newf(mongoerr.CommandNotSupportedOnView, "Namespace %s.%s is a view, not a collection", w.db, w.target)
	}
	opts, _ := info.Lookup("options").DocumentOK()
	return opts, true, nil
}

// targetIndexes reads the target's index specs (without _id_, which create makes).
func (w *routerWriter) targetIndexes(ctx context.Context) ([]bsoncore.Document, error) {
	reply, err := w.run(ctx, w.db, bsoncore.NewDocumentBuilder().AppendString("listIndexes", w.target).Build())
	if mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := batch.Values()
	var out []bsoncore.Document
	for _, v := range vals {
		spec, ok := v.DocumentOK()
		if !ok {
			continue
		}
		if name, _ := spec.Lookup("name").StringValueOK(); name == "_id_" {
			continue
		}
		out = append(out, stripFields(spec, map[string]bool{"ns": true}))
	}
	return out, nil
}

// write sends a write command with the aggregate's writeConcern and bypassDocumentValidation.
func (w *routerWriter) write(ctx context.Context, b *bsoncore.DocumentBuilder) (bsoncore.Document, error) {
	if w.rr.bypass {
		b.AppendBoolean("bypassDocumentValidation", true)
	}
	if w.rr.writeConcern != nil {
		b.AppendDocument("writeConcern", w.rr.writeConcern)
	}
	return w.run(ctx, w.db, b.Build())
}

// FindOne implements agg.Writer ($merge's lookup of the target document by its "on" fields).
func (w *routerWriter) FindOne(ctx context.Context, filter bsoncore.Document) (bsoncore.Document, bool, error) {
	if err := w.flush(ctx); err != nil {
		return nil, false, err
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", w.writeTo).AppendDocument("filter", filter).
		AppendInt32("limit", 2).AppendBoolean("singleBatch", true).Build()
	reply, err := w.run(ctx, w.db, cmd)
	if err != nil {
		return nil, false, err
	}
	batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := batch.Values()
	switch len(vals) {
	case 0:
		return nil, false, nil
	case 1:
		d, _ := vals[0].DocumentOK()
		return d, true, nil
	}
	return nil, false, mongoerr.New(mongoerr.Location51125,
		"$merge: the 'on' field values match more than one document in the target collection")
}

// Insert implements agg.Writer, buffering documents into bounded insert commands.
func (w *routerWriter) Insert(ctx context.Context, d bsoncore.Document) error {
	if w.bufBytes+len(d) > outBatchBytes || len(w.buf) >= outBatchDocs {
		if err := w.flush(ctx); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, d)
	w.bufBytes += len(d)
	return nil
}

func (w *routerWriter) flush(ctx context.Context) error {
	if len(w.buf) == 0 {
		return nil
	}
	arr := bsoncore.NewArrayBuilder()
	for _, d := range w.buf {
		arr.AppendDocument(d)
	}
	w.buf, w.bufBytes = w.buf[:0], 0
	_, err := w.write(ctx, bsoncore.NewDocumentBuilder().AppendString("insert", w.writeTo).
		AppendArray("documents", arr.Build()).AppendBoolean("ordered", true))
	return err
}

// Replace implements agg.Writer: the first document matching filter becomes d.
func (w *routerWriter) Replace(ctx context.Context, filter, d bsoncore.Document) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	u := bsoncore.NewDocumentBuilder().AppendDocument("q", filter).AppendDocument("u", d).
		AppendBoolean("upsert", false).AppendBoolean("multi", false).Build()
	_, err := w.write(ctx, bsoncore.NewDocumentBuilder().AppendString("update", w.writeTo).
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(u).Build()))
	return err
}

// Commit implements agg.Writer: $out's indexes and rename over the target.
func (w *routerWriter) Commit(ctx context.Context) error {
	if err := w.flush(ctx); err != nil {
		w.Abort(ctx)
		return err
	}
	if !w.replace {
		return nil
	}
	if len(w.indexes) > 0 {
		arr := bsoncore.NewArrayBuilder()
		for _, s := range w.indexes {
			arr.AppendDocument(s)
		}
		if _, err := w.write(ctx, bsoncore.NewDocumentBuilder().AppendString("createIndexes", w.writeTo).
			AppendArray("indexes", arr.Build())); err != nil {
			w.Abort(ctx)
			return err
		}
	}
	b := bsoncore.NewDocumentBuilder().AppendString("renameCollection", w.db+"."+w.writeTo).
		AppendString("to", w.db+"."+w.target).AppendBoolean("dropTarget", true)
	if w.rr.writeConcern != nil {
		b.AppendDocument("writeConcern", w.rr.writeConcern)
	}
	if _, err := w.run(ctx, "admin", b.Build()); err != nil {
		w.Abort(ctx)
		return err
	}
	w.created = false
	return nil
}

// Abort implements agg.Writer: drops $out's temporary collection (best effort).
func (w *routerWriter) Abort(ctx context.Context) {
	w.buf, w.bufBytes = nil, 0
	if !w.replace || !w.created {
		return
	}
	w.created = false
	_, _ = w.run(context.WithoutCancel(ctx), w.db, bsoncore.NewDocumentBuilder().AppendString("drop", w.writeTo).Build())
}
