package participant

// ReadOnly reports whether the statement's transaction has written nothing so far: a
// shard's replies inside a transaction carry it (readOnly), and the router's commit path
// depends on it (spec: sharding.md "Transactions").
func (st *Stmt) ReadOnly() bool {
	return st.Txn == nil || st.Txn.ops == nil || len(st.Txn.ops.Ops) == 0
}
