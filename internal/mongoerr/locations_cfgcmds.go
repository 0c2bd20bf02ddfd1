package mongoerr

// Location codes added for issue 12's cluster commands (addShard), in a block of their own so
// parallel additions merge cleanly.
const (
	Location50876 Code = 50876 // _addShard on a node started without --shardsvr
)
