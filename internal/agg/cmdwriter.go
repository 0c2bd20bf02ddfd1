package agg

// CommandWriter is the Writer of $out and $merge when the pipeline runs away from the node
// that holds the target (MongoDB's $out/$merge on a secondary, and on mongos for a target on
// another shard): every write is an ordinary command sent through Run, so whenMatched /
// whenNotMatched behave exactly as on the target's node.
//
// $out follows MongoDB's DocumentSourceOut: Open reads the target's options and indexes,
// creates a temporary collection with those options; the output is inserted into it in
// batches; Commit builds the target's indexes on it and renames it over the target with
// dropTarget; Abort drops it.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// CommandWriter sends $out's or $merge's writes as commands. Set the exported fields, then
// call Open before the first write.
type CommandWriter struct {
	// Run sends cmd to database db where the target lives. A command error, the first write
	// error of a write command and a write concern error come back as errors with the
	// remote code.
	Run func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error)
	// DB and Target name the target collection; Out is $out's whole-collection
	// replacement ($merge otherwise).
	DB, Target string
	Out        bool
	// Bypass and WriteConcern are the aggregate's bypassDocumentValidation and
	// writeConcern (nil: the target node's default), forwarded with every write.
	Bypass       bool
	WriteConcern bsoncore.Document
	// BatchBytes and BatchDocs bound one insert command (defaults 8 MB and 500 documents).
	BatchBytes, BatchDocs int

	writeTo  string              // Target, or $out's temporary collection
	indexes  []bsoncore.Document // $out: the target's index specs, without _id_
	buf      []bsoncore.Document
	bufBytes int
	created  bool // $out: the temporary collection exists
}

var _ Writer = (*CommandWriter)(nil)

// Open prepares the writer: for $out, the temporary collection with the target's options.
func (w *CommandWriter) Open(ctx context.Context) error {
	w.writeTo = w.Target
	if w.BatchBytes <= 0 {
		w.BatchBytes = 8 << 20
	}
	if w.BatchDocs <= 0 {
		w.BatchDocs = 500
	}
	if !w.Out {
		return nil
	}
	opts, exists, err := w.targetOptions(ctx)
	if err != nil {
		return err
	}
	if exists {
		if w.indexes, err = w.targetIndexes(ctx); err != nil {
			return err
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
	if _, err := w.Run(ctx, w.DB, b.Build()); err != nil {
		return err
	}
	w.created = true
	return nil
}

// targetOptions reads the target's listCollections options.
func (w *CommandWriter) targetOptions(ctx context.Context) (bsoncore.Document, bool, error) {
	cmd := bsoncore.NewDocumentBuilder().AppendInt32("listCollections", 1).
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendString("name", w.Target).Build()).Build()
	reply, err := w.Run(ctx, w.DB, cmd)
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
		return nil, false, mongoerr.Newf(mongoerr.CommandNotSupportedOnView, "Namespace %s.%s is a view, not a collection", w.DB, w.Target)
	}
	opts, _ := info.Lookup("options").DocumentOK()
	return opts, true, nil
}

// targetIndexes reads the target's index specs, without _id_ (which create makes) and their
// ns field.
func (w *CommandWriter) targetIndexes(ctx context.Context) ([]bsoncore.Document, error) {
	reply, err := w.Run(ctx, w.DB, bsoncore.NewDocumentBuilder().AppendString("listIndexes", w.Target).Build())
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
		b := bsoncore.NewDocumentBuilder()
		if els, err := spec.Elements(); err == nil {
			for _, e := range els {
				if e.Key() != "ns" {
					b.AppendValue(e.Key(), e.Value())
				}
			}
		}
		out = append(out, b.Build())
	}
	return out, nil
}

// write sends a write command with the aggregate's writeConcern and
// bypassDocumentValidation.
func (w *CommandWriter) write(ctx context.Context, b *bsoncore.DocumentBuilder) (bsoncore.Document, error) {
	if w.Bypass {
		b.AppendBoolean("bypassDocumentValidation", true)
	}
	if w.WriteConcern != nil {
		b.AppendDocument("writeConcern", w.WriteConcern)
	}
	return w.Run(ctx, w.DB, b.Build())
}

// FindOne implements Writer ($merge's lookup of the target document by its "on" fields).
func (w *CommandWriter) FindOne(ctx context.Context, filter bsoncore.Document) (bsoncore.Document, bool, error) {
	if err := w.flush(ctx); err != nil {
		return nil, false, err
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", w.writeTo).AppendDocument("filter", filter).
		AppendInt32("limit", 2).AppendBoolean("singleBatch", true).Build()
	reply, err := w.Run(ctx, w.DB, cmd)
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

// Insert implements Writer, buffering documents into bounded insert commands.
func (w *CommandWriter) Insert(ctx context.Context, d bsoncore.Document) error {
	if w.bufBytes+len(d) > w.BatchBytes || len(w.buf) >= w.BatchDocs {
		if err := w.flush(ctx); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, d)
	w.bufBytes += len(d)
	return nil
}

func (w *CommandWriter) flush(ctx context.Context) error {
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

// Replace implements Writer: replaces the first document matching filter (as the local
// path's limit-1 update).
func (w *CommandWriter) Replace(ctx context.Context, filter, d bsoncore.Document) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	u := bsoncore.NewDocumentBuilder().AppendDocument("q", filter).AppendDocument("u", d).
		AppendBoolean("upsert", false).AppendBoolean("multi", false).Build()
	_, err := w.write(ctx, bsoncore.NewDocumentBuilder().AppendString("update", w.writeTo).
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(u).Build()))
	return err
}

// Commit implements Writer: $out's indexes and rename over the target.
func (w *CommandWriter) Commit(ctx context.Context) error {
	if err := w.flush(ctx); err != nil {
		w.Abort(ctx)
		return err
	}
	if !w.Out {
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
	b := bsoncore.NewDocumentBuilder().AppendString("renameCollection", w.DB+"."+w.writeTo).
		AppendString("to", w.DB+"."+w.Target).AppendBoolean("dropTarget", true)
	if w.WriteConcern != nil {
		b.AppendDocument("writeConcern", w.WriteConcern)
	}
	if _, err := w.Run(ctx, "admin", b.Build()); err != nil {
		w.Abort(ctx)
		return err
	}
	w.created = false
	return nil
}

// Abort implements Writer: drops $out's temporary collection (best effort, as the local
// path).
func (w *CommandWriter) Abort(ctx context.Context) {
	w.buf, w.bufBytes = nil, 0
	if !w.Out || !w.created {
		return
	}
	w.created = false
	_, _ = w.Run(context.WithoutCancel(ctx), w.DB, bsoncore.NewDocumentBuilder().AppendString("drop", w.writeTo).Build())
}
