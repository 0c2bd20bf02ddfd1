// Package session is the session catalog of retryable writes (spec: replication.md, and
// MongoDB's SessionCatalog / TransactionParticipant for retryable writes): one record per
// logical session id holding the session's active txnNumber and, for it, which statement ids
// have already executed and the OpTime of the oplog entry each one wrote.
//
// # Durability and failover
//
// The catalog is a cache. What is durable is (a) the session's `config.transactions`
// document {_id: lsid, txnNum, lastWriteOpTime, lastWriteDate}, written in the same
// WriteUnitOfWork as the statement it records, and (b) the statement's oplog entries, which
// carry lsid/txnNumber/stmtId and a prevOpTime linking them into a chain per transaction
// number. Both replicate, so a new primary rebuilds a record lazily (Load): read the
// config.transactions document, then walk the chain back from lastWriteOpTime. A chain cut
// short by oplog truncation marks the record incomplete, and a statement id not found in it
// is IncompleteTransactionHistory (217), as in MongoDB, rather than a second execution.
//
// # Validity
//
// A record loaded while this node is primary in term T stays right while it remains primary
// in T: only the primary writes, and every write of the session goes through the checked-out
// record. A node cannot be primary again in T after stepping down, so the record remembers
// its term and is reloaded when the caller's term differs (after a failover and back).
//
// # Concurrency
//
// CheckOut gives one operation at a time exclusive use of a session (MongoDB's
// OperationContextSession), waiting for the current holder and honouring ctx. Every field of
// a Session is owned by whoever has it checked out.
package session

import (
	"context"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/txn/lsc"
)

// Store reads what a record is rebuilt from.
type Store interface {
	// LoadRecord returns the session's config.transactions document, nil when it has none.
	LoadRecord(ctx context.Context, lsid bsoncore.Document) (bsoncore.Document, error)
	// OplogEntry returns the oplog entry at ts, nil when the oplog no longer holds it.
	OplogEntry(ctx context.Context, ts optime.Timestamp) (bsoncore.Document, error)
}

// Catalog holds session records. Safe for concurrent use.
type Catalog struct {
	store Store
	// maxIdle bounds the records kept while nobody has them checked out; evicted records
	// are reloaded from storage on next use.
	maxIdle int

	mu sync.Mutex
	m  map[lsc.Key]*Session
}

// New returns a catalog reading through store and keeping at most maxIdle idle records
// (0 means 10000).
func New(store Store, maxIdle int) *Catalog {
	if maxIdle <= 0 {
		maxIdle = 10000
	}
	return &Catalog{store: store, maxIdle: maxIdle, m: map[lsc.Key]*Session{}}
}

// Session is one logical session's retryable-write state. All fields except key, token and
// users are owned by the holder of the checkout.
type Session struct {
	key lsc.Key
	// token holds one value while the session is free; CheckOut takes it.
	token chan struct{}
	users int // operations holding or waiting for the session; guarded by Catalog.mu

	loaded bool
	term   int64 // the term the record was loaded in

	txn        int64                   // active txnNumber; -1 before the first
	stmts      map[int32]optime.OpTime // executed statements of txn
	last       optime.OpTime           // OpTime of txn's newest entry (the chain's head)
	incomplete bool                    // part of txn's chain was truncated from the oplog
}

// CheckOut waits for exclusive use of the session key (creating its record) or for ctx.
func (c *Catalog) CheckOut(ctx context.Context, key lsc.Key) (*Session, error) {
	c.mu.Lock()
	s, ok := c.m[key]
	if !ok {
		s = &Session{key: key, token: make(chan struct{}, 1), txn: -1}
		s.token <- struct{}{}
		c.m[key] = s
	}
	s.users++
	c.mu.Unlock()
	select {
	case <-s.token:
		return s, nil
	case <-ctx.Done():
		c.release(s)
		return nil, context.Cause(ctx)
	}
}

// CheckIn ends the caller's use of s.
func (c *Catalog) CheckIn(s *Session) {
	s.token <- struct{}{}
	c.release(s)
}

// release drops one user of s and, with too many idle records, forgets idle ones.
func (c *Catalog) release(s *Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.users--
	if len(c.m) <= c.maxIdle {
		return
	}
	for k, r := range c.m {
		if r.users == 0 {
			delete(c.m, k)
			if len(c.m) <= c.maxIdle/2 {
				return
			}
		}
	}
}

// Invalidate forgets every record not in use (e.g. after rollback); records in use are
// reloaded by their next Refresh because their term no longer matches.
func (c *Catalog) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, r := range c.m {
		if r.users == 0 {
			delete(c.m, k)
		}
	}
}

// Refresh makes sure s reflects storage for term: it loads the record unless it was loaded
// in the same term. lsid is the session id document (the config.transactions _id).
func (c *Catalog) Refresh(ctx context.Context, s *Session, lsid bsoncore.Document, term int64) error {
	if s.loaded && s.term == term {
		return nil
	}
	s.txn, s.stmts, s.last, s.incomplete = -1, nil, optime.OpTime{}, false
	rec, err := c.store.LoadRecord(ctx, lsid)
	if err != nil {
		return err
	}
	if rec != nil {
		if err := c.loadChain(ctx, s, rec); err != nil {
			return err
		}
	}
	s.loaded, s.term = true, term
	return nil
}

// loadChain fills s from a config.transactions document and the oplog chain it heads.
func (c *Catalog) loadChain(ctx context.Context, s *Session, rec bsoncore.Document) error {
	txn, ok := lookupInt64(rec, "txnNum")
	if !ok {
		return fmt.Errorf("session: config.transactions record without txnNum: %v", rec)
	}
	last, ok := optime.Lookup(rec, "lastWriteOpTime")
	if !ok {
		return fmt.Errorf("session: config.transactions record without lastWriteOpTime: %v", rec)
	}
	s.txn, s.last, s.stmts = txn, last, map[int32]optime.OpTime{}
	for at := last; !at.IsNull(); {
		e, err := c.store.OplogEntry(ctx, at.TS)
		if err != nil {
			return err
		}
		if e == nil {
			s.incomplete = true
			return nil
		}
		etxn, _ := lookupInt64(e, "txnNumber")
		sid, ok := lookupInt32(e, "stmtId")
		if etxn != txn || !ok {
			// Not this transaction's entry: the chain is broken; treat as truncated.
			s.incomplete = true
			return nil
		}
		if sid == IncompleteHistoryStmtID {
			// A dead-end sentinel (a session migration's mark of history the donor no
			// longer had): the statements before it are unknown.
			s.incomplete = true
		} else {
			s.stmts[sid] = at
		}
		prev, _ := optime.Lookup(e, "prevOpTime")
		if !prev.IsNull() && prev.TS >= at.TS {
			return fmt.Errorf("session: oplog chain does not go back in time at %v", at)
		}
		at = prev
	}
	return nil
}

// Begin starts or continues txn on s: a lower number than the active one is
// TransactionTooOld (225); a higher one starts a new transaction number with no executed
// statements (persisted by its first write).
func (s *Session) Begin(txn int64, lsidDesc string) error {
	switch {
	case txn < s.txn:
		return mongoerr.Newf(mongoerr.TransactionTooOld,
			"Retryable write with txnNumber %d is prohibited on session %s because a newer retryable write with txnNumber %d has already started on this session.",
			txn, lsidDesc, s.txn)
	case txn > s.txn:
		s.txn, s.stmts, s.last, s.incomplete = txn, nil, optime.OpTime{}, false
	}
	return nil
}

// TxnNumber is the active transaction number (-1 before the first).
func (s *Session) TxnNumber() int64 { return s.txn }

// LastWrite is the OpTime of the active transaction number's newest entry (null when none):
// the next entry's prevOpTime.
func (s *Session) LastWrite() optime.OpTime { return s.last }

// Executed reports whether stmt already ran in the active transaction number and the OpTime
// of its entry. When the chain was truncated and stmt is not in what remains, it is
// IncompleteTransactionHistory: the statement may have run, so it must not run again.
func (s *Session) Executed(stmt int32) (optime.OpTime, bool, error) {
	if ot, ok := s.stmts[stmt]; ok {
		return ot, true, nil
	}
	if s.incomplete {
		return optime.OpTime{}, false, mongoerr.Newf(mongoerr.IncompleteTransactionHistory,
			"Incomplete history detected for transaction %d on session %x", s.txn, s.key.ID[:])
	}
	return optime.OpTime{}, false, nil
}

// IncompleteHistoryStmtID is the statement id of a dead-end sentinel entry (MongoDB's
// kIncompleteHistoryStmtId): the session's history before it is lost, so a statement not
// found in the rest is IncompleteTransactionHistory.
const IncompleteHistoryStmtID int32 = -1

// NoteIncomplete marks txn's history incomplete (a dead-end sentinel written at ot, after
// its unit committed); ot becomes the chain's head.
func (s *Session) NoteIncomplete(txn int64, ot optime.OpTime) {
	if txn != s.txn {
		return
	}
	s.incomplete = true
	if ot.TS > s.last.TS {
		s.last = ot
	}
}

// NoteCommitted records statements [first, first+n) of txn as executed with their entries'
// OpTimes ots (len n), after the unit that wrote them committed.
func (s *Session) NoteCommitted(txn int64, first int32, ots []optime.OpTime) {
	if txn != s.txn || len(ots) == 0 {
		return
	}
	if s.stmts == nil {
		s.stmts = map[int32]optime.OpTime{}
	}
	for i, ot := range ots {
		s.stmts[first+int32(i)] = ot
	}
	if last := ots[len(ots)-1]; last.TS > s.last.TS {
		s.last = last
	}
}

func lookupInt64(d bsoncore.Document, key string) (int64, bool) {
	v, err := d.LookupErr(key)
	if err != nil {
		return 0, false
	}
	return v.AsInt64OK()
}

func lookupInt32(d bsoncore.Document, key string) (int32, bool) {
	v, err := d.LookupErr(key)
	if err != nil {
		return 0, false
	}
	return v.AsInt32OK()
}
