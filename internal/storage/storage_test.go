package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openMem(t testing.TB) *Engine {
	t.Helper()
	e, err := Open(Options{InMemory: true, Logger: quietLogger(), CacheSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !e.closed.Load() {
			if err := e.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	})
	return e
}

func mustCreate(t testing.TB, e *Engine, name string, opts IdentOptions) {
	t.Helper()
	if err := e.CreateIdent(name, opts); err != nil {
		t.Fatal(err)
	}
}

// put commits key=val in ident in its own unit at ts (0 = engine-assigned).
func put(t testing.TB, e *Engine, ident, key, val string, ts optime.Timestamp) {
	t.Helper()
	write(t, e, ident, key, &val, ts)
}

func del(t testing.TB, e *Engine, ident, key string, ts optime.Timestamp) {
	t.Helper()
	write(t, e, ident, key, nil, ts)
}

func write(t testing.TB, e *Engine, ident, key string, val *string, ts optime.Timestamp) {
	t.Helper()
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	defer w.End()
	if !ts.IsNull() {
		if err := ru.SetCommitTimestamp(ts); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if val == nil {
		err = ru.Delete(ident, []byte(key))
	} else {
		err = ru.Put(ident, []byte(key), []byte(*val))
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// getAt reads key at ts (0 = ReadNoTimestamp) in a fresh unit.
func getAt(t testing.TB, e *Engine, ident, key string, ts optime.Timestamp) (string, bool) {
	t.Helper()
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	if !ts.IsNull() {
		if err := ru.SetReadSource(ReadProvided, ts); err != nil {
			t.Fatal(err)
		}
	}
	v, ok, err := ru.Get(ident, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

// scan returns "k=v" pairs of a cursor over the whole ident.
func scan(t testing.TB, ru *RecoveryUnit, ident string, opts CursorOptions) []string {
	t.Helper()
	c, err := ru.NewCursor(ident, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []string
	for ok := c.First(); ok; ok = c.Next() {
		out = append(out, string(c.Key())+"="+string(c.Value()))
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func ts(n uint32) optime.Timestamp { return optime.MakeTimestamp(100, n) }

func TestReadsAtOlderTimestamp(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	put(t, e, "t", "a", "a1", ts(10))
	put(t, e, "t", "a", "a2", ts(20))
	put(t, e, "t", "b", "b1", ts(25)) // inserted later
	del(t, e, "t", "a", ts(30))       // deleted later

	cases := []struct {
		at       optime.Timestamp
		a, b     string
		aOK, bOK bool
	}{
		{ts(5), "", "", false, false},
		{ts(10), "a1", "", true, false},
		{ts(15), "a1", "", true, false},
		{ts(20), "a2", "", true, false},
		{ts(25), "a2", "b1", true, true},
		{ts(30), "", "b1", false, true},
		{0, "", "b1", false, true},
	}
	for _, c := range cases {
		a, aOK := getAt(t, e, "t", "a", c.at)
		b, bOK := getAt(t, e, "t", "b", c.at)
		if a != c.a || aOK != c.aOK || b != c.b || bOK != c.bOK {
			t.Errorf("at %v: a=%q,%v b=%q,%v; want a=%q,%v b=%q,%v", c.at, a, aOK, b, bOK, c.a, c.aOK, c.b, c.bOK)
		}
		ru := e.NewRecoveryUnit()
		if !c.at.IsNull() {
			_ = ru.SetReadSource(ReadProvided, c.at)
		}
		var want []string
		if c.aOK {
			want = append(want, "a="+c.a)
		}
		if c.bOK {
			want = append(want, "b="+c.b)
		}
		if got := scan(t, ru, "t", CursorOptions{}); !slices.Equal(got, want) {
			t.Errorf("at %v: scan %v, want %v", c.at, got, want)
		}
		ru.Close()
	}
}

func TestWriteConflictFirstUpdaterWins(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	put(t, e, "t", "k", "v0", 0)

	ru1, ru2 := e.NewRecoveryUnit(), e.NewRecoveryUnit()
	defer ru1.Close()
	defer ru2.Close()
	w1, w2 := ru1.BeginUnitOfWork(), ru2.BeginUnitOfWork()
	if err := ru1.Put("t", []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	err := ru2.Put("t", []byte("k"), []byte("v2"))
	if !IsWriteConflict(err) || !mongoerr.Is(err, mongoerr.WriteConflict) {
		t.Fatalf("second writer: %v, want WriteConflict", err)
	}
	w2.End()

	// ru3 opens its snapshot before ru1 commits: it must conflict afterwards too.
	ru3 := e.NewRecoveryUnit()
	defer ru3.Close()
	if v, _, _ := ru3.Get("t", []byte("k")); string(v) != "v0" {
		t.Fatalf("ru3 snapshot sees %q", v)
	}
	if err := w1.Commit(); err != nil {
		t.Fatal(err)
	}
	w1.End()
	w3 := ru3.BeginUnitOfWork()
	if err := ru3.Put("t", []byte("k"), []byte("v3")); !IsWriteConflict(err) {
		t.Fatalf("older snapshot after commit: %v, want WriteConflict", err)
	}
	w3.End()
	// A fresh snapshot may write.
	w3 = ru3.BeginUnitOfWork()
	if err := ru3.Put("t", []byte("k"), []byte("v3")); err != nil {
		t.Fatalf("fresh snapshot: %v", err)
	}
	if err := w3.Commit(); err != nil {
		t.Fatal(err)
	}
	w3.End()
	if v, _ := getAt(t, e, "t", "k", 0); v != "v3" {
		t.Fatalf("final %q", v)
	}
	// Other keys never conflict.
	w1 = ru1.BeginUnitOfWork()
	w2 = ru2.BeginUnitOfWork()
	if err := ru1.Put("t", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if err := ru2.Put("t", []byte("y"), nil); err != nil {
		t.Fatal(err)
	}
	if err := w1.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := w2.Commit(); err != nil {
		t.Fatal(err)
	}
	w1.End()
	w2.End()
}

func TestWriteConflictRetryCounter(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	put(t, e, "t", "counter", "0", 0)
	const workers, incs = 8, 500
	var conflicts atomic.Int64
	errc := make(chan error, workers)
	for range workers {
		go func() {
			ru := e.NewRecoveryUnit()
			defer ru.Close()
			for range incs {
				err := WriteConflictRetry(context.Background(), "inc", func() error {
					w := ru.BeginUnitOfWork()
					defer w.End()
					v, _, err := ru.Get("t", []byte("counter"))
					if err != nil {
						return err
					}
					var n int
					fmt.Sscan(string(v), &n)
					runtime.Gosched() // let another incrementer read the same value
					err = ru.Put("t", []byte("counter"), []byte(fmt.Sprint(n+1)))
					if IsWriteConflict(err) {
						conflicts.Add(1)
					}
					if err != nil {
						return err
					}
					return w.Commit()
				})
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range workers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := getAt(t, e, "t", "counter", 0); v != fmt.Sprint(workers*incs) {
		t.Fatalf("counter = %s, want %d", v, workers*incs)
	}
	t.Logf("%d write conflicts retried", conflicts.Load())
}

func TestWriteConflictRetryStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	n := 0
	err := WriteConflictRetry(ctx, "op", func() error {
		n++
		return mongoerr.New(mongoerr.WriteConflict, "wc")
	})
	if !errors.Is(err, context.DeadlineExceeded) || n < 2 {
		t.Fatalf("err=%v after %d attempts", err, n)
	}
	if err := WriteConflictRetry(context.Background(), "op", func() error { return io.EOF }); err != io.EOF {
		t.Fatalf("non-WC error not passed through: %v", err)
	}
}

func TestReadYourOwnWritesAndRollback(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	put(t, e, "t", "a", "1", 0)
	put(t, e, "t", "c", "3", 0)
	put(t, e, "t", "e", "5", 0)

	ru := e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	must(t, ru.Put("t", []byte("b"), []byte("2")))
	must(t, ru.Put("t", []byte("c"), []byte("33")))
	must(t, ru.Delete("t", []byte("e")))
	must(t, ru.Put("t", []byte("f"), []byte("6")))
	must(t, ru.Delete("t", []byte("zz"))) // deleting a missing key is a no-op for readers
	if v, ok, _ := ru.Get("t", []byte("c")); !ok || string(v) != "33" {
		t.Fatalf("own write c = %q %v", v, ok)
	}
	if _, ok, _ := ru.Get("t", []byte("e")); ok {
		t.Fatal("own delete of e not seen")
	}
	want := []string{"a=1", "b=2", "c=33", "f=6"}
	if got := scan(t, ru, "t", CursorOptions{}); !slices.Equal(got, want) {
		t.Fatalf("forward %v want %v", got, want)
	}
	slices.Reverse(want)
	if got := scan(t, ru, "t", CursorOptions{Reverse: true}); !slices.Equal(got, want) {
		t.Fatalf("reverse %v want %v", got, want)
	}
	if got := scan(t, ru, "t", CursorOptions{Lower: []byte("b"), Upper: []byte("f")}); !slices.Equal(got, []string{"b=2", "c=33"}) {
		t.Fatalf("bounded %v", got)
	}
	// Another unit does not see uncommitted writes.
	if v, _ := getAt(t, e, "t", "c", 0); v != "3" {
		t.Fatalf("other unit sees %q", v)
	}
	w.End() // rollback
	if ru.InUnitOfWork() {
		t.Fatal("still in unit")
	}
	if got := scan(t, ru, "t", CursorOptions{}); !slices.Equal(got, []string{"a=1", "c=3", "e=5"}) {
		t.Fatalf("after rollback %v", got)
	}
	// The rolled-back writes released their keys.
	put(t, e, "t", "c", "333", 0)
}

func TestCursorSeesWritesMadeWhileOpen(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	for _, k := range []string{"a", "c", "e"} {
		put(t, e, "t", k, k, 0)
	}
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	defer w.End()
	c, err := ru.NewCursor("t", CursorOptions{})
	must(t, err)
	defer c.Close()
	if !c.First() || string(c.Key()) != "a" {
		t.Fatal("first")
	}
	must(t, ru.Put("t", []byte("b"), []byte("B")))
	must(t, ru.Delete("t", []byte("c")))
	var got []string
	for ok := c.Next(); ok; ok = c.Next() {
		got = append(got, string(c.Key()))
	}
	if !slices.Equal(got, []string{"b", "e"}) {
		t.Fatalf("got %v", got)
	}
}

func TestNestedUnitsAndHooks(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	ru := e.NewRecoveryUnit()
	defer ru.Close()

	var events []string
	outer := ru.BeginUnitOfWork()
	ru.OnCommit(func(optime.Timestamp) { events = append(events, "c1") })
	ru.OnRollback(func() { events = append(events, "r1") })
	inner := ru.BeginUnitOfWork()
	must(t, ru.Put("t", []byte("k"), []byte("v")))
	ru.OnCommit(func(optime.Timestamp) { events = append(events, "c2") })
	ru.OnRollback(func() { events = append(events, "r2") })
	must(t, inner.Commit())
	inner.End()
	if _, ok := getAt(t, e, "t", "k", 0); ok {
		t.Fatal("inner commit must not commit")
	}
	var commitTs optime.Timestamp
	ru.OnCommit(func(ts optime.Timestamp) { commitTs = ts })
	must(t, ru.SetCommitTimestamp(ts(7)))
	must(t, outer.Commit())
	outer.End()
	if !slices.Equal(events, []string{"c1", "c2"}) || commitTs != ts(7) {
		t.Fatalf("events %v ts %v", events, commitTs)
	}
	if v, _ := getAt(t, e, "t", "k", ts(7)); v != "v" {
		t.Fatal("not committed at ts 7")
	}

	// Rollback order is reverse; an inner End without Commit dooms the outer unit.
	events = nil
	outer = ru.BeginUnitOfWork()
	ru.OnRollback(func() { events = append(events, "r1") })
	ru.OnRollback(func() { events = append(events, "r2") })
	ru.OnCommit(func(optime.Timestamp) { events = append(events, "c") })
	inner = ru.BeginUnitOfWork()
	must(t, ru.Put("t", []byte("k2"), []byte("v")))
	inner.End()
	if err := outer.Commit(); err == nil {
		t.Fatal("doomed unit committed")
	}
	outer.End()
	if !slices.Equal(events, []string{"r2", "r1"}) {
		t.Fatalf("rollback events %v", events)
	}
	if _, ok := getAt(t, e, "t", "k2", 0); ok {
		t.Fatal("doomed write visible")
	}
	// The unit is usable again.
	w := ru.BeginUnitOfWork()
	must(t, ru.Put("t", []byte("k3"), []byte("v")))
	must(t, w.Commit())
	w.End()
}

func TestWriteOutsideUnit(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	if err := ru.Put("t", []byte("k"), nil); !errors.Is(err, ErrNotInUnit) {
		t.Fatalf("got %v", err)
	}
	if _, _, err := ru.Get("nope", []byte("k")); !errors.Is(err, ErrNoSuchIdent) {
		t.Fatalf("got %v", err)
	}
	must(t, ru.PreallocateSnapshot())
	if err := ru.SetReadSource(ReadProvided, 5); !errors.Is(err, ErrSnapshotActive) {
		t.Fatalf("got %v", err)
	}
	ru.AbandonSnapshot()
	must(t, ru.SetReadSource(ReadProvided, 5))
}

func TestSnapshotIsolation(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	put(t, e, "t", "a", "1", 0)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	must(t, ru.PreallocateSnapshot())
	put(t, e, "t", "a", "2", 0)
	put(t, e, "t", "b", "2", 0)
	if got := scan(t, ru, "t", CursorOptions{}); !slices.Equal(got, []string{"a=1"}) {
		t.Fatalf("snapshot sees %v", got)
	}
	ru.AbandonSnapshot()
	if got := scan(t, ru, "t", CursorOptions{}); !slices.Equal(got, []string{"a=2", "b=2"}) {
		t.Fatalf("new snapshot sees %v", got)
	}
}

func TestIdentsCreateDropList(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "b", IdentOptions{})
	mustCreate(t, e, "a", IdentOptions{})
	if err := e.CreateIdent("a", IdentOptions{}); !errors.Is(err, ErrIdentExists) {
		t.Fatalf("got %v", err)
	}
	put(t, e, "a", "k", "v", 0)
	put(t, e, "b", "k", "v", 0)
	if !slices.Equal(e.ListIdents(), []string{"a", "b"}) {
		t.Fatal(e.ListIdents())
	}
	must(t, e.DropIdent("a"))
	if e.HasIdent("a") || !e.HasIdent("b") {
		t.Fatal("drop")
	}
	if err := e.DropIdent("a"); !errors.Is(err, ErrNoSuchIdent) {
		t.Fatalf("got %v", err)
	}
	mustCreate(t, e, "a", IdentOptions{})
	if _, ok := getAt(t, e, "a", "k", 0); ok {
		t.Fatal("recreated ident sees old data")
	}
	if v, _ := getAt(t, e, "b", "k", 0); v != "v" {
		t.Fatal("neighbour lost data")
	}
	n1, n2 := e.NewIdentName("collection"), e.NewIdentName("collection")
	if n1 == n2 || !bytes.HasPrefix([]byte(n1), []byte("collection-")) {
		t.Fatal(n1, n2)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWaitUntilDurableGroupCommitAndClose(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	errc := make(chan error, 16)
	for i := range 16 {
		go func() {
			put(t, e, "t", fmt.Sprint(i), "v", 0)
			errc <- e.WaitUntilDurable(context.Background())
		}()
	}
	for range 16 {
		must(t, <-errc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A cancelled context returns promptly (or nil if the round already completed).
	if err := e.WaitUntilDurable(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	must(t, e.Close())
	if err := e.WaitUntilDurable(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if err := e.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("double close: %v", err)
	}
}
