package oplog_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/optime"
	"humongo/internal/storage"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestVisibilityWakesAfterTheHoleCloses: two units take oplog slots T1 < T2; T2 commits first
// (readers cannot see it yet: T1 is a hole), then T1 commits. Each commit wakes the readers
// waiting at that moment, and after the second one the all-durable point covers both entries,
// so a reader woken by the last commit finds everything. A rolled-back unit also wakes them:
// releasing its slot can uncover later entries.
func TestVisibilityWakesAfterTheHoleCloses(t *testing.T) {
	n := openNode(t, true)
	e := n.db.Engine
	msg := bsoncore.NewDocumentBuilder().AppendString("msg", "x").Build()
	begin := func() (*storage.RecoveryUnit, *storage.WriteUnitOfWork, optime.OpTime) {
		ru := e.NewRecoveryUnit()
		wu := ru.BeginUnitOfWork()
		ot, err := n.w.LogNoopInUnit(ru, msg)
		if err != nil {
			t.Fatal(err)
		}
		return ru, wu, ot
	}
	ru1, wu1, ot1 := begin()
	ru2, wu2, ot2 := begin()
	if ot2.TS <= ot1.TS {
		t.Fatalf("slots out of order: %v then %v", ot1, ot2)
	}
	ch := n.w.VisibilityChanged()
	if closed(ch) {
		t.Fatal("signalled before any commit")
	}
	if err := wu2.Commit(); err != nil {
		t.Fatal(err)
	}
	wu2.End()
	ru2.Close()
	if !closed(ch) {
		t.Fatal("the commit of T2 did not wake readers")
	}
	if vis := e.OplogVisibleTimestamp(); vis >= ot2.TS {
		t.Fatalf("T2 visible (%v) while T1 %v is in flight", vis, ot1.TS)
	}
	ch = n.w.VisibilityChanged()
	if closed(ch) {
		t.Fatal("a new wait channel is already closed")
	}
	if err := wu1.Commit(); err != nil {
		t.Fatal(err)
	}
	wu1.End()
	ru1.Close()
	if !closed(ch) {
		t.Fatal("the commit that closed the hole did not wake readers")
	}
	if vis := e.OplogVisibleTimestamp(); vis < ot2.TS {
		t.Fatalf("after both commits the visible point %v is below T2 %v", vis, ot2.TS)
	}

	// Rollback: T3 is abandoned while T4 committed behind it.
	ru3, wu3, _ := begin()
	ru4, wu4, ot4 := begin()
	if err := wu4.Commit(); err != nil {
		t.Fatal(err)
	}
	wu4.End()
	ru4.Close()
	ch = n.w.VisibilityChanged()
	wu3.End() // rolls back, releasing T3
	ru3.Close()
	if !closed(ch) {
		t.Fatal("rolling back a unit with an oplog slot did not wake readers")
	}
	if vis := e.OplogVisibleTimestamp(); vis < ot4.TS {
		t.Fatalf("after the rollback the visible point %v is below T4 %v", vis, ot4.TS)
	}
}

// TestLastVisibleIsAnEntry: LastVisible (a primary's lastApplied) is always one of the
// node's own entries that readers can see. A unit that commits without logging anything (a
// read-only transaction's commit) takes an engine-assigned timestamp past the newest entry
// and moves the all-durable point there; LastVisible stays at the entry, which is what a
// secondary can fetch (else members waiting to reach the primary's lastApplied wait for the
// next write). An entry committed behind a hole becomes visible when the hole commits or
// rolls back.
func TestLastVisibleIsAnEntry(t *testing.T) {
	n := openNode(t, true)
	e := n.db.Engine
	msg := bsoncore.NewDocumentBuilder().AppendString("msg", "x").Build()
	begin := func() (*storage.RecoveryUnit, *storage.WriteUnitOfWork, optime.OpTime) {
		ru := e.NewRecoveryUnit()
		wu := ru.BeginUnitOfWork()
		ot, err := n.w.LogNoopInUnit(ru, msg)
		if err != nil {
			t.Fatal(err)
		}
		return ru, wu, ot
	}
	commit := func(ru *storage.RecoveryUnit, wu *storage.WriteUnitOfWork) {
		t.Helper()
		if err := wu.Commit(); err != nil {
			t.Fatal(err)
		}
		wu.End()
		ru.Close()
	}
	ru1, wu1, ot1 := begin()
	commit(ru1, wu1)
	if got := n.w.LastVisible(); got != ot1 {
		t.Fatalf("LastVisible = %v after committing %v", got, ot1)
	}

	// An empty unit commits at a timestamp of its own.
	ru := e.NewRecoveryUnit()
	wu := ru.BeginUnitOfWork()
	commit(ru, wu)
	if vis := e.AllDurableTimestamp(); vis <= ot1.TS {
		t.Fatalf("the empty commit did not move the all-durable point (%v) past %v; the test proves nothing", vis, ot1.TS)
	}
	if got := n.w.LastVisible(); got != ot1 {
		t.Fatalf("LastVisible = %v after an empty commit, want the last entry %v", got, ot1)
	}

	// T3 commits behind the hole T2: not visible until T2 commits.
	ru2, wu2, ot2 := begin()
	ru3, wu3, ot3 := begin()
	commit(ru3, wu3)
	if got := n.w.LastVisible(); got != ot1 {
		t.Fatalf("LastVisible = %v while %v is in flight below %v, want %v", got, ot2, ot3, ot1)
	}
	commit(ru2, wu2)
	if got := n.w.LastVisible(); got != ot3 {
		t.Fatalf("LastVisible = %v once the hole committed, want %v", got, ot3)
	}

	// T5 commits behind T4, which rolls back: T5 is visible then.
	ru4, wu4, _ := begin()
	ru5, wu5, ot5 := begin()
	commit(ru5, wu5)
	if got := n.w.LastVisible(); got != ot3 {
		t.Fatalf("LastVisible = %v behind a hole, want %v", got, ot3)
	}
	wu4.End()
	ru4.Close()
	if got := n.w.LastVisible(); got != ot5 {
		t.Fatalf("LastVisible = %v after the hole rolled back, want %v", got, ot5)
	}
}
