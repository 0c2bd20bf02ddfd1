// Package participant runs multi-document transactions on a replica-set member (spec:
// replication.md "Transactions"; MongoDB's TransactionParticipant): the per-session state
// machine (none → in progress → committed or aborted), the transaction's storage resources
// kept between statements, commit (one applyOps oplog entry, or a chain) and abort, and the
// reaper that aborts transactions older than transactionLifetimeLimitSeconds.
//
// # Resources
//
// A transaction owns one storage RecoveryUnit with an outer WriteUnitOfWork open from its
// first statement to its end (operation.Txn). Every statement's operations run in that unit
// (operation.Context joins it), so they read one snapshot, opened at the first statement
// (read concern local: the newest data; majority: the majority commit point; snapshot:
// atClusterTime or the all-durable point), see the transaction's own writes, and buffer
// theirs until commit. The storage engine's first-updater-wins check turns a concurrent
// update of the same document into WriteConflict at once (never a wait), and with a
// timestamped snapshot SetIsolatedWrites also refuses to overwrite a version the snapshot
// does not see. The op observer collects the document writes (opobserver.TxnCollector)
// and the oplog writer logs them at commit (oplog.Writer.LogTransaction), in the same unit
// as the data and the session's config.transactions record {state: "committed"}.
//
// Locks are taken per statement, not held between statements (MongoDB holds the
// transaction's intent locks to its end). A collection dropped under a transaction that
// wrote to it makes the commit fail with WriteConflict (the engine refuses writes to dropped
// idents), so the outcome is the same: the transaction aborts, DDL is not blocked.
//
// # Not yet
//
// Prepared transactions (prepareTransaction, commit at a commitTimestamp, prepare and
// commit/abort oplog entries, reconstruction at startup and step-up): the storage half is in
// place (storage.RecoveryUnit.Prepare, prepare conflicts, CommitPrepared); the read paths'
// PrepareConflictRetry, the participant's prepared state and the oplog side are not. Creating
// a collection or index inside a transaction (operation.EnsureCollection creates it at once,
// outside the transaction; explicit create/createIndexes are refused) needs a per-unit
// catalog view that does not hold the catalog's DDL mutex for the transaction's life.
//
// # Sessions
//
// Transactions and retryable writes share a session's transaction number and its
// exclusive checkout (txn/session, through txn/retryable's catalog). A statement checks the
// session out for its whole run (Begin → Stmt.End), so statements of one session never run
// concurrently; the reaper and kill paths check it out too before they abort.
package participant

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
	"humongo/internal/txn/lsc"
	"humongo/internal/txn/retryable"
	"humongo/internal/txn/session"
)

// State is a transaction's place in its life.
type State int

const (
	InProgress State = iota + 1
	Committed
	Aborted
)

func (s State) String() string {
	switch s {
	case InProgress:
		return "inProgress"
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	}
	return "none"
}

// Txn is one multi-document transaction. Its fields are owned by whoever has its session
// checked out.
type Txn struct {
	m      *Manager
	key    lsc.Key
	lsid   bsoncore.Document
	number int64
	// state is written by the session's holder and read by the reaper and kill paths
	// without the session (they check it out before acting on it).
	state atomic.Int32

	res      *operation.Txn
	wuow     *storage.WriteUnitOfWork
	ops      *opobserver.TxnCollector
	detach   func()
	started  bool // the first statement opened the snapshot
	expires  time.Time
	readTS   optime.Timestamp // the snapshot's timestamp (0: newest data)
	cursors  []int64
	commitOT optime.OpTime
	// abortCause is why the transaction was aborted by someone other than its client
	// (reaper, kill, step-down); reported by the next statement.
	abortCause string
}

// Number is the transaction number.
func (t *Txn) Number() int64 { return t.number }

// State is the transaction's state.
func (t *Txn) State() State { return State(t.state.Load()) }

// CommitOpTime is the commit entry's OpTime (null for a read-only transaction).
func (t *Txn) CommitOpTime() optime.OpTime { return t.commitOT }

// Manager holds one node's transactions (a decoration of its operation.DB).
type Manager struct {
	db *operation.DB

	mu   sync.Mutex
	txns map[lsc.Key]*Txn // the newest transaction of each session that had one

	stopReaper context.CancelFunc
	reaperDone chan struct{}

	// Counters for serverStatus.transactions.
	Started, Committed, Aborted, Active atomic.Int64
}

var managers = operation.NewDecoration(func(db *operation.DB) *Manager {
	m := &Manager{db: db, txns: map[lsc.Key]*Txn{}}
	ctx, cancel := context.WithCancel(context.Background())
	m.stopReaper, m.reaperDone = cancel, make(chan struct{})
	go m.reap(ctx)
	db.OnClose(m.close)
	return m
})

// Of returns db's transaction manager.
func Of(db *operation.DB) *Manager { return managers.Get(db) }

// Existing returns db's transaction manager if one was ever needed.
func Existing(db *operation.DB) (*Manager, bool) { return managers.Lookup(db) }

// AbortAll aborts db's transactions that match (killSessions, step-down), if db ever had any.
func AbortAll(db *operation.DB, match func(lsc.Key) bool, cause string) {
	if m, ok := managers.Lookup(db); ok {
		m.AbortMatching(context.Background(), match, cause)
	}
}

// cursorKillers holds, per node, how a transaction that ends kills the cursors it opened
// (they read through its unit, which goes away with it). Kept apart from the Manager so
// that installing it starts no reaper on a node that never runs a transaction.
var cursorKillers = operation.NewDecoration(func(*operation.DB) *atomic.Pointer[func([]int64)] {
	return new(atomic.Pointer[func([]int64)])
})

// SetCursorKiller installs kill as db's way to kill cursors by id (the server's cursor
// manager), used whenever a transaction ends, whatever ended it.
func SetCursorKiller(db *operation.DB, kill func(ids []int64)) { cursorKillers.Get(db).Store(&kill) }

// close stops the reaper and aborts every transaction (the engine closes after this).
func (m *Manager) close() {
	m.stopReaper()
	<-m.reaperDone
	m.AbortMatching(context.Background(), func(lsc.Key) bool { return true }, "server shutting down")
}

// BeginArgs are a statement's session arguments.
type BeginArgs struct {
	Key       lsc.Key
	TxnNumber int64
	// Start: startTransaction: true.
	Start bool
	// Command is the command's name (commit and abort have their own rules).
	Command string
	// Term returns the current replication term (session records are reloaded per term).
	Term func() int64
	// Lifetime is transactionLifetimeLimitSeconds; LockTimeout is
	// maxTransactionLockRequestTimeoutMillis (negative: no bound).
	Lifetime    time.Duration
	LockTimeout time.Duration
}

// Stmt is one statement of a transaction, holding its session checked out until End.
type Stmt struct {
	m   *Manager
	cat *session.Catalog
	s   *session.Session
	Txn *Txn
}

// Begin checks the session out and starts or continues transaction a.TxnNumber on it
// (MongoDB's beginOrContinue). The caller must End the statement.
func (m *Manager) Begin(ctx context.Context, a BeginArgs) (*Stmt, error) {
	if err := retryable.EnsureCollections(ctx, m.db); err != nil {
		return nil, err
	}
	cat := retryable.Sessions(m.db)
	s, err := cat.CheckOut(ctx, a.Key)
	if err != nil {
		return nil, err
	}
	st := &Stmt{m: m, cat: cat, s: s}
	if err := st.begin(ctx, a); err != nil {
		st.checkIn()
		return nil, err
	}
	m.Active.Add(1)
	return st, nil
}

func (st *Stmt) begin(ctx context.Context, a BeginArgs) error {
	m := st.m
	lsid := retryable.LsidDoc(a.Key)
	if err := st.cat.Refresh(ctx, st.s, lsid, a.Term()); err != nil {
		return err
	}
	active := st.s.TxnNumber()
	m.mu.Lock()
	t := m.txns[a.Key]
	m.mu.Unlock()
	if t != nil && t.number < active {
		t = nil // a retryable write moved the session on
	}
	desc := a.Key.String()
	if a.Start {
		switch {
		case a.TxnNumber < active:
			return mongoerr.Newf(mongoerr.TransactionTooOld,
				"Cannot start transaction %d on session %s because a newer transaction %d has already started.",
				a.TxnNumber, desc, active)
		case a.TxnNumber == active:
			return mongoerr.New(mongoerr.ConflictingOperationInProgress,
				"Only servers in a sharded cluster can start a new transaction at the active transaction number")
		}
		if t != nil && t.State() == InProgress {
			t.abort("a newer transaction started")
		}
		if err := st.s.Begin(a.TxnNumber, desc); err != nil {
			return err
		}
		ru := m.db.Engine.NewRecoveryUnit()
		t = &Txn{key: a.Key, lsid: lsid, number: a.TxnNumber,
			res: &operation.Txn{RU: ru}, ops: &opobserver.TxnCollector{}, expires: time.Now().Add(a.Lifetime)}
		if a.LockTimeout >= 0 {
			t.res.LockTimeout = max(a.LockTimeout, time.Millisecond)
		}
		t.state.Store(int32(InProgress))
		t.wuow = ru.BeginUnitOfWork()
		t.detach = opobserver.WithTransaction(ru, t.ops)
		t.m = m
		m.Started.Add(1)
		m.mu.Lock()
		m.txns[a.Key] = t
		m.mu.Unlock()
		st.Txn = t
		return nil
	}
	if a.TxnNumber < active {
		return mongoerr.Newf(mongoerr.TransactionTooOld,
			"txnNumber %d is less than last txnNumber %d seen in session %s", a.TxnNumber, active, desc)
	}
	if t == nil && a.TxnNumber == active {
		// After a restart or failover: the session's record says whether its transaction
		// committed.
		rec, err := retryable.LoadRecord(ctx, m.db, lsid)
		if err != nil {
			return err
		}
		if n, _ := rec.Lookup("txnNum").AsInt64OK(); rec != nil && n == a.TxnNumber {
			if state, _ := rec.Lookup("state").StringValueOK(); state == "committed" {
				t = &Txn{key: a.Key, lsid: lsid, number: n}
				t.state.Store(int32(Committed))
			}
		}
	}
	if t == nil || t.number != a.TxnNumber {
		return mongoerr.Newf(mongoerr.NoSuchTransaction,
			"Given transaction number %d does not match any in-progress transactions. The active transaction number is %d",
			a.TxnNumber, active)
	}
	st.Txn = t
	switch t.State() {
	case Aborted:
		if a.Command == "abortTransaction" {
			return nil // the handler answers NoSuchTransaction
		}
		msg := fmt.Sprintf("Transaction with { txnNumber: %d } has been aborted.", t.number)
		if t.abortCause != "" {
			msg = fmt.Sprintf("Transaction %d was aborted: %s.", t.number, t.abortCause)
		}
		return mongoerr.New(mongoerr.NoSuchTransaction, msg)
	case Committed:
		if a.Command == "commitTransaction" {
			return nil // a retried commit: the handler waits for its write concern again
		}
		return mongoerr.Newf(mongoerr.TransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", t.number)
	}
	return nil
}

// Resources are the transaction's storage resources for the statement's operations; nil
// once the transaction ended (a retried commit, an abort of an aborted transaction), when
// the statement runs no operation in it.
func (st *Stmt) Resources() *operation.Txn {
	if st.Txn.State() != InProgress {
		return nil
	}
	return st.Txn.res
}

// First reports whether this statement is the transaction's first (it chooses the snapshot).
func (st *Stmt) First() bool { return st.Txn.State() == InProgress && !st.Txn.started }

// OpenSnapshot opens the transaction's snapshot at the first statement: src/ts are the read
// concern's choice (storage.ReadNoTimestamp for local). Reads at a timestamp make the
// transaction's writes snapshot-isolated against it (storage.RecoveryUnit.SetIsolatedWrites).
func (st *Stmt) OpenSnapshot(src storage.ReadSource, ts optime.Timestamp) error {
	t := st.Txn
	if t.started {
		return nil
	}
	ru := t.res.RU
	if err := ru.SetReadSource(src, ts); err != nil {
		return err
	}
	ru.SetIsolatedWrites(src != storage.ReadNoTimestamp)
	if err := ru.PreallocateSnapshot(); err != nil {
		return err
	}
	_, t.readTS = ru.ReadSource()
	t.started = true
	return nil
}

// NoteCursor records a cursor opened by the transaction: it is killed when the
// transaction ends (its unit goes away).
func (st *Stmt) NoteCursor(id int64) { st.Txn.cursors = append(st.Txn.cursors, id) }

// End finishes the statement: a statement that failed aborts the transaction (MongoDB
// aborts on any error inside a transaction), then the session is checked back in.
func (st *Stmt) End(err error) {
	if t := st.Txn; t != nil && err != nil && t.State() == InProgress {
		t.abort("")
	}
	if st.s != nil {
		st.m.Active.Add(-1)
	}
	st.checkIn()
}

func (st *Stmt) checkIn() {
	if st.s != nil {
		st.cat.CheckIn(st.s)
		st.s = nil
	}
}

// Commit commits the transaction (commitTransaction): its operations are logged as applyOps
// and the data, the entry and the session record commit together. A transaction already
// committed commits again as a no-op (a retry). Read-only transactions log nothing.
func (st *Stmt) Commit(ctx context.Context) error {
	t := st.Txn
	switch t.State() {
	case Committed:
		return nil
	case Aborted:
		return mongoerr.Newf(mongoerr.NoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", t.number)
	}
	if err := st.commit(ctx); err != nil {
		t.abort("")
		return err
	}
	return nil
}

func (st *Stmt) commit(ctx context.Context) error {
	t := st.Txn
	m := st.m
	ru := t.res.RU
	// The commit takes the global intent lock: a step-down (which kills writers under the
	// global lock) cannot interleave with logging the commit.
	op := m.db.NewOp(operation.WithRequest(ctx, &operation.Request{Txn: t.res, Admission: new(lock.Admission)}))
	defer op.Close()
	scope, err := op.Locker.GlobalLock(ctx, lock.ModeIX)
	if err != nil {
		return err
	}
	defer func() { _ = scope.Release() }()
	if len(t.ops.Ops) > 0 {
		w, ok := m.db.Observer().(*oplog.Writer)
		if !ok {
			return mongoerr.New(mongoerr.IllegalOperation, "Transaction numbers are only allowed on a replica set member or mongos")
		}
		ots, wall, err := w.LogTransaction(ru, t.lsid, t.number, t.ops.Ops)
		if err != nil {
			return err
		}
		commit := ots[len(ots)-1]
		// The same record members applying the commit entry write (oplog.TxnCommitted).
		rec := oplog.TxnSessionRecord(t.lsid, t.number, commit, wall, "committed")
		if err := retryable.UpsertRecord(op, rec); err != nil {
			return err
		}
		t.commitOT = commit
	}
	t.detach()
	if err := t.wuow.Commit(); err != nil {
		return err
	}
	t.wuow.End()
	t.state.Store(int32(Committed))
	m.Committed.Add(1)
	t.release()
	if !t.commitOT.IsNull() {
		st.s.NoteCommitted(t.number, 0, []optime.OpTime{t.commitOT})
	}
	return nil
}

// Abort aborts the transaction (abortTransaction).
func (st *Stmt) Abort() error {
	t := st.Txn
	switch t.State() {
	case Committed:
		return mongoerr.Newf(mongoerr.TransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", t.number)
	case Aborted:
		return mongoerr.Newf(mongoerr.NoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", t.number)
	}
	t.abort("")
	return nil
}

// abort rolls the transaction back and releases its resources. Its session must be
// checked out by the caller (or the transaction never reachable by anyone else).
func (t *Txn) abort(cause string) {
	if t.State() != InProgress {
		return
	}
	t.state.Store(int32(Aborted))
	t.abortCause = cause
	if t.m != nil {
		t.m.Aborted.Add(1)
	}
	if t.detach != nil {
		t.detach()
	}
	if t.wuow != nil {
		t.wuow.End()
	}
	t.release()
}

// release closes the transaction's unit and kills the cursors that read through it.
func (t *Txn) release() {
	if t.res != nil && t.res.RU != nil {
		t.res.RU.Close()
	}
	t.wuow, t.detach = nil, nil
	if len(t.cursors) > 0 && t.m != nil {
		if kill := cursorKillers.Get(t.m.db).Load(); kill != nil {
			(*kill)(t.cursors)
		}
		t.cursors = nil
	}
}

// AbortMatching aborts the in-progress transactions of the sessions match selects
// (killSessions, step-down, shutdown), checking each session out first; a session busy
// for longer than a short wait is skipped (its running statement is killed by the caller,
// and its End aborts the transaction).
func (m *Manager) AbortMatching(ctx context.Context, match func(lsc.Key) bool, cause string) {
	m.mu.Lock()
	var victims []*Txn
	for k, t := range m.txns {
		if t.State() == InProgress && match(k) {
			victims = append(victims, t)
		}
	}
	m.mu.Unlock()
	cat := retryable.Sessions(m.db)
	for _, t := range victims {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		s, err := cat.CheckOut(wctx, t.key)
		cancel()
		if err != nil {
			continue
		}
		if t.State() == InProgress {
			t.abort(cause)
		}
		cat.CheckIn(s)
	}
}

// BeforeRetryableWrite is called before a retryable write with txnNumber checks session key
// out: a transaction in progress at a lower number is aborted (the session moves on, as
// MongoDB's beginOrContinue does), and one at the same number refuses the write, which must
// then carry autocommit: false.
func BeforeRetryableWrite(ctx context.Context, db *operation.DB, key lsc.Key, txnNumber int64) error {
	m, ok := managers.Lookup(db)
	if !ok {
		return nil
	}
	m.mu.Lock()
	t := m.txns[key]
	m.mu.Unlock()
	if t == nil || t.State() != InProgress {
		return nil
	}
	if t.number == txnNumber {
		return mongoerr.New(mongoerr.InvalidOptions, "Must specify autocommit=false on all operations of a multi-statement transaction.")
	}
	if t.number < txnNumber {
		m.AbortMatching(ctx, func(k lsc.Key) bool { return k == key }, "a newer retryable write started")
	}
	return nil
}

// reap aborts transactions that outlived transactionLifetimeLimitSeconds, once a second.
func (m *Manager) reap(ctx context.Context) {
	defer close(m.reaperDone)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		m.mu.Lock()
		expired := map[lsc.Key]bool{}
		for k, t := range m.txns {
			if t.State() == InProgress && now.After(t.expires) {
				expired[k] = true
			}
			if t.State() != InProgress && len(m.txns) > 10000 {
				delete(m.txns, k) // a retry after this finds the durable record
			}
		}
		m.mu.Unlock()
		if len(expired) > 0 {
			m.AbortMatching(ctx, func(k lsc.Key) bool { return expired[k] }, "transaction exceeded transactionLifetimeLimitSeconds")
		}
	}
}

// InProgressCount is the number of transactions in progress (serverStatus).
func (m *Manager) InProgressCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, t := range m.txns {
		if t.State() == InProgress {
			n++
		}
	}
	return n
}
