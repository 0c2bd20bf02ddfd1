package storage

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"humongo/internal/optime"
)

// prepareUnit writes puts (key=value) and deletes (keys) in a new unit and prepares it at ts.
func prepareUnit(t *testing.T, e *Engine, ident string, puts map[string]string, dels []string, ts optime.Timestamp) (*RecoveryUnit, *WriteUnitOfWork) {
	t.Helper()
	ru := e.NewRecoveryUnit()
	w := ru.BeginUnitOfWork()
	for k, v := range puts {
		must(t, ru.Put(ident, []byte(k), []byte(v)))
	}
	for _, k := range dels {
		must(t, ru.Delete(ident, []byte(k)))
	}
	must(t, ru.Prepare(ts))
	t.Cleanup(func() { w.End(); ru.Close() })
	return ru, w
}

// readerAt returns a unit reading at ts (null = ReadNoTimestamp).
func readerAt(t *testing.T, e *Engine, ts optime.Timestamp) *RecoveryUnit {
	t.Helper()
	ru := e.NewRecoveryUnit()
	if !ts.IsNull() {
		must(t, ru.SetReadSource(ReadProvided, ts))
	}
	t.Cleanup(ru.Close)
	return ru
}

// scanErr is scan returning the cursor's error instead of failing.
func scanErr(ru *RecoveryUnit, ident string, opts CursorOptions, seek string) ([]string, error) {
	c, err := ru.NewCursor(ident, opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []string
	ok := c.First()
	if seek != "" {
		ok = c.Seek([]byte(seek))
	}
	for ; ok; ok = c.Next() {
		out = append(out, string(c.Key())+"="+string(c.Value()))
	}
	return out, c.Err()
}

func setupPrepared(t *testing.T) (*Engine, *RecoveryUnit, *WriteUnitOfWork) {
	e := openMem(t)
	mustCreate(t, e, "c", IdentOptions{})
	put(t, e, "c", "k1", "old", ts(10))
	put(t, e, "c", "k3", "old", ts(10))
	put(t, e, "c", "k5", "old", ts(10))
	// k1 updated, k2 inserted (absent from every reader's view), k5 deleted.
	ru, w := prepareUnit(t, e, "c", map[string]string{"k1": "new", "k2": "ins"}, []string{"k5"}, ts(20))
	return e, ru, w
}

func TestPrepareConflictsForReaders(t *testing.T) {
	e, _, _ := setupPrepared(t)

	for _, rts := range []optime.Timestamp{0, ts(20), ts(25)} {
		r := readerAt(t, e, rts)
		if _, _, err := r.Get("c", []byte("k1")); !IsPrepareConflict(err) {
			t.Errorf("read at %v: Get of a prepared update: %v, want a prepare conflict", rts, err)
		}
		if _, _, err := r.Get("c", []byte("k2")); !IsPrepareConflict(err) {
			t.Errorf("read at %v: Get of a prepared insert: %v, want a prepare conflict", rts, err)
		}
		if v, ok, err := r.Get("c", []byte("k3")); err != nil || !ok || string(v) != "old" {
			t.Errorf("read at %v: Get of an unprepared key: %q %v %v", rts, v, ok, err)
		}
		// A cursor landing on the prepared key, and one crossing the prepared insert k2 (not
		// in the view: Seek(k1x) lands on k3), forward and reverse, and one crossing the
		// prepared delete while exhausting.
		cases := []struct {
			opts CursorOptions
			seek string
		}{
			{CursorOptions{}, ""},
			{CursorOptions{}, "k1x"},
			{CursorOptions{Reverse: true}, "k2x"},
			{CursorOptions{Lower: []byte("k4")}, ""},
			{CursorOptions{Reverse: true}, ""},
		}
		for _, tc := range cases {
			got, err := scanErr(r, "c", tc.opts, tc.seek)
			if !IsPrepareConflict(err) {
				t.Errorf("read at %v: cursor %+v seek %q: %v, %v, want a prepare conflict", rts, tc.opts, tc.seek, got, err)
			}
		}
		// A range without prepared keys is readable.
		if got, err := scanErr(r, "c", CursorOptions{Lower: []byte("k3"), Upper: []byte("k4")}, ""); err != nil || !slices.Equal(got, []string{"k3=old"}) {
			t.Errorf("read at %v: cursor over k3 only: %v, %v", rts, got, err)
		}
	}

	// Below the prepare timestamp the prepared writes are invisible: no conflict.
	r := readerAt(t, e, ts(19))
	if v, ok, err := r.Get("c", []byte("k1")); err != nil || !ok || string(v) != "old" {
		t.Errorf("read below prepare: %q %v %v", v, ok, err)
	}
	if got, err := scanErr(r, "c", CursorOptions{}, ""); err != nil || !slices.Equal(got, []string{"k1=old", "k3=old", "k5=old"}) {
		t.Errorf("scan below prepare: %v, %v", got, err)
	}

	// Ignoring prepare conflicts reads the pre-prepare state (read concern local).
	ig := readerAt(t, e, 0)
	must(t, ig.SetPrepareConflictBehavior(PrepareConflictIgnore))
	if got, err := scanErr(ig, "c", CursorOptions{}, ""); err != nil || !slices.Equal(got, []string{"k1=old", "k3=old", "k5=old"}) {
		t.Errorf("scan ignoring prepare conflicts: %v, %v", got, err)
	}
	w := ig.BeginUnitOfWork()
	if err := ig.Put("c", []byte("k9"), []byte("x")); err == nil {
		t.Error("a unit ignoring prepare conflicts wrote")
	}
	w.End()
}

func TestPrepareWritersAndPreparedUnitRules(t *testing.T) {
	e, pru, pw := setupPrepared(t)

	for _, k := range []string{"k1", "k2", "k5"} {
		wr := e.NewRecoveryUnit()
		w := wr.BeginUnitOfWork()
		if err := wr.Put("c", []byte(k), []byte("w")); !IsWriteConflict(err) {
			t.Errorf("write to prepared key %s: %v, want WriteConflict", k, err)
		}
		w.End()
		wr.Close()
	}

	if err := pru.Put("c", []byte("k7"), []byte("x")); err == nil {
		t.Error("a prepared unit wrote")
	}
	if err := pru.SetTimestamp(ts(30)); err == nil {
		t.Error("SetTimestamp on a prepared unit")
	}
	if err := pru.Prepare(ts(21)); err == nil {
		t.Error("prepared twice")
	}
	if err := pw.Commit(); err == nil {
		t.Error("a prepared unit committed without a commit timestamp")
	}
	if !pru.IsPrepared() || pru.PrepareTimestamp() != ts(20) || e.PreparedUnits() != 1 {
		t.Fatalf("failed commit changed the prepared state: %v %v %d", pru.IsPrepared(), pru.PrepareTimestamp(), e.PreparedUnits())
	}
	if err := pw.CommitPrepared(ts(19), 0); err == nil {
		t.Error("commit timestamp below the prepare timestamp accepted")
	}
	// The prepared unit reads its own writes.
	if v, ok, err := pru.Get("c", []byte("k2")); err != nil || !ok || string(v) != "ins" {
		t.Errorf("prepared unit reading its insert: %q %v %v", v, ok, err)
	}
	if got, err := scanErr(pru, "c", CursorOptions{}, ""); err != nil || !slices.Equal(got, []string{"k1=new", "k2=ins", "k3=old"}) {
		t.Errorf("prepared unit scanning: %v, %v", got, err)
	}

	// Prepare preconditions.
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	if err := ru.Prepare(ts(30)); !errors.Is(err, ErrNotInUnit) {
		t.Errorf("prepare outside a unit: %v", err)
	}
	w := ru.BeginUnitOfWork()
	must(t, ru.SetTimestamp(ts(30)))
	must(t, ru.Put("c", []byte("k8"), []byte("x")))
	if err := ru.Prepare(ts(31)); err == nil {
		t.Error("prepared a unit with timestamped writes")
	}
	w.End()
	e.SetOldestTimestamp(ts(40))
	w = ru.BeginUnitOfWork()
	if err := ru.Prepare(ts(39)); err == nil {
		t.Error("prepared below the oldest timestamp")
	}
	w.End()
}

// waitConflicted runs a PrepareConflictRetry reader of key at rts in a goroutine and returns
// once its first attempt met the prepare conflict. The result arrives on the channel.
type readResult struct {
	val      string
	found    bool
	attempts int
	err      error
}

func startWaiter(t *testing.T, ctx context.Context, e *Engine, key string, rts optime.Timestamp) <-chan readResult {
	t.Helper()
	conflicted := make(chan struct{})
	out := make(chan readResult, 1)
	go func() {
		ru := e.NewRecoveryUnit()
		defer ru.Close()
		if !rts.IsNull() {
			if err := ru.SetReadSource(ReadProvided, rts); err != nil {
				out <- readResult{err: err}
				close(conflicted)
				return
			}
		}
		var res readResult
		once := sync.Once{}
		res.err = e.PrepareConflictRetry(ctx, func() error {
			res.attempts++
			v, ok, err := ru.Get("c", []byte(key))
			if IsPrepareConflict(err) {
				ru.AbandonSnapshot() // no view pinned while waiting
				once.Do(func() { close(conflicted) })
			}
			res.val, res.found = string(v), ok
			return err
		})
		once.Do(func() { close(conflicted) })
		out <- res
	}()
	select {
	case <-conflicted:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader never met the prepare conflict")
	}
	return out
}

func TestPrepareConflictRetryWaitsForCommit(t *testing.T) {
	e, _, pw := setupPrepared(t)
	before := runtime.NumGoroutine()
	ctx := context.Background()

	upd := startWaiter(t, ctx, e, "k1", 0)
	ins := startWaiter(t, ctx, e, "k2", ts(40))
	old := startWaiter(t, ctx, e, "k1", ts(29)) // below the commit timestamp: old after commit

	// The prepare timestamp does not hold the all-durable (oplog visibility) point: a later
	// commit becomes visible while the unit is prepared.
	put(t, e, "c", "k9", "other", ts(50))
	if ad := e.AllDurableTimestamp(); ad < ts(50) {
		t.Errorf("all-durable %v held back by a prepared unit", ad)
	}
	select {
	case r := <-upd:
		t.Fatalf("reader returned while the unit was prepared: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}

	must(t, pw.CommitPrepared(ts(30), ts(31)))
	pw.End()
	if e.PreparedUnits() != 0 {
		t.Errorf("PreparedUnits = %d after commit", e.PreparedUnits())
	}
	for name, c := range map[string]<-chan readResult{"update": upd, "insert": ins, "below commit": old} {
		select {
		case r := <-c:
			want := map[string]string{"update": "new", "insert": "ins", "below commit": "old"}[name]
			if r.err != nil || !r.found || r.val != want || r.attempts < 2 {
				t.Errorf("%s reader: %+v, want %q after a retry", name, r, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s reader not woken by the commit", name)
		}
	}

	// Visible at exactly the commit timestamp.
	for _, c := range []struct {
		key  string
		at   optime.Timestamp
		want string
		ok   bool
	}{
		{"k1", ts(29), "old", true}, {"k1", ts(30), "new", true},
		{"k2", ts(29), "", false}, {"k2", ts(30), "ins", true},
		{"k5", ts(29), "old", true}, {"k5", ts(30), "", false},
	} {
		if v, ok := getAt(t, e, "c", c.key, c.at); v != c.want || ok != c.ok {
			t.Errorf("%s at %v = %q %v, want %q %v", c.key, c.at, v, ok, c.want, c.ok)
		}
	}
	// Writers may write the keys again.
	put(t, e, "c", "k1", "later", ts(60))
	waitGoroutines(t, before)
}

func TestPrepareRollbackWakesWaiters(t *testing.T) {
	e, _, pw := setupPrepared(t)
	before := runtime.NumGoroutine()
	upd := startWaiter(t, context.Background(), e, "k1", 0)
	ins := startWaiter(t, context.Background(), e, "k2", ts(40))
	pw.End() // abort
	for name, c := range map[string]<-chan readResult{"update": upd, "insert": ins} {
		select {
		case r := <-c:
			want := map[string]readResult{"update": {val: "old", found: true}, "insert": {}}[name]
			if r.err != nil || r.found != want.found || r.val != want.val || r.attempts < 2 {
				t.Errorf("%s reader after rollback: %+v", name, r)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s reader not woken by the rollback", name)
		}
	}
	if e.prep.set.Load() != nil || e.PreparedUnits() != 0 {
		t.Error("rolled-back prepared keys still registered")
	}
	if v, ok := getAt(t, e, "c", "k1", 0); v != "old" || !ok {
		t.Errorf("k1 after rollback = %q %v", v, ok)
	}
	put(t, e, "c", "k2", "w", ts(60)) // no longer owned
	waitGoroutines(t, before)
}

func TestPrepareConflictRetryContextAndClose(t *testing.T) {
	e, _, _ := setupPrepared(t)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	r := startWaiter(t, ctx, e, "k1", 0)
	cancel()
	select {
	case res := <-r:
		if !errors.Is(res.err, context.Canceled) {
			t.Errorf("cancelled wait returned %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancellation did not end the wait")
	}

	// Close wakes waiters; they fail with ErrClosed (the prepared unit dies with the process).
	r = startWaiter(t, context.Background(), e, "k1", 0)
	done := make(chan error, 1)
	go func() { done <- e.Close() }()
	select {
	case res := <-r:
		if !errors.Is(res.err, ErrClosed) {
			t.Errorf("wait across Close returned %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake the waiter")
	}
	<-done
	waitGoroutines(t, before)
}

// A reader whose snapshot opened while the unit was prepared, at a timestamp at or above the
// commit, must not read the old version after the commit: its view lacks the commit.
func TestPrepareCommitAfterReaderSnapshot(t *testing.T) {
	e, _, pw := setupPrepared(t)
	r := readerAt(t, e, ts(40))
	if _, _, err := r.Get("c", []byte("k3")); err != nil { // opens the snapshot
		t.Fatal(err)
	}
	below := readerAt(t, e, ts(25))
	if _, _, err := below.Get("c", []byte("k3")); err != nil {
		t.Fatal(err)
	}
	must(t, pw.CommitPrepared(ts(30), 0))
	pw.End()
	if _, _, err := r.Get("c", []byte("k1")); !IsPrepareConflict(err) {
		t.Fatalf("stale snapshot read of a committed prepared key: %v, want a prepare conflict", err)
	}
	if _, err := scanErr(r, "c", CursorOptions{Lower: []byte("k2")}, ""); !IsPrepareConflict(err) {
		t.Fatalf("stale snapshot scan over a committed prepared insert: %v", err)
	}
	// Below the commit timestamp the stale view is right.
	if v, ok, err := below.Get("c", []byte("k1")); err != nil || !ok || string(v) != "old" {
		t.Errorf("read below the commit: %q %v %v", v, ok, err)
	}
	// The conflict is already resolved: the retry does not wait.
	var got string
	err := e.PrepareConflictRetry(context.Background(), func() error {
		r.AbandonSnapshot()
		v, _, err := r.Get("c", []byte("k1"))
		got = string(v)
		return err
	})
	if err != nil || got != "new" {
		t.Fatalf("retry: %q %v", got, err)
	}
	// Once no snapshot predates the commit, its entries are pruned: reads are back on the
	// fast path.
	r.Close()
	below.Close()
	e.prep.prune(e.snaps.minOpen)
	if e.prep.set.Load() != nil {
		t.Errorf("committed prepared keys not pruned: %d left", len(e.prep.set.Load().keys))
	}
}

// A cursor that met a prepare conflict resumes after Save, a new snapshot and Restore
// exactly where it stopped.
func TestPrepareConflictCursorRestore(t *testing.T) {
	e, _, pw := setupPrepared(t)
	r := readerAt(t, e, 0)
	c, err := r.NewCursor("c", CursorOptions{Lower: []byte("k1x")})
	must(t, err)
	defer c.Close()
	if c.First() || !IsPrepareConflict(c.Err()) { // k2 (a prepared insert) is before k3
		t.Fatalf("First: %v %v", c.Valid(), c.Err())
	}
	c.Save()
	r.AbandonSnapshot()
	must(t, pw.CommitPrepared(ts(30), 0))
	pw.End()
	ok, err := c.Restore()
	if !ok || err != nil || string(c.Key()) != "k2" {
		t.Fatalf("Restore: %v %v %q", ok, err, c.Key())
	}
	var got []string
	for ; ok; ok = c.Next() {
		got = append(got, string(c.Key())+"="+string(c.Value()))
	}
	if !slices.Equal(got, []string{"k2=ins", "k3=old"}) || c.Err() != nil {
		t.Errorf("after restore: %v %v", got, c.Err())
	}

	// A conflict met by Next resumes after the last key returned.
	_, pw2 := prepareUnit(t, e, "c", map[string]string{"k4": "p"}, nil, ts(40))
	r.AbandonSnapshot()
	c2, err := r.NewCursor("c", CursorOptions{})
	must(t, err)
	defer c2.Close()
	var seen []string
	ok = c2.First()
	for ; ok; ok = c2.Next() {
		seen = append(seen, string(c2.Key()))
	}
	if !IsPrepareConflict(c2.Err()) || !slices.Equal(seen, []string{"k1", "k2", "k3"}) {
		t.Fatalf("scan into a prepared insert: %v %v", seen, c2.Err())
	}
	c2.Save()
	r.AbandonSnapshot()
	// Restoring while still prepared meets the conflict again (k3, the last key returned, is
	// deleted meanwhile, so the restore's seek itself crosses the prepared k4); saving again
	// keeps "continue after k3", even once k3 exists again.
	del(t, e, "c", "k3", ts(45))
	if ok, err := c2.Restore(); ok || !IsPrepareConflict(err) {
		t.Fatalf("Restore while prepared: %v %v", ok, err)
	}
	c2.Save()
	r.AbandonSnapshot()
	put(t, e, "c", "k3", "again", ts(46))
	pw2.End()
	for ok, err = c2.Restore(); ok; ok = c2.Next() {
		seen = append(seen, string(c2.Key()))
	}
	if err != nil || c2.Err() != nil || !slices.Equal(seen, []string{"k1", "k2", "k3"}) {
		t.Errorf("after rollback and restore: %v %v %v", seen, err, c2.Err())
	}
}

// Prepare and resolution keep the read hot path at one atomic load: nothing is allocated or
// locked when nothing is prepared.
func TestPrepareNoOverheadWhenNothingPrepared(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector")
	}
	e := openMem(t)
	mustCreate(t, e, "c", IdentOptions{})
	put(t, e, "c", "k1", "v", ts(10))
	ru := readerAt(t, e, 0)
	if _, _, err := ru.Get("c", []byte("k1")); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := ru.Get("c", []byte("k1")); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 { // the returned copy
		t.Errorf("Get allocates %.1f times with nothing prepared", allocs)
	}
}

func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("goroutines: %d before, %d after", before, n)
	}
}

// A prepared commit below the stable timestamp whose commit oplog entry (durable timestamp) is
// above it is undone by RecoverToStable, across a restart, and GC keeps the version it
// uncovers; once stable reaches the durable timestamp the commit is kept.
func TestPrepareCommitBelowStableUndoneByRecoverToStable(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	opts := Options{Dir: "db", Logger: quietLogger(), CacheSize: 8 << 20}
	e, err := openEngine(opts, fs)
	must(t, err)
	defer func() { _ = e.Close() }()
	mustCreate(t, e, "c", IdentOptions{})
	put(t, e, "c", "k1", "old", ts(10))
	put(t, e, "c", "k3", "keep", ts(10))

	commitPrepared := func(puts map[string]string, prepare, commit, durable optime.Timestamp) {
		ru := e.NewRecoveryUnit()
		defer ru.Close()
		w := ru.BeginUnitOfWork()
		defer w.End()
		for k, v := range puts {
			must(t, ru.Put("c", []byte(k), []byte(v)))
		}
		must(t, ru.Prepare(prepare))
		// Stable and oldest pass the prepare (and commit) timestamp while prepared.
		e.SetStableTimestamp(ts(30))
		e.SetOldestTimestamp(ts(30))
		if _, err := e.RecoverToStable(); !errors.Is(err, ErrSnapshotsOpen) {
			t.Errorf("RecoverToStable with a prepared unit: %v", err)
		}
		must(t, w.CommitPrepared(commit, durable))
	}
	commitPrepared(map[string]string{"k1": "new", "k2": "ins"}, ts(20), ts(22), ts(40))
	must(t, e.gcStep(ctx)) // oldest 30 > commit 22: GC must still keep k1@10
	if v, _ := getAt(t, e, "c", "k1", ts(30)); v != "new" {
		t.Fatalf("k1 at 30 = %q after the prepared commit", v)
	}

	// Restart (clean), then recover to stable 30: the commit's entry at 40 is gone.
	must(t, e.Close())
	e, err = openEngine(opts, fs)
	must(t, err)
	if n := len(e.pcommits.records); n != 1 {
		t.Fatalf("%d prepared commit records after reopen, want 1", n)
	}
	got, err := e.RecoverToStable()
	if err != nil || got != ts(30) {
		t.Fatalf("RecoverToStable: %v %v", got, err)
	}
	for _, c := range []struct{ k, want string }{{"k1", "old"}, {"k2", ""}, {"k3", "keep"}} {
		if v, _ := getAt(t, e, "c", c.k, 0); v != c.want {
			t.Errorf("%s after recovery = %q, want %q", c.k, v, c.want)
		}
	}
	if r, d := e.Counts("c"); r != 2 || d != 7 {
		t.Errorf("counts after recovery: %d %d", r, d)
	}
	if len(e.pcommits.records) != 0 {
		t.Error("records left after RecoverToStable")
	}

	// Durable timestamp at or below stable: settled, kept by RecoverToStable.
	commitPrepared(map[string]string{"k1": "new2"}, ts(31), ts(31), ts(35))
	e.SetStableTimestamp(ts(35))
	e.settlePreparedCommits()
	if len(e.pcommits.records) != 0 {
		t.Error("settled record not deleted")
	}
	if _, err := e.RecoverToStable(); err != nil {
		t.Fatal(err)
	}
	if v, _ := getAt(t, e, "c", "k1", 0); v != "new2" {
		t.Errorf("k1 after recovery past the durable timestamp = %q", v)
	}
}

// A transaction reading at a timestamp inside a unit of work with writes waits out a prepare
// conflict and continues in the same unit with a refreshed view.
func TestPrepareRefreshSnapshotInUnit(t *testing.T) {
	e, _, pw := setupPrepared(t)
	tx := readerAt(t, e, ts(40))
	tx.SetIsolatedWrites(true)
	w := tx.BeginUnitOfWork()
	defer w.End()
	must(t, tx.Put("c", []byte("k7"), []byte("mine")))
	_, _, err := tx.Get("c", []byte("k1"))
	if !IsPrepareConflict(err) {
		t.Fatalf("Get: %v", err)
	}
	must(t, pw.CommitPrepared(ts(30), 0))
	pw.End()
	var got string
	err = e.PrepareConflictRetry(context.Background(), func() error {
		if err := tx.RefreshSnapshot(); err != nil {
			return err
		}
		v, _, err := tx.Get("c", []byte("k1"))
		got = string(v)
		return err
	})
	if err != nil || got != "new" {
		t.Fatalf("after refresh: %q %v", got, err)
	}
	if v, ok, err := tx.Get("c", []byte("k7")); err != nil || !ok || string(v) != "mine" {
		t.Errorf("own write lost by the refresh: %q %v %v", v, ok, err)
	}
	must(t, w.Commit())

	nt := readerAt(t, e, 0)
	must(t, nt.PreallocateSnapshot())
	if err := nt.RefreshSnapshot(); err == nil {
		t.Error("refreshed a ReadNoTimestamp unit")
	}
}

// A caller that keeps its stale view after a resolved conflict backs off instead of spinning.
func TestPrepareConflictRetryStaleViewBacksOff(t *testing.T) {
	e, _, pw := setupPrepared(t)
	r := readerAt(t, e, ts(40))
	must(t, r.PreallocateSnapshot())
	must(t, pw.CommitPrepared(ts(30), 0))
	pw.End()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	attempts := 0
	err := e.PrepareConflictRetry(ctx, func() error {
		attempts++
		_, _, err := r.Get("c", []byte("k1"))
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) || attempts > 30 {
		t.Errorf("stale-view retry: %v after %d attempts", err, attempts)
	}
}
