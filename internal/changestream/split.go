package changestream

// $changeStreamSplitLargeEvent (MongoDB 7.0's DocumentSourceChangeStreamSplitLargeEvent,
// change_stream_split_event_helpers.cpp): an event too large for a reply is cut into
// fragments, each {_id: <the event's token with fragmentNum i>, splitEvent: {fragment: i+1,
// of: n}, <some of the event's fields>}, filled greedily with the fields in order of size
// (then name), so a client reassembles the event and resumes between fragments.

import (
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/changestream/resumetoken"
	"humongo/internal/mongoerr"
)

// MaxEventSize is the largest event a stream returns whole (BSONObjMaxUserSize, MongoDB's
// kBSONObjMaxChangeEventSize). An event counts its _id twice, as MongoDB does: the reply's
// postBatchResumeToken repeats it.
const MaxEventSize = 16 * 1024 * 1024

// eventSize is an event's size as checked against MaxEventSize.
func eventSize(d bsoncore.Document) int {
	id, err := d.LookupErr("_id")
	if err != nil {
		return len(d)
	}
	return len(d) + 1 + len("_id") + 1 + len(id.Data)
}

// tooLarge is the error for an event over MaxEventSize without the split stage.
func tooLarge(d bsoncore.Document) error {
	n := eventSize(d)
	return mongoerr.Newf(mongoerr.BSONObjectTooLarge,
		"BSONObj size: %d (0x%X) is invalid. Size must be between 0 and %d(16MB)", n, n, MaxEventSize)
}

// fragment is one piece of a split event and its resume token.
type fragment struct {
	doc bsoncore.Document
	tok resumetoken.Data
}

// splitEvent cuts event d, whose token is tok, into fragments of at most MaxEventSize less
// the token's size, and drops the first skip of them.
func splitEvent(d bsoncore.Document, tok resumetoken.Data, skip int) ([]fragment, error) {
	els, err := d.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "change event: %v", err)
	}
	fields := make([]bsoncore.Element, 0, len(els))
	for _, e := range els {
		if e.Key() != "_id" {
			fields = append(fields, e)
		}
	}
	if len(fields) == 0 {
		return nil, mongoerr.New(mongoerr.Location7182502, "Cannot split an empty event or an event containing solely '_id' field")
	}
	sort.SliceStable(fields, func(i, j int) bool {
		if len(fields[i]) != len(fields[j]) {
			return len(fields[i]) < len(fields[j])
		}
		return fields[i].Key() < fields[j].Key()
	})
	base, err := resumetoken.Make(tok)
	if err != nil {
		return nil, err
	}
	limit := MaxEventSize - len(base)
	type piece struct {
		tok    resumetoken.Data
		id     bsoncore.Document
		fields []bsoncore.Element
	}
	var pieces []piece
	for i := 0; i < len(fields); {
		ft := tok
		n := len(pieces)
		ft.FragmentNum = &n
		id, err := resumetoken.Make(ft)
		if err != nil {
			return nil, err
		}
		// _id twice (the postBatchResumeToken), splitEvent with two int32s, the document's
		// own framing.
		size := 4 + 1 + 2*(len("_id")+2+len(id)) + (len("splitEvent") + 2 + 5 + 2*(1+len("fragment")+1+4)) + 1
		p := piece{tok: ft, id: id}
		for {
			p.fields = append(p.fields, fields[i])
			size += len(fields[i])
			i++
			if i == len(fields) || size+len(fields[i]) > limit {
				break
			}
		}
		if size > limit {
			return nil, mongoerr.Newf(mongoerr.Location7182500,
				"Splitting change event failed: fragment size %d is greater than maximum allowed fragment size %d", size, limit)
		}
		pieces = append(pieces, p)
	}
	out := make([]fragment, 0, len(pieces))
	for i, p := range pieces {
		if i < skip {
			continue
		}
		start, b := bsoncore.AppendDocumentStart(nil)
		b = bsoncore.AppendDocumentElement(b, "_id", p.id)
		b = bsoncore.AppendDocumentElement(b, "splitEvent", bsoncore.NewDocumentBuilder().
			AppendInt32("fragment", int32(i+1)).AppendInt32("of", int32(len(pieces))).Build())
		for _, f := range p.fields {
			b = append(b, f...)
		}
		b, err = bsoncore.AppendDocumentEnd(b, start)
		if err != nil {
			return nil, fmt.Errorf("split event: %w", err)
		}
		out = append(out, fragment{doc: b, tok: p.tok})
	}
	return out, nil
}
