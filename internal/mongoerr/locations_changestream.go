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
