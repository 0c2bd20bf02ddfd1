package cursor

import (
	"context"
	"math"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

const (
	// MaxBatchBytes bounds the documents of one batch (FindCommon's
	// kMaxBytesToReturnToClientAtOnce = BSONObjMaxUserSize): a document that would push the
	// batch past it waits for the next batch; the first document of a batch always fits.
	MaxBatchBytes = 16 * 1024 * 1024
	// DefaultFirstBatch is the first batch's document count when batchSize is not given.
	DefaultFirstBatch = 101
	// Unlimited is the count to pass to FillBatch for a getMore without batchSize.
	Unlimited = math.MaxInt64
)

// Batch is a batch of documents being built for a cursor reply.
type Batch struct {
	arr   []byte // array elements, without the array header
	n     int
	bytes int
}

// Len returns the number of documents in the batch.
func (b *Batch) Len() int { return b.n }

// Add appends doc if it fits (always when the batch is empty) and reports whether it did.
func (b *Batch) Add(doc bsoncore.Document) bool {
	if b.n > 0 && b.bytes+len(doc) > MaxBatchBytes {
		return false
	}
	b.arr = bsoncore.AppendDocumentElement(b.arr, itoa(b.n), doc)
	b.n++
	b.bytes += len(doc)
	return true
}

// FillBatch reads up to count documents from c (its stashed document first) into a new
// batch, stopping early at MaxBatchBytes. exhausted reports that the source has no more
// documents (the cursor can be closed and id 0 returned).
func FillBatch(ctx context.Context, c *Cursor, count int64) (b *Batch, exhausted bool, err error) {
	b = &Batch{}
	for int64(b.n) < count {
		doc := c.stash
		if doc != nil {
			c.stash = nil
		} else {
			var ok bool
			doc, ok, err = c.Source.Next(ctx)
			if err != nil {
				return b, false, err
			}
			if !ok {
				return b, true, nil
			}
		}
		if !b.Add(doc) {
			c.stash = append(bsoncore.Document(nil), doc...)
			return b, false, nil
		}
	}
	c.NReturned += int64(b.n)
	return b, false, nil
}

// ReplyOptions shape a cursor reply.
type ReplyOptions struct {
	// First selects firstBatch (find, aggregate, list commands) over nextBatch (getMore).
	First bool
	// BatchBeforeID puts the batch before id and ns, as find and getMore do
	// (CursorResponseBuilder); listCollections and listIndexes put it last
	// (appendCursorResponseObject).
	BatchBeforeID bool
	// PostBatchResumeToken, when set, follows the batch (change streams: the token a driver
	// resumes from when the batch is empty or it has consumed the whole batch).
	PostBatchResumeToken bsoncore.Document
}

// AppendReply returns {cursor: {firstBatch|nextBatch: [...], id, ns}} (fields ordered per
// opts); the server appends ok.
func AppendReply(b *Batch, id int64, ns string, opts ReplyOptions) bsoncore.Document {
	name := "nextBatch"
	if opts.First {
		name = "firstBatch"
	}
	var arr []byte
	if b != nil {
		arr = b.arr
	}
	out := make([]byte, 0, len(arr)+len(ns)+64)
	top, out := bsoncore.AppendDocumentStart(out)
	cur, out := bsoncore.AppendDocumentElementStart(out, "cursor")
	appendBatch := func(out []byte) []byte {
		ai, out := bsoncore.AppendArrayElementStart(out, name)
		out = append(out, arr...)
		out, _ = bsoncore.AppendArrayEnd(out, ai)
		return out
	}
	if opts.BatchBeforeID {
		out = appendBatch(out)
	}
	if opts.PostBatchResumeToken != nil {
		out = bsoncore.AppendDocumentElement(out, "postBatchResumeToken", opts.PostBatchResumeToken)
	}
	out = bsoncore.AppendInt64Element(out, "id", id)
	out = bsoncore.AppendStringElement(out, "ns", ns)
	if !opts.BatchBeforeID {
		out = appendBatch(out)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, cur)
	out, _ = bsoncore.AppendDocumentEnd(out, top)
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
