package commands

// Retryable writes (spec: replication.md; MongoDB's retryable writes design): a write command
// carrying lsid + txnNumber outside a transaction checks its session out of the session
// catalog (internal/txn/session), and each statement (statement id = its index in the batch,
// 0 for findAndModify) either
//
//   - already ran in this txnNumber: it is not executed again and its reply is rebuilt from
//     the oplog entry it wrote (and, for findAndModify, the image in config.image_collection), or
//   - runs with the session attached to its RecoveryUnit (opobserver.WithSession), so its oplog
//     entries carry lsid/txnNumber/stmtId/prevOpTime, and the same WriteUnitOfWork upserts the
//     session's config.transactions document {_id: lsid, txnNum, lastWriteOpTime, lastWriteDate}.
//
// As in MongoDB, the config.transactions upsert is not logged (an unreplicated write at the
// statement's last entry's timestamp): every member applying the oplog derives the record
// from the entries' lsid/txnNumber (internal/repl/oplog/sessions.go), so a retryable write
// costs one oplog entry, not two, and a new primary after a failover still rebuilds the
// session from its own config.transactions. The findAndModify images in
// config.image_collection are still replicated as entries of their own (MongoDB 5.1+ marks
// the statement's entry with needsRetryImage and lets secondaries write the image).
// Statements that wrote nothing (no match) are not recorded and simply run again on retry,
// as in MongoDB.

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/opobserver"
	"humongo/internal/recordid"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
	"humongo/internal/txn/lsc"
	"humongo/internal/txn/session"
)

const (
	retryTxnsNS   = oplog.TransactionsNS
	retryImagesNS = "config.image_collection"
	retryOplogNS  = "local.oplog.rs"
)

// retryCatalogs is each node's session catalog, kept on its DB (tests run several nodes in
// one process; they share no session).
var retryCatalogs = operation.NewDecoration(func(db *operation.DB) *session.Catalog {
	return session.New(retryStore{db}, 0)
})

// RetrySessions returns db's session catalog.
func RetrySessions(db *operation.DB) *session.Catalog { return retryCatalogs.Get(db) }

// retryCtx is one retryable write command's checked-out session; nil when the command is
// not a retryable write. Its methods accept a nil receiver.
type retryCtx struct {
	db   *operation.DB
	cat  *session.Catalog
	s    *session.Session
	lsid bsoncore.Document // canonical {id, uid}: the config.transactions _id
	txn  int64
}

// retryBegin validates the command's session arguments and, for a retryable write, checks
// the session out (the caller defers end). Outside a session or inside a multi-document
// transaction it returns nil.
func retryBegin(ctx context.Context, env *Env, cmd bsoncore.Document) (*retryCtx, error) {
	tv := lookup(cmd, "txnNumber")
	if tv.Type == 0 {
		return nil, nil
	}
	lv := lookup(cmd, "lsid")
	if lv.Type == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Transaction number requires a session ID to also be specified")
	}
	if env.State == nil || env.State.Repl == nil {
		return nil, mongoerr.New(mongoerr.IllegalOperation,
			"Transaction numbers are only allowed on a replica set member or mongos")
	}
	if tv.Type != bsoncore.TypeInt64 {
		return nil, typeMismatch("OperationSessionInfo", "txnNumber", tv.Type, "long")
	}
	txn := tv.Int64()
	if txn < 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Transaction number cannot be negative")
	}
	if lookup(cmd, "autocommit").Type != 0 || lookup(cmd, "startTransaction").Type != 0 {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "multi-document transactions are not supported yet")
	}
	key, err := ParseLsid(lv)
	if err != nil {
		return nil, err
	}
	db, err := writeRequireDB(env)
	if err != nil {
		return nil, err
	}
	// The collections the writes record into exist before any statement's unit starts.
	op := db.NewOp(ctx)
	for _, ns := range []string{retryTxnsNS, retryImagesNS} {
		if err := op.EnsureCollection(ctx, ns, nil); err != nil {
			op.Close()
			return nil, err
		}
	}
	op.Close()
	cat := RetrySessions(db)
	s, err := cat.CheckOut(ctx, key)
	if err != nil {
		return nil, err
	}
	rc := &retryCtx{db: db, cat: cat, s: s, lsid: retryLsidDoc(key), txn: txn}
	if err := cat.Refresh(ctx, s, rc.lsid, env.State.Repl.Term()); err != nil {
		rc.end()
		return nil, err
	}
	if err := s.Begin(txn, fmt.Sprintf("%x", key.ID[:])); err != nil {
		rc.end()
		return nil, err
	}
	return rc, nil
}

// retryLsidDoc is the canonical lsid {id: UUID, uid: BinData(0, sha256)}.
func retryLsidDoc(k lsc.Key) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendBinary("id", 4, k.ID[:]).AppendBinary("uid", 0, k.UID[:]).Build()
}

// end checks the session back in.
func (rc *retryCtx) end() {
	if rc != nil {
		rc.cat.CheckIn(rc.s)
	}
}

// executed reports whether statement i already ran (IncompleteTransactionHistory when that
// cannot be known).
func (rc *retryCtx) executed(i int) (bool, error) {
	if rc == nil {
		return false, nil
	}
	_, ok, err := rc.s.Executed(int32(i))
	return ok, err
}

// stmt returns the retry context of statement i; nil (not retryable) when rc is nil or the
// statement is a multi-document write, which MongoDB does not make retryable.
func (rc *retryCtx) stmt(i int, multi bool) *retryStmt {
	if rc == nil || multi {
		return nil
	}
	return &retryStmt{rc: rc, id: int32(i)}
}

// retryStmt is one statement of a retryable write.
type retryStmt struct {
	rc *retryCtx
	id int32
	// imageKind is findAndModify's stored image: "preImage" or "postImage" ("" for others).
	imageKind string
	// sess is the session info attached to the current unit attempt.
	sess *opobserver.SessionInfo
}

// wrap returns f made to record the statement: the session is attached to op's unit while f
// runs, and if f wrote oplog entries the same unit upserts config.transactions (and the
// findAndModify image returned by images). With a nil s it returns f.
func (s *retryStmt) wrap(op *operation.Context, f func(*index.Collection) error, images func() (pre, post bsoncore.Document)) func(*index.Collection) error {
	if s == nil {
		return f
	}
	return func(coll *index.Collection) error {
		last := s.rc.s.LastWrite()
		// A fresh SessionInfo per attempt: the oplog writer advances it as it logs, and a
		// WriteConflict re-runs the whole unit.
		s.sess = &opobserver.SessionInfo{LSID: s.rc.lsid, TxnNumber: s.rc.txn, StmtID: s.id,
			PrevTS: last.TS, PrevTerm: last.Term}
		release := opobserver.WithSession(op.RU, s.sess)
		err := f(coll)
		release()
		if err != nil {
			return err
		}
		var pre, post bsoncore.Document
		if images != nil {
			pre, post = images()
		}
		return s.record(op, pre, post)
	}
}

// record writes the session's config.transactions document (and image) in op's unit when
// the statement logged entries, and notes the statements as executed when the unit commits.
func (s *retryStmt) record(op *operation.Context, pre, post bsoncore.Document) error {
	n := int(s.sess.StmtID - s.id)
	if n <= 0 {
		return nil // nothing written: nothing to remember
	}
	last := session.OpTime{TS: s.sess.PrevTS, Term: s.sess.PrevTerm}
	// The bookkeeping writes are not statements of the session themselves.
	release := opobserver.WithSession(op.RU, nil)
	defer release()
	rec := oplog.SessionRecord(s.rc.lsid, s.rc.txn, oplog.OpTime{TS: last.TS, Term: last.Term}, retryEntryWall(op, last.TS))
	// Unlogged: members applying the oplog derive the record from the entries (see above).
	unlogged := opobserver.UnreplicatedWrites(op.RU)
	err := retryUpsert(op, retryTxnsNS, rec)
	unlogged()
	if err != nil {
		return err
	}
	var image bsoncore.Document
	switch s.imageKind {
	case "preImage":
		image = pre
	case "postImage":
		image = post
	}
	if image != nil {
		img := bsoncore.NewDocumentBuilder().
			AppendDocument("_id", s.rc.lsid).
			AppendInt64("txnNum", s.rc.txn).
			AppendTimestamp("ts", last.TS.Secs(), last.TS.Inc()).
			AppendString("imageKind", s.imageKind).
			AppendDocument("image", image).Build()
		if err := retryUpsert(op, retryImagesNS, img); err != nil {
			return err
		}
	}
	// Vectored inserts log n entries; only the last OpTime is known here. Retried inserts
	// need only the fact that they ran, and a reload from the oplog has exact OpTimes.
	ots := make([]session.OpTime, n)
	for i := range ots {
		ots[i] = last
	}
	sess, txn, first := s.rc.s, s.rc.txn, s.id
	op.RU.OnCommit(func(storage.Timestamp) { sess.NoteCommitted(txn, first, ots) })
	return nil
}

// retryEntryWall returns the wall clock (ms) of the oplog entry at ts that op's unit just
// wrote: the session record's lastWriteDate, which members applying the oplog take from the
// same entry, so every member holds the same record.
func retryEntryWall(op *operation.Context, ts storage.Timestamp) int64 {
	if coll, err := retryColl(op.DB, retryOplogNS); err == nil {
		if d, found, err := coll.RecordStore().Get(op.RU, recordid.Long(int64(ts))); err == nil && found {
			if wall, ok := bsoncore.Document(d).Lookup("wall").DateTimeOK(); ok {
				return wall
			}
		}
	}
	return time.Now().UnixMilli()
}

// retryUpsert replaces or inserts doc (by its _id) in ns inside op's unit. The session
// checkout serializes writers of one lsid; the collection is internal, so no collection
// lock is taken beyond the statement's own.
func retryUpsert(op *operation.Context, ns string, doc bsoncore.Document) error {
	coll, err := retryColl(op.DB, ns)
	if err != nil {
		return err
	}
	id := doc.Lookup("_id")
	rid, old, found, err := coll.FindByID(op.RU, id)
	if err != nil {
		return err
	}
	if found {
		return coll.UpdateDocument(op.RU, rid, append(bsoncore.Document(nil), old...), doc)
	}
	_, err = coll.InsertDocument(op.RU, doc)
	return err
}

func retryColl(db *operation.DB, ns string) (*index.Collection, error) {
	meta, ok := db.Catalog.Latest().ByNS(ns)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "%s does not exist", ns)
	}
	return db.Colls.ByUUID(meta.UUID)
}

// retryEntry returns the oplog entry statement s wrote, or nil when s has not run.
func (s *retryStmt) entry(ctx context.Context) (bsoncore.Document, error) {
	if s == nil {
		return nil, nil
	}
	ot, ok, err := s.rc.s.Executed(s.id)
	if err != nil || !ok {
		return nil, err
	}
	e, err := retryStore{}.oplogEntry(ctx, s.rc.db, ot.TS)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, mongoerr.Newf(mongoerr.IncompleteTransactionHistory,
			"Incomplete history detected for transaction %d: oplog entry of statement %d is gone", s.rc.txn, s.id)
	}
	return e, nil
}

// replayUpdate rebuilds the result of an update statement that already ran: an insert
// entry is an upsert, an update entry one modified document.
func (s *retryStmt) replayUpdate(ctx context.Context) (writeUpdateResult, bool, error) {
	e, err := s.entry(ctx)
	if err != nil || e == nil {
		return writeUpdateResult{}, false, err
	}
	res := writeUpdateResult{n: 1}
	switch lookup(e, "op").StringValue() {
	case "i":
		o, _ := lookup(e, "o").DocumentOK()
		res.upserted = lookup(o, "_id")
	case "u":
		res.nModified = 1
	default:
		return res, false, retryMismatch(s, "update")
	}
	return res, true, nil
}

// replayDelete rebuilds a delete statement that already ran: one document deleted.
func (s *retryStmt) replayDelete(ctx context.Context) (writeDeleteResult, bool, error) {
	e, err := s.entry(ctx)
	if err != nil || e == nil {
		return writeDeleteResult{}, false, err
	}
	if lookup(e, "op").StringValue() != "d" {
		return writeDeleteResult{}, false, retryMismatch(s, "delete")
	}
	return writeDeleteResult{n: 1}, true, nil
}

// retryFamResult is a findAndModify reply rebuilt for a retry.
type retryFamResult struct {
	n        int
	value    bsoncore.Document
	existed  bool
	upserted bsoncore.Value
}

// replayFam rebuilds a findAndModify that already ran from its oplog entry and, for an
// update or removal, the image stored with it (the value the first execution returned).
func (s *retryStmt) replayFam(ctx context.Context, remove, returnNew bool) (*retryFamResult, error) {
	e, err := s.entry(ctx)
	if err != nil || e == nil {
		return nil, err
	}
	op := lookup(e, "op").StringValue()
	switch {
	case op == "i" && !remove:
		o, _ := lookup(e, "o").DocumentOK()
		r := &retryFamResult{n: 1, upserted: lookup(o, "_id")}
		if returnNew {
			r.value = o
		}
		return r, nil
	case (op == "d" && remove) || (op == "u" && !remove):
	default:
		return nil, retryMismatch(s, "findAndModify")
	}
	secs, inc, _ := lookup(e, "ts").TimestampOK()
	img, err := retryStore{s.rc.db}.image(ctx, s.rc.lsid)
	if err != nil {
		return nil, err
	}
	if img == nil || lookup(img, "txnNum").Int64() != s.rc.txn {
		return nil, mongoerr.Newf(mongoerr.IncompleteTransactionHistory,
			"Incomplete history detected for transaction %d: no image for findAndModify statement %d", s.rc.txn, s.id)
	}
	if is, ii, _ := lookup(img, "ts").TimestampOK(); is != secs || ii != inc {
		return nil, mongoerr.Newf(mongoerr.IncompleteTransactionHistory,
			"Incomplete history detected for transaction %d: image does not belong to statement %d", s.rc.txn, s.id)
	}
	if lookup(img, "imageKind").StringValue() != s.imageKind {
		return nil, retryMismatch(s, "findAndModify")
	}
	value, _ := lookup(img, "image").DocumentOK()
	return &retryFamResult{n: 1, value: value, existed: !remove}, nil
}

func retryMismatch(s *retryStmt, what string) error {
	// MongoDB's codes: 40606 for findAndModify, 40670 for the other write commands.
	code := mongoerr.Location40670
	if what == "findAndModify" {
		code = mongoerr.Location40606
	}
	return mongoerr.Newf(code, "%s retry request is not compatible with previous write in the transaction (statement %d of txnNumber %d)",
		what, s.id, s.rc.txn)
}

// retryFamImageKind is the image a findAndModify stores for its retries.
func retryFamImageKind(remove, returnNew bool) string {
	if returnNew && !remove {
		return "postImage"
	}
	return "preImage"
}

// retryStore reads session state from storage: session.Store for the catalog.
type retryStore struct{ db *operation.DB }

var _ session.Store = retryStore{}

// LoadRecord returns the session's config.transactions document.
func (r retryStore) LoadRecord(ctx context.Context, lsid bsoncore.Document) (bsoncore.Document, error) {
	return r.byID(ctx, retryTxnsNS, lsid)
}

func (r retryStore) image(ctx context.Context, lsid bsoncore.Document) (bsoncore.Document, error) {
	return r.byID(ctx, retryImagesNS, lsid)
}

func (r retryStore) byID(ctx context.Context, ns string, lsid bsoncore.Document) (bsoncore.Document, error) {
	op := r.db.NewOp(ctx)
	defer op.Close()
	_, coll, release, err := op.ReadCollection(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer release()
	if coll == nil {
		return nil, nil
	}
	_, d, found, err := coll.FindByID(op.RU, bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: lsid})
	if err != nil || !found {
		return nil, err
	}
	return append(bsoncore.Document(nil), d...), nil
}

// OplogEntry returns the oplog entry at ts.
func (r retryStore) OplogEntry(ctx context.Context, ts storage.Timestamp) (bsoncore.Document, error) {
	return r.oplogEntry(ctx, r.db, ts)
}

func (retryStore) oplogEntry(ctx context.Context, db *operation.DB, ts storage.Timestamp) (bsoncore.Document, error) {
	op := db.NewOp(ctx)
	defer op.Close()
	meta, coll, release, err := op.ReadCollection(ctx, retryOplogNS)
	if err != nil {
		return nil, err
	}
	defer release()
	if coll == nil || meta == nil {
		return nil, nil
	}
	d, found, err := coll.RecordStore().Get(op.RU, recordid.Long(int64(ts)))
	if err != nil || !found {
		return nil, err
	}
	return append(bsoncore.Document(nil), d...), nil
}
