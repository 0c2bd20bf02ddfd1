package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/txn/lsc"
)

// memStore holds a config.transactions document and oplog entries by timestamp. The real
// store (config.transactions and local.oplog.rs) is exercised by internal/commands tests.
type memStore struct {
	rec     bsoncore.Document
	entries map[optime.Timestamp]bsoncore.Document
}

func (m *memStore) LoadRecord(context.Context, bsoncore.Document) (bsoncore.Document, error) {
	return m.rec, nil
}

func (m *memStore) OplogEntry(_ context.Context, ts optime.Timestamp) (bsoncore.Document, error) {
	return m.entries[ts], nil
}

func opTimeDoc(ts optime.Timestamp, t int64) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendTimestamp("ts", ts.Secs(), ts.Inc()).AppendInt64("t", t).Build()
}

// chain builds a store whose txn 7 wrote stmts 0..2 at ts 10, 11, 12 (term 1).
func chain() *memStore {
	m := &memStore{entries: map[optime.Timestamp]bsoncore.Document{}}
	prev := optime.Timestamp(0)
	for i := int32(0); i < 3; i++ {
		ts := optime.MakeTimestamp(100, uint32(10+i))
		pt := int64(1)
		if prev == 0 {
			pt = optime.UninitializedTerm
		}
		m.entries[ts] = bsoncore.NewDocumentBuilder().AppendInt64("txnNumber", 7).AppendInt32("stmtId", i).
			AppendDocument("prevOpTime", opTimeDoc(prev, pt)).Build()
		prev = ts
	}
	m.rec = bsoncore.NewDocumentBuilder().AppendInt64("txnNum", 7).AppendDocument("lastWriteOpTime", opTimeDoc(prev, 1)).Build()
	return m
}

func TestLoadChainAndBegin(t *testing.T) {
	m := chain()
	c := New(m, 0)
	ctx := context.Background()
	s, err := c.CheckOut(ctx, lsc.Key{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(ctx, s, nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(7, "x"); err != nil {
		t.Fatal(err)
	}
	for i := int32(0); i < 3; i++ {
		ot, ok, err := s.Executed(i)
		if err != nil || !ok || ot.TS != optime.MakeTimestamp(100, uint32(10+i)) {
			t.Fatalf("stmt %d: %v %v %v", i, ot, ok, err)
		}
	}
	if _, ok, err := s.Executed(3); ok || err != nil {
		t.Fatalf("stmt 3 should not have run: %v %v", ok, err)
	}
	if err := s.Begin(6, "x"); mongoerr.CodeOf(err) != mongoerr.TransactionTooOld {
		t.Fatalf("lower txnNumber: %v", err)
	}
	if err := s.Begin(8, "x"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Executed(0); ok || !s.LastWrite().IsNull() {
		t.Fatal("a new txnNumber starts with no executed statements")
	}
	s.NoteCommitted(8, 0, []optime.OpTime{{TS: 500, Term: 2}})
	if ot, ok, _ := s.Executed(0); !ok || ot.TS != 500 || s.LastWrite().TS != 500 {
		t.Fatalf("NoteCommitted: %v %v", ot, ok)
	}
	c.CheckIn(s)

	// A truncated chain: statements not found may have run → IncompleteTransactionHistory.
	delete(m.entries, optime.MakeTimestamp(100, 10))
	c.Invalidate()
	s, _ = c.CheckOut(ctx, lsc.Key{})
	if err := c.Refresh(ctx, s, nil, 1); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Executed(2); !ok || err != nil {
		t.Fatalf("stmt 2: %v %v", ok, err)
	}
	if _, _, err := s.Executed(0); mongoerr.CodeOf(err) != mongoerr.IncompleteTransactionHistory {
		t.Fatalf("truncated stmt 0: %v", err)
	}
	c.CheckIn(s)
}

func TestRefreshOnTermChange(t *testing.T) {
	m := chain()
	c := New(m, 0)
	ctx := context.Background()
	s, _ := c.CheckOut(ctx, lsc.Key{})
	_ = c.Refresh(ctx, s, nil, 1)
	_ = s.Begin(9, "x") // in memory only
	if err := c.Refresh(ctx, s, nil, 1); err != nil || s.TxnNumber() != 9 {
		t.Fatalf("same term must keep the record: %d %v", s.TxnNumber(), err)
	}
	if err := c.Refresh(ctx, s, nil, 2); err != nil || s.TxnNumber() != 7 {
		t.Fatalf("new term must reload: %d %v", s.TxnNumber(), err)
	}
	c.CheckIn(s)
}

func TestCheckOutIsExclusive(t *testing.T) {
	c := New(&memStore{}, 0)
	k := lsc.Key{ID: catalog.NewUUID()}
	s, err := c.CheckOut(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.CheckOut(ctx, k); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second checkout while held: %v", err)
	}
	got := make(chan *Session)
	go func() {
		s2, _ := c.CheckOut(context.Background(), k)
		got <- s2
	}()
	c.CheckIn(s)
	s2 := <-got
	if s2 != s {
		t.Fatal("waiter got a different record")
	}
	c.CheckIn(s2)
}

func TestEvictsIdleRecords(t *testing.T) {
	c := New(&memStore{}, 4)
	held, _ := c.CheckOut(context.Background(), lsc.Key{ID: catalog.NewUUID()})
	for i := 0; i < 20; i++ {
		s, _ := c.CheckOut(context.Background(), lsc.Key{ID: catalog.NewUUID()})
		c.CheckIn(s)
	}
	c.mu.Lock()
	n := len(c.m)
	_, kept := c.m[held.key]
	c.mu.Unlock()
	if n > 4 || !kept {
		t.Fatalf("records: %d, held kept: %v", n, kept)
	}
	c.CheckIn(held)
}
