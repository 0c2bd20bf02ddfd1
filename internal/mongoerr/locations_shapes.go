package mongoerr

// Location codes added for issue 10's shapes and error-code points, in a block of their own
// so parallel additions merge cleanly.
const (
	Location5447000 Code = 5447000 // $collStats given a non-object
	Location31170   Code = 31170   // IDL validateObjectIsEmpty ($collStats count, queryExecStats)
	Location15969   Code = 15969   // $project specification not an object
)
