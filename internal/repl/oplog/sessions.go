package oplog

// Session records of retryable writes on the members that apply the oplog (MongoDB's
// SessionUpdateTracker; spec: replication.md, retryable writes).
//
// A primary writes a session's config.transactions record {_id: lsid, txnNum,
// lastWriteOpTime, lastWriteDate} in the same storage unit as the statement it records,
// but does not log it: the statement's own entries carry lsid, txnNumber and stmtId, which
// is everything the record holds. Members applying the oplog derive the record from those
// entries instead of applying a second entry per write, which halved the entries a
// secondary applies under retryable inserts:
//
//   - batch application (internal/repl/applier, steady state and initial sync) collects,
//     per lsid, the batch's newest entry (SessionTracker) and upserts each session's record
//     once per batch, at that entry's timestamp, after the batch's data writes and before
//     lastApplied moves; reads at lastApplied see records and data together;
//   - single-entry application (Applier.Apply: startup recovery and rollback replay) upserts
//     the record in the entry's own unit.
//
// A transaction's commit (an applyOps entry with lsid and txnNumber: a single entry, or the
// last of a partialTxn chain; txn_apply.go) records the same fields plus state: "committed",
// with lastWriteOpTime the commit entry's optime, as MongoDB's config.transactions does, so a
// member that becomes primary knows the transaction committed. partialTxn entries record
// nothing (the transaction is not committed until its last entry).
//
// An upsert never moves a record backwards (a lower txnNum, or an older lastWriteOpTime for
// the same txnNum): replayed entries and records cloned by initial sync may already be newer.
// A member without config.transactions (no retryable write was ever made on the set; the
// primary creates it, replicated, before the first one) has nothing to update.

import (
	"bytes"
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/storage"
)

// TransactionsNS is the namespace of session records.
const TransactionsNS = "config.transactions"

// SessionRecord builds a config.transactions document: {_id: lsid, txnNum,
// lastWriteOpTime: {ts, t}, lastWriteDate}.
func SessionRecord(lsid bsoncore.Document, txnNum int64, last optime.OpTime, wallMillis int64) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().
		AppendDocument("_id", lsid).
		AppendInt64("txnNum", txnNum).
		AppendDocument("lastWriteOpTime", last.Document()).
		AppendDateTime("lastWriteDate", wallMillis).Build()
}

// SessionMigrateInfo is the only field of the o of a session migration's `n` entry
// ({$sessionMigrateInfo: 1}, MongoDB's SessionCatalogMigration::kSessionOplogTag; o2 holds
// the donor's entry).
const SessionMigrateInfo = "$sessionMigrateInfo"

// TxnCommitted is the state of a committed transaction's record.
const TxnCommitted = "committed"

// TxnSessionRecord builds a transaction's config.transactions document: SessionRecord's
// fields followed by state.
func TxnSessionRecord(lsid bsoncore.Document, txnNum int64, last optime.OpTime, wallMillis int64, state string) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().
		AppendDocument("_id", lsid).
		AppendInt64("txnNum", txnNum).
		AppendDocument("lastWriteOpTime", last.Document()).
		AppendDateTime("lastWriteDate", wallMillis).
		AppendString("state", state).Build()
}

// SessionUpdate is a session's newest write among some entries.
type SessionUpdate struct {
	LSID      bsoncore.Document
	TxnNumber int64
	OpTime    optime.OpTime
	// Wall is the entry's wall clock in milliseconds (the record's lastWriteDate).
	Wall int64
	// State is the transaction state to record ("" for a retryable write's record).
	State string
	// Start is a prepared transaction's first entry (null: OpTime).
	Start optime.OpTime
}

// sessionOf returns the session write an entry records: a CRUD entry with lsid and
// txnNumber (a retryable write's statement), or a transaction's commit entry.
func sessionOf(e *Entry) (SessionUpdate, bool) {
	state := ""
	switch e.Op {
	case "i", "u", "d":
	case "n":
		// A session migration's copy of a donor's statement (o: {$sessionMigrateInfo: 1})
		// records its session on the recipient like the statement did on the donor; other
		// no-ops (a findAndModify image it links to, messages) record nothing.
		if name, _ := firstKey(e.O); name != SessionMigrateInfo {
			return SessionUpdate{}, false
		}
	case "c":
		switch name, _ := firstKey(e.O); {
		case name == "commitTransaction":
			state = TxnCommitted
		case name == "abortTransaction":
			state = TxnAborted
		case !IsApplyOps(e) || IsPartialTxn(e):
			return SessionUpdate{}, false
		default:
			state = TxnCommitted
			if b, _ := e.O.Lookup("prepare").BooleanOK(); b {
				state = TxnPrepared
			}
		}
	default:
		return SessionUpdate{}, false
	}
	lsid, ok := e.Raw.Lookup("lsid").DocumentOK()
	if !ok {
		return SessionUpdate{}, false
	}
	txn, ok := e.Raw.Lookup("txnNumber").AsInt64OK()
	if !ok {
		return SessionUpdate{}, false
	}
	u := SessionUpdate{LSID: lsid, TxnNumber: txn, OpTime: e.OpTime, State: state}
	u.Wall, _ = e.Raw.Lookup("wall").DateTimeOK()
	return u, true
}

// newerThan orders a session's writes: by txnNumber, then by timestamp.
func (u SessionUpdate) newerThan(txn int64, ts optime.Timestamp) bool {
	if u.TxnNumber != txn {
		return u.TxnNumber > txn
	}
	return u.OpTime.TS > ts
}

// SessionTracker collects the newest write per session from a batch of entries.
type SessionTracker struct {
	idx     map[string]int // lsid bytes -> index in updates
	updates []SessionUpdate
}

// Note records e if it is a retryable write's statement.
func (t *SessionTracker) Note(e *Entry) {
	u, ok := sessionOf(e)
	if !ok {
		return
	}
	if t.idx == nil {
		t.idx = make(map[string]int)
	}
	if i, seen := t.idx[string(u.LSID)]; seen {
		if u.newerThan(t.updates[i].TxnNumber, t.updates[i].OpTime.TS) {
			t.updates[i] = u
		}
		return
	}
	t.idx[string(u.LSID)] = len(t.updates)
	t.updates = append(t.updates, u)
}

// Updates returns one update per session noted, in the order sessions were first seen.
func (t *SessionTracker) Updates() []SessionUpdate { return t.updates }

// ApplySessionUpdates upserts the session records of updates, each at its entry's
// timestamp, in one unit of ru (retrying WriteConflicts when ru is not in a unit already).
func (a *Applier) ApplySessionUpdates(ctx context.Context, ru *storage.RecoveryUnit, updates []SessionUpdate) error {
	if len(updates) == 0 {
		return nil
	}
	coll, err := a.sessionsColl()
	if err != nil || coll == nil {
		return err
	}
	// Applied writes log nothing (the record is derived on every member).
	release := opobserver.UnreplicatedWrites(ru)
	defer release()
	once := func() error {
		w := ru.BeginUnitOfWork()
		defer w.End()
		for _, u := range updates {
			if err := ru.SetTimestamp(u.OpTime.TS); err != nil {
				return err
			}
			if err := upsertSession(ru, coll, u); err != nil {
				return err
			}
		}
		return w.Commit()
	}
	if ru.InUnitOfWork() {
		return once()
	}
	return storage.WriteConflictRetry(ctx, "applySessionUpdates", func() error {
		defer ru.AbandonSnapshot()
		return once()
	})
}

// sessionsColl returns config.transactions, nil when it does not exist.
func (a *Applier) sessionsColl() (*index.Collection, error) {
	meta, ok := a.cat.Latest().ByNS(TransactionsNS)
	if !ok {
		return nil, nil
	}
	return a.colls.ByUUID(meta.UUID)
}

// applyEntrySession upserts the session record of a single applied entry in ru's unit, at
// the unit's current timestamp (the entry's); Apply has marked ru's writes unreplicated.
func (a *Applier) applyEntrySession(ru *storage.RecoveryUnit, e *Entry) error {
	u, ok := sessionOf(e)
	if !ok {
		return nil
	}
	coll, err := a.sessionsColl()
	if err != nil || coll == nil {
		return err
	}
	return upsertSession(ru, coll, u)
}

// upsertSession writes u's record unless the stored one is as new or newer.
func upsertSession(ru *storage.RecoveryUnit, coll *index.Collection, u SessionUpdate) error {
	rec := SessionRecord(u.LSID, u.TxnNumber, u.OpTime, u.Wall)
	switch u.State {
	case "":
	case TxnPrepared:
		start := u.Start
		if start.IsNull() {
			start = u.OpTime
		}
		rec = PreparedSessionRecord(u.LSID, u.TxnNumber, u.OpTime, start, u.Wall)
	default:
		rec = TxnSessionRecord(u.LSID, u.TxnNumber, u.OpTime, u.Wall, u.State)
	}
	rid, cur, found, err := coll.FindByID(ru, bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: u.LSID})
	if err != nil {
		return err
	}
	if !found {
		_, err := coll.InsertDocument(ru, rec)
		return err
	}
	txn, _ := cur.Lookup("txnNum").AsInt64OK()
	var ts optime.Timestamp
	if ot, ok := cur.Lookup("lastWriteOpTime").DocumentOK(); ok {
		s, i, _ := ot.Lookup("ts").TimestampOK()
		ts = optime.MakeTimestamp(s, i)
	}
	if !u.newerThan(txn, ts) || bytes.Equal(cur, rec) {
		return nil
	}
	return coll.UpdateDocument(ru, rid, append(bsoncore.Document(nil), cur...), rec)
}
