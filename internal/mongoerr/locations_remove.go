package mongoerr

// Location codes added for issue 13's removeShard and movePrimary, in a block of their own so
// parallel additions merge cleanly.
const (
	Location4740601 Code = 4740601 // removeShard found no other shard to carry the new topologyTime
	Location7118501 Code = 7118501 // movePrimary cloned other collections than it meant to
	Location7120209 Code = 7120209 // movePrimary's commit left config.databases unchanged
)
