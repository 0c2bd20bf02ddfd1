package mongoerr

// Location codes of the $changeStream stage's checks (document_source_change_stream.cpp,
// document_source_change_stream_ensure_resume_token_present.cpp).
const (
	// Location40573: $changeStream on a server that is not a replica-set member or a router.
	Location40573 Code = 40573
	// Location50808: the $changeStream stage's argument is not a document.
	Location50808 Code = 50808
	// Location50865: both resumeAfter and startAfter.
	Location50865 Code = 50865
	// Location40674: startAtOperationTime with a resume token.
	Location40674 Code = 40674
	// Location31123: showMigrationEvents through a router.
	Location31123 Code = 31123
)

// Location codes of $changeStreamSplitLargeEvent
// (document_source_change_stream_split_large_event.cpp, change_stream_split_event_helpers.cpp).
const (
	// Location7182800: the stage's argument is not an empty document.
	Location7182800 Code = 7182800
	// Location7182802: the stage is not the last of the pipeline.
	Location7182802 Code = 7182802
	// Location7182500: a field alone does not fit in a fragment.
	Location7182500 Code = 7182500
	// Location7182502: an event with no field but _id to split.
	Location7182502 Code = 7182502
)
