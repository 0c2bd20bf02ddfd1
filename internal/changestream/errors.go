package changestream

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// ResumableError labels a change stream's error as drivers expect: ResumableChangeStreamError
// for the errors a new stream (on another member, or through the router again) can get past
// (MongoDB's isResumableChangeStreamError). Shards' streams and the router's merged ones
// both answer through it.
func ResumableError(err error) error {
	e, ok := mongoerr.As(err)
	if !ok {
		return err
	}
	switch c := e.Code; {
	case mongoerr.IsRetriableError(c), c == mongoerr.StaleShardVersion, c == mongoerr.StaleEpoch,
		c == mongoerr.StaleConfig, c == mongoerr.FailedToSatisfyReadPreference, c == mongoerr.RetryChangeStream:
		return withLabel(e, mongoerr.LabelResumableChangeStream)
	case c == mongoerr.ChangeStreamFatalError, c == mongoerr.ChangeStreamHistoryLost:
		// MongoDB's NonResumableChangeStreamError category (error_labels.cpp).
		return withLabel(e, mongoerr.LabelNonResumableChangeStream)
	}
	return err
}

// withLabel returns e with label added, once.
func withLabel(e *mongoerr.Error, label string) error {
	for _, l := range e.Labels {
		if l == label {
			return e
		}
	}
	cp := *e
	cp.Labels = append(append([]string(nil), e.Labels...), label)
	return &cp
}

// CheckUnmodifiedID fails with ChangeStreamFatalError when the user's pipeline changed an
// event's `_id` (its resume token): in, the event; out, what the pipeline made of it.
func CheckUnmodifiedID(in, out bsoncore.Document) error {
	if bytes.Equal(out.Lookup("_id").Data, in.Lookup("_id").Data) && out.Lookup("_id").Type == bsoncore.TypeEmbeddedDocument {
		return nil
	}
	return mongoerr.New(mongoerr.ChangeStreamFatalError,
		"Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. "+
			"Modifying the _id field of an event makes it impossible to resume the stream from that point. "+
			"Only transformations that retain the unmodified _id field are allowed.")
}

// ResumeTokenNotFound is the error of a stream resumed from an event that is not there any
// more: first is the `_id` of the first event found past it.
func ResumeTokenNotFound(first bsoncore.Document) error {
	return mongoerr.Newf(mongoerr.ChangeStreamFatalError, "cannot resume stream; the resume token was not found. %s", docString(first))
}
