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
// transaction's intent locks to its end). A collection dropped or renamed under a
// transaction that wrote to it makes the commit (or the prepare) fail with WriteConflict:
// under the collections' intent locks the commit checks that each one it wrote is still in
// the catalog under its name (checkWrittenCollections; the dropped table itself lives on
// until its two-phase drop, so writes to it would otherwise vanish). The outcome is the
// same as MongoDB's: the transaction aborts, and DDL is not blocked. A prepared transaction, which must stay able to commit, does hold intent locks on
// the collections it wrote, from its prepare to its decision (oplog.PreparedTxns).
//
// # Prepared transactions
//
// prepareTransaction (the participant half of two-phase commit; spec: "Cross-Shard
// Transactions and the Prepared State") logs the transaction's operations in an entry with
// prepare: true at a new slot, in a unit of its own with the session record {state:
// "prepared"}, and prepares the transaction's unit at that timestamp
// (storage.RecoveryUnit.Prepare). The unit then belongs to the node's oplog.PreparedTxns, which
// members applying the oplog fill the same way from the prepare entry, so the transaction
// survives step-down and failover (a new primary adopts it at the session's next statement),
// and startup recovery, rollback and initial sync rebuild it from the oplog. A prepared
// transaction takes no statement but prepare, commit and abort; the reaper, killSessions and
// step-down leave it alone. commitTransaction with a commitTimestamp (≥ the prepare timestamp,
// once the prepare entry is majority committed) logs a commitTransaction entry at a new slot
// and commits the unit at exactly commitTimestamp; abortTransaction logs an abortTransaction
// entry and rolls it back. Readers and writers of its documents wait for the decision (query
// executor and write paths; reads at local/majority without afterClusterTime read the
// pre-prepare data). A transaction that created a collection cannot be prepared, as in
// MongoDB.
//
// Collections and indexes created inside a transaction are the catalog's: see its package
// doc, "DDL in multi-document transactions".
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

	"humongo/internal/catalog"
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
	Prepared
	Committed
	Aborted
)

func (s State) String() string {
	switch s {
	case InProgress:
		return "inProgress"
	case Prepared:
		return "prepared"
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
	// prep is the transaction once prepared: the unit is held by the node's
	// oplog.PreparedTxns, where a member applying the decision (after a step-down) resolves
	// it too.
	prep *oplog.PreparedTxn
	// abortCause is why the transaction was aborted by someone other than its client
	// (reaper, kill, step-down); reported by the next statement.
	abortCause string
}

// Number is the transaction number.
func (t *Txn) Number() int64 { return t.number }

// State is the transaction's state. A prepared transaction resolved by someone else (the
// oplog applier, after this node stepped down) reports its outcome.
func (t *Txn) State() State {
	st := State(t.state.Load())
	if st == Prepared && t.prep != nil {
		select {
		case <-t.prep.Done():
			if t.prep.Outcome() == oplog.TxnCommitted {
				return Committed
			}
			return Aborted // aborted, or dropped by a rollback that removed its prepare
		default:
		}
	}
	return st
}

// PrepareOpTime is the prepare entry's OpTime (null unless the transaction was prepared).
func (t *Txn) PrepareOpTime() optime.OpTime {
	if t.prep == nil {
		return optime.OpTime{}
	}
	return t.prep.Prepare
}

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
	Started, Committed, Aborted, Active          atomic.Int64
	Prepared, PreparedCommitted, PreparedAborted atomic.Int64
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
	// Prepared transactions stay prepared in the oplog; the restarted node rebuilds them.
	oplog.PreparedOf(m.db.Engine).Close()
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
	// Sharded: the node is a shard server, where a router may start the transaction again at
	// the active number after it aborted unprepared (a stale-routing retry of the first
	// statement), as MongoDB's shards allow.
	Sharded bool
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
	// A transaction prepared before this node became primary (or rebuilt at startup or
	// after a rollback) is held by the node, not yet by this Txn.
	if held := oplog.PreparedOf(m.db.Engine); held.Len() > 0 {
		if p := held.Get(lsid); p != nil && p.TxnNumber >= active && (t == nil || t.prep != p) {
			t = &Txn{m: m, key: a.Key, lsid: lsid, number: p.TxnNumber, prep: p}
			t.state.Store(int32(Prepared))
			m.mu.Lock()
			m.txns[a.Key] = t
			m.mu.Unlock()
		}
	}
	desc := a.Key.String()
	if t != nil && t.State() == Prepared && a.TxnNumber > t.number {
		return mongoerr.New(mongoerr.PreparedTransactionInProgress,
			"Cannot change transaction number while the session has a prepared transaction")
	}
	if a.Start {
		switch {
		case a.TxnNumber < active:
			return mongoerr.Newf(mongoerr.TransactionTooOld,
				"Cannot start transaction %d on session %s because a newer transaction %d has already started.",
				a.TxnNumber, desc, active)
		case a.TxnNumber == active && !(a.Sharded && t != nil && t.number == active && t.State() == Aborted && t.prep == nil):
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
	case Prepared:
		switch a.Command {
		case "commitTransaction", "abortTransaction", "prepareTransaction":
			return nil
		}
		return mongoerr.New(mongoerr.PreparedTransactionInProgress,
			"Cannot call any operation other than abort, prepare or commit on a prepared transaction")
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
	case Prepared:
		return mongoerr.New(mongoerr.InvalidOptions, "commitTransaction must provide commitTimestamp to prepared transaction.")
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
	op, done, err := m.loggingOp(ctx, t.res)
	if err != nil {
		return err
	}
	defer done()
	if len(t.ops.Ops) > 0 {
		if err := m.checkWrittenCollections(ctx, op, ru, t.ops.Ops); err != nil {
			return err
		}
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

// Abort aborts the transaction (abortTransaction). A prepared transaction's abort is logged
// (an abortTransaction entry) before its unit is rolled back.
func (st *Stmt) Abort(ctx context.Context) error {
	t := st.Txn
	switch t.State() {
	case Committed:
		return mongoerr.Newf(mongoerr.TransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", t.number)
	case Aborted:
		return mongoerr.Newf(mongoerr.NoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", t.number)
	case Prepared:
		return st.decidePrepared(ctx, 0)
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
	t.killCursors()
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
	if held := oplog.PreparedOf(db.Engine); held.Len() > 0 {
		if p := held.Get(retryable.LsidDoc(key)); p != nil && p.TxnNumber != txnNumber {
			return mongoerr.New(mongoerr.PreparedTransactionInProgress,
				"Cannot change transaction number while the session has a prepared transaction")
		}
	}
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

// Prepare prepares the transaction (prepareTransaction) and returns the prepare entry's
// OpTime, whose timestamp is the prepare timestamp: the operations are logged in an entry
// with prepare: true (or a chain ending in one), written in a unit of its own together with
// the session record {state: "prepared"}, and the transaction's unit is prepared at that
// timestamp and handed to the node's oplog.PreparedTxns. From then on it takes no more
// operations, survives step-down, failover and restarts, and only commitTransaction with a
// commitTimestamp or abortTransaction ends it. Preparing again returns the same OpTime.
func (st *Stmt) Prepare(ctx context.Context) (optime.OpTime, error) {
	t := st.Txn
	switch t.State() {
	case Prepared:
		return t.prep.Prepare, nil
	case Committed:
		return optime.OpTime{}, mongoerr.Newf(mongoerr.TransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", t.number)
	case Aborted:
		return optime.OpTime{}, mongoerr.New(mongoerr.NoSuchTransaction, "Transaction isn't in progress")
	}
	ot, err := st.prepare(ctx)
	if err != nil {
		t.abort("")
		return optime.OpTime{}, err
	}
	return ot, nil
}

func (st *Stmt) prepare(ctx context.Context) (optime.OpTime, error) {
	t := st.Txn
	m := st.m
	w, ok := m.db.Observer().(*oplog.Writer)
	if !ok {
		return optime.OpTime{}, mongoerr.New(mongoerr.ReadConcernMajorityNotEnabled, "'prepareTransaction' is not supported on standalone nodes.")
	}
	// The prepare is logged by a unit of its own: the transaction's unit takes no writes
	// once prepared (MongoDB writes the entry in a side transaction too).
	op, done, err := m.loggingOp(ctx, nil)
	if err != nil {
		return optime.OpTime{}, err
	}
	defer done()
	t.detach()
	t.detach = nil
	for _, op := range t.ops.Ops {
		if o, _ := bsoncore.Document(op).Lookup("op").StringValueOK(); o == "c" {
			return optime.OpTime{}, mongoerr.New(mongoerr.OperationNotSupportedInTransaction,
				"Cannot create new collections inside distributed transactions")
		}
	}
	// The prepared transaction keeps its collections locked until its decision (statements
	// lock only while they run): DDL that came between statements is found here.
	held := oplog.PreparedOf(m.db.Engine)
	locks, err := held.LockNamespaces(ctx, oplog.OpNamespaces(t.ops.Ops))
	if err != nil {
		return optime.OpTime{}, err
	}
	if err := liveCollections(m.db.Catalog.LatestFor(t.res.RU), t.ops.Ops); err != nil {
		locks.Release()
		return optime.OpTime{}, err
	}
	handedOver := false
	defer func() {
		if !handedOver {
			locks.Release()
		}
	}()
	cat := m.db.Catalog.Latest()
	for _, op := range t.ops.Ops {
		if st, b, ok := bsoncore.Document(op).Lookup("ui").BinaryOK(); ok && st == 4 && len(b) == 16 {
			if _, ok := cat.ByUUID(catalog.UUID(b)); !ok {
				ns, _ := bsoncore.Document(op).Lookup("ns").StringValueOK()
				return optime.OpTime{}, mongoerr.Newf(mongoerr.WriteConflict,
					"WriteConflict error: collection %s was dropped while the transaction was open", ns)
			}
		}
	}
	ru := op.RU
	wu := ru.BeginUnitOfWork()
	defer wu.End()
	ots, wall, err := w.LogPrepare(ru, t.lsid, t.number, t.ops.Ops)
	if err != nil {
		return optime.OpTime{}, err
	}
	// The change stream pre-images belong to the prepared unit: visible at the commit.
	if err := w.WritePreparedPreImages(t.res.RU, t.ops, ots, wall); err != nil {
		return optime.OpTime{}, err
	}
	prep, start := ots[len(ots)-1], ots[0]
	if err := t.res.RU.Prepare(prep.TS); err != nil {
		return optime.OpTime{}, err
	}
	if err := retryable.UpsertRecord(op, oplog.PreparedSessionRecord(t.lsid, t.number, prep, start, wall)); err != nil {
		return optime.OpTime{}, err
	}
	if err := wu.Commit(); err != nil {
		return optime.OpTime{}, err
	}
	// Cursors read through the unit, which now belongs to the prepared state.
	t.killCursors()
	t.prep = held.Hold(t.lsid, t.number, prep, start, t.res.RU, t.wuow, locks, nil)
	handedOver = true
	t.res, t.wuow = nil, nil
	t.state.Store(int32(Prepared))
	m.Prepared.Add(1)
	return prep, nil
}

// CommitPrepared commits a prepared transaction at commitTs (commitTransaction with a
// commitTimestamp): the commitTransaction entry and the session record {state: "committed"}
// are written at a new slot, above commitTs, in a unit of their own, and the transaction's
// writes become visible at exactly commitTs. A committed transaction commits again as a
// no-op (a retry).
func (st *Stmt) CommitPrepared(ctx context.Context, commitTs optime.Timestamp) error {
	t := st.Txn
	switch t.State() {
	case Committed:
		return nil
	case Aborted:
		return mongoerr.Newf(mongoerr.NoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", t.number)
	case InProgress:
		return mongoerr.New(mongoerr.InvalidOptions, "commitTransaction cannot provide commitTimestamp to unprepared transaction.")
	}
	if commitTs.IsNull() {
		return mongoerr.New(mongoerr.InvalidOptions, "'commitTimestamp' cannot be null")
	}
	if commitTs < t.prep.Prepare.TS {
		return mongoerr.New(mongoerr.InvalidOptions, "'commitTimestamp' must be greater than or equal to 'prepareTimestamp'")
	}
	return st.decidePrepared(ctx, commitTs)
}

// decidePrepared logs and applies a prepared transaction's decision: commit at commitTs, or
// abort when commitTs is null.
func (st *Stmt) decidePrepared(ctx context.Context, commitTs optime.Timestamp) error {
	t := st.Txn
	m := st.m
	w, ok := m.db.Observer().(*oplog.Writer)
	if !ok {
		return mongoerr.New(mongoerr.IllegalOperation, "Transaction numbers are only allowed on a replica set member or mongos")
	}
	op, done, err := m.loggingOp(ctx, nil)
	if err != nil {
		return err
	}
	defer done()
	ru := op.RU
	wu := ru.BeginUnitOfWork()
	defer wu.End()
	ot, wall, err := w.LogPreparedDecision(ru, t.lsid, t.number, t.prep.Prepare, commitTs)
	if err != nil {
		return err
	}
	state := oplog.TxnCommitted
	if commitTs.IsNull() {
		state = oplog.TxnAborted
	}
	if err := retryable.UpsertRecord(op, oplog.TxnSessionRecord(t.lsid, t.number, ot, wall, state)); err != nil {
		return err
	}
	if commitTs.IsNull() {
		if err := wu.Commit(); err != nil {
			return err
		}
		t.prep.Abort()
		t.state.Store(int32(Aborted))
		m.Aborted.Add(1)
		m.PreparedAborted.Add(1)
		return nil
	}
	// The data first, then the entry (MongoDB's order): the entry's slot is in flight
	// until both are done, so nothing reads the oplog past it before the data is there,
	// and a crash in between leaves the transaction prepared (a commit at or below the
	// stable timestamp is undone by recovery; see storage's prepared commit records).
	if err := t.prep.Commit(commitTs, ot.TS); err != nil {
		return err
	}
	t.state.Store(int32(Committed))
	t.commitOT = ot
	m.Committed.Add(1)
	m.PreparedCommitted.Add(1)
	if err := wu.Commit(); err != nil {
		return fmt.Errorf("logging the commit of prepared transaction %d (its writes are committed): %w", t.number, err)
	}
	st.s.NoteCommitted(t.number, 0, []optime.OpTime{ot})
	return nil
}

// checkWrittenCollections makes sure every collection the transaction wrote is still the one
// it wrote (statements lock only while they run, so a drop or rename may have come between
// them): it takes their intent locks for the rest of the commit, so no DDL interleaves, and
// fails with WriteConflict (TransientTransactionError: the driver retries the whole
// transaction) when one is gone. Its writes would otherwise land in a dropped collection's
// table, which waits for its two-phase drop, and vanish from a committed transaction.
func (m *Manager) checkWrittenCollections(ctx context.Context, op *operation.Context, ru *storage.RecoveryUnit, ops [][]byte) error {
	if _, err := op.Locker.LockCollections(ctx, lock.ModeIX, oplog.OpNamespaces(ops)...); err != nil {
		return err
	}
	return liveCollections(m.db.Catalog.LatestFor(ru), ops)
}

// liveCollections fails with WriteConflict when a document operation's collection (ns, ui)
// is no longer in snap under that name.
func liveCollections(snap *catalog.Snapshot, ops [][]byte) error {
	for _, o := range ops {
		doc := bsoncore.Document(o)
		if kind, _ := doc.Lookup("op").StringValueOK(); kind != "i" && kind != "u" && kind != "d" {
			continue // DDL the transaction ran itself (create, createIndexes: ns is db.$cmd)
		}
		ns, _ := doc.Lookup("ns").StringValueOK()
		sub, data, ok := doc.Lookup("ui").BinaryOK()
		if !ok || sub != 4 || len(data) != 16 {
			continue
		}
		m, found := snap.ByUUID(catalog.UUID(data))
		if !found || m.NS != ns {
			return mongoerr.Newf(mongoerr.WriteConflict,
				"WriteConflict: collection %s was dropped or renamed while the transaction wrote to it", ns)
		}
	}
	return nil
}

// loggingOp opens the operation a commit, prepare or decision logs in: in the transaction's
// unit (res) or, for the prepared paths, a unit of its own, holding the global intent lock so
// that a step-down (which kills writers under the global lock) cannot interleave with the
// logging. done closes it.
func (m *Manager) loggingOp(ctx context.Context, res *operation.Txn) (*operation.Context, func(), error) {
	op := m.db.NewOp(operation.WithRequest(ctx, &operation.Request{Txn: res, Admission: new(lock.Admission)}))
	scope, err := op.Locker.GlobalLock(ctx, lock.ModeIX)
	if err != nil {
		op.Close()
		return nil, nil, err
	}
	return op, func() {
		_ = scope.Release()
		op.Close()
	}, nil
}

// killCursors kills the cursors the transaction opened.
func (t *Txn) killCursors() {
	if len(t.cursors) > 0 && t.m != nil {
		if kill := cursorKillers.Get(t.m.db).Load(); kill != nil {
			(*kill)(t.cursors)
		}
		t.cursors = nil
	}
}
