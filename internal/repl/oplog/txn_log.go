package oplog

// Logging a multi-document transaction (spec: replication.md "Transactions"; MongoDB's
// OpObserverImpl::onUnpreparedTransactionCommit): while a transaction runs, its document
// writes are collected (opobserver.TxnCollector) instead of logged one entry each; at commit
// LogTransaction writes them as one applyOps entry, or as a chain of entries linked by
// prevOpTime when they do not fit in one document:
//
//	{lsid, txnNumber, op: "c", ns: "admin.$cmd", o: {applyOps: [ops...], partialTxn: true}, ts, t, v, wall, prevOpTime}
//	...
//	{lsid, txnNumber, op: "c", ns: "admin.$cmd", o: {applyOps: [ops...], count: <all ops>}, ...}
//
// The data writes take the last entry's timestamp (they were made before any timestamp was
// set in the unit, and the engine gives such writes the unit's last one), so the transaction
// becomes visible at once, at its commit entry.

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/storage"
)

// maxApplyOpsBytes bounds the operations of one applyOps entry: the entry must stay under
// the 16 MB document limit with its envelope (MongoDB packs up to BSONObjMaxUserSize).
var maxApplyOpsBytes = 16*1024*1024 - 16*1024

// TxnNS is the namespace of transaction entries.
const TxnNS = "admin.$cmd"

// collectTxnOps appends es (document writes, and the create / createIndexes commands of
// collections the transaction created) to a transaction's collector.
func collectTxnOps(tc *opobserver.TxnCollector, es []entry) error {
	for i := range es {
		e := &es[i]
		if e.op != "i" && e.op != "u" && e.op != "d" && !txnDDL(e) {
			return mongoerr.Newf(mongoerr.OperationNotSupportedInTransaction,
				"Cannot run a catalog change on %s in a multi-document transaction", e.ns)
		}
		start, d := bsoncore.AppendDocumentStart(make([]byte, 0, 64+len(e.o)+len(e.o2)))
		d = appendOpFields(d, e)
		d, _ = bsoncore.AppendDocumentEnd(d, start)
		tc.Add(d)
	}
	return nil
}

// txnDDL reports whether e is a catalog change a transaction may make: create a collection,
// or an index on one it created (MongoDB's rules, enforced by the create and createIndexes
// commands); secondaries apply them first (txn_apply.go).
func txnDDL(e *entry) bool {
	if e.op != "c" {
		return false
	}
	first, err := e.o.IndexErr(0)
	return err == nil && (first.Key() == "create" || first.Key() == "createIndexes")
}

// LogTransaction logs a committing transaction's operations in ru's unit (see the file
// comment) and returns the OpTime of every entry written, the commit entry last, and the
// entries' wall clock (milliseconds; the session record's lastWriteDate, which members
// applying the entries take from them too). lsid and txnNumber identify the transaction.
func (w *Writer) LogTransaction(ru *storage.RecoveryUnit, lsid bsoncore.Document, txnNumber int64, ops [][]byte) ([]optime.OpTime, int64, error) {
	if len(ops) == 0 {
		if !ru.InUnitOfWork() {
			return nil, 0, storage.ErrNotInUnit
		}
		return nil, 0, nil
	}
	return w.logTxn(ru, lsid, txnNumber, ops, false)
}

// logTxn writes a transaction's entries: a commit's (LogTransaction) or a prepare's
// (LogPrepare, whose last entry says prepare: true).
func (w *Writer) logTxn(ru *storage.RecoveryUnit, lsid bsoncore.Document, txnNumber int64, ops [][]byte, prepare bool) ([]optime.OpTime, int64, error) {
	if !ru.InUnitOfWork() {
		return nil, 0, storage.ErrNotInUnit
	}
	term, err := w.ownTerm("admin.$cmd", false)
	if err != nil {
		return nil, 0, err
	}
	groups := splitOps(ops)
	ru.OnRollback(w.NotifyVisible)
	slots, err := w.info.ReserveSlots(ru, term, len(groups), make([]optime.OpTime, 0, len(groups)))
	if err != nil {
		return nil, 0, err
	}
	wall := w.cfg.Now().UnixMilli()
	prev := optime.OpTime{Term: optime.UninitializedTerm}
	// The change stream pre-images go with each entry (preimages.go). A prepare's unit is a
	// side unit, not the transaction's: WritePreparedPreImages writes them in the prepared
	// unit instead, so they commit (at the commit's timestamp) or abort with it.
	var pre []opobserver.TxnPreImage
	if tc := opobserver.Transaction(ru); tc != nil && !prepare {
		pre = tc.PreImages
	}
	first := 0 // index in ops of group i's first operation
	var doc []byte
	for i, g := range groups {
		if len(groups) > 1 {
			if err := ru.SetTimestamp(slots[i].TS); err != nil {
				return nil, 0, err
			}
		}
		last := i == len(groups)-1
		doc = appendTxnEntry(doc[:0], lsid, txnNumber, g, !last, prepare && last, len(ops), slots[i], wall, prev)
		if len(doc) > 16*1024*1024+16*1024 {
			return nil, 0, mongoerr.Newf(mongoerr.TransactionTooLarge, "Total size of all transaction operations must be less than 16793600. Actual size is %d", len(doc))
		}
		if err := w.put(ru, slots[i].TS, doc); err != nil {
			return nil, 0, err
		}
		for len(pre) > 0 && pre[0].Op < first+len(g) {
			p := pre[0]
			if err := writePreImage(ru, w.cfg.Colls, p.UUID, slots[i].TS, int64(p.Op-first), wall, p.Doc); err != nil {
				return nil, 0, err
			}
			pre = pre[1:]
		}
		first += len(g)
		prev = slots[i]
	}
	// The data writes made before the first slot take the unit's current timestamp at
	// commit: make it the commit entry's.
	if len(groups) > 1 {
		if err := ru.SetTimestamp(slots[len(slots)-1].TS); err != nil {
			return nil, 0, err
		}
	}
	commit := slots[len(slots)-1]
	ru.OnCommit(func(optime.Timestamp) {
		w.noteCommitted(commit)
		w.noteOwnCommitted(commit)
		w.NotifyVisible()
	})
	return slots, wall, nil
}

// splitOps packs ops into groups that each fit one entry, in order.
func splitOps(ops [][]byte) [][][]byte {
	var groups [][][]byte
	var cur [][]byte
	size := 0
	for _, op := range ops {
		if len(cur) > 0 && size+len(op)+16 > maxApplyOpsBytes {
			groups = append(groups, cur)
			cur, size = nil, 0
		}
		cur = append(cur, op)
		size += len(op) + 16
	}
	return append(groups, cur)
}

// appendTxnEntry builds one applyOps entry of a transaction.
func appendTxnEntry(dst []byte, lsid bsoncore.Document, txnNumber int64, ops [][]byte, partial, prepare bool, count int, ot optime.OpTime, wall int64, prev optime.OpTime) []byte {
	return appendTxnEnvelope(dst, lsid, txnNumber, ot, wall, prev, func(dst []byte) []byte {
		ai, dst := bsoncore.AppendArrayElementStart(dst, "applyOps")
		for i, op := range ops {
			dst = bsoncore.AppendDocumentElement(dst, itoa(i), op)
		}
		dst, _ = bsoncore.AppendArrayEnd(dst, ai)
		if prepare {
			dst = bsoncore.AppendBooleanElement(dst, "prepare", true)
		}
		if partial {
			dst = bsoncore.AppendBooleanElement(dst, "partialTxn", true)
		} else if !prev.IsNull() {
			dst = bsoncore.AppendInt64Element(dst, "count", int64(count))
		}
		return dst
	})
}

// appendTxnEnvelope builds a transaction's command entry (applyOps, or a prepared
// transaction's decision): lsid, txnNumber, op "c" on admin.$cmd, o's fields from appendO, and
// the entry's ts, t, v, wall and prevOpTime.
func appendTxnEnvelope(dst []byte, lsid bsoncore.Document, txnNumber int64, ot optime.OpTime, wall int64, prev optime.OpTime, appendO func([]byte) []byte) []byte {
	start, dst := bsoncore.AppendDocumentStart(dst)
	dst = bsoncore.AppendDocumentElement(dst, "lsid", lsid)
	dst = bsoncore.AppendInt64Element(dst, "txnNumber", txnNumber)
	dst = bsoncore.AppendStringElement(dst, "op", "c")
	dst = bsoncore.AppendStringElement(dst, "ns", TxnNS)
	oi, dst := bsoncore.AppendDocumentElementStart(dst, "o")
	dst = appendO(dst)
	dst, _ = bsoncore.AppendDocumentEnd(dst, oi)
	dst = bsoncore.AppendTimestampElement(dst, "ts", ot.TS.Secs(), ot.TS.Inc())
	dst = bsoncore.AppendInt64Element(dst, "t", ot.Term)
	dst = bsoncore.AppendInt64Element(dst, "v", 2)
	dst = bsoncore.AppendDateTimeElement(dst, "wall", wall)
	dst = prev.AppendElement(dst, "prevOpTime")
	dst, _ = bsoncore.AppendDocumentEnd(dst, start)
	return dst
}

// WritePreparedPreImages writes the change stream pre-images of a transaction being prepared
// (tc's) in its own unit txnRU, before it is prepared: each at the timestamp of the prepare
// chain's entry (slots, as LogPrepare returned them) that holds its operation, with its index
// there, and the entries' wall clock. Secondaries applying the prepare record the same ones.
func (w *Writer) WritePreparedPreImages(txnRU *storage.RecoveryUnit, tc *opobserver.TxnCollector, slots []optime.OpTime, wall int64) error {
	if tc == nil || len(tc.PreImages) == 0 {
		return nil
	}
	groups := splitOps(tc.Ops)
	if len(groups) != len(slots) {
		return mongoerr.Newf(mongoerr.InternalError, "prepared transaction: %d entries for %d slots", len(groups), len(slots))
	}
	pre := tc.PreImages
	first := 0
	for i, g := range groups {
		for len(pre) > 0 && pre[0].Op < first+len(g) {
			p := pre[0]
			if err := writePreImage(txnRU, w.cfg.Colls, p.UUID, slots[i].TS, int64(p.Op-first), wall, p.Doc); err != nil {
				return err
			}
			pre = pre[1:]
		}
		first += len(g)
	}
	return nil
}
