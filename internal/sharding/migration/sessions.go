package migration

// Session migration (MongoDB's SessionCatalogMigrationSource and
// SessionCatalogMigrationDestination; spec: sharding.md, checklist section 7 "Across
// migrations"): so that a retryable write or findAndModify retried after its document moved
// is not executed again, the donor sends the recipient the oplog entries of the retryable
// writes in the migrated range (and the findAndModify images), and the recipient records
// them as executed statements of their sessions (internal/txn/retryable, migrate.go).
//
// The donor's SessionSource walks, for every session in config.transactions, the chain of
// its current txnNumber back from lastWriteOpTime, and keeps the entries whose document is
// in the range; the sessions written to in the range during the migration (the Tracker
// notes them when their unit commits) are walked again, stopping at entries walked before.
// History it cannot give (a chain cut by oplog truncation, a multi-document transaction)
// becomes a dead-end sentinel. _getNextSessionMods hands the entries out in batches and,
// when it has none, waits for a new write or for the commit (then it answers empty at once).
//
// The recipient fetches from the start of the clone until, after _recvChunkCommit (the
// donor's writes are blocked by then), it gets an empty batch twice, and waits for its
// writes to be majority-committed before the commit completes.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/txn/retryable"
)

// SessionSource is the donor's session history for one migration.
type SessionSource struct {
	ns    string
	rng   Range
	local *Local
	// skip is the migration's own session (its coordinator's lsid id): not sent.
	skip catalog.UUID

	mu      sync.Mutex
	pending []bsoncore.Document // lsids of sessions still to walk
	queued  map[string]bool     // lsids in pending
	visited map[string]bool     // lsid+ts of entries walked already
	dead    map[string]bool     // lsid+txnNumber given a dead-end sentinel already
	out     []bsoncore.Document // entries ready to send, in order
	// committing: the donor entered the critical section (no new writes come);
	// closed: the migration ended; rescanTxns: a transaction wrote in the range, so the
	// committed transactions of config.transactions are looked for again.
	committing, closed, rescanTxns bool
	changed                        chan struct{} // closed and replaced when a session is noted or the state changes
	// sent counts the entries handed out.
	sent int64
}

// NewSessionSource returns the donor's session history of range rng of ns; Init loads it.
func NewSessionSource(ns string, rng Range, local *Local, skip catalog.UUID) *SessionSource {
	return &SessionSource{ns: ns, rng: rng, local: local, skip: skip, queued: map[string]bool{},
		visited: map[string]bool{}, dead: map[string]bool{}, changed: make(chan struct{})}
}

// Init queues every session of config.transactions (the Tracker already notes sessions
// written to during the migration, so none falls between).
func (ss *SessionSource) Init(ctx context.Context) error {
	return ss.scan(ctx, false)
}

// scan queues the sessions of config.transactions (only transactions' with txnsOnly).
func (ss *SessionSource) scan(ctx context.Context, txnsOnly bool) error {
	recs, err := ss.local.ScanAll(ctx, retryable.TxnsNS)
	if err != nil {
		return fmt.Errorf("read config.transactions: %w", err)
	}
	for _, r := range recs {
		if txnsOnly && r.Lookup("state").Type == 0 {
			continue
		}
		if lsid, ok := r.Lookup("_id").DocumentOK(); ok {
			ss.NoteSession(lsid)
		}
	}
	return nil
}

// NoteTransactionCommitted makes the next batch look for newly committed transactions (a
// transaction's write in the range committed; its unit does not name its session). Each
// gets a dead-end sentinel, as in MongoDB: a transaction is not retried as retryable
// writes.
func (ss *SessionSource) NoteTransactionCommitted() {
	ss.mu.Lock()
	ss.rescanTxns = true
	ss.signalLocked()
	ss.mu.Unlock()
}

// NoteSession queues session lsid to be walked (again).
func (ss *SessionSource) NoteSession(lsid bsoncore.Document) {
	if sub, id, ok := lsid.Lookup("id").BinaryOK(); ok && sub == 4 && string(id) == string(ss.skip[:]) {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.queued[string(lsid)] {
		return
	}
	ss.queued[string(lsid)] = true
	ss.pending = append(ss.pending, append(bsoncore.Document(nil), lsid...))
	ss.signalLocked()
}

func (ss *SessionSource) signalLocked() {
	close(ss.changed)
	ss.changed = make(chan struct{})
}

// CommitStarted is MongoDB's onCommitCloneStarted: no write comes any more, so an empty
// batch is final and _getNextSessionMods stops waiting.
func (ss *SessionSource) CommitStarted() {
	ss.mu.Lock()
	ss.committing = true
	ss.signalLocked()
	ss.mu.Unlock()
}

// Close is MongoDB's onCloneCleanup: waiters return.
func (ss *SessionSource) Close() {
	ss.mu.Lock()
	ss.closed = true
	ss.signalLocked()
	ss.mu.Unlock()
}

// Sent returns how many entries were handed out.
func (ss *SessionSource) Sent() int64 {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.sent
}

// NextBatch serves one _getNextSessionMods: up to maxBytes of entries. With none ready it
// waits (up to wait, or ctx) for a new session write or the commit, and tries once more.
func (ss *SessionSource) NextBatch(ctx context.Context, maxBytes int, wait time.Duration) ([]bsoncore.Document, error) {
	batch, err := ss.next(ctx, maxBytes)
	if err != nil || len(batch) > 0 {
		return batch, err
	}
	ss.mu.Lock()
	done := ss.committing || ss.closed || len(ss.pending) > 0 || ss.rescanTxns
	changed := ss.changed
	ss.mu.Unlock()
	if !done {
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, nil
		case <-time.After(wait):
		}
	}
	return ss.next(ctx, maxBytes)
}

func (ss *SessionSource) next(ctx context.Context, maxBytes int) ([]bsoncore.Document, error) {
	ss.mu.Lock()
	rescan := ss.rescanTxns
	ss.rescanTxns = false
	ss.mu.Unlock()
	if rescan {
		if err := ss.scan(ctx, true); err != nil {
			return nil, err
		}
	}
	var batch []bsoncore.Document
	size := 0
	for size < maxBytes {
		ss.mu.Lock()
		if len(ss.out) > 0 {
			e := ss.out[0]
			if len(batch) > 0 && size+len(e) > maxBytes {
				ss.mu.Unlock()
				break
			}
			ss.out = ss.out[1:]
			ss.sent++
			ss.mu.Unlock()
			batch = append(batch, e)
			size += len(e)
			continue
		}
		if len(ss.pending) == 0 {
			ss.mu.Unlock()
			break
		}
		lsid := ss.pending[0]
		ss.pending = ss.pending[1:]
		delete(ss.queued, string(lsid))
		ss.mu.Unlock()
		entries, err := ss.walk(ctx, lsid)
		if err != nil {
			return nil, err
		}
		ss.mu.Lock()
		ss.out = append(ss.out, entries...)
		ss.mu.Unlock()
	}
	return batch, nil
}

// walk returns the entries to send for session lsid's current txnNumber that were not
// walked before (images first, each before its statement's entry).
func (ss *SessionSource) walk(ctx context.Context, lsid bsoncore.Document) ([]bsoncore.Document, error) {
	db := ss.local.DB
	rec, err := retryable.LoadRecord(ctx, db, lsid)
	if err != nil || rec == nil {
		return nil, err
	}
	txn, _ := rec.Lookup("txnNum").AsInt64OK()
	var out []bsoncore.Document
	sentinel := func() {
		k := fmt.Sprintf("%x/%d", []byte(lsid), txn)
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if !ss.dead[k] {
			ss.dead[k] = true
			out = append(out, retryable.SentinelEntry(lsid, txn, time.Now().UnixMilli()))
		}
	}
	if state, ok := rec.Lookup("state").StringValueOK(); ok {
		// A multi-document transaction's session: its statements cannot be retried as
		// retryable writes; a committed or prepared one must not run again either. One
		// known not to have written the collection is left out (MongoDB skips the sessions
		// whose affected namespaces it knows).
		if state == oplog.TxnCommitted || state == oplog.TxnPrepared {
			touches, err := ss.txnTouches(ctx, rec)
			if err != nil {
				return nil, err
			}
			if touches {
				sentinel()
			}
		}
		return out, nil
	}
	at, ok := optime.Lookup(rec, "lastWriteOpTime")
	var chain []bsoncore.Document
	for ok && !at.IsNull() {
		k := fmt.Sprintf("%x/%d", []byte(lsid), uint64(at.TS))
		ss.mu.Lock()
		seen := ss.visited[k]
		ss.visited[k] = true
		ss.mu.Unlock()
		if seen {
			break // the rest of the chain was walked before
		}
		e, err := retryable.ReadOplogEntry(ctx, db, at.TS)
		if err != nil {
			return nil, err
		}
		if etxn, _ := e.Lookup("txnNumber").AsInt64OK(); e == nil || etxn != txn {
			// Truncated (or broken): what ran before is unknown.
			sentinel()
			break
		}
		in, err := ss.inRange(ctx, e)
		if err != nil {
			return nil, err
		}
		if in {
			chain = append(chain, e)
		}
		at, ok = optime.Lookup(e, "prevOpTime")
	}
	for _, e := range chain {
		img, entry, err := retryable.ImageForMigration(ctx, db, e)
		if err != nil {
			return nil, err
		}
		if img != nil {
			out = append(out, img)
		}
		out = append(out, entry)
	}
	return out, nil
}

// txnTouches reports whether the transaction recorded by rec wrote the collection, from
// its applyOps entries (the chain back from lastWriteOpTime); true when the oplog no
// longer holds them.
func (ss *SessionSource) txnTouches(ctx context.Context, rec bsoncore.Document) (bool, error) {
	at, ok := optime.Lookup(rec, "lastWriteOpTime")
	for ok && !at.IsNull() {
		e, err := retryable.ReadOplogEntry(ctx, ss.local.DB, at.TS)
		if err != nil {
			return false, err
		}
		if e == nil {
			return true, nil
		}
		if arr, isArr := e.Lookup("o", "applyOps").ArrayOK(); isArr {
			ops, _ := arr.Values()
			for _, v := range ops {
				op, _ := v.DocumentOK()
				if ns, _ := op.Lookup("ns").StringValueOK(); ns == ss.ns {
					return true, nil
				}
			}
		}
		at, ok = optime.Lookup(e, "prevOpTime")
	}
	return false, nil
}

// inRange reports whether statement entry e is to be sent: a dead-end sentinel always, a
// write of the collection when its document is in the range. Update and delete entries
// name only the _id, so their document is looked up; one that is gone is sent (an extra
// statement on the recipient is harmless, a missing one is a second execution).
func (ss *SessionSource) inRange(ctx context.Context, e bsoncore.Document) (bool, error) {
	if retryable.IsSentinel(e) {
		return true, nil
	}
	if ns, _ := e.Lookup("ns").StringValueOK(); ns != ss.ns {
		return false, nil
	}
	orig := retryable.Original(e)
	var id bsoncore.Value
	switch op, _ := orig.Lookup("op").StringValueOK(); op {
	case "i":
		doc, _ := orig.Lookup("o").DocumentOK()
		return ss.rng.Contains(doc), nil
	case "u":
		id = orig.Lookup("o2", "_id")
	case "d":
		id = orig.Lookup("o", "_id")
	default:
		return false, nil
	}
	if id.Type == 0 {
		return true, nil
	}
	docs, err := ss.local.FetchByIDs(ctx, ss.ns, []bsoncore.Value{id})
	if err != nil {
		return false, err
	}
	return len(docs) == 0 || ss.rng.Contains(docs[0]), nil
}

// sessionModsWait bounds how long an empty _getNextSessionMods waits for a new write.
const sessionModsWait = time.Second

// NextSessionMods serves _getNextSessionMods for the donor's migration sessionID.
func (s *Service) NextSessionMods(ctx context.Context, sessionID string) ([]bsoncore.Document, error) {
	c, err := s.activeCloner("", sessionID)
	if err != nil {
		return nil, err
	}
	if c.sessions == nil {
		return nil, nil
	}
	return c.sessions.NextBatch(ctx, cloneBatchBytes, sessionModsWait)
}

// sessionMigration is the recipient's SessionCatalogMigrationDestination: a goroutine owned
// by the incoming migration's receive, from the start of the clone to the commit.
type sessionMigration struct {
	done chan struct{} // closed when migrateSessions returns
	err  error         // its outcome, set before done closes
}

// failed returns the session migration's error once it has ended with one.
func (sm *sessionMigration) failed() error {
	select {
	case <-sm.done:
		return sm.err
	default:
		return nil
	}
}

// startSessionMigration starts fetching d's donor's session history; the caller waits for
// done (after cancelling ctx when it gives up).
func (s *Service) startSessionMigration(ctx context.Context, d *Destination) *sessionMigration {
	sm := &sessionMigration{done: make(chan struct{})}
	go func() {
		defer close(sm.done)
		sm.err = s.migrateSessions(ctx, d)
	}()
	return sm
}

// migrateSessions loops _getNextSessionMods until it has seen two empty batches after
// _recvChunkCommit, writing each entry, then waits for majority.
func (s *Service) migrateSessions(ctx context.Context, d *Destination) error {
	cmd := bsoncore.NewDocumentBuilder().AppendInt32("_getNextSessionMods", 1).AppendString("sessionId", d.req.SessionID).Build()
	term := s.Term
	if term == nil {
		term = func() int64 { return 0 }
	}
	var last retryable.MigratedResult
	drainedAfterCommit := false
	for {
		committing := d.committing()
		reply, err := s.Cluster.RunOnShard(ctx, d.req.FromShard, "admin", cmd)
		if err != nil {
			return fmt.Errorf("_getNextSessionMods failed: %w", err)
		}
		arr, ok := reply.Lookup("oplog").ArrayOK()
		if !ok {
			return mongoerr.New(mongoerr.FailedToParse, "_getNextSessionMods response does not have the 'oplog' field as array")
		}
		vals, _ := arr.Values()
		if len(vals) == 0 {
			if committing {
				// The first empty batch after the commit began may miss a write made
				// just before it: only the second one is final.
				if drainedAfterCommit {
					break
				}
				drainedAfterCommit = true
			}
			if !last.OpTime.IsNull() && s.WaitMajority != nil {
				if err := s.WaitMajority(ctx); err != nil {
					return err
				}
			}
			if !committing {
				// The donor waited for a write already; do not spin if it could not.
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-d.wake:
				case <-time.After(5 * time.Millisecond):
				}
			}
			continue
		}
		for _, v := range vals {
			raw, ok := v.DocumentOK()
			if !ok {
				return mongoerr.New(mongoerr.FailedToParse, "_getNextSessionMods returned an oplog entry that is not an object")
			}
			if last, err = retryable.ApplyMigrated(ctx, s.Local.DB, term, raw, last); err != nil {
				return fmt.Errorf("apply a migrated session entry: %w", err)
			}
			d.mu.Lock()
			d.sessionEntries++
			d.mu.Unlock()
		}
	}
	if s.WaitMajority != nil {
		return s.WaitMajority(ctx)
	}
	return nil
}

// committing reports whether _recvChunkCommit arrived.
func (d *Destination) committing() bool {
	select {
	case <-d.wake:
		return true
	default:
		return false
	}
}

// ScanAll returns copies of every document of ns (none when it does not exist).
func (l *Local) ScanAll(ctx context.Context, ns string) ([]bsoncore.Document, error) {
	var out []bsoncore.Document
	err := l.DB.ScanDocuments(ctx, ns, func(doc bsoncore.Document) bool {
		out = append(out, append(bsoncore.Document(nil), doc...))
		return true
	})
	return out, err
}
