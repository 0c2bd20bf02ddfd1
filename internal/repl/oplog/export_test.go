package oplog

// SetMaxApplyOpsBytes makes a transaction's applyOps entries hold at most n bytes of
// operations (so tests get chains) until restore is called.
func SetMaxApplyOpsBytes(n int) (restore func()) {
	prev := maxApplyOpsBytes
	maxApplyOpsBytes = n
	return func() { maxApplyOpsBytes = prev }
}
