package event

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
)

// Transactions (package comment; MongoDB's DocumentSourceChangeStreamUnwindTransaction). The
// entries, as internal/repl/oplog's txn_log.go and prepared.go write them:
//
//	{lsid, txnNumber, op: "c", ns: "admin.$cmd", o: {applyOps: [...]}, prevOpTime: null}          one entry
//	{..., o: {applyOps: [...], partialTxn: true}, prevOpTime: null | previous}                     chain
//	{..., o: {applyOps: [...], count: n}, prevOpTime: previous}                                     chain's commit
//	{..., o: {applyOps: [...], prepare: true[, count]}, prevOpTime: null | previous}               prepare
//	{..., o: {commitTransaction: 1, commitTimestamp}, prevOpTime: the prepare entry}              prepared commit
//	{..., o: {abortTransaction: 1}, prevOpTime: the prepare entry}

// maxTxnChain bounds the entries ReadTxnChain follows (a transaction is at most a few GB of
// 16 MB entries; a longer chain is a corrupt oplog, not something to loop over).
const maxTxnChain = 1 << 16

// txnKind classifies a command entry of a transaction.
type txnKind int

const (
	notTxn      txnKind = iota
	txnCommit           // applyOps that commits (neither partialTxn nor prepare)
	txnPartial          // applyOps with partialTxn
	txnPrepare          // applyOps with prepare
	txnCommitPr         // commitTransaction of a prepared transaction
	txnAbort            // abortTransaction
)

func kindOf(e *oplog.Entry) txnKind {
	if e == nil || e.Op != "c" {
		return notTxn
	}
	first, err := e.O.IndexErr(0)
	if err != nil {
		return notTxn
	}
	switch first.Key() {
	case "applyOps":
		if p, _ := e.O.Lookup("prepare").BooleanOK(); p {
			return txnPrepare
		}
		if p, _ := e.O.Lookup("partialTxn").BooleanOK(); p {
			return txnPartial
		}
		return txnCommit
	case "commitTransaction":
		return txnCommitPr
	case "abortTransaction":
		return txnAbort
	}
	return notTxn
}

// prevOf returns e's non-null prevOpTime.
func prevOf(e *oplog.Entry) (optime.OpTime, bool) {
	p, ok := optime.Lookup(e.Raw, "prevOpTime")
	if !ok || p.IsNull() {
		return optime.OpTime{}, false
	}
	return p, true
}

// NeedsTxnEntries reports whether entry's events need the earlier entries of its transaction
// (an applyOps that commits a chain, or the commitTransaction of a prepared transaction), and
// the OpTime of the entry before it. The caller reads them with ReadTxnChain and passes them
// to TransformTxn.
func NeedsTxnEntries(entry *oplog.Entry) (prev optime.OpTime, ok bool) {
	switch kindOf(entry) {
	case txnCommit, txnCommitPr:
		return prevOf(entry)
	}
	return optime.OpTime{}, false
}

// ReadTxnChain returns the earlier entries of entry's transaction, oldest first, following
// prevOpTime from entry through read (which returns the entry at an OpTime, nil if the oplog
// no longer has it). Every entry of the chain must be an applyOps of the same transaction
// (lsid, txnNumber), at a smaller timestamp than the one after it. An entry that does not
// NeedsTxnEntries has no earlier entries (nil).
func ReadTxnChain(entry *oplog.Entry, read func(optime.OpTime) (*oplog.Entry, error)) ([]*oplog.Entry, error) {
	prev, ok := NeedsTxnEntries(entry)
	if !ok {
		return nil, nil
	}
	lsid, _ := entry.Raw.Lookup("lsid").DocumentOK()
	txn, _ := entry.Raw.Lookup("txnNumber").AsInt64OK()
	var chain []*oplog.Entry
	for cur := entry; ok; prev, ok = prevOf(cur) {
		if len(chain) >= maxTxnChain || prev.TS >= cur.OpTime.TS {
			return nil, mongoerr.Newf(mongoerr.BadValue, "transaction entry at %v has a bad prevOpTime %v", cur.OpTime, prev)
		}
		p, err := read(prev)
		if err != nil {
			return nil, err
		}
		if p == nil {
			return nil, mongoerr.Newf(mongoerr.ChangeStreamHistoryLost,
				"Oplog no longer has history necessary for $changeStream to observe operations from a committed transaction: the entry at %v is gone", prev)
		}
		if k := kindOf(p); k != txnPartial && k != txnPrepare {
			return nil, mongoerr.Newf(mongoerr.BadValue, "the entry at %v, before the transaction entry at %v, is not one of its applyOps entries", prev, cur.OpTime)
		}
		plsid, _ := p.Raw.Lookup("lsid").DocumentOK()
		ptxn, _ := p.Raw.Lookup("txnNumber").AsInt64OK()
		if string(plsid) != string(lsid) || ptxn != txn {
			return nil, mongoerr.Newf(mongoerr.BadValue, "the entry at %v belongs to another transaction than the entry at %v", prev, cur.OpTime)
		}
		chain = append(chain, p)
		cur = p
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

// TransformTxn is Transform for an entry whose transaction's earlier entries (ReadTxnChain:
// oldest first) are given. For other entries earlier is ignored and it is Transform.
func TransformTxn(dst []Event, entry *oplog.Entry, earlier []*oplog.Entry, o *Options) ([]Event, error) {
	kind := kindOf(entry)
	switch kind {
	case txnPartial, txnPrepare, txnAbort:
		// Their operations are events at the transaction's commit, or never.
		return dst, nil
	}
	wall, err := wallOf(entry)
	if err != nil {
		return dst, err
	}
	c := eventCtx{ts: entry.OpTime.TS, wall: wall, applyOpsTS: entry.OpTime.TS}
	if kind == notTxn {
		op := topOp(entry)
		return transformOp(dst, &op, &c, o)
	}

	entries := earlier
	if _, chained := NeedsTxnEntries(entry); !chained {
		entries = nil
	} else if len(earlier) == 0 {
		return dst, ErrNeedsTxnEntries
	}
	if kind == txnCommit {
		entries = append(entries[:len(entries):len(entries)], entry)
	}
	c.inTxn = true
	if v, err := entry.Raw.LookupErr("lsid"); err == nil {
		if c.lsid, _ = v.DocumentOK(); c.lsid == nil {
			return dst, wrongType("lsid", "object", v)
		}
	}
	if v, err := entry.Raw.LookupErr("txnNumber"); err == nil {
		if v.Type != bsoncore.TypeInt64 {
			return dst, wrongType("txnNumber", "long", v)
		}
		c.txnNumber, c.hasTxnNumber = v.Int64(), true
	}
	for _, e := range entries {
		if k := kindOf(e); k != txnCommit && k != txnPartial && k != txnPrepare {
			return dst, mongoerr.Newf(mongoerr.BadValue, "transaction entry at %v is not an applyOps", e.OpTime)
		}
		arr, ok := e.O.Lookup("applyOps").ArrayOK()
		if !ok {
			return dst, wrongType("applyOps", "array", e.O.Lookup("applyOps"))
		}
		vals, err := arr.Values()
		if err != nil {
			return dst, mongoerr.Newf(mongoerr.InvalidBSON, "applyOps entry at %v: %v", e.OpTime, err)
		}
		c.applyOpsTS = e.OpTime.TS
		for i, v := range vals {
			c.applyOpsIndex = i
			op, err := innerOp(v)
			if err != nil {
				return dst, err
			}
			if op.op != "n" {
				if dst, err = transformOp(dst, &op, &c, o); err != nil {
					return dst, err
				}
			}
			c.txnOpIndex++
		}
	}
	return dst, nil
}

// innerOp parses an operation of an applyOps array ({op, ns, ui, o, o2}).
func innerOp(v bsoncore.Value) (entryOp, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return entryOp{}, wrongType("applyOps", "an array of objects", v)
	}
	var op entryOp
	if op.op, ok = d.Lookup("op").StringValueOK(); !ok {
		return entryOp{}, wrongType("op", "string", d.Lookup("op"))
	}
	op.ns, _ = d.Lookup("ns").StringValueOK()
	if uv, err := d.LookupErr("ui"); err == nil {
		st, b, ok := uv.BinaryOK()
		if !ok || st != 4 || len(b) != 16 {
			return entryOp{}, wrongType("ui", "UUID", uv)
		}
		op.ui, op.hasUI = catalog.UUID(b), true
	}
	if op.o, ok = d.Lookup("o").DocumentOK(); !ok {
		return entryOp{}, wrongType("o", "object", d.Lookup("o"))
	}
	if ov, err := d.LookupErr("o2"); err == nil {
		if op.o2, ok = ov.DocumentOK(); !ok {
			return entryOp{}, wrongType("o2", "object", ov)
		}
		op.hasO2 = true
	}
	op.fromMigrate, _ = d.Lookup("fromMigrate").BooleanOK()
	return op, nil
}
