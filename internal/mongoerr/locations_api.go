package mongoerr

// Location codes of the Stable API parameter checks (initialize_api_parameters.cpp) and of
// the search index stage without Atlas.
const (
	// Location498870: requireApiVersion is set and the command has no apiVersion.
	Location498870 Code = 498870
	// Location4886600: apiStrict or apiDeprecationErrors without apiVersion.
	Location4886600 Code = 4886600
	// Location6047401: $listSearchIndexes outside Atlas (MongoDB 7.0).
	Location6047401 Code = 6047401
)
