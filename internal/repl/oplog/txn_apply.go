package oplog

// Applying applyOps entries: committed transactions and the applyOps command (spec:
// replication.md "Transactions", "Oplog Entry Application"; MongoDB's
// applyApplyOpsOplogEntry and TransactionHistoryIterator).
//
// A transaction's commit is logged as {op: "c", ns: "admin.$cmd", o: {applyOps: [ops]}}
// with lsid and txnNumber, or, above 16 MB, as a chain of entries linked by prevOpTime: all
// but the last have o.partialTxn: true, the last has o.count (the number of operations of
// the whole chain). The applyOps command logs the same shape without lsid. Inner operations
// are documents {op, ns, ui, o, o2} like single-op entries.
//
// Application is atomic: every operation of the transaction is applied in ONE storage unit
// at the timestamp of the entry that commits it (the single entry, or the last of the
// chain), so a reader at any timestamp (lastApplied, the majority snapshot) sees all of it
// or none of it. The exception is a transaction's DDL (create, createIndexes: the only
// commands allowed inside one), which commits first in a unit of its own at the same
// timestamp (applyApplyOps says why that is safe). A partialTxn entry changes no data when applied: it is only written to the
// oplog (the caller's AppendEntry); the final entry walks prevOpTime back through the oplog
// to collect the chain's operations, oldest first. The primary writes a whole chain in one
// storage unit at commit, so the chain's entries are committed, and fetched, together: the
// earlier ones are in our oplog (a secondary writes a batch's entries before it applies
// them) or, for callers that apply entries they have not written, in the batch they pass
// (ApplyWith). Initial sync's first fetched entry is a visible entry of the source, so it
// is never inside a chain: a chain is either wholly at or before it (the clone, which
// starts later, reflects it) or wholly fetched.
//
// Idempotency: inner operations go through the same idempotent paths as single-op entries
// (insert as upsert, diff replay, tolerant modes for initial sync and recovery).
//
// Prepared transactions (o.prepare: true, then commitTransaction / abortTransaction
// entries) are held in a prepared unit until their decision: prepared.go.

import (
	"context"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// PrevEntries finds an oplog entry by timestamp among entries not (necessarily) in the
// oplog yet, such as the rest of the batch being applied; nil is "none".
type PrevEntries func(ts optime.Timestamp) (bsoncore.Document, bool)

// applyOpsEntry is a parsed applyOps command entry.
type applyOpsEntry struct {
	ops      []bsoncore.Document
	partial  bool
	prepare  bool
	count    int64
	hasCount bool
	lsid     bsoncore.Document
	txn      int64
	hasTxn   bool
	prev     optime.OpTime // null when the entry starts its chain (or has none)
}

// IsApplyOps reports whether e is an applyOps command entry.
func IsApplyOps(e *Entry) bool {
	if e.Op != "c" {
		return false
	}
	name, _ := firstKey(e.O)
	return name == "applyOps"
}

// IsPartialTxn reports whether e is a non-final entry of a transaction's chain.
func IsPartialTxn(e *Entry) bool {
	if !IsApplyOps(e) {
		return false
	}
	b, _ := e.O.Lookup("partialTxn").BooleanOK()
	return b
}

func parseApplyOps(e *Entry) (*applyOpsEntry, error) {
	arr, ok := e.O.Lookup("applyOps").ArrayOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.BadValue, "applyOps entry at %v: applyOps is not an array", e.OpTime)
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "applyOps entry at %v: %v", e.OpTime, err)
	}
	info := &applyOpsEntry{ops: make([]bsoncore.Document, 0, len(vals))}
	for i, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.BadValue, "applyOps entry at %v: operation %d is not an object", e.OpTime, i)
		}
		info.ops = append(info.ops, d)
	}
	info.partial, _ = e.O.Lookup("partialTxn").BooleanOK()
	info.prepare, _ = e.O.Lookup("prepare").BooleanOK()
	if v, err := e.O.LookupErr("count"); err == nil {
		if info.count, ok = v.AsInt64OK(); !ok {
			return nil, mongoerr.Newf(mongoerr.BadValue, "applyOps entry at %v: count is not a number", e.OpTime)
		}
		info.hasCount = true
	}
	info.lsid, _ = e.Raw.Lookup("lsid").DocumentOK()
	info.txn, info.hasTxn = e.Raw.Lookup("txnNumber").AsInt64OK()
	if v, err := e.Raw.LookupErr("prevOpTime"); err == nil {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.BadValue, "applyOps entry at %v: prevOpTime is not an object", e.OpTime)
		}
		if info.prev, err = parseOpTime(d); err != nil {
			return nil, err
		}
	}
	return info, nil
}

// parseOpTime reads {ts, t}.
func parseOpTime(d bsoncore.Document) (optime.OpTime, error) {
	s, i, ok := d.Lookup("ts").TimestampOK()
	if !ok {
		return optime.OpTime{}, mongoerr.New(mongoerr.BadValue, "optime without a timestamp ts")
	}
	t, ok := d.Lookup("t").AsInt64OK()
	if !ok {
		t = optime.UninitializedTerm
	}
	return optime.OpTime{TS: optime.MakeTimestamp(s, i), Term: t}, nil
}

// innerEntry parses an operation of an applyOps array as an entry at ot (the timestamp its
// writes take: the committing entry's).
func innerEntry(op bsoncore.Document, ot optime.OpTime) (*Entry, error) {
	e := &Entry{OpTime: ot, Raw: op}
	var ok bool
	if e.Op, ok = op.Lookup("op").StringValueOK(); !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "applyOps operation has no op")
	}
	if e.NS, ok = op.Lookup("ns").StringValueOK(); !ok && e.Op != "n" {
		return nil, mongoerr.New(mongoerr.BadValue, "applyOps operation has no ns")
	}
	if v, err := op.LookupErr("ui"); err == nil {
		st, b, ok := v.BinaryOK()
		if !ok || st != 4 || len(b) != 16 {
			return nil, mongoerr.New(mongoerr.BadValue, "applyOps operation ui is not a UUID")
		}
		copy(e.UI[:], b)
		e.HasUI = true
	}
	if e.O, ok = op.Lookup("o").DocumentOK(); !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "applyOps operation has no o")
	}
	if v, err := op.LookupErr("o2"); err == nil {
		if e.O2, ok = v.DocumentOK(); !ok {
			return nil, mongoerr.New(mongoerr.BadValue, "applyOps operation o2 is not an object")
		}
	}
	switch e.Op {
	case "i", "u", "d", "n":
	case "c":
		switch name, _ := firstKey(e.O); name {
		case "create", "createIndexes": // what a transaction may do (its DDL is applied first)
		default:
			return nil, mongoerr.Newf(mongoerr.BadValue, "command %q is not supported inside applyOps", name)
		}
	default:
		return nil, mongoerr.Newf(mongoerr.BadValue, "unknown applyOps operation type %q", e.Op)
	}
	return e, nil
}

// applyApplyOps applies an applyOps entry (applyCommand's "applyOps" case).
func (a *Applier) applyApplyOps(ctx context.Context, ru *storage.RecoveryUnit, e *Entry, mode Mode, prevs PrevEntries) error {
	info, err := parseApplyOps(e)
	if err != nil {
		return err
	}
	if info.prepare {
		return a.applyPrepare(ctx, ru, e, info, mode, prevs)
	}
	if info.partial {
		// Written to the oplog only; the chain's final entry applies it.
		return nil
	}
	ops := info.ops
	var pos []opPos
	if !info.prev.IsNull() {
		if ops, pos, _, err = a.chainOpsFrom(ru, e, info, prevs); err != nil {
			return err
		}
	}
	inner, err := innerEntries(ops, e.OpTime, wallOf(e.Raw, e.OpTime.TS), pos)
	if err != nil {
		return err
	}
	if ddl, crud := splitDDL(inner); len(ddl) > 0 && !ru.InUnitOfWork() {
		// A transaction may create collections and indexes on them, then write to them. A
		// collection created in a unit cannot take writes before the unit commits (the
		// write path opens committed collections only), so the catalog changes commit
		// first, in units of their own at the same timestamp. Readers still see all of
		// the transaction or none of it: a secondary's readers read at lastApplied, which
		// moves after the batch; a crash between the two units replays the entry (creates
		// are idempotent). Applying the DDL first gives the same result as the original
		// order: a transaction only creates collections and indexes on collections it
		// created (txn's rules), so its writes to them come after the create and are
		// indexed either way.
		// Each command commits alone: an index on a collection created by the same
		// transaction needs the collection committed, like the writes.
		for _, ie := range ddl {
			if err := a.applyCommand(ctx, ru, ie, mode); err != nil {
				return err
			}
		}
		inner = crud
	}
	return a.inUnit(ctx, ru, e.OpTime.TS, func() error {
		if err := a.applyInner(ctx, ru, inner, mode); err != nil {
			return err
		}
		if a.batchSessions {
			return nil
		}
		return a.applyEntrySession(ru, e)
	})
}

// innerEntries parses an applyOps array applied at ot. wall is the entry's wall clock and
// pos, when not nil, the place of each operation in a transaction chain (chainOpsFrom);
// otherwise operation i is at index i of the entry at ot.
func innerEntries(ops []bsoncore.Document, ot optime.OpTime, wall int64, pos []opPos) ([]*Entry, error) {
	inner := make([]*Entry, 0, len(ops))
	for i, op := range ops {
		ie, err := innerEntry(op, ot)
		if err != nil {
			return nil, err
		}
		ie.Wall = wall
		if pos != nil {
			ie.ApplyOpsTS, ie.ApplyOpsIndex = pos[i].ts, pos[i].index
		} else {
			ie.ApplyOpsTS, ie.ApplyOpsIndex = ot.TS, int64(i)
		}
		inner = append(inner, ie)
	}
	return inner, nil
}

// opPos is where an operation of a transaction chain was logged: its entry's timestamp and
// its index in that entry's applyOps array.
type opPos struct {
	ts    optime.Timestamp
	index int64
}

// splitDDL separates command operations from the others, each in order.
func splitDDL(inner []*Entry) (ddl, crud []*Entry) {
	for _, ie := range inner {
		if ie.Op == "c" {
			ddl = append(ddl, ie)
		} else {
			crud = append(crud, ie)
		}
	}
	return ddl, crud
}

// applyInner applies inner operations in ru's open unit, each at the unit's timestamp.
func (a *Applier) applyInner(ctx context.Context, ru *storage.RecoveryUnit, inner []*Entry, mode Mode) error {
	for _, ie := range inner {
		var err error
		switch ie.Op {
		case "n":
			continue
		case "c":
			err = a.applyCommand(ctx, ru, ie, mode)
		default:
			err = a.applyCRUD(ru, ie, mode)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ApplyOpsInUnit applies operations of an applyOps array in ru's open unit, all at ts (0: a
// standalone's untimestamped writes), without logging them (the applyOps command, which
// logs its one entry itself).
func (a *Applier) ApplyOpsInUnit(ctx context.Context, ru *storage.RecoveryUnit, ops []bsoncore.Document, ts optime.Timestamp, mode Mode) error {
	if !ru.InUnitOfWork() {
		return storage.ErrNotInUnit
	}
	inner, err := innerEntries(ops, optime.OpTime{TS: ts, Term: optime.UninitializedTerm}, 0, nil)
	if err != nil {
		return err
	}
	release := opobserver.UnreplicatedWrites(ru)
	defer release()
	if ts != 0 {
		if err := ru.SetTimestamp(ts); err != nil {
			return err
		}
	}
	return a.applyInner(ctx, ru, inner, mode)
}

// chainOpsFrom collects a chain's operations, oldest entry first, by walking prevOpTime back
// from the final entry e (whose own operations come last), and returns where each was
// logged (its entry and index there) and the OpTime of the chain's first entry too.
func (a *Applier) chainOpsFrom(ru *storage.RecoveryUnit, e *Entry, info *applyOpsEntry, prevs PrevEntries) ([]bsoncore.Document, []opPos, optime.OpTime, error) {
	parts := [][]bsoncore.Document{info.ops}
	partTS := []optime.Timestamp{e.OpTime.TS}
	start := e.OpTime
	total := len(info.ops)
	for p, below := info.prev, e.OpTime.TS; !p.IsNull(); {
		if p.TS >= below {
			return nil, nil, optime.OpTime{}, mongoerr.Newf(mongoerr.BadValue, "transaction entry at %v: prevOpTime %v does not go back in time", e.OpTime, p)
		}
		raw, err := a.findEntry(ru, p.TS, prevs)
		if err != nil {
			return nil, nil, optime.OpTime{}, err
		}
		if raw == nil {
			return nil, nil, optime.OpTime{}, mongoerr.Newf(mongoerr.NoSuchKey,
				"applying the transaction committed at %v: its entry at %v is not in the oplog", e.OpTime, p)
		}
		pe, err := ParseEntry(raw)
		if err != nil {
			return nil, nil, optime.OpTime{}, err
		}
		if !IsPartialTxn(pe) {
			return nil, nil, optime.OpTime{}, mongoerr.Newf(mongoerr.BadValue,
				"applying the transaction committed at %v: the entry at %v is not a partialTxn applyOps entry", e.OpTime, p)
		}
		pinfo, err := parseApplyOps(pe)
		if err != nil {
			return nil, nil, optime.OpTime{}, err
		}
		if info.hasTxn && (!pinfo.hasTxn || pinfo.txn != info.txn || string(pinfo.lsid) != string(info.lsid)) {
			return nil, nil, optime.OpTime{}, mongoerr.Newf(mongoerr.BadValue,
				"applying the transaction committed at %v: the entry at %v belongs to another transaction", e.OpTime, p)
		}
		parts = append(parts, pinfo.ops)
		partTS = append(partTS, p.TS)
		total += len(pinfo.ops)
		start = p
		p, below = pinfo.prev, p.TS
	}
	if info.hasCount && info.count != int64(total) {
		return nil, nil, optime.OpTime{}, mongoerr.Newf(mongoerr.BadValue,
			"applying the transaction committed at %v: count is %d but its chain holds %d operations", e.OpTime, info.count, total)
	}
	ops := make([]bsoncore.Document, 0, total)
	pos := make([]opPos, 0, total)
	for i, part := range slices.Backward(parts) {
		ops = append(ops, part...)
		for j := range part {
			pos = append(pos, opPos{ts: partTS[i], index: int64(j)})
		}
	}
	return ops, pos, start, nil
}

// findEntry returns the entry at ts: from prevs, else from our oplog (a point read, which
// oplog visibility does not hide), nil when neither has it.
func (a *Applier) findEntry(ru *storage.RecoveryUnit, ts optime.Timestamp, prevs PrevEntries) (bsoncore.Document, error) {
	if prevs != nil {
		if raw, ok := prevs(ts); ok {
			return raw, nil
		}
	}
	meta, ok := a.cat.Latest().ByNS(NS)
	if !ok {
		return nil, nil
	}
	raw, found, err := ru.Get(meta.Ident, recordid.Long(int64(ts)).Key())
	if err != nil || !found {
		return nil, err
	}
	return raw, nil
}

// SharesBatch reports whether a `c` entry may share a secondary's batch with other entries:
// an applyOps entry whose operations are all CRUD (or no-ops) and that is not prepared. The
// batch applier applies it alone anyway, in oplog order between the CRUD entries around it
// and in one unit of its own, and readers see only whole batches (lastApplied), so sharing
// a batch changes nothing they can observe; it saves a batch's fixed costs (truncate point,
// oplog write, session records) per transaction. Other commands are batches of their own.
func SharesBatch(raw bsoncore.Document) bool {
	o, ok := raw.Lookup("o").DocumentOK()
	if !ok {
		return false
	}
	if name, _ := firstKey(o); name != "applyOps" {
		return false
	}
	if b, _ := o.Lookup("prepare").BooleanOK(); b {
		return false
	}
	arr, ok := o.Lookup("applyOps").ArrayOK()
	if !ok {
		return false
	}
	vals, err := arr.Values()
	if err != nil {
		return false
	}
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return false
		}
		switch op, _ := d.Lookup("op").StringValueOK(); op {
		case "i", "u", "d", "n":
		default:
			return false
		}
	}
	return true
}
