package mongoerr

// Location codes of change stream pre- and post-images (internal/changestream/images), in a
// block of their own so parallel additions merge cleanly.
const (
	Location6148000 Code = 6148000 // a pre-images document without its preImage field
)
