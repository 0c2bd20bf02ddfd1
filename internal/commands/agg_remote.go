package commands

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
)

// $out and $merge on a secondary (MongoDB 5.0+, "$out/$merge on secondaries"): an aggregate
// admitted under a non-primary read preference runs its pipeline's read here, and its
// writes go to the primary as ordinary commands over the internal client. A node that is
// not a writable primary never writes replicated data of its own (the oplog writer refuses
// it), so this is the only way such an aggregate can write.
//
// $out follows MongoDB's DocumentSourceOut on a secondary: it reads the target's options and
// indexes from the primary, creates a temporary collection there with those options, inserts
// the output into it in batches, builds the target's indexes on it and renames it over the
// target with dropTarget. $merge runs the same per-document logic as the local path
// (agg's mergeStage.mergeOne) over a writer whose find, insert and update are commands
// sent to the primary, so whenMatched/whenNotMatched behave exactly as on a primary.

// aggRemoteBatchBytes bounds one insert command's documents (below the 16 MB message).
const aggRemoteBatchBytes = 8 << 20

// aggRemoteWriter is the agg.Writer of $out/$merge on a node that is not primary.
type aggRemoteWriter struct {
	cl       *mongo.Client // the primary, through the coordinator's peer pool
	host     string
	db       string
	target   string // collection name
	writeTo  string // target, or $out's temporary collection
	replace  bool
	bypass   bool
	wc       bsoncore.Document   // the aggregate's writeConcern, forwarded (nil: the primary's default)
	indexes  []bsoncore.Document // $out: the target's index specs on the primary
	buf      []bsoncore.Document
	bufBytes int
	created  bool // $out: the temporary collection exists on the primary
}

// aggPrimaryWriter returns the remote writer when this node is a replica-set member that is
// not a writable primary, nil on a primary or a standalone. It fails with NotWritablePrimary
// when no other member is known to be primary.
func (r *aggResolver) aggPrimaryWriter(ctx context.Context, db, coll string, replace bool) (*aggRemoteWriter, error) {
	rc := r.env.State.Repl
	if rc == nil || db == "local" || rc.IsWritablePrimary() {
		return nil, nil
	}
	h := rc.Hello()
	if h.Primary == "" || h.Primary == h.Me {
		return nil, mongoerr.New(mongoerr.NotWritablePrimary,
			"not primary and no primary is known to send the $out/$merge writes to")
	}
	cl, err := rc.Peer(h.Primary)
	if err != nil {
		return nil, err
	}
	w := &aggRemoteWriter{cl: cl, host: h.Primary, db: db, target: coll, writeTo: coll, replace: replace,
		bypass: r.bypassValidation, wc: r.writeConcern}
	if !replace {
		return w, nil
	}
	// The target's options and indexes as the primary has them now (the local $out reads
	// them from its catalog: UserOptions and ddlIndexSpecs).
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
	if _, err := w.run(ctx, b.Build()); err != nil {
		return nil, err
	}
	w.created = true
	return w, nil
}

// targetOptions reads the target's listCollections options on the primary.
func (w *aggRemoteWriter) targetOptions(ctx context.Context) (bsoncore.Document, bool, error) {
	cmd := bsoncore.NewDocumentBuilder().AppendInt32("listCollections", 1).
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendString("name", w.target).Build()).Build()
	reply, err := w.run(ctx, cmd)
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

// targetIndexes reads the target's index specs on the primary (without _id_, which the
// create makes).
func (w *aggRemoteWriter) targetIndexes(ctx context.Context) ([]bsoncore.Document, error) {
	reply, err := w.run(ctx, bsoncore.NewDocumentBuilder().AppendString("listIndexes", w.target).Build())
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
		if !ok || lookup(spec, "name").StringValue() == catalog.IDIndexName {
			continue
		}
		out = append(out, ddlWithout(spec, "ns"))
	}
	return out, nil
}

// run sends cmd to the primary's database w.db.
func (w *aggRemoteWriter) run(ctx context.Context, cmd bsoncore.Document) (bsoncore.Document, error) {
	return w.runOn(ctx, w.db, cmd)
}

// runOn sends cmd to the primary's database db. A command error, a write error and a write
// concern error come back as *mongoerr.Error with the primary's code.
func (w *aggRemoteWriter) runOn(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	raw, err := w.cl.Database(db).RunCommand(ctx, bson.Raw(cmd)).Raw()
	if err != nil {
		var ce mongo.CommandError
		if errors.As(err, &ce) {
			return nil, aggRemoteError(mongoerr.Code(ce.Code), ce.Message, bsoncore.Document(ce.Raw))
		}
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, mongoerr.Newf(mongoerr.HostUnreachable, "sending $out/$merge writes to the primary %s: %v", w.host, err)
	}
	reply := bsoncore.Document(raw)
	if wes, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		if vals, _ := wes.Values(); len(vals) > 0 {
			we, _ := vals[0].DocumentOK()
			code, _ := we.Lookup("code").AsInt64OK()
			msg, _ := we.Lookup("errmsg").StringValueOK()
			return nil, aggRemoteError(mongoerr.Code(code), msg, we)
		}
	}
	if wce, ok := reply.Lookup("writeConcernError").DocumentOK(); ok {
		code, _ := wce.Lookup("code").AsInt64OK()
		msg, _ := wce.Lookup("errmsg").StringValueOK()
		return nil, mongoerr.New(mongoerr.Code(code), msg)
	}
	return reply, nil
}

// aggRemoteError is the primary's error as this node answers it: the code and message, and
// the extra fields of the primary's error or write error (a DuplicateKey's keyPattern and
// keyValue, a validation failure's errInfo) so that the client sees what the primary said.
func aggRemoteError(code mongoerr.Code, msg string, reply bsoncore.Document) error {
	e := mongoerr.New(code, msg)
	elems, err := reply.Elements()
	if err != nil {
		return e
	}
	var info []byte
	for _, el := range elems {
		switch el.Key() {
		case "ok", "errmsg", "code", "codeName", "errorLabels", "index", "topologyVersion",
			"$clusterTime", "operationTime", "writeConcernError", "electionId", "opTime":
			continue
		}
		info = append(info, el...)
	}
	if len(info) == 0 {
		return e
	}
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = append(doc, info...)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return e.WithInfo(bsoncore.Document(doc))
}

// write sends a write command, with the aggregate's writeConcern and
// bypassDocumentValidation.
func (w *aggRemoteWriter) write(ctx context.Context, b *bsoncore.DocumentBuilder) (bsoncore.Document, error) {
	if w.bypass {
		b.AppendBoolean("bypassDocumentValidation", true)
	}
	if w.wc != nil {
		b.AppendDocument("writeConcern", w.wc)
	}
	return w.run(ctx, b.Build())
}

func (w *aggRemoteWriter) FindOne(ctx context.Context, filter bsoncore.Document) (bsoncore.Document, bool, error) {
	if err := w.flush(ctx); err != nil {
		return nil, false, err
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", w.writeTo).AppendDocument("filter", filter).
		AppendInt32("limit", 2).AppendBoolean("singleBatch", true).Build()
	reply, err := w.run(ctx, cmd)
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

func (w *aggRemoteWriter) Insert(ctx context.Context, d bsoncore.Document) error {
	if w.bufBytes+len(d) > aggRemoteBatchBytes || len(w.buf) >= aggWriteBatch {
		if err := w.flush(ctx); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, d)
	w.bufBytes += len(d)
	return nil
}

func (w *aggRemoteWriter) flush(ctx context.Context) error {
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

// Replace replaces the first document matching filter (as the local path's limit-1 update).
func (w *aggRemoteWriter) Replace(ctx context.Context, filter, d bsoncore.Document) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	u := bsoncore.NewDocumentBuilder().AppendDocument("q", filter).AppendDocument("u", d).
		AppendBoolean("upsert", false).AppendBoolean("multi", false).Build()
	_, err := w.write(ctx, bsoncore.NewDocumentBuilder().AppendString("update", w.writeTo).
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(u).Build()))
	return err
}

func (w *aggRemoteWriter) Commit(ctx context.Context) error {
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
	if w.wc != nil {
		b.AppendDocument("writeConcern", w.wc)
	}
	if _, err := w.runOn(ctx, "admin", b.Build()); err != nil {
		w.Abort(ctx)
		return err
	}
	w.created = false
	return nil
}

// Abort drops $out's temporary collection on the primary (best effort, as the local path).
func (w *aggRemoteWriter) Abort(ctx context.Context) {
	w.buf, w.bufBytes = nil, 0
	if !w.replace || !w.created {
		return
	}
	w.created = false
	_, _ = w.run(context.WithoutCancel(ctx), bsoncore.NewDocumentBuilder().AppendString("drop", w.writeTo).Build())
}
