package event

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// AddImages returns doc (an event's Doc) with the images the stream looked up: post becomes
// an update event's fullDocument, placed right after wallTime where MongoDB's AddPostImage
// stage fills the slot its transform left; pre becomes fullDocumentBeforeChange, appended
// last as MongoDB's AddPreImage stage does. A zero Value (Type 0) adds nothing; pass a null
// Value for an image that was asked for and not found (fullDocument: null). An existing
// fullDocument (insert, replace) is replaced in place.
func AddImages(doc bsoncore.Document, post, pre bsoncore.Value) (bsoncore.Document, error) {
	els, err := doc.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "change event: %v", err)
	}
	start, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(doc)+len(post.Data)+len(pre.Data)+64))
	placed := post.Type == 0
	for _, e := range els {
		switch e.Key() {
		case "fullDocument":
			if !placed {
				out = bsoncore.AppendValueElement(out, "fullDocument", post)
				placed = true
			}
			continue
		case "fullDocumentBeforeChange":
			if pre.Type != 0 {
				continue
			}
		}
		out = append(out, e...)
		if e.Key() == "wallTime" && !placed && !hasKey(els, "fullDocument") {
			out = bsoncore.AppendValueElement(out, "fullDocument", post)
			placed = true
		}
	}
	if !placed {
		out = bsoncore.AppendValueElement(out, "fullDocument", post)
	}
	if pre.Type != 0 {
		out = bsoncore.AppendValueElement(out, "fullDocumentBeforeChange", pre)
	}
	out, err = bsoncore.AppendDocumentEnd(out, start)
	return out, err
}

func hasKey(els []bsoncore.Element, k string) bool {
	for _, e := range els {
		if e.Key() == k {
			return true
		}
	}
	return false
}
