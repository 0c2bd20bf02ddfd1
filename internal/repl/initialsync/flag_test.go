package initialsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"humongo/internal/failpoint"
	"humongo/internal/repl/applier/repltest"
	"humongo/internal/repl/fetcher"
	"humongo/internal/repl/initialsync"
	"humongo/internal/repl/recovery"
)

// TestInitialSyncFlag: the durable initial-sync flag is set before initial sync drops or
// copies anything and stays set while an attempt is interrupted (here: held by
// initialSyncHangBeforeCopyingDatabases, then cancelled, as a crash would end it); a new
// initial sync over the partial copy (what a restart does) finishes with the source's data,
// clears the flag and records minValid = the optime the copy is consistent at.
func TestInitialSyncFlag(t *testing.T) {
	p := repltest.StartPrimary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for round := range 2 {
		if err := repltest.Workload(ctx, p.Client, round, 40); err != nil {
			t.Fatal(err)
		}
	}
	m := repltest.StartMember(t)
	markers := func() recovery.Markers {
		t.Helper()
		mk, err := recovery.LoadMarkers(m.DB.Engine, m.DB.Catalog, m.DB.Colls)
		if err != nil {
			t.Fatal(err)
		}
		return mk
	}
	newSyncer := func() *initialsync.Syncer {
		return initialsync.New(initialsync.Config{Engine: m.DB.Engine, Catalog: m.DB.Catalog, Colls: m.DB.Colls,
			Writer: m.Writer, Chooser: fetcher.FixedSource{Host: p.Host}, AwaitTime: 100 * time.Millisecond, MaxAttempts: 1})
	}

	fp := failpoint.Get("initialSyncHangBeforeCopyingDatabases")
	if fp == nil {
		t.Fatal("fail point initialSyncHangBeforeCopyingDatabases is not registered")
	}
	entered := fp.TimesEntered()
	fp.Configure(failpoint.AlwaysOn, 0, 0, nil)
	defer fp.Disable()
	runCtx, interrupt := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := newSyncer().Run(runCtx)
		done <- err
	}()
	if err := fp.WaitForTimesEntered(ctx, entered+1); err != nil {
		t.Fatal(err)
	}
	if mk := markers(); !mk.InitialSyncFlag {
		t.Fatalf("markers while initial sync is held before cloning: %+v", mk)
	}
	interrupt()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted initial sync returned %v", err)
	}
	if mk := markers(); !mk.InitialSyncFlag {
		t.Fatalf("the flag did not survive an interrupted initial sync: %+v", mk)
	}
	fp.Disable()

	// More writes on the source, then the initial sync again.
	if err := repltest.Workload(ctx, p.Client, 5, 40); err != nil {
		t.Fatal(err)
	}
	op, err := newSyncer().Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mk := markers(); mk.InitialSyncFlag || mk.MinValid != op {
		t.Fatalf("markers after initial sync: %+v, want the flag cleared and minValid %v", mk, op)
	}
	repltest.Compare(t, p, m)
}
