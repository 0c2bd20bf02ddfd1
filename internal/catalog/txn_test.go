package catalog

import (
	"testing"
	"time"

	"humongo/internal/mongoerr"
	"humongo/internal/storage"
)

// A transaction's unit creates a collection and an index: only LatestFor(its unit) shows
// them until it commits, other DDL runs meanwhile (the unit does not keep ddlMu between
// calls), a create of the same namespace by anyone else is a WriteConflict, and the commit
// publishes everything at its timestamp.
func TestTransactionUnitDDL(t *testing.T) {
	e, c := setup(t)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	defer w.End()
	if err := c.MarkTransaction(ru); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCollection(ru, "db.a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddIndex(ru, "db.a", doc(t, D("key", D("x", 1), "name", "x_1")), true, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Latest().ByNS("db.a"); ok {
		t.Fatal("uncommitted collection in Latest")
	}
	m, ok := c.LatestFor(ru).ByNS("db.a")
	if !ok || len(m.Indexes) != 2 {
		t.Fatalf("transaction's view: %v", m)
	}
	if other := e.NewRecoveryUnit(); c.LatestFor(other) != c.Latest() {
		t.Fatal("another unit sees the transaction's view")
	}

	// Other DDL is not blocked by the open transaction (under the old rule, ddlMu held
	// until the unit's end, this waits forever).
	done := make(chan error, 1)
	go func() {
		_, err := inUnit(t, e, ts(1), func(ru2 *storage.RecoveryUnit) error {
			_, err := c.CreateCollection(ru2, "db.b", nil)
			return err
		})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("DDL on another namespace blocked by an open transaction")
	}
	// The same namespace: WriteConflict, for an ordinary unit and another transaction.
	_, err := inUnit(t, e, 0, func(ru2 *storage.RecoveryUnit) error {
		_, err := c.CreateCollection(ru2, "db.a", nil)
		return err
	})
	wantCode(t, err, mongoerr.WriteConflict)
	_, err = inUnit(t, e, 0, func(ru2 *storage.RecoveryUnit) error {
		if err := c.MarkTransaction(ru2); err != nil {
			return err
		}
		_, err := c.CreateCollection(ru2, "db.a", nil)
		return err
	})
	wantCode(t, err, mongoerr.WriteConflict)
	_, err = inUnit(t, e, 0, func(ru2 *storage.RecoveryUnit) error {
		return c.RenameCollection(ru2, "db.b", "db.a", false)
	})
	wantCode(t, err, mongoerr.WriteConflict)
	// The transaction sees the committed collection too.
	if _, ok := c.LatestFor(ru).ByNS("db.b"); !ok {
		t.Fatal("transaction's view misses a collection committed meanwhile")
	}

	if err := ru.SetCommitTimestamp(ts(2)); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	m, ok = c.Latest().ByNS("db.a")
	if !ok || len(m.Indexes) != 2 || m.MinValidSnapshot != ts(2) {
		t.Fatalf("after commit: %+v", m)
	}
	if _, ok := c.Latest().ByNS("db.b"); !ok {
		t.Fatal("the other unit's collection was lost")
	}
	// The reservation is gone with the unit: the name behaves as any existing one.
	_, err = inUnit(t, e, 0, func(ru2 *storage.RecoveryUnit) error {
		_, err := c.CreateCollection(ru2, "db.a", nil)
		return err
	})
	wantCode(t, err, mongoerr.NamespaceExists)
}

// An aborted transaction leaves no entry, no table and no reservation.
func TestTransactionUnitRollback(t *testing.T) {
	e, c := setup(t)
	before := len(e.ListIdents())
	ru := e.NewRecoveryUnit()
	w := ru.BeginUnitOfWork()
	if err := c.MarkTransaction(ru); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCollection(ru, "db.a", nil); err != nil {
		t.Fatal(err)
	}
	w.End()
	ru.Close()
	if c.Latest().Len() != 0 || len(e.ListIdents()) != before {
		t.Fatalf("rolled-back transaction left %s, idents %d -> %d", summary(c.Latest()), before, len(e.ListIdents()))
	}
	mustUnit(t, e, ts(1), func(ru2 *storage.RecoveryUnit) error {
		_, err := c.CreateCollection(ru2, "db.a", nil)
		return err
	})
	if c.ddlActive.Load() != 0 || c.txnDDL.Load() != 0 || len(c.reserved) != 0 {
		t.Fatalf("leftover DDL state: active %d txn %d reserved %v", c.ddlActive.Load(), c.txnDDL.Load(), c.reserved)
	}
}
