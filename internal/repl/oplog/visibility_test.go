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
