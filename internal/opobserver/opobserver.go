// Package opobserver is the one hook every write goes through (spec: replication.md "Life as
// a Primary / Doing a Write": "replica set nodes have an OpObserver that inserts a document to
// the oplog whenever a write to the database happens"; execution.md "Vectored Inserts").
//
// The write path (index.Collection for documents, the DDL commands for catalog changes) calls
// an Observer inside the caller's WriteUnitOfWork. A standalone node uses NoOp; a replica-set
// member uses the oplog writer (internal/repl/oplog), which writes the oplog entry in the same
// storage unit as the write it describes, so both commit or neither does.
//
// # Call order and timestamps
//
// An observer that assigns timestamps (the oplog writer) reserves one OpTime per entry and
// makes it the unit's current timestamp with RecoveryUnit.SetTimestamp; the storage engine
// stamps the writes that follow with it, and writes made before the unit's first
// SetTimestamp get the unit's last one at commit. So:
//
//   - Document writes call the observer BEFORE the document's data and index writes:
//     OnInserts once per document (Collection.InsertDocuments does this for vectored inserts,
//     so document i and its entry carry OpTime i and a snapshot between two of them sees a
//     prefix of the batch), OnUpdate before the record update, OnDelete before the record
//     delete.
//   - A DDL unit that logs one entry may call the observer before or after its catalog
//     writes (they all get the unit's one timestamp). A unit that logs several entries
//     (dropDatabase) calls it before the catalog writes of each entry.
//
// # Writes that are not replicated
//
// Writes to the `local` database are never logged (the observer checks). An oplog applier
// replaying entries it received marks its RecoveryUnit with UnreplicatedWrites so the write
// path's observer calls do nothing (MongoDB's UnreplicatedWritesBlock); the applier itself
// writes the entries it received and sets their timestamps. That mark is also what lets
// replication write on a node that is not primary: the oplog writer refuses every other
// replicated write there (NotWritablePrimary; see internal/repl/oplog).
//
// Session information for retryable writes (lsid, txnNumber, stmtId, prevOpTime) is attached
// to the RecoveryUnit with WithSession for the duration of the operation.
package opobserver

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/optime"
	"humongo/internal/storage"
)

// OnUpdateArgs describe one document update.
type OnUpdateArgs struct {
	// Pre and Post are the whole document before and after the update. The oplog entry is
	// the $v:2 diff between them (idempotent: an $inc is logged as its result).
	Pre, Post bsoncore.Document
	// ID is the document's _id (the entry's o2).
	ID bsoncore.Value
	// FromMigrate marks writes made by chunk migration (fromMigrate: true in the entry).
	FromMigrate bool
	// PreImage asks for Pre to be recorded as the change stream pre-image of the entry (the
	// collection has changeStreamPreAndPostImages enabled; never set with FromMigrate).
	PreImage bool
	// Replacement marks a user's replacement-style update: it is logged as the post image,
	// which change streams report as a replace.
	Replacement bool
	// Paths are the paths a user's operator update named (update.Update.Paths): its diff
	// follows them whatever the sizes (oplog.DiffUpdate), so it stays an update event. Nil
	// for other writes, whose diff gives way to the post image when larger.
	Paths []string
}

// OnDeleteArgs describe one document delete.
type OnDeleteArgs struct {
	// ID is the document's _id (the entry's o).
	ID bsoncore.Value
	// Pre is the deleted document.
	Pre bsoncore.Document
	// FromMigrate marks writes made by chunk migration (fromMigrate: true in the entry).
	FromMigrate bool
	// PreImage: as OnUpdateArgs.PreImage.
	PreImage bool
}

// RenameArgs describe a renameCollection.
type RenameArgs struct {
	From, To string
	UUID     catalog.UUID
	// DropTarget is the UUID of the target collection the rename dropped, if any.
	DropTarget    catalog.UUID
	HasDropTarget bool
	StayTemp      bool
}

// Observer is called by the write path inside the caller's WriteUnitOfWork. An error aborts
// the write (the unit rolls back).
type Observer interface {
	// OnInserts is called before the writes of docs (one document per call when each must
	// carry its own timestamp; see the package comment).
	OnInserts(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, docs []bsoncore.Document, fromMigrate bool) error
	// OnUpdate is called before the record update.
	OnUpdate(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, args *OnUpdateArgs) error
	// OnDelete is called before the record delete.
	OnDelete(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, args *OnDeleteArgs) error
	// OnCreateCollection logs a create; options are the user-visible create options (no uuid)
	// and idIndex the _id index spec (nil when the collection has none).
	OnCreateCollection(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, options, idIndex bsoncore.Document) error
	// OnDropCollection logs a drop.
	OnDropCollection(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID) error
	// OnRenameCollection logs a rename within or across databases.
	OnRenameCollection(ru *storage.RecoveryUnit, args *RenameArgs) error
	// OnCreateIndexes logs one createIndexes entry per spec (each a complete index spec).
	OnCreateIndexes(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, specs []bsoncore.Document) error
	// OnDropIndex logs the drop of the index name whose spec was spec.
	OnDropIndex(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, name string, spec bsoncore.Document) error
	// OnCollMod logs a collMod; cmd is the applied modification ({collMod: coll, ...}).
	OnCollMod(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, cmd bsoncore.Document) error
	// OnDropDatabase logs a dropDatabase (after the OnDropCollection of each collection).
	OnDropDatabase(ru *storage.RecoveryUnit, db string) error
}

// NoOp is the standalone observer: it logs nothing.
type NoOp struct{}

var _ Observer = NoOp{}

func (NoOp) OnInserts(*storage.RecoveryUnit, string, catalog.UUID, []bsoncore.Document, bool) error {
	return nil
}
func (NoOp) OnUpdate(*storage.RecoveryUnit, string, catalog.UUID, *OnUpdateArgs) error { return nil }
func (NoOp) OnDelete(*storage.RecoveryUnit, string, catalog.UUID, *OnDeleteArgs) error { return nil }
func (NoOp) OnCreateCollection(*storage.RecoveryUnit, string, catalog.UUID, bsoncore.Document, bsoncore.Document) error {
	return nil
}
func (NoOp) OnDropCollection(*storage.RecoveryUnit, string, catalog.UUID) error { return nil }
func (NoOp) OnRenameCollection(*storage.RecoveryUnit, *RenameArgs) error        { return nil }
func (NoOp) OnCreateIndexes(*storage.RecoveryUnit, string, catalog.UUID, []bsoncore.Document) error {
	return nil
}
func (NoOp) OnDropIndex(*storage.RecoveryUnit, string, catalog.UUID, string, bsoncore.Document) error {
	return nil
}
func (NoOp) OnCollMod(*storage.RecoveryUnit, string, catalog.UUID, bsoncore.Document) error {
	return nil
}
func (NoOp) OnDropDatabase(*storage.RecoveryUnit, string) error { return nil }

// PreImagesNS is the collection of change stream pre-images. Every member writes its own
// (the primary as it logs a write, a secondary as it applies it), so writes to it are not
// logged (MongoDB's "implicitly replicated" namespace).
const PreImagesNS = "config.system.preimages"

// IsReplicatedNS reports whether writes to ns are logged: everything except the `local`
// database, system.profile and the pre-images collection (MongoDB also excludes a few
// other internal collections).
func IsReplicatedNS(ns string) bool {
	db, coll, _ := strings.Cut(ns, ".")
	return db != "local" && coll != "system.profile" && ns != PreImagesNS
}

// SessionInfo is the retryable-write context of an operation. The oplog writer adds lsid,
// txnNumber, stmtId and prevOpTime to each entry and advances PrevTS/PrevTerm and StmtID
// after each entry it writes (vectored inserts get consecutive statement ids).
type SessionInfo struct {
	LSID      bsoncore.Document
	TxnNumber int64
	// StmtID is the statement id of the next entry.
	StmtID int32
	// PrevTS/PrevTerm are the OpTime of the session's previous write in this transaction
	// number (null timestamp, term -1 for the first).
	PrevTS   optime.Timestamp
	PrevTerm int64
}

// opState is the per-operation (per-RecoveryUnit) replication context.
type opState struct {
	unreplicated int
	fromMigrate  int
	session      *SessionInfo
	txn          *TxnCollector
}

// stateOf returns ru's state, kept on ru itself (so two servers in one process, or a unit
// that is never released, leave nothing behind in a global map).
func stateOf(ru *storage.RecoveryUnit, create bool) *opState {
	if st, ok := ru.ObserverState().(*opState); ok {
		return st
	}
	if !create {
		return nil
	}
	st := &opState{}
	ru.SetObserverState(st)
	return st
}

func (st *opState) release(ru *storage.RecoveryUnit) {
	if st.unreplicated == 0 && st.fromMigrate == 0 && st.session == nil && st.txn == nil {
		ru.SetObserverState(nil)
	}
}

// UnreplicatedWrites makes the observer ignore ru's writes until release is called (nests).
func UnreplicatedWrites(ru *storage.RecoveryUnit) (release func()) {
	st := stateOf(ru, true)
	st.unreplicated++
	return func() {
		st.unreplicated--
		st.release(ru)
	}
}

// WritesReplicated reports whether ru's writes are to be logged.
func WritesReplicated(ru *storage.RecoveryUnit) bool {
	st := stateOf(ru, false)
	return st == nil || st.unreplicated == 0
}

// WithFromMigrate marks the DDL entries ru logs until release is called as fromMigrate: a
// sharded drop's participants other than the primary shard drop their copies so, and change
// streams, which skip fromMigrate entries, report the drop once (7.0's drop participants).
func WithFromMigrate(ru *storage.RecoveryUnit) (release func()) {
	st := stateOf(ru, true)
	st.fromMigrate++
	return func() {
		st.fromMigrate--
		st.release(ru)
	}
}

// FromMigrate reports whether ru's DDL entries are marked fromMigrate (WithFromMigrate).
func FromMigrate(ru *storage.RecoveryUnit) bool {
	st := stateOf(ru, false)
	return st != nil && st.fromMigrate > 0
}

// WithSession attaches s to ru until release is called.
func WithSession(ru *storage.RecoveryUnit, s *SessionInfo) (release func()) {
	st := stateOf(ru, true)
	prev := st.session
	st.session = s
	return func() {
		st.session = prev
		st.release(ru)
	}
}

// Session returns the session attached to ru, or nil.
func Session(ru *storage.RecoveryUnit) *SessionInfo {
	if st := stateOf(ru, false); st != nil {
		return st.session
	}
	return nil
}

// TxnCollector gathers a multi-document transaction's operations: while it is attached to a
// unit (WithTransaction), the oplog writer appends each document write's operation
// ({op, ns, ui, o, o2?}) here instead of logging an entry, and the transaction logs them all
// at commit as applyOps (spec: replication.md "Transactions").
type TxnCollector struct {
	Ops [][]byte
	// Bytes is the total size of Ops.
	Bytes int
	// PreImages are the change stream pre-images of Ops' updates and deletes on collections
	// with changeStreamPreAndPostImages, written at commit with the timestamp of the
	// applyOps entry that holds their operation and its index there.
	PreImages []TxnPreImage
}

// TxnPreImage is the pre-image of a transaction's operation.
type TxnPreImage struct {
	// Op is the operation's index in TxnCollector.Ops.
	Op   int
	UUID catalog.UUID
	Doc  bsoncore.Document
}

// Add appends one operation document.
func (c *TxnCollector) Add(op []byte) {
	c.Ops = append(c.Ops, op)
	c.Bytes += len(op)
}

// WithTransaction attaches c to ru until release is called.
func WithTransaction(ru *storage.RecoveryUnit, c *TxnCollector) (release func()) {
	st := stateOf(ru, true)
	prev := st.txn
	st.txn = c
	return func() {
		st.txn = prev
		st.release(ru)
	}
}

// Transaction returns the transaction collector attached to ru, or nil.
func Transaction(ru *storage.RecoveryUnit) *TxnCollector {
	if st := stateOf(ru, false); st != nil {
		return st.txn
	}
	return nil
}
