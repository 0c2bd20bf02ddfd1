package retryable

// Session migration's entries (MongoDB's SessionCatalogMigrationSource and
// SessionCatalogMigrationDestination, the part that reads and writes sessions; the transport
// is internal/sharding/migration).
//
// A donor sends, for each statement of a retryable write in the migrated range, the oplog
// entry it wrote; for a findAndModify it first sends the image as a forged `n` entry
// {o: <image>, no o2} and marks the statement's entry needsRetryImage: "preImage" or
// "postImage". History it no longer has is a dead-end sentinel {op: "n", o: {},
// o2: {$incompleteOplogHistory: 1}, stmtId: -1}.
//
// The recipient writes each statement as an `n` entry {o: {$sessionMigrateInfo: 1},
// o2: <the donor's entry>, fromMigrate: true} carrying lsid, txnNumber, stmtId and a
// prevOpTime that chains it to the session's writes on this node, plus preImageOpTime or
// postImageOpTime pointing to the image it wrote just before (MongoDB's classic image
// format), and updates config.transactions in the same unit. A retry then finds the
// statement executed (Refresh walks the chain as for any retryable write) and rebuilds its
// reply from the entry's o2 and, for findAndModify, the linked image (Stmt.Entry and
// Stmt.Image unwrap both).

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
	"humongo/internal/txn/lsc"
	"humongo/internal/txn/session"
)

var (
	// sessionOplogTag is a migrated statement's o (SessionCatalogMigration::kSessionOplogTag).
	sessionOplogTag = bsoncore.NewDocumentBuilder().AppendInt32(oplog.SessionMigrateInfo, 1).Build()
	// deadEndSentinel is a dead-end sentinel's o2 (TransactionParticipant::kDeadEndSentinel).
	deadEndSentinel = bsoncore.NewDocumentBuilder().AppendInt32("$incompleteOplogHistory", 1).Build()
)

// Fields of a statement's entry naming its findAndModify image.
const (
	needsRetryImageField = "needsRetryImage"
	preImageOpTimeField  = "preImageOpTime"
	postImageOpTimeField = "postImageOpTime"
)

// Original returns the statement entry a migrated entry (an `n` entry tagged
// {$sessionMigrateInfo: 1}) carries in o2, and e itself otherwise.
func Original(e bsoncore.Document) bsoncore.Document {
	if op, _ := e.Lookup("op").StringValueOK(); op != "n" {
		return e
	}
	o, _ := e.Lookup("o").DocumentOK()
	if k, _ := firstKey(o); k != oplog.SessionMigrateInfo {
		return e
	}
	if o2, ok := e.Lookup("o2").DocumentOK(); ok && !emptyDoc(o2) {
		return o2
	}
	return e
}

func firstKey(d bsoncore.Document) (string, bool) {
	els, err := d.Elements()
	if err != nil || len(els) == 0 {
		return "", false
	}
	return els[0].Key(), true
}

func emptyDoc(d bsoncore.Document) bool { _, ok := firstKey(d); return !ok }

// SentinelEntry is the dead-end sentinel a donor sends for a session whose history it cannot
// give (its chain was truncated, or it is a multi-document transaction's): a retry on the
// recipient of any statement of txn fails with IncompleteTransactionHistory.
func SentinelEntry(lsid bsoncore.Document, txn int64, wallMillis int64) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().
		AppendDocument("lsid", lsid).AppendInt64("txnNumber", txn).
		AppendString("op", "n").AppendString("ns", "").
		AppendDocument("o", bsoncore.NewDocumentBuilder().Build()).AppendDocument("o2", deadEndSentinel).
		AppendInt32("stmtId", session.IncompleteHistoryStmtID).
		AppendTimestamp("ts", 0, 0).AppendInt64("t", -1).AppendInt64("v", 2).
		AppendDateTime("wall", wallMillis).Build()
}

// IsSentinel reports whether e is a dead-end sentinel (as sent, or as a recipient wrote it).
func IsSentinel(e bsoncore.Document) bool {
	sid, ok := e.Lookup("stmtId").AsInt32OK()
	return ok && sid == session.IncompleteHistoryStmtID
}

// ReadOplogEntry returns db's oplog entry at ts (nil when the oplog no longer holds it).
func ReadOplogEntry(ctx context.Context, db *operation.DB, ts optime.Timestamp) (bsoncore.Document, error) {
	return oplogEntry(ctx, db, ts)
}

// ImageForMigration returns what a donor sends before statement entry e (from its oplog):
// the findAndModify image as an `n` entry, and e as it is to be sent (marked
// needsRetryImage when the image comes from config.image_collection). image is nil when e
// has none; as in MongoDB, an image that no longer matches the entry (a later findAndModify
// of the session replaced it) is not sent, and a retry on the recipient then fails rather
// than answering another statement's document.
func ImageForMigration(ctx context.Context, db *operation.DB, e bsoncore.Document) (image, entry bsoncore.Document, err error) {
	// An entry this node received by migration links the image entry it wrote.
	for _, f := range []string{preImageOpTimeField, postImageOpTimeField} {
		if ot, ok := optime.Lookup(e, f); ok {
			img, err := oplogEntry(ctx, db, ot.TS)
			if err != nil || img == nil {
				return nil, e, err
			}
			return img, e, nil
		}
	}
	op, _ := e.Lookup("op").StringValueOK()
	if op != "u" && op != "d" {
		return nil, e, nil // inserts (and upserts) need no image
	}
	lsid, ok := e.Lookup("lsid").DocumentOK()
	if !ok {
		return nil, e, nil
	}
	txn, _ := e.Lookup("txnNumber").AsInt64OK()
	img, err := store{db}.image(ctx, lsid)
	if err != nil || img == nil {
		return nil, e, err
	}
	secs, inc, _ := e.Lookup("ts").TimestampOK()
	is, ii, _ := img.Lookup("ts").TimestampOK()
	if itxn, _ := img.Lookup("txnNum").AsInt64OK(); itxn != txn || is != secs || ii != inc {
		return nil, e, nil
	}
	kind, _ := img.Lookup("imageKind").StringValueOK()
	value, _ := img.Lookup("image").DocumentOK()
	b := bsoncore.NewDocumentBuilder().AppendDocument("lsid", lsid).AppendInt64("txnNumber", txn).
		AppendString("op", "n")
	if v, err := e.LookupErr("ns"); err == nil {
		b.AppendValue("ns", v)
	}
	if v, err := e.LookupErr("ui"); err == nil {
		b.AppendValue("ui", v)
	}
	b.AppendDocument("o", value)
	if v, err := e.LookupErr("stmtId"); err == nil {
		b.AppendValue("stmtId", v)
	}
	b.AppendTimestamp("ts", 0, 0).AppendInt64("t", -1).AppendInt64("v", 2)
	if v, err := e.LookupErr("wall"); err == nil {
		b.AppendValue("wall", v)
	}
	image = b.Build()
	// The entry marked as MongoDB 5.1+ marks it: the recipient links the image it writes.
	elems, _ := e.Elements()
	eb := bsoncore.NewDocumentBuilder()
	for _, el := range elems {
		if el.Key() != needsRetryImageField {
			eb.AppendValue(el.Key(), el.Value())
		}
	}
	eb.AppendString(needsRetryImageField, kind)
	return image, eb.Build(), nil
}

// MigratedResult is what the recipient wrote for the last entry it applied (MongoDB's
// ProcessOplogResult): an image entry must be followed by its statement's entry, which
// links it.
type MigratedResult struct {
	LSID    bsoncore.Document
	Txn     int64
	OpTime  optime.OpTime // null when nothing was written
	IsImage bool
}

// migratedNoopLogger is the oplog writer's method for session migration entries.
type migratedNoopLogger interface {
	LogMigratedNoop(ru *storage.RecoveryUnit, ns string, ui *catalog.UUID, o, o2 bsoncore.Document, extra []byte) (optime.OpTime, error)
}

// ApplyMigrated writes one entry received from a donor's _getNextSessionMods (MongoDB's
// _processSessionOplog): unless the session already knows the statement (or has moved to a
// newer txnNumber), an `n` entry carrying the session and the original, and the session's
// config.transactions record, in one unit. last is the previous call's result; the new one
// is returned (last itself when nothing was written).
func ApplyMigrated(ctx context.Context, db *operation.DB, term func() int64, raw bsoncore.Document, last MigratedResult) (MigratedResult, error) {
	tsDesc := func() string {
		s, i, _ := raw.Lookup("ts").TimestampOK()
		return fmt.Sprintf("Timestamp(%d, %d)", s, i)
	}
	lsidDoc, ok := raw.Lookup("lsid").DocumentOK()
	if !ok {
		return last, mongoerr.Newf(mongoerr.UnsupportedFormat, "oplog with opTime %s does not have sessionId: %s", tsDesc(), raw)
	}
	txn, ok := raw.Lookup("txnNumber").Int64OK()
	if !ok {
		return last, mongoerr.Newf(mongoerr.UnsupportedFormat, "oplog with opTime %s does not have txnNumber: %s", tsDesc(), raw)
	}
	stmt, ok := firstStmtID(raw)
	if !ok {
		return last, mongoerr.Newf(mongoerr.UnsupportedFormat, "oplog with opTime %s does not have stmtId: %s", tsDesc(), raw)
	}
	key, err := keyOf(lsidDoc)
	if err != nil {
		return last, err
	}
	lsid := LsidDoc(key)
	res := MigratedResult{LSID: lsid, Txn: txn}
	op, _ := raw.Lookup("op").StringValueOK()
	o, _ := raw.Lookup("o").DocumentOK()
	o2, hasO2 := raw.Lookup("o2").DocumentOK()
	newO := sessionOplogTag
	if op == "n" {
		// Already a no-op: a statement migrated before (its o2 is the original), a
		// dead-end sentinel, or a findAndModify image (no o2).
		if !hasO2 || emptyDoc(o2) {
			res.IsImage = true
			if last.IsImage {
				return last, mongoerr.Newf(mongoerr.Location40632,
					"Can't handle 2 pre/post image oplog in a row. Prevoius oplog %s, oplog ts: %s: %s", last.OpTime.TS, tsDesc(), raw)
			}
			newO, o2 = o, nil
		}
	} else {
		o2 = raw
	}
	ns, _ := raw.Lookup("ns").StringValueOK()
	var ui *catalog.UUID
	if sub, data, ok := raw.Lookup("ui").BinaryOK(); ok && sub == 4 && len(data) == 16 {
		ui = new(catalog.UUID)
		copy(ui[:], data)
	}
	logger, ok := db.Observer().(migratedNoopLogger)
	if !ok {
		return last, mongoerr.New(mongoerr.IllegalOperation, "session migration needs a replica set member's oplog")
	}
	if err := EnsureCollections(ctx, db); err != nil {
		return last, err
	}
	cat := Sessions(db)
	s, err := cat.CheckOut(ctx, key)
	if err != nil {
		return last, err
	}
	defer cat.CheckIn(s)
	if err := cat.Refresh(ctx, s, lsid, term()); err != nil {
		return last, err
	}
	if txn < s.TxnNumber() {
		return last, nil // the session moved on: older statements cannot be retried
	}
	if txn == s.TxnNumber() {
		if _, done, err := s.Executed(stmt); done || err != nil {
			// Known already (a write made here, or an earlier copy), or the history is
			// incomplete already: nothing to add.
			return last, nil
		}
	}
	// The statement is new here: its entry links the image written just before.
	var extra []byte
	imgField := ""
	if last.IsImage {
		switch {
		case string(last.LSID) != string(lsid):
			return last, mongoerr.Newf(mongoerr.Location40629, "expected oplog with ts: %s: %s to have session: %s", tsDesc(), raw, last.LSID)
		case last.Txn != txn:
			return last, mongoerr.Newf(mongoerr.Location40630, "expected oplog with ts: %s: %s to have txnNumber: %d", tsDesc(), raw, last.Txn)
		}
		kind, _ := raw.Lookup(needsRetryImageField).StringValueOK()
		switch {
		case kind == "preImage" || raw.Lookup(preImageOpTimeField).Type != 0:
			imgField = preImageOpTimeField
		case kind == "postImage" || raw.Lookup(postImageOpTimeField).Type != 0:
			imgField = postImageOpTimeField
		default:
			return last, mongoerr.Newf(mongoerr.Location40631, "expected oplog with opTime: %s: %s to have either preImageOpTime or postImageOpTime", tsDesc(), raw)
		}
		extra = last.OpTime.AppendElement(nil, imgField)
	} else if raw.Lookup(preImageOpTimeField).Type != 0 || raw.Lookup(postImageOpTimeField).Type != 0 {
		return last, mongoerr.Newf(mongoerr.Location40628, "expected oplog with ts: %s to not have preImageOpTime or postImageOpTime", tsDesc())
	}
	if err := s.Begin(txn, fmt.Sprintf("%x", key.ID[:])); err != nil {
		return last, err
	}
	opc := db.NewOp(ctx)
	defer opc.Close()
	err = opc.WriteCollection(ctx, TxnsNS, false, func(*index.Collection) error {
		prev := s.LastWrite()
		info := &opobserver.SessionInfo{LSID: lsid, TxnNumber: txn, StmtID: stmt, PrevTS: prev.TS, PrevTerm: prev.Term}
		release := opobserver.WithSession(opc.RU, info)
		ot, err := logger.LogMigratedNoop(opc.RU, ns, ui, newO, o2, extra)
		release()
		if err != nil {
			return err
		}
		res.OpTime = ot
		if res.IsImage {
			return nil // the statement's entry, next, records the session
		}
		if err := UpsertRecord(opc, oplog.SessionRecord(lsid, txn, ot, entryWall(opc, ot.TS))); err != nil {
			return err
		}
		opc.RU.OnCommit(func(optime.Timestamp) {
			if stmt == session.IncompleteHistoryStmtID {
				s.NoteIncomplete(txn, ot)
			} else {
				s.NoteCommitted(txn, stmt, []optime.OpTime{ot})
			}
		})
		return nil
	})
	if err != nil {
		return last, err
	}
	return res, nil
}

// firstStmtID returns an entry's stmtId (the first of an array).
func firstStmtID(e bsoncore.Document) (int32, bool) {
	v := e.Lookup("stmtId")
	if arr, ok := v.ArrayOK(); ok {
		vals, _ := arr.Values()
		if len(vals) == 0 {
			return 0, false
		}
		v = vals[0]
	}
	return v.AsInt32OK()
}

// keyOf reads a canonical lsid {id: UUID, uid: BinData(32 bytes)}.
func keyOf(lsid bsoncore.Document) (lsc.Key, error) {
	k := lsc.Key{UID: lsc.NoUserUID}
	sub, id, ok := lsid.Lookup("id").BinaryOK()
	if !ok || sub != 4 || len(id) != 16 {
		return k, mongoerr.Newf(mongoerr.UnsupportedFormat, "invalid lsid in a migrated oplog entry: %s", lsid)
	}
	copy(k.ID[:], id)
	if _, uid, ok := lsid.Lookup("uid").BinaryOK(); ok {
		if len(uid) != 32 {
			return k, mongoerr.Newf(mongoerr.UnsupportedFormat, "invalid lsid uid in a migrated oplog entry: %s", lsid)
		}
		copy(k.UID[:], uid)
	}
	return k, nil
}
