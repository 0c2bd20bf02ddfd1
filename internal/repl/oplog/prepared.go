package oplog

// Prepared transactions in the oplog (spec: replication.md "Cross-Shard Transactions and the
// Prepared State", "Lifetime of a Prepared Transaction"; MongoDB's
// OpObserverImpl::onTransactionPrepare, onPreparedTransactionCommit, onTransactionAbort and
// the reconstruction of prepared transactions at startup, rollback and initial sync).
//
// Entries. prepareTransaction logs the transaction's operations as a transaction's commit
// would, except that the last entry carries prepare: true (a chain's last also carries
// count); its timestamp is the prepare timestamp. The decision follows as an entry of its
// own at a new slot, chained to the prepare entry by prevOpTime:
//
//	{lsid, txnNumber, op: "c", ns: "admin.$cmd", o: {applyOps: [...], prepare: true}, ts: P, prevOpTime}
//	{lsid, txnNumber, op: "c", ns: "admin.$cmd", o: {commitTransaction: 1, commitTimestamp: C}, ts: D, prevOpTime: P}
//	{lsid, txnNumber, op: "c", ns: "admin.$cmd", o: {abortTransaction: 1}, ts: D, prevOpTime: P}
//
// with P ≤ C ≤ D. The session's config.transactions record says "prepared" (with the chain's
// startOpTime), then "committed" or "aborted".
//
// Holding. Every member holds each prepared transaction the same way: a storage unit with
// the transaction's writes, prepared at P (storage.RecoveryUnit.Prepare), kept in the node's
// PreparedTxns until the decision. The primary's participant puts the unit it prepared
// there; members applying the oplog build one from the prepare entry. So a member that
// steps up finds the transactions it must be able to commit, and a primary that steps down
// keeps them. A prepared unit lives in memory only: its durability is the prepare entry. After
// startup recovery, rollback (which drops every prepared unit before recovering to the
// stable timestamp) and initial sync, ReconstructPrepared rebuilds the transactions whose
// records still say "prepared" from their entries. A commit entry whose transaction this node
// does not hold (its prepare entry was replayed below the recovery point, or is older than a
// rebuilt unit) rebuilds it from the prepare entry first and commits it at once.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/storage"
)

// Transaction states recorded in config.transactions besides TxnCommitted.
const (
	TxnPrepared = "prepared"
	TxnAborted  = "aborted"
)

// PreparedTxn is one prepared transaction this node holds.
type PreparedTxn struct {
	LSID      bsoncore.Document
	TxnNumber int64
	// Prepare is the prepare entry's OpTime (its timestamp is the prepare timestamp); Start
	// is the first entry of its chain (Prepare for a single entry).
	Prepare, Start optime.OpTime

	set     *PreparedTxns
	locks   *HeldLocks
	ru      *storage.RecoveryUnit
	wuow    *storage.WriteUnitOfWork
	release func()
	done    chan struct{}
	outcome string // TxnCommitted, TxnAborted, or "" when dropped (rollback, shutdown)
}

// Done is closed when the transaction is committed, aborted or dropped.
func (t *PreparedTxn) Done() <-chan struct{} { return t.done }

// Outcome is TxnCommitted or TxnAborted once Done is closed ("" when the node dropped the
// unit without a decision: rollback or shutdown).
func (t *PreparedTxn) Outcome() string {
	select {
	case <-t.done:
		return t.outcome
	default:
		return ""
	}
}

// PreparedTxns holds a node's prepared transactions, by session.
type PreparedTxns struct {
	e     *storage.Engine
	mu    sync.Mutex
	m     map[string]*PreparedTxn // string(lsid) →
	n     atomic.Int64            // len(m), for Len without the mutex
	locks *lock.Manager           // nil: held transactions take no locks (tests of storage paths)
	// deferred holds the locks of transactions prepared while DeferLocks is on, taken
	// by AcquireDeferredLocks (guarded by mu; nil when off).
	deferred []*HeldLocks
	deferOn  bool
}

// SetLocks makes held transactions lock the collections they wrote (intent exclusive, from
// their prepare to their decision), as MongoDB's prepared transactions keep their locks: DDL
// on those collections (drop, rename, index changes) waits for the decision instead of
// pulling the collection from under a transaction that must be able to commit. The locks skip
// the RSTL and the PBWM, so state transitions and batch application never wait for them.
func (p *PreparedTxns) SetLocks(m *lock.Manager) {
	p.mu.Lock()
	p.locks = m
	p.mu.Unlock()
}

// HeldLocks are a prepared transaction's collection locks.
type HeldLocks struct {
	mu       sync.Mutex
	l        *lock.Locker // nil while deferred
	nss      []string
	released bool
}

// Release releases the locks (nil: none).
func (h *HeldLocks) Release() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = true
	if h.l != nil {
		h.l.UnlockAll()
	}
}

// LockNamespaces takes the collection locks a prepared transaction that wrote nss holds
// (nil without a lock manager). While DeferLocks is on it only records them.
func (p *PreparedTxns) LockNamespaces(ctx context.Context, nss []string) (*HeldLocks, error) {
	p.mu.Lock()
	m := p.locks
	if m != nil && len(nss) > 0 && p.deferOn {
		h := &HeldLocks{nss: nss}
		p.deferred = append(p.deferred, h)
		p.mu.Unlock()
		return h, nil
	}
	p.mu.Unlock()
	if m == nil || len(nss) == 0 {
		return nil, nil
	}
	l, err := lockNamespaces(ctx, m, nss)
	if err != nil {
		return nil, err
	}
	return &HeldLocks{l: l, nss: nss}, nil
}

func lockNamespaces(ctx context.Context, m *lock.Manager, nss []string) (*lock.Locker, error) {
	l := m.NewLocker()
	l.SetShouldConflictWithSecondaryBatchApplication(false)
	if _, err := l.GlobalLockWith(ctx, lock.ModeIX, lock.GlobalOptions{SkipRSTL: true}); err != nil {
		l.UnlockAll()
		return nil, err
	}
	if _, err := l.LockCollections(ctx, lock.ModeIX, nss...); err != nil {
		l.UnlockAll()
		return nil, err
	}
	return l, nil
}

// DeferLocks makes transactions prepared from now on record their locks instead of taking
// them, until AcquireDeferredLocks. A rollback holds the global lock in X while its replay
// and the reconstruction prepare transactions again: waiting for their intent locks there
// would wait for the rollback itself.
func (p *PreparedTxns) DeferLocks() {
	p.mu.Lock()
	p.deferOn = true
	p.mu.Unlock()
}

// AcquireDeferredLocks ends DeferLocks and takes the recorded locks of the transactions still
// prepared; call it after the global lock is released.
func (p *PreparedTxns) AcquireDeferredLocks(ctx context.Context) error {
	p.mu.Lock()
	hs, m := p.deferred, p.locks
	p.deferred, p.deferOn = nil, false
	p.mu.Unlock()
	var first error
	for _, h := range hs {
		h.mu.Lock()
		if !h.released && h.l == nil {
			l, err := lockNamespaces(ctx, m, h.nss)
			if err != nil && first == nil {
				first = fmt.Errorf("locking the collections of a prepared transaction: %w", err)
			}
			h.l = l
		}
		h.mu.Unlock()
	}
	return first
}

// OpNamespaces returns the distinct namespaces of a transaction's operations (documents
// with "ns").
func OpNamespaces[D ~[]byte](ops []D) []string {
	var nss []string
	for _, op := range ops {
		ns, _ := bsoncore.Document(op).Lookup("ns").StringValueOK()
		if ns != "" && !slices.Contains(nss, ns) {
			nss = append(nss, ns)
		}
	}
	return nss
}

// preparedSets maps each engine to its node's PreparedTxns (read on every retryable write:
// lock-free).
var preparedSets sync.Map // *storage.Engine → *PreparedTxns

// PreparedOf returns the prepared transactions held on e's node.
func PreparedOf(e *storage.Engine) *PreparedTxns {
	if p, ok := preparedSets.Load(e); ok {
		return p.(*PreparedTxns)
	}
	p, _ := preparedSets.LoadOrStore(e, &PreparedTxns{e: e, m: map[string]*PreparedTxn{}})
	return p.(*PreparedTxns)
}

// Hold makes ru (in its outermost unit of work w, already prepared) a held prepared
// transaction holding locks (LockNamespaces); release runs when it resolves. A transaction
// of the same session held before is dropped (it cannot still be prepared: a session has one
// transaction at a time).
func (p *PreparedTxns) Hold(lsid bsoncore.Document, txnNumber int64, prepare, start optime.OpTime,
	ru *storage.RecoveryUnit, w *storage.WriteUnitOfWork, locks *HeldLocks, release func()) *PreparedTxn {
	t := &PreparedTxn{LSID: lsid, TxnNumber: txnNumber, Prepare: prepare, Start: start,
		set: p, locks: locks, ru: ru, wuow: w, release: release, done: make(chan struct{})}
	p.mu.Lock()
	old := p.m[string(lsid)]
	p.m[string(lsid)] = t
	p.pinLocked()
	p.mu.Unlock()
	if old != nil {
		old.finish("")
	}
	return t
}

// Get returns the prepared transaction held for lsid, nil if none.
func (p *PreparedTxns) Get(lsid bsoncore.Document) *PreparedTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[string(lsid)]
}

// Len is the number of prepared transactions held.
func (p *PreparedTxns) Len() int { return int(p.n.Load()) }

// pinLocked keeps the oplog entries of the held transactions from truncation (spec: the
// prepare entries "cannot fall off the back of the oplog").
func (p *PreparedTxns) pinLocked() {
	p.n.Store(int64(len(p.m)))
	p.e.SetPinnedOplogTimestamp(p.oldestLocked().TS)
}

// OldestStart is the start OpTime of the oldest prepared transaction held (null if none):
// the oplog keeps its entries.
func (p *PreparedTxns) OldestStart() optime.OpTime {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.oldestLocked()
}

func (p *PreparedTxns) oldestLocked() optime.OpTime {
	var oldest optime.OpTime
	for _, t := range p.m {
		if oldest.IsNull() || t.Start.TS < oldest.TS {
			oldest = t.Start
		}
	}
	return oldest
}

// DropAll abandons every held unit without a decision (rollback before recovering to the
// stable timestamp, shutdown): the transactions stay prepared in the oplog and are rebuilt
// by ReconstructPrepared.
func (p *PreparedTxns) DropAll() {
	p.mu.Lock()
	ts := make([]*PreparedTxn, 0, len(p.m))
	for _, t := range p.m {
		ts = append(ts, t)
	}
	p.m = map[string]*PreparedTxn{}
	p.pinLocked()
	p.mu.Unlock()
	for _, t := range ts {
		t.finish("")
	}
}

// Close drops every held unit and forgets e's set (the engine is closing).
func (p *PreparedTxns) Close() {
	p.DropAll()
	preparedSets.CompareAndDelete(p.e, p)
}

// Commit commits the transaction at commitTs (≥ the prepare timestamp); durableTs is its
// commit entry's timestamp. Its writes become visible at exactly commitTs.
func (t *PreparedTxn) Commit(commitTs, durableTs optime.Timestamp) error {
	if commitTs < t.Prepare.TS {
		return mongoerr.New(mongoerr.InvalidOptions, "'commitTimestamp' must be greater than or equal to 'prepareTimestamp'")
	}
	// Rounded up with the prepare timestamp (prepareUnit): below oldest nothing reads.
	commitTs = max(commitTs, t.ru.PrepareTimestamp())
	if err := t.wuow.CommitPrepared(commitTs, durableTs); err != nil {
		return fmt.Errorf("committing the prepared transaction %d at %v: %w", t.TxnNumber, commitTs, err)
	}
	t.finish(TxnCommitted)
	return nil
}

// Abort rolls the transaction back.
func (t *PreparedTxn) Abort() { t.finish(TxnAborted) }

// finish ends the unit (rolling it back unless committed), closes it and forgets t.
func (t *PreparedTxn) finish(outcome string) {
	select {
	case <-t.done:
		return
	default:
	}
	t.wuow.End()
	if t.release != nil {
		t.release()
	}
	t.ru.Close()
	t.locks.Release()
	t.outcome = outcome
	t.set.mu.Lock()
	if t.set.m[string(t.LSID)] == t {
		delete(t.set.m, string(t.LSID))
		t.set.pinLocked()
	}
	t.set.mu.Unlock()
	close(t.done)
}

// checkNotPrepared refuses a logged write (a user's, or the session reaper's) to the
// config.transactions record _id id of a session whose transaction is prepared: the record
// is what makes the transaction survive failover (MongoDB's
// OpObserverImpl "Cannot modify the entry for session").
func (w *Writer) checkNotPrepared(id bsoncore.Value) error {
	held := PreparedOf(w.cfg.Engine)
	if held.Len() == 0 {
		return nil
	}
	lsid, ok := id.DocumentOK()
	if !ok || held.Get(lsid) == nil {
		return nil
	}
	desc := lsid.String()
	if st, b, ok := lsid.Lookup("id").BinaryOK(); ok && st == 4 && len(b) == 16 {
		desc = catalog.UUID(b).String()
	}
	return mongoerr.Newf(mongoerr.PreparedTransactionInProgress,
		"Cannot modify the entry for session %s because it is in the prepared state", desc)
}

// ---- logging (primary) ----

// LogPrepare logs a transaction's prepare in ru's unit (a unit of its own, not the
// transaction's: the prepared unit can take no more writes) and returns the entries'
// OpTimes, the prepare entry last (its timestamp is the prepare timestamp), and their wall
// clock. A transaction with no operations still logs one (empty) prepare entry.
func (w *Writer) LogPrepare(ru *storage.RecoveryUnit, lsid bsoncore.Document, txnNumber int64, ops [][]byte) ([]optime.OpTime, int64, error) {
	for _, op := range ops {
		if o, _ := bsoncore.Document(op).Lookup("op").StringValueOK(); o == "c" {
			return nil, 0, mongoerr.New(mongoerr.OperationNotSupportedInTransaction,
				"Cannot create new collections inside distributed transactions")
		}
	}
	return w.logTxn(ru, lsid, txnNumber, ops, true)
}

// LogPreparedDecision logs the decision of a prepared transaction in ru's unit at a new slot:
// commitTransaction with commitTs, or abortTransaction when commitTs is null. prepare is
// the prepare entry's OpTime (the entry's prevOpTime). The slot is above commitTs (the
// allocator observes it first), so nothing causally after the commit is logged before it.
func (w *Writer) LogPreparedDecision(ru *storage.RecoveryUnit, lsid bsoncore.Document, txnNumber int64,
	prepare optime.OpTime, commitTs optime.Timestamp) (optime.OpTime, int64, error) {
	if !ru.InUnitOfWork() {
		return optime.OpTime{}, 0, storage.ErrNotInUnit
	}
	term, err := w.ownTerm("admin.$cmd", false)
	if err != nil {
		return optime.OpTime{}, 0, err
	}
	w.info.Observe(commitTs)
	ru.OnRollback(w.NotifyVisible)
	var buf [1]optime.OpTime
	slots, err := w.info.ReserveSlots(ru, term, 1, buf[:0])
	if err != nil {
		return optime.OpTime{}, 0, err
	}
	ot := slots[0]
	wall := w.cfg.Now().UnixMilli()
	doc := appendTxnEnvelope(nil, lsid, txnNumber, ot, wall, prepare, func(dst []byte) []byte {
		if commitTs.IsNull() {
			return bsoncore.AppendInt32Element(dst, "abortTransaction", 1)
		}
		dst = bsoncore.AppendInt32Element(dst, "commitTransaction", 1)
		return bsoncore.AppendTimestampElement(dst, "commitTimestamp", commitTs.Secs(), commitTs.Inc())
	})
	if err := w.put(ru, ot.TS, doc); err != nil {
		return optime.OpTime{}, 0, err
	}
	ru.OnCommit(func(optime.Timestamp) {
		w.noteCommitted(ot)
		w.noteOwnCommitted(ot)
		w.NotifyVisible()
	})
	return ot, wall, nil
}

// PreparedSessionRecord is the config.transactions record of a prepared transaction:
// TxnSessionRecord's fields (lastWriteOpTime: the prepare entry) and startOpTime.
func PreparedSessionRecord(lsid bsoncore.Document, txnNum int64, prepare, start optime.OpTime, wallMillis int64) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().
		AppendDocument("_id", lsid).
		AppendInt64("txnNum", txnNum).
		AppendDocument("lastWriteOpTime", prepare.Document()).
		AppendDateTime("lastWriteDate", wallMillis).
		AppendString("state", TxnPrepared).
		AppendDocument("startOpTime", start.Document()).Build()
}

// ---- application (every member) ----

// decisionEntry is a parsed commitTransaction / abortTransaction entry.
type decisionEntry struct {
	lsid     bsoncore.Document
	txn      int64
	prev     optime.OpTime
	commitTs optime.Timestamp // null: abort
}

func parseDecision(e *Entry, commit bool) (*decisionEntry, error) {
	d := &decisionEntry{}
	var ok bool
	if d.lsid, ok = e.Raw.Lookup("lsid").DocumentOK(); !ok {
		return nil, mongoerr.Newf(mongoerr.BadValue, "transaction decision at %v without lsid", e.OpTime)
	}
	if d.txn, ok = e.Raw.Lookup("txnNumber").AsInt64OK(); !ok {
		return nil, mongoerr.Newf(mongoerr.BadValue, "transaction decision at %v without txnNumber", e.OpTime)
	}
	pd, ok := e.Raw.Lookup("prevOpTime").DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.BadValue, "transaction decision at %v without prevOpTime", e.OpTime)
	}
	var err error
	if d.prev, err = parseOpTime(pd); err != nil {
		return nil, err
	}
	if commit {
		s, i, ok := e.O.Lookup("commitTimestamp").TimestampOK()
		if !ok || (s == 0 && i == 0) {
			return nil, mongoerr.Newf(mongoerr.BadValue, "commitTransaction entry at %v without commitTimestamp", e.OpTime)
		}
		d.commitTs = optime.MakeTimestamp(s, i)
	}
	return d, nil
}

// applyPrepare holds the transaction a prepare entry prepares (a member applying the oplog).
func (a *Applier) applyPrepare(ctx context.Context, ru *storage.RecoveryUnit, e *Entry, info *applyOpsEntry, mode Mode, prevs PrevEntries) error {
	if !info.hasTxn || info.lsid == nil {
		return mongoerr.Newf(mongoerr.BadValue, "prepare entry at %v without lsid and txnNumber", e.OpTime)
	}
	t := PreparedOf(a.e).Get(info.lsid)
	if t == nil || t.TxnNumber != info.txn || t.Prepare != e.OpTime {
		var err error
		if t, err = a.prepareUnit(ctx, ru, e, info, mode, prevs); err != nil {
			return err
		}
	}
	// The record is written here even when the batch records sessions (its tracker's
	// later upsert at the same OpTime changes nothing): only this knows the chain's start.
	u, _ := sessionOf(e)
	u.Start = t.Start
	coll, err := a.sessionsColl()
	if err != nil || coll == nil {
		return err
	}
	return a.inUnit(ctx, ru, e.OpTime.TS, func() error { return upsertSession(ru, coll, u) })
}

// prepareUnit builds the prepared unit of the transaction whose prepare entry is e (the
// final entry of its chain) and holds it. ru reads the chain's earlier entries.
func (a *Applier) prepareUnit(ctx context.Context, ru *storage.RecoveryUnit, e *Entry, info *applyOpsEntry, mode Mode, prevs PrevEntries) (*PreparedTxn, error) {
	ops, start := info.ops, e.OpTime
	var pos []opPos
	if !info.prev.IsNull() {
		var err error
		if ops, pos, start, err = a.chainOpsFrom(ru, e, info, prevs); err != nil {
			return nil, err
		}
	}
	inner, err := innerEntries(ops, e.OpTime, wallOf(e.Raw, e.OpTime.TS), pos)
	if err != nil {
		return nil, err
	}
	for _, ie := range inner {
		if ie.Op == "c" {
			return nil, mongoerr.Newf(mongoerr.BadValue, "prepared transaction at %v contains a command", e.OpTime)
		}
	}
	var nss []string
	for _, ie := range inner {
		if !slices.Contains(nss, ie.NS) {
			nss = append(nss, ie.NS)
		}
	}
	locks, err := PreparedOf(a.e).LockNamespaces(ctx, nss)
	if err != nil {
		return nil, err
	}
	var held *PreparedTxn
	err = storage.WriteConflictRetry(ctx, "applyPrepare", func() error {
		pru := a.e.NewRecoveryUnit()
		// Applied writes log nothing; the mark stays until the unit resolves.
		release := opobserver.UnreplicatedWrites(pru)
		_ = pru.SetPrepareConflictBehavior(storage.PrepareConflictIgnoreAllowWrites)
		w := pru.BeginUnitOfWork()
		fail := func(err error) error {
			w.End()
			release()
			pru.Close()
			return err
		}
		if err := a.applyInner(ctx, pru, inner, mode); err != nil {
			return fail(err)
		}
		// A transaction rebuilt long after its prepare (a rollback, a restart) may be
		// older than the history the engine keeps: its storage prepare timestamp is rounded
		// up to the oldest timestamp, as MongoDB's reconstruction has WiredTiger round
		// prepared timestamps up; no reader reads below oldest, so no one can tell.
		ts := max(e.OpTime.TS, a.e.OldestTimestamp())
		if err := pru.Prepare(ts); err != nil {
			return fail(err)
		}
		held = PreparedOf(a.e).Hold(info.lsid, info.txn, e.OpTime, start, pru, w, locks, release)
		return nil
	})
	if err != nil {
		locks.Release()
	}
	return held, err
}

// applyDecision applies a commitTransaction or abortTransaction entry.
func (a *Applier) applyDecision(ctx context.Context, ru *storage.RecoveryUnit, e *Entry, mode Mode, commit bool) error {
	d, err := parseDecision(e, commit)
	if err != nil {
		return err
	}
	held := PreparedOf(a.e)
	t := held.Get(d.lsid)
	if t != nil && (t.TxnNumber != d.txn || t.Prepare != d.prev) {
		t = nil
	}
	if commit && t == nil {
		// Not held: its prepare entry was replayed before our starting point (startup
		// recovery from a stable timestamp above it, a rollback's replay) or was dropped.
		// Rebuild it from the entry and commit it now.
		raw, err := a.findEntry(ru, d.prev.TS, nil)
		if err != nil {
			return err
		}
		if raw == nil {
			if mode.tolerant() {
				return nil
			}
			return mongoerr.Newf(mongoerr.NoSuchKey, "committing the prepared transaction at %v: its prepare entry at %v is not in the oplog", e.OpTime, d.prev)
		}
		pe, err := ParseEntry(raw)
		if err != nil {
			return err
		}
		info, err := parseApplyOps(pe)
		if err != nil {
			return err
		}
		if !info.prepare || info.txn != d.txn || string(info.lsid) != string(d.lsid) {
			return mongoerr.Newf(mongoerr.BadValue, "the entry at %v is not the prepare entry of the transaction committed at %v", d.prev, e.OpTime)
		}
		if t, err = a.prepareUnit(ctx, ru, pe, info, mode, nil); err != nil {
			return err
		}
	}
	if t != nil {
		if commit {
			if err := t.Commit(d.commitTs, e.OpTime.TS); err != nil {
				return err
			}
		} else {
			t.Abort()
		}
	}
	if a.batchSessions {
		return nil
	}
	return a.inUnit(ctx, ru, e.OpTime.TS, func() error { return a.applyEntrySession(ru, e) })
}

// ReconstructPrepared rebuilds the prepared transactions whose config.transactions records
// say "prepared" and that this node does not hold (after startup recovery, rollback and
// initial sync), from their prepare entries in the oplog.
func (a *Applier) ReconstructPrepared(ctx context.Context) (int, error) {
	coll, err := a.sessionsColl()
	if err != nil || coll == nil {
		return 0, err
	}
	ru := a.e.NewRecoveryUnit()
	defer ru.Close()
	var prepared []optime.OpTime
	var lsids []bsoncore.Document
	rc, err := coll.RecordStore().NewCursor(ru, false)
	if err != nil {
		return 0, err
	}
	for _, raw, ok := rc.Next(); ok; _, raw, ok = rc.Next() {
		doc := bsoncore.Document(raw)
		if s, _ := doc.Lookup("state").StringValueOK(); s != TxnPrepared {
			continue
		}
		d, ok := doc.Lookup("lastWriteOpTime").DocumentOK()
		if !ok {
			continue
		}
		ot, err := parseOpTime(d)
		if err != nil {
			rc.Close()
			return 0, err
		}
		id, _ := doc.Lookup("_id").DocumentOK()
		prepared = append(prepared, ot)
		lsids = append(lsids, append(bsoncore.Document(nil), id...))
	}
	err = rc.Err()
	rc.Close()
	if err != nil {
		return 0, err
	}
	ru.AbandonSnapshot()
	n := 0
	for i, ot := range prepared {
		if t := PreparedOf(a.e).Get(lsids[i]); t != nil && t.Prepare == ot {
			continue
		}
		raw, err := a.findEntry(ru, ot.TS, nil)
		if err != nil {
			return n, err
		}
		if raw == nil {
			return n, mongoerr.Newf(mongoerr.NoSuchKey, "reconstructing a prepared transaction: its prepare entry at %v is not in the oplog", ot)
		}
		pe, err := ParseEntry(raw)
		if err != nil {
			return n, err
		}
		info, err := parseApplyOps(pe)
		if err != nil {
			return n, err
		}
		if !info.prepare {
			return n, mongoerr.Newf(mongoerr.BadValue, "reconstructing a prepared transaction: the entry at %v is not a prepare entry", ot)
		}
		if _, err := a.prepareUnit(ctx, ru, pe, info, ModeRecovering, nil); err != nil {
			return n, fmt.Errorf("reconstructing the prepared transaction at %v: %w", ot, err)
		}
		n++
	}
	return n, nil
}
