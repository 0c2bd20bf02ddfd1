package applier_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/applier/repltest"
	"humongo/internal/repl/fetcher"
)

func startReplication(t *testing.T, m *repltest.Node, source string, onApplied func(optime.OpTime)) *applier.Replication {
	t.Helper()
	r, err := applier.Start(context.Background(), applier.Deps{Engine: m.DB.Engine, Catalog: m.DB.Catalog, Colls: m.DB.Colls,
		Writer: m.Writer, Chooser: fetcher.FixedSource{Host: source}, AwaitTime: 100 * time.Millisecond,
		OnApplied: onApplied, Fatal: func(err error) { t.Errorf("fatal apply error: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// waitCaughtUp waits until m applied p's newest oplog entry.
func waitCaughtUp(t *testing.T, p *repltest.Node, r *applier.Replication) {
	t.Helper()
	top := repltest.TopOfOplog(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Applier().WaitApplied(ctx, optime.MakeTimestamp(top.T, top.I)); err != nil {
		t.Fatalf("secondary did not apply up to %v (lastApplied %v, lastFetched %v): %v", top, r.LastApplied(), r.LastFetched(), err)
	}
}

// TestSteadyStateReplication: a member fetching from a primary ends with identical data
// after inserts, updates, deletes, index builds and drops; stopping its replication lets
// it fall behind, and restarting catches it up from its own oplog's top.
func TestSteadyStateReplication(t *testing.T) {
	p := repltest.StartPrimary(t)
	m := repltest.StartMember(t)
	var mu sync.Mutex
	var applied []optime.OpTime
	r := startReplication(t, m, p.Host, func(o optime.OpTime) { mu.Lock(); applied = append(applied, o); mu.Unlock() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	for round := range 4 {
		if err := repltest.Workload(ctx, p.Client, round, 60); err != nil {
			t.Fatal(err)
		}
	}
	waitCaughtUp(t, p, r)
	t.Logf("caught up after %v in %d batches", time.Since(start), r.Applier().Batches())
	repltest.Compare(t, p, m)
	mu.Lock()
	if len(applied) == 0 {
		t.Fatal("OnApplied never called")
	}
	for i := 1; i < len(applied); i++ {
		if applied[i].TS <= applied[i-1].TS {
			t.Fatalf("lastApplied went backwards: %v after %v", applied[i], applied[i-1])
		}
	}
	mu.Unlock()
	if got := repltest.DumpNode(t, m).TotalDocs(); got < 100 {
		t.Fatalf("only %d documents replicated", got)
	}

	// Pause: stop replication, write more, the member lags; restart: it catches up.
	r.Stop()
	before := repltest.DumpNode(t, m).TotalDocs()
	for round := 4; round < 6; round++ {
		if err := repltest.Workload(ctx, p.Client, round, 60); err != nil {
			t.Fatal(err)
		}
	}
	if got := repltest.DumpNode(t, m).TotalDocs(); got != before {
		t.Fatalf("stopped member changed: %d → %d documents", before, got)
	}
	r2 := startReplication(t, m, p.Host, nil)
	waitCaughtUp(t, p, r2)
	repltest.Compare(t, p, m)
}
