package mongoerr

// Location codes of change stream event construction (internal/changestream/event; MongoDB's
// change_stream_event_transform.cpp and DocumentSourceChangeStream::checkValueType), in a block
// of their own so parallel additions merge cleanly.
const (
	Location40532   Code = 40532   // an oplog entry field has the wrong type ("Entry field ... should be ...")
	Location6741200 Code = 6741200 // an update entry is neither a $v:2 diff nor a replacement
	Location7826901 Code = 7826901 // a document write in the oplog has no collection UUID
)
