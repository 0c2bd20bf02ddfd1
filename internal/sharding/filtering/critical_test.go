package filtering

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/sharding/routing"
)

// writer is a versioned operation holding test.c's collection lock for writing.
func writer(t *testing.T, m *lock.Manager, sv routing.ChunkVersion) (*operation.Context, func()) {
	t.Helper()
	op := versioned("test.c", sv)
	op.Locker = m.NewLocker()
	scope, err := op.Locker.CollectionLock(context.Background(), "test.c", lock.ModeIX)
	if err != nil {
		t.Fatal(err)
	}
	return op, func() { _ = scope.Release() }
}

// The critical section blocks versioned writes first, then reads, with StaleConfig; a
// blocked operation's stale path waits for the section to end (bounded by its context).
func TestCriticalSection(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	var aware atomic.Bool
	aware.Store(true)
	rt := newRuntime(f, &aware)
	v11 := routing.ChunkVersion{Major: 1, Minor: 1, Generation: f.coll.Gen}
	if _, err := rt.RefreshCollection(ctx, "test.c"); err != nil {
		t.Fatal(err)
	}
	m := lock.NewManager()
	if err := rt.EnterCriticalSection("test.c", "{ command: \"moveChunk\" }"); err != nil {
		t.Fatal(err)
	}
	if err := rt.EnterCriticalSection("test.c", "again"); !mongoerr.Is(err, mongoerr.ConflictingOperationInProgress) {
		t.Fatalf("second enter: %v", err)
	}
	// Catch-up phase: writes blocked, reads pass.
	w, release := writer(t, m, v11)
	_, err := rt.Check(w, "test.c")
	release()
	me := wantCode(t, err, mongoerr.StaleConfig, "")
	if !strings.Contains(me.Msg, "The critical section for test.c is acquired with reason: { command: \"moveChunk\" }") {
		t.Fatalf("message %q", me.Msg)
	}
	if _, err := rt.Check(versioned("test.c", v11), "test.c"); err != nil {
		t.Fatalf("read in the catch-up phase: %v", err)
	}
	// Commit phase: reads blocked too.
	rt.PromoteCriticalSectionToBlockReads("test.c")
	_, err = rt.Check(versioned("test.c", v11), "test.c")
	wantCode(t, err, mongoerr.StaleConfig, "")
	// The stale path waits: bounded by the operation's context...
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	start := time.Now()
	rt.OnStaleError(short, err)
	cancel()
	if time.Since(start) < 40*time.Millisecond {
		t.Fatal("the stale path did not wait for the critical section")
	}
	// ...or until the section ends.
	done := make(chan struct{})
	go func() {
		rt.OnStaleError(ctx, err)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("returned while the critical section is held")
	case <-time.After(20 * time.Millisecond):
	}
	rt.ExitCriticalSection("test.c")
	<-done
	w, release = writer(t, m, v11)
	defer release()
	if _, err := rt.Check(w, "test.c"); err != nil {
		t.Fatalf("write after the section: %v", err)
	}
	// Unversioned operations are never blocked.
	if err := rt.EnterCriticalSection("test.c", "x"); err != nil {
		t.Fatal(err)
	}
	defer rt.ExitCriticalSection("test.c")
	rt.PromoteCriticalSectionToBlockReads("test.c")
	if _, err := rt.Check(&operation.Context{}, "test.c"); err != nil {
		t.Fatalf("unversioned: %v", err)
	}
}
