package images

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// NS is the pre-images collection, config.system.preimages.
const NS = oplog.PreImagesNS

// Enabled reports whether the collection uuid, as snap knows it, records pre-images
// (changeStreamPreAndPostImages: {enabled: true}); false when snap has no such collection.
func Enabled(snap *catalog.Snapshot, uuid catalog.UUID) bool {
	m, ok := snap.ByUUID(uuid)
	return ok && m.PreAndPostImages
}

// ID returns a pre-image's _id, {nsUUID, ts, applyOpsIndex}: the stream's preImageId.
func ID(nsUUID catalog.UUID, ts optime.Timestamp, applyOpsIndex int) bsoncore.Document {
	return oplog.AppendPreImageID(nil, nsUUID, ts, int64(applyOpsIndex))
}

// PreImage returns the pre-image of the operation logged at ts (index applyOpsIndex of that
// applyOps entry; 0 outside transactions) on collection nsUUID, as ru reads it (the caller
// sets ru's read source: the stream reads at its snapshot), and false when there is none:
// the collection did not record it, or it expired. colls is the node's write path, whose
// _id index finds the document.
func PreImage(ctx context.Context, ru *storage.RecoveryUnit, colls *index.Collections, nsUUID catalog.UUID, ts optime.Timestamp, applyOpsIndex int) (bsoncore.Document, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	c, err := colls.Get(NS)
	if mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	id := ID(nsUUID, ts, applyOpsIndex)
	_, doc, found, err := c.FindByID(ru, bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: id})
	if err != nil || !found {
		return nil, false, err
	}
	pre, ok := doc.Lookup("preImage").DocumentOK()
	if !ok {
		return nil, false, mongoerr.Newf(mongoerr.Location6148000, "Pre-image document must contain the 'preImage' field")
	}
	return append(bsoncore.Document(nil), pre...), true, nil
}

// PostImage returns the document after an update whose oplog entry's o is updateO, applied
// to pre: a $v: 2 diff ({$v: 2, diff: {...}}, as the oplog applier applies it) or a whole
// replacement document (returned as is).
func PostImage(pre, updateO bsoncore.Document) (bsoncore.Document, error) {
	v, err := updateO.LookupErr("$v")
	if err != nil {
		return updateO, nil // a replacement
	}
	if n, ok := v.AsInt64OK(); !ok || n != 2 {
		return nil, mongoerr.Newf(mongoerr.BadValue, "unsupported update entry version %v", v)
	}
	diff, ok := updateO.Lookup("diff").DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "$v:2 update entry without diff")
	}
	post, err := oplog.ApplyDiff(pre, diff)
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.BadValue, "cannot compute the post-image: %v", err)
	}
	return post, nil
}

// NoPreImageError is MongoDB's error when a stream with fullDocumentBeforeChange: required
// finds no pre-image for event (a change event document: operationType, ns, clusterTime and
// txnNumber are quoted).
func NoPreImageError(event bsoncore.Document) error {
	return mongoerr.New(mongoerr.NoMatchingDocument,
		"Change stream was configured to require a pre-image for all update, delete and replace events, "+
			"but the pre-image was not found for event: "+eventSummary(event))
}

// NoPostImageError is MongoDB's error when a stream with fullDocument: required cannot give
// an update event its post-image.
func NoPostImageError(event bsoncore.Document) error {
	return mongoerr.New(mongoerr.NoMatchingDocument,
		"Change stream was configured to require a post-image for all update events, "+
			"but the post-image was not found for event: "+eventSummary(event))
}

// eventSummary formats an event's identifying fields as MongoDB's Document::toString does
// (fields the event lacks are left out).
func eventSummary(event bsoncore.Document) string {
	var b strings.Builder
	b.WriteString("{")
	first := true
	for _, f := range []string{"operationType", "ns", "clusterTime", "txnNumber"} {
		v, err := event.LookupErr(f)
		if err != nil {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&b, "%s: %s", f, valueString(v))
	}
	b.WriteString("}")
	return b.String()
}

// valueString renders v in MongoDB's Value::toString style.
func valueString(v bsoncore.Value) string {
	switch v.Type {
	case bsoncore.TypeString:
		return fmt.Sprintf("%q", v.StringValue())
	case bsoncore.TypeTimestamp:
		t, i := v.Timestamp()
		return fmt.Sprintf("Timestamp(%d, %d)", t, i)
	case bsoncore.TypeEmbeddedDocument:
		elems, _ := v.Document().Elements()
		parts := make([]string, 0, len(elems))
		for _, e := range elems {
			parts = append(parts, e.Key()+": "+valueString(e.Value()))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case bsoncore.TypeInt64:
		return fmt.Sprint(v.Int64())
	case bsoncore.TypeInt32:
		return fmt.Sprint(v.Int32())
	}
	return v.String()
}
