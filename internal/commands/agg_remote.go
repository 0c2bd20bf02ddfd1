package commands

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
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

// aggRemote sends the commands of $out/$merge on a node that is not primary to the primary.
type aggRemote struct {
	cl   *mongo.Client // the primary, through the coordinator's peer pool
	host string
}

// aggPrimaryWriter returns the remote writer when this node is a replica-set member that is
// not a writable primary, nil on a primary or a standalone. It fails with NotWritablePrimary
// when no other member is known to be primary.
func (r *aggResolver) aggPrimaryWriter(ctx context.Context, db, coll string, replace bool) (*agg.CommandWriter, error) {
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
	remote := &aggRemote{cl: cl, host: h.Primary}
	w := &agg.CommandWriter{Run: remote.run, DB: db, Target: coll, Out: replace,
		Bypass: r.bypassValidation, WriteConcern: r.writeConcern}
	if err := w.Open(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// run sends cmd to the primary's database db (agg.CommandWriter's Run). A command error, a write error and a write
// concern error come back as *mongoerr.Error with the primary's code.
func (w *aggRemote) run(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
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
