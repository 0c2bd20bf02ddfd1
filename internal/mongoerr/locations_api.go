package mongoerr

// Location codes of the Stable API parameter checks (initialize_api_parameters.cpp).
const (
	// Location498870: requireApiVersion is set and the command has no apiVersion.
	Location498870 Code = 498870
	// Location4886600: apiStrict or apiDeprecationErrors without apiVersion.
	Location4886600 Code = 4886600
)
