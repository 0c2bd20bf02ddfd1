// Package retryable owns retryable writes (spec/replication.md; MongoDB's retryable writes
// design) on top of txn/session's session catalog: a write command carrying lsid + txnNumber
// outside a transaction checks its session out (Begin), and each statement (statement id =
// its index in the batch, 0 for findAndModify) either
//
//   - already ran in this txnNumber: it is not executed again and its reply is rebuilt from
//     the oplog entry it wrote (Stmt.Entry) and, for findAndModify, the image in
//     config.image_collection (Stmt.Image), or
//   - runs with the session attached to its RecoveryUnit (opobserver.WithSession, Stmt.Wrap),
//     so its oplog entries carry lsid/txnNumber/stmtId/prevOpTime, and the same
//     WriteUnitOfWork upserts the session's config.transactions document {_id: lsid, txnNum,
//     lastWriteOpTime, lastWriteDate}.
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
//
// A chunk migration carries the history of the moved documents' statements to the
// recipient (migrate.go): there a statement's entry is a no-op wrapping the donor's, which
// Stmt.Entry unwraps.
//
// Each node has its own session catalog (Sessions), kept on its operation.DB. Turning a
// replayed entry into a command's reply is the command's business (internal/commands).
package retryable

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/failpoint"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/repl/oplog"
	"humongo/internal/txn/lsc"
	"humongo/internal/txn/session"
)

const (
	// TxnsNS holds one record per session: its last retryable write.
	TxnsNS = oplog.TransactionsNS
	// ImagesNS holds findAndModify's pre/post images for retries.
	ImagesNS = "config.image_collection"
	oplogNS  = "local.oplog.rs"
)

// catalogs is each node's session catalog, kept on its DB (tests run several nodes in one
// process; they share no session).
var catalogs = operation.NewDecoration(func(db *operation.DB) *session.Catalog {
	return session.New(store{db}, 0)
})

// Metrics are a node's retryable-write counters (serverStatus.transactions).
type Metrics struct {
	// RetriedCommands: commands with at least one statement that had already run;
	// RetriedStatements: such statements; TransactionsCollectionWrites: session records
	// written to config.transactions.
	RetriedCommands, RetriedStatements, TransactionsCollectionWrites atomic.Int64
}

var metrics = operation.NewDecoration(func(*operation.DB) *Metrics { return &Metrics{} })

// MetricsOf returns db's retryable-write counters.
func MetricsOf(db *operation.DB) *Metrics { return metrics.Get(db) }

// Sessions returns db's session catalog.
func Sessions(db *operation.DB) *session.Catalog { return catalogs.Get(db) }

// Txn is one retryable write command's checked-out session. Its methods accept a nil
// receiver (a command that is not a retryable write).
type Txn struct {
	db   *operation.DB
	cat  *session.Catalog
	s    *session.Session
	lsid bsoncore.Document // canonical {id, uid}: the config.transactions _id
	txn  int64
	// closeConn is set when onPrimaryTransactionalWrite asked for the client's connection
	// to be closed (CloseRequested).
	closeConn atomic.Bool
	// retried: a statement of this command had already run (a retry).
	retried bool
	// stmtBase and stmtIDs are the command's stmtId and stmtIds (SetStmtIDs).
	stmtBase int32
	stmtIDs  []int32
}

// SetStmtIDs makes statement i's id stmtIDs[i] when the command named them (a router's
// stmtIds), else base+i (its stmtId), as MongoDB's getStmtIdForWriteAt.
func (t *Txn) SetStmtIDs(base int32, ids []int32) {
	if t != nil {
		t.stmtBase, t.stmtIDs = base, ids
	}
}

// onPrimaryTransactionalWrite is MongoDB's fail point of that name, evaluated after each
// unit of a retryable write that wrote something, before it commits. Its data:
// closeConnection (default true) closes the client's connection once the command has run
// (the write commits, the client never hears of it: CloseRequested);
// failBeforeCommitExceptionCode fails the unit with that code, so the write does not commit.
var onPrimaryTransactionalWrite = failpoint.Register("onPrimaryTransactionalWrite")

// CloseRequested reports whether onPrimaryTransactionalWrite asked to close the client's
// connection instead of replying to this command.
func (t *Txn) CloseRequested() bool { return t != nil && t.closeConn.Load() }

// failPointBeforeCommit applies onPrimaryTransactionalWrite to the statement's unit.
func (s *Stmt) failPointBeforeCommit() error {
	data, on := onPrimaryTransactionalWrite.Evaluate(nil)
	if !on {
		return nil
	}
	if v, err := data.LookupErr("closeConnection"); err != nil || v.Type != bsoncore.TypeBoolean || v.Boolean() {
		s.t.closeConn.Store(true)
	}
	if v, err := data.LookupErr("failBeforeCommitExceptionCode"); err == nil {
		if code, ok := v.AsInt64OK(); ok {
			return mongoerr.Newf(mongoerr.Code(code), "Failing write for %x:%d due to failpoint. The write must not be reflected.",
				s.t.lsid.Lookup("id").Data, s.id)
		}
	}
	return nil
}

// Begin checks out session key for transaction number txn on db (the caller defers End):
// the collections the statements record into are created first, the session is refreshed
// from storage (term returns the current replication term, read once the session is
// checked out) and txn begins on it.
func Begin(ctx context.Context, db *operation.DB, key lsc.Key, txn int64, term func() int64) (*Txn, error) {
	// The collections the writes record into exist before any statement's unit starts.
	op := db.NewOp(ctx)
	for _, ns := range []string{TxnsNS, ImagesNS} {
		if err := op.EnsureCollection(ctx, ns, nil); err != nil {
			op.Close()
			return nil, err
		}
	}
	op.Close()
	cat := Sessions(db)
	s, err := cat.CheckOut(ctx, key)
	if err != nil {
		return nil, err
	}
	t := &Txn{db: db, cat: cat, s: s, lsid: LsidDoc(key), txn: txn}
	if err := cat.Refresh(ctx, s, t.lsid, term()); err != nil {
		t.End()
		return nil, err
	}
	if err := s.Begin(txn, fmt.Sprintf("%x", key.ID[:])); err != nil {
		t.End()
		return nil, err
	}
	return t, nil
}

// LsidDoc is the canonical lsid {id: UUID, uid: BinData(0, sha256)}.
func LsidDoc(k lsc.Key) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendBinary("id", 4, k.ID[:]).AppendBinary("uid", 0, k.UID[:]).Build()
}

// End checks the session back in.
func (t *Txn) End() {
	if t != nil {
		if t.retried {
			MetricsOf(t.db).RetriedCommands.Add(1)
		}
		t.cat.CheckIn(t.s)
	}
}

// Executed reports whether statement i already ran (IncompleteTransactionHistory when that
// cannot be known).
func (t *Txn) Executed(i int) (bool, error) {
	if t == nil {
		return false, nil
	}
	_, ok, err := t.s.Executed(t.stmtID(i))
	if ok && err == nil {
		t.retried = true
		MetricsOf(t.db).RetriedStatements.Add(1)
	}
	return ok, err
}

// Stmt returns the retry context of statement i; nil (not retryable) when t is nil or the
// statement is a multi-document write, which MongoDB does not make retryable.
func (t *Txn) Stmt(i int, multi bool) *Stmt {
	if t == nil || multi {
		return nil
	}
	return &Stmt{t: t, id: t.stmtID(i)}
}

// stmtID is statement i's id.
func (t *Txn) stmtID(i int) int32 {
	if i < len(t.stmtIDs) {
		return t.stmtIDs[i]
	}
	return t.stmtBase + int32(i)
}

// FollowsStmt reports whether statement i's id is statement i-1's plus one, so that both can
// be logged by one vectored insert (whose entries take consecutive ids); true outside a
// retryable write.
func (t *Txn) FollowsStmt(i int) bool {
	return t == nil || i == 0 || t.stmtID(i) == t.stmtID(i-1)+1
}

// Stmt is one statement of a retryable write.
type Stmt struct {
	t  *Txn
	id int32
	// imageKind is findAndModify's stored image: "preImage" or "postImage" ("" for others).
	imageKind string
	// sess is the session info attached to the current unit attempt.
	sess *opobserver.SessionInfo
	// stored is the entry Entry read last, as stored (a migrated entry wraps the
	// statement's: migrate.go).
	stored bsoncore.Document
}

// ImageKindFor is the image a findAndModify stores for its retries.
func ImageKindFor(remove, returnNew bool) string {
	if returnNew && !remove {
		return "postImage"
	}
	return "preImage"
}

// SetImageKind makes the statement store a findAndModify image of kind (ImageKindFor).
func (s *Stmt) SetImageKind(kind string) {
	if s != nil {
		s.imageKind = kind
	}
}

// Wrap returns f made to record the statement: the session is attached to op's unit while f
// runs, and if f wrote oplog entries the same unit upserts
// config.transactions (and the findAndModify image returned by images). With a nil s it
// returns f.
func (s *Stmt) Wrap(op *operation.Context, f func(*index.Collection) error, images func() (pre, post bsoncore.Document)) func(*index.Collection) error {
	if s == nil {
		return f
	}
	return func(coll *index.Collection) error {
		last := s.t.s.LastWrite()
		// A fresh SessionInfo per attempt: the oplog writer advances it as it logs, and a
		// WriteConflict re-runs the whole unit.
		s.sess = &opobserver.SessionInfo{LSID: s.t.lsid, TxnNumber: s.t.txn, StmtID: s.id,
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
func (s *Stmt) record(op *operation.Context, pre, post bsoncore.Document) error {
	n := int(s.sess.StmtID - s.id)
	if n <= 0 {
		return nil // nothing written: nothing to remember
	}
	if err := s.failPointBeforeCommit(); err != nil {
		return err
	}
	last := optime.OpTime{TS: s.sess.PrevTS, Term: s.sess.PrevTerm}
	// The bookkeeping writes are not statements of the session themselves.
	release := opobserver.WithSession(op.RU, nil)
	defer release()
	rec := oplog.SessionRecord(s.t.lsid, s.t.txn, last, entryWall(op, last.TS))
	// Unlogged: members applying the oplog derive the record from the entries (see above).
	unlogged := opobserver.UnreplicatedWrites(op.RU)
	err := upsert(op, TxnsNS, rec)
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
			AppendDocument("_id", s.t.lsid).
			AppendInt64("txnNum", s.t.txn).
			AppendTimestamp("ts", last.TS.Secs(), last.TS.Inc()).
			AppendString("imageKind", s.imageKind).
			AppendDocument("image", image).Build()
		if err := upsert(op, ImagesNS, img); err != nil {
			return err
		}
	}
	// Vectored inserts log n entries; only the last OpTime is known here. Retried inserts
	// need only the fact that they ran, and a reload from the oplog has exact OpTimes.
	ots := make([]optime.OpTime, n)
	for i := range ots {
		ots[i] = last
	}
	sess, txn, first := s.t.s, s.t.txn, s.id
	op.RU.OnCommit(func(optime.Timestamp) { sess.NoteCommitted(txn, first, ots) })
	return nil
}

// entryWall returns the wall clock (ms) of the oplog entry at ts that op's unit just
// wrote: the session record's lastWriteDate, which members applying the oplog take from the
// same entry, so every member holds the same record.
func entryWall(op *operation.Context, ts optime.Timestamp) int64 {
	if coll, err := collection(op.DB, oplogNS); err == nil {
		if d, found, err := coll.RecordStore().Get(op.RU, recordid.Long(int64(ts))); err == nil && found {
			if wall, ok := bsoncore.Document(d).Lookup("wall").DateTimeOK(); ok {
				return wall
			}
		}
	}
	return time.Now().UnixMilli()
}

// upsert replaces or inserts doc (by its _id) in ns inside op's unit. The session checkout
// serializes writers of one lsid; the collection is internal, so no collection lock is
// taken beyond the statement's own.
func upsert(op *operation.Context, ns string, doc bsoncore.Document) error {
	coll, err := collection(op.DB, ns)
	if err != nil {
		return err
	}
	id := doc.Lookup("_id")
	rid, old, found, err := coll.FindByID(op.RU, id)
	if err != nil {
		return err
	}
	if ns == TxnsNS {
		MetricsOf(op.DB).TransactionsCollectionWrites.Add(1)
	}
	if found {
		return coll.UpdateDocument(op.RU, rid, append(bsoncore.Document(nil), old...), doc)
	}
	_, err = coll.InsertDocument(op.RU, doc)
	return err
}

func collection(db *operation.DB, ns string) (*index.Collection, error) {
	meta, ok := db.Catalog.Latest().ByNS(ns)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "%s does not exist", ns)
	}
	return db.Colls.ByUUID(meta.UUID)
}

// Entry returns the oplog entry statement s wrote, or nil when s has not run (or s is nil).
// For a statement a chunk migration brought here, it is the donor's entry (Original).
func (s *Stmt) Entry(ctx context.Context) (bsoncore.Document, error) {
	if s == nil {
		return nil, nil
	}
	ot, ok, err := s.t.s.Executed(s.id)
	if err != nil || !ok {
		return nil, err
	}
	e, err := oplogEntry(ctx, s.t.db, ot.TS)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, mongoerr.Newf(mongoerr.IncompleteTransactionHistory,
			"Incomplete history detected for transaction %d: oplog entry of statement %d is gone", s.t.txn, s.id)
	}
	s.stored = e
	return Original(e), nil
}

// Image returns the findAndModify image stored with entry, the statement's oplog entry
// (the value the first execution returned), checking that it belongs to this statement.
func (s *Stmt) Image(ctx context.Context, entry bsoncore.Document) (bsoncore.Document, error) {
	if s.stored != nil {
		// A migrated statement links the image entry written with it.
		for _, f := range []string{preImageOpTimeField, postImageOpTimeField} {
			ot, ok := optime.Lookup(s.stored, f)
			if !ok {
				continue
			}
			if kind := f[:len(f)-len("OpTime")]; kind != s.imageKind {
				return nil, s.Mismatch("findAndModify")
			}
			img, err := oplogEntry(ctx, s.t.db, ot.TS)
			if err != nil {
				return nil, err
			}
			value, ok := img.Lookup("o").DocumentOK()
			if img == nil || !ok {
				return nil, mongoerr.Newf(mongoerr.IncompleteTransactionHistory,
					"Incomplete history detected for transaction %d: image entry of findAndModify statement %d is gone", s.t.txn, s.id)
			}
			return value, nil
		}
		entry = s.stored
	}
	secs, inc, _ := entry.Lookup("ts").TimestampOK()
	img, err := store{s.t.db}.image(ctx, s.t.lsid)
	if err != nil {
		return nil, err
	}
	if txn, _ := img.Lookup("txnNum").Int64OK(); img == nil || txn != s.t.txn {
		return nil, mongoerr.Newf(mongoerr.IncompleteTransactionHistory,
			"Incomplete history detected for transaction %d: no image for findAndModify statement %d", s.t.txn, s.id)
	}
	if is, ii, _ := img.Lookup("ts").TimestampOK(); is != secs || ii != inc {
		return nil, mongoerr.Newf(mongoerr.IncompleteTransactionHistory,
			"Incomplete history detected for transaction %d: image does not belong to statement %d", s.t.txn, s.id)
	}
	if kind, _ := img.Lookup("imageKind").StringValueOK(); kind != s.imageKind {
		return nil, s.Mismatch("findAndModify")
	}
	value, _ := img.Lookup("image").DocumentOK()
	return value, nil
}

// Mismatch is the error of a retry whose command does not match the statement's first
// execution (what: the command name).
func (s *Stmt) Mismatch(what string) error {
	// MongoDB's codes: 40606 for findAndModify, 40670 for the other write commands.
	code := mongoerr.Location40670
	if what == "findAndModify" {
		code = mongoerr.Location40606
	}
	return mongoerr.Newf(code, "%s retry request is not compatible with previous write in the transaction (statement %d of txnNumber %d)",
		what, s.id, s.t.txn)
}

// store reads session state from storage: session.Store for the catalog.
type store struct{ db *operation.DB }

var _ session.Store = store{}

// LoadRecord returns the session's config.transactions document.
func (r store) LoadRecord(ctx context.Context, lsid bsoncore.Document) (bsoncore.Document, error) {
	return r.byID(ctx, TxnsNS, lsid)
}

func (r store) image(ctx context.Context, lsid bsoncore.Document) (bsoncore.Document, error) {
	return r.byID(ctx, ImagesNS, lsid)
}

func (r store) byID(ctx context.Context, ns string, lsid bsoncore.Document) (bsoncore.Document, error) {
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
func (r store) OplogEntry(ctx context.Context, ts optime.Timestamp) (bsoncore.Document, error) {
	return oplogEntry(ctx, r.db, ts)
}

func oplogEntry(ctx context.Context, db *operation.DB, ts optime.Timestamp) (bsoncore.Document, error) {
	op := db.NewOp(ctx)
	defer op.Close()
	meta, coll, release, err := op.ReadCollection(ctx, oplogNS)
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

// UpsertRecord writes doc, a session's config.transactions document, in op's unit as an
// unlogged write (members applying the oplog derive the record from the entries).
func UpsertRecord(op *operation.Context, doc bsoncore.Document) error {
	release := opobserver.WithSession(op.RU, nil)
	defer release()
	unlogged := opobserver.UnreplicatedWrites(op.RU)
	defer unlogged()
	return upsert(op, TxnsNS, doc)
}

// LoadRecord returns session lsid's config.transactions document (nil when it has none).
func LoadRecord(ctx context.Context, db *operation.DB, lsid bsoncore.Document) (bsoncore.Document, error) {
	return store{db}.LoadRecord(ctx, lsid)
}

// EnsureCollections creates the collections retryable writes and transactions record into.
func EnsureCollections(ctx context.Context, db *operation.DB) error {
	cat := db.Catalog.Latest()
	if _, ok := cat.ByNS(TxnsNS); ok {
		if _, ok := cat.ByNS(ImagesNS); ok {
			return nil // the common case: no operation (locker, unit) to set up
		}
	}
	op := db.NewOp(ctx)
	defer op.Close()
	for _, ns := range []string{TxnsNS, ImagesNS} {
		if err := op.EnsureCollection(ctx, ns, nil); err != nil {
			return err
		}
	}
	return nil
}
