package filtering

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
)

// The database critical section: versioned writes are refused with StaleDbVersion while it
// is held, reads too once promoted; the refused request's error path waits for the release,
// which forgets the database's metadata (the next request refreshes it).
func TestDatabaseCriticalSection(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	var aware atomic.Bool
	aware.Store(true)
	rt := newRuntime(f, &aware)
	v := f.dbs["test"].Version
	if _, err := rt.RefreshDatabase(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	read := &operation.Context{DatabaseVersion: dbvValue(v), VersionedNS: "test.u"}
	mgr := lock.NewManager()
	locker := mgr.NewLocker()
	scope, err := locker.GlobalLock(ctx, lock.ModeIX)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = scope.Release() }()
	write := &operation.Context{DatabaseVersion: dbvValue(v), VersionedNS: "test.u", Locker: locker}

	if err := rt.EnterDatabaseCriticalSection("test", "movePrimary"); err != nil {
		t.Fatal(err)
	}
	if err := rt.EnterDatabaseCriticalSection("test", "movePrimary"); err != nil {
		t.Fatalf("re-entering with the same reason: %v", err)
	}
	wantCode(t, rt.EnterDatabaseCriticalSection("test", "other"), mongoerr.ConflictingOperationInProgress, "")
	if _, err := rt.Check(read, "test.u"); err != nil {
		t.Fatalf("a read while writes are blocked: %v", err)
	}
	_, err = rt.Check(write, "test.u")
	wantCode(t, err, mongoerr.StaleDbVersion, "The critical section for the database test is acquired with reason: movePrimary")
	if _, err := rt.Check(write, "other.u"); err != nil {
		t.Fatalf("another database: %v", err)
	}
	rt.PromoteDatabaseCriticalSection("test")
	_, err = rt.Check(read, "test.u")
	wantCode(t, err, mongoerr.StaleDbVersion, "")

	// The error path waits for the release, then refreshes.
	done := make(chan struct{})
	go func() {
		defer close(done)
		rt.OnStaleError(ctx, err)
	}()
	select {
	case <-done:
		t.Fatal("the stale error path did not wait for the critical section")
	case <-time.After(50 * time.Millisecond):
	}
	rt.ExitDatabaseCriticalSection("test")
	<-done
	if held, _ := rt.InDatabaseCriticalSection("test"); held {
		t.Fatal("still held")
	}
	if _, err := rt.Check(write, "test.u"); err != nil {
		t.Fatalf("after the release and refresh: %v", err)
	}
}
