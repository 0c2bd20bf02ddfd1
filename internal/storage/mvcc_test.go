package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/recordid"
)

func TestRecoverToStable(t *testing.T) {
	e := openMem(t)
	timestamped := []string{"collection-data", "index-id", "catalog"}
	for _, id := range timestamped {
		mustCreate(t, e, id, IdentOptions{})
	}
	mustCreate(t, e, "local-replstate", IdentOptions{Untimestamped: true})
	all := append(slices.Clone(timestamped), "local-replstate")
	for _, id := range all {
		put(t, e, id, "k1", "old", ts(10))
		put(t, e, id, "k2", "old", ts(10))
	}
	e.SetStableTimestamp(ts(15))
	for _, id := range all {
		put(t, e, id, "k1", "new", ts(20))
		del(t, e, id, "k2", ts(20))
		put(t, e, id, "k3", "new", ts(21))
	}
	e.SetCounts("collection-data", 3, 99) // stale on purpose: RecoverToStable recomputes

	got, err := e.RecoverToStable()
	if err != nil || got != ts(15) {
		t.Fatalf("RecoverToStable = %v, %v", got, err)
	}
	for _, id := range timestamped {
		ru := e.NewRecoveryUnit()
		if s := scan(t, ru, id, CursorOptions{}); !slices.Equal(s, []string{"k1=old", "k2=old"}) {
			t.Errorf("%s after recovery: %v", id, s)
		}
		ru.Close()
	}
	ru := e.NewRecoveryUnit()
	if s := scan(t, ru, "local-replstate", CursorOptions{}); !slices.Equal(s, []string{"k1=new", "k3=new"}) {
		t.Errorf("untimestamped ident after recovery: %v", s)
	}
	ru.Close()
	if r, d := e.Counts("collection-data"); r != 2 || d != 6 {
		t.Errorf("counts after recovery: %d, %d", r, d)
	}
	// Refused while a snapshot is open.
	ru = e.NewRecoveryUnit()
	defer ru.Close()
	must(t, ru.PreallocateSnapshot())
	if _, err := e.RecoverToStable(); err == nil {
		t.Fatal("RecoverToStable with an open snapshot succeeded")
	}
}

// TestOplogVisibilityNoHoles: concurrent writers reserve increasing timestamps, commit in a
// random order; readers of forward oplog cursors must never see a gap.
func TestOplogVisibilityNoHoles(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "oplog", IdentOptions{Oplog: true})
	const writers = 8
	opsPerWriter := 250
	if testing.Short() {
		opsPerWriter = 50
	}
	var (
		reserveMu sync.Mutex
		next      optime.Timestamp = ts(1)
		writersWG sync.WaitGroup
		done      atomic.Bool
	)
	errc := make(chan error, writers+2)
	for w := range writers {
		writersWG.Add(1)
		go func() {
			defer writersWG.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			ru := e.NewRecoveryUnit()
			defer ru.Close()
			for range opsPerWriter {
				wuow := ru.BeginUnitOfWork()
				// Reservation and registration are atomic, as MongoDB's oplog slot reservation.
				reserveMu.Lock()
				t := next
				next++
				err := ru.SetTimestamp(t)
				reserveMu.Unlock()
				if err != nil {
					errc <- err
					return
				}
				if d := rng.IntN(4); d > 0 {
					time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
				}
				if err := ru.Put("oplog", recordid.Long(int64(t)).Key(), []byte("entry")); err != nil {
					errc <- err
					return
				}
				if err := wuow.Commit(); err != nil {
					errc <- err
					return
				}
				wuow.End()
			}
		}()
	}
	var readersWG sync.WaitGroup
	var scans atomic.Int64
	for range 2 {
		readersWG.Add(1)
		go func() {
			defer readersWG.Done()
			ru := e.NewRecoveryUnit()
			defer ru.Close()
			for !done.Load() {
				c, err := ru.NewCursor("oplog", CursorOptions{})
				if err != nil {
					errc <- err
					return
				}
				want := ts(1)
				for ok := c.First(); ok; ok = c.Next() {
					id, err := recordid.FromKey(c.Key())
					if err != nil {
						errc <- err
						return
					}
					if got := optime.Timestamp(id.Int64()); got != want {
						errc <- fmt.Errorf("hole: saw %v, expected %v", got, want)
						c.Close()
						return
					}
					want++
				}
				c.Close()
				ru.AbandonSnapshot()
				scans.Add(1)
			}
		}()
	}
	writersWG.Wait()
	done.Store(true)
	readersWG.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// Once everything committed, the whole oplog is visible.
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	if n := len(scan(t, ru, "oplog", CursorOptions{})); n != writers*opsPerWriter {
		t.Fatalf("final oplog has %d entries, want %d", n, writers*opsPerWriter)
	}
	if e.AllDurableTimestamp() != next-1 {
		t.Fatalf("all durable %v, want %v", e.AllDurableTimestamp(), next-1)
	}
	t.Logf("%d reader scans", scans.Load())
}

func TestOplogVisibilityPoint(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "oplog", IdentOptions{Oplog: true})
	key := func(n uint32) string { return string(recordid.Long(int64(ts(n))).Key()) }
	put(t, e, "oplog", key(4), "x", ts(4))
	slow := e.NewRecoveryUnit()
	defer slow.Close()
	w := slow.BeginUnitOfWork()
	must(t, slow.SetTimestamp(ts(5)))
	put(t, e, "oplog", key(6), "x", ts(6))
	if e.AllDurableTimestamp() != ts(4) {
		t.Fatalf("all durable %v", e.AllDurableTimestamp())
	}
	ru := e.NewRecoveryUnit()
	if n := len(scan(t, ru, "oplog", CursorOptions{})); n != 1 {
		t.Fatalf("forward cursor sees %d entries past the hole", n)
	}
	if n := len(scan(t, ru, "oplog", CursorOptions{Reverse: true})); n != 2 {
		t.Fatalf("reverse cursor sees %d entries, want 2 (ignores visibility)", n)
	}
	ru.Close()
	must(t, slow.Put("oplog", []byte(key(5)), []byte("x")))
	must(t, w.Commit())
	w.End()
	ru = e.NewRecoveryUnit()
	defer ru.Close()
	if n := len(scan(t, ru, "oplog", CursorOptions{})); n != 3 {
		t.Fatalf("after commit forward cursor sees %d", n)
	}
	if e.AllDurableTimestamp() != ts(6) {
		t.Fatalf("all durable %v", e.AllDurableTimestamp())
	}
	// ReadAllDurable reads at the all-durable point.
	ru2 := e.NewRecoveryUnit()
	defer ru2.Close()
	must(t, ru2.SetReadSource(ReadAllDurable, 0))
	must(t, ru2.PreallocateSnapshot())
	if _, at := ru2.ReadSource(); at != ts(6) {
		t.Fatalf("ReadAllDurable at %v", at)
	}
}

func TestGCBelowOldest(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	put(t, e, "t", "a", "a10", ts(10))
	put(t, e, "t", "a", "a20", ts(20))
	put(t, e, "t", "a", "a30", ts(30))
	put(t, e, "t", "b", "b10", ts(10))
	del(t, e, "t", "b", ts(20))
	put(t, e, "t", "c", "c10", ts(10))
	put(t, e, "t", "c", "c40", ts(40))
	put(t, e, "t", "d", "d50", ts(50))

	type read struct {
		at  optime.Timestamp
		key string
	}
	reads := []read{}
	for _, at := range []optime.Timestamp{ts(25), ts(30), ts(45), ts(60), 0} {
		for _, k := range []string{"a", "b", "c", "d"} {
			reads = append(reads, read{at, k})
		}
	}
	before := map[read]string{}
	for _, r := range reads {
		v, ok := getAt(t, e, "t", r.key, r.at)
		before[r] = fmt.Sprint(v, ok)
	}
	e.SetOldestTimestamp(ts(25))
	for {
		done, err := e.gcPass(2) // tiny passes exercise the resume point
		must(t, err)
		if done {
			break
		}
	}
	raw, err := e.rawVersions("t")
	must(t, err)
	var got []string
	for _, v := range raw {
		got = append(got, fmt.Sprintf("%s@%d", v.key, v.ts.Inc()))
	}
	want := []string{"a@30", "a@20", "c@40", "c@10", "d@50"}
	if !slices.Equal(got, want) {
		t.Fatalf("raw versions after GC %v, want %v", got, want)
	}
	for _, r := range reads {
		v, ok := getAt(t, e, "t", r.key, r.at)
		if fmt.Sprint(v, ok) != before[r] {
			t.Errorf("read %v changed: %v %v, was %s", r, v, ok, before[r])
		}
	}
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	must(t, ru.SetReadSource(ReadProvided, ts(15)))
	if _, _, err := ru.Get("t", []byte("a")); !mongoerr.Is(err, mongoerr.SnapshotTooOld) {
		t.Fatalf("read below oldest: %v", err)
	}
}

// TestDurabilityCrash simulates a machine crash that loses every unsynced write.
func TestDurabilityCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	// A long interval keeps the flusher from syncing on its own, so only WaitUntilDurable does.
	opts := Options{Dir: "db", Logger: quietLogger(), JournalCommitInterval: time.Hour, CacheSize: 8 << 20}
	e, err := openEngine(opts, fs)
	must(t, err)
	mustCreate(t, e, "t", IdentOptions{})
	rs, err := OpenRecordStore(e, "t")
	must(t, err)
	ru := e.NewRecoveryUnit()
	for i := range 3 {
		w := ru.BeginUnitOfWork()
		_, err := rs.Insert(ru, []byte(fmt.Sprint("durable", i)))
		must(t, err)
		must(t, w.Commit())
		w.End()
	}
	must(t, e.WaitUntilDurable(context.Background()))
	w := ru.BeginUnitOfWork()
	_, err = rs.Insert(ru, []byte("lost"))
	must(t, err)
	must(t, w.Commit())
	w.End()
	ru.Close()
	e.SetCounts("t", 99, 99) // wrong counts must not survive an unclean restart
	must(t, e.persistCounts(true))

	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	must(t, e.Close())

	e2, err := openEngine(opts, crashed)
	must(t, err)
	defer e2.Close()
	if e2.CleanShutdownLast() {
		t.Fatal("crash not detected")
	}
	ru = e2.NewRecoveryUnit()
	defer ru.Close()
	got := scan(t, ru, "t", CursorOptions{})
	if len(got) != 3 {
		t.Fatalf("after crash: %q (want the 3 durable records, not the unsynced one)", got)
	}
	if r, d := e2.Counts("t"); r != 3 || d != int64(3*len("durable0")) {
		t.Fatalf("recomputed counts %d %d", r, d)
	}
	// Record ids continue above the recovered ones.
	rs2, err := OpenRecordStore(e2, "t")
	must(t, err)
	w = ru.BeginUnitOfWork()
	id, err := rs2.Insert(ru, []byte("x"))
	must(t, err)
	must(t, w.Commit())
	w.End()
	if id.Int64() != 4 {
		t.Fatalf("next id %v", id)
	}
}

func TestCountsCommitRollbackAndCleanRestart(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, Logger: quietLogger(), CacheSize: 8 << 20}
	e, err := Open(opts)
	must(t, err)
	mustCreate(t, e, "t", IdentOptions{})
	rs, err := OpenRecordStore(e, "t")
	must(t, err)
	ru := e.NewRecoveryUnit()
	w := ru.BeginUnitOfWork()
	id1, err := rs.Insert(ru, []byte("12345"))
	must(t, err)
	_, err = rs.Insert(ru, []byte("123"))
	must(t, err)
	if r, _ := rs.Counts(); r != 0 {
		t.Fatal("counts applied before commit")
	}
	must(t, w.Commit())
	w.End()
	if r, d := rs.Counts(); r != 2 || d != 8 {
		t.Fatalf("after commit %d %d", r, d)
	}
	w = ru.BeginUnitOfWork()
	must(t, rs.Delete(ru, id1))
	w.End() // rollback
	if r, d := rs.Counts(); r != 2 || d != 8 {
		t.Fatalf("after rollback %d %d", r, d)
	}
	w = ru.BeginUnitOfWork()
	must(t, rs.Update(ru, id1, []byte("1")))
	must(t, w.Commit())
	w.End()
	if r, d := rs.Counts(); r != 2 || d != 4 {
		t.Fatalf("after update %d %d", r, d)
	}
	ru.Close()
	e.SetCounts("t", 7, 70) // persisted as is by a clean shutdown (not recomputed)
	must(t, e.Close())

	e, err = Open(opts)
	must(t, err)
	defer e.Close()
	if !e.CleanShutdownLast() {
		t.Fatal("clean shutdown not recognised")
	}
	if r, d := e.Counts("t"); r != 7 || d != 70 {
		t.Fatalf("after clean restart %d %d", r, d)
	}
}

func TestReopenKeepsIdentsAndTimestamps(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(1000, 0)
	opts := Options{Dir: dir, Logger: quietLogger(), CacheSize: 8 << 20, Now: func() time.Time { return clock }}
	e, err := Open(opts)
	must(t, err)
	mustCreate(t, e, "t", IdentOptions{})
	mustCreate(t, e, "u", IdentOptions{Untimestamped: true, Oplog: true})
	var last optime.Timestamp
	ru := e.NewRecoveryUnit()
	w := ru.BeginUnitOfWork()
	must(t, ru.Put("t", []byte("k"), []byte("v")))
	ru.OnCommit(func(ts optime.Timestamp) { last = ts })
	must(t, w.Commit())
	w.End()
	ru.Close()
	if last.Secs() != 1000 {
		t.Fatalf("assigned %v", last)
	}
	e.SetStableTimestamp(optime.MakeTimestamp(900, 1))
	e.SetStableTimestamp(optime.MakeTimestamp(800, 1)) // ignored: never backwards
	must(t, e.Close())

	clock = time.Unix(500, 0) // the wall clock went backwards
	e, err = Open(opts)
	must(t, err)
	defer e.Close()
	if !slices.Equal(e.ListIdents(), []string{"t", "u"}) {
		t.Fatal(e.ListIdents())
	}
	if e.StableTimestamp() != optime.MakeTimestamp(900, 1) {
		t.Fatalf("stable %v", e.StableTimestamp())
	}
	ru = e.NewRecoveryUnit()
	defer ru.Close()
	w = ru.BeginUnitOfWork()
	must(t, ru.Put("t", []byte("k"), []byte("v2")))
	var next optime.Timestamp
	ru.OnCommit(func(ts optime.Timestamp) { next = ts })
	must(t, w.Commit())
	w.End()
	if next <= last {
		t.Fatalf("timestamp went backwards across restart: %v then %v", last, next)
	}
	if v, _ := getAt(t, e, "t", "k", last); v != "v" {
		t.Fatalf("history lost: %q", v)
	}
}

func TestCorruptDataReturnsErrors(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	put(t, e, "t", "a", "ok", ts(1))
	ii, _ := e.lookupIdent("t")
	must(t, e.db.Set(appendVersionedKey(nil, ii.id, []byte("b"), ts(1)), []byte{0x7f, 1}, pebble.Sync))
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	if _, _, err := ru.Get("t", []byte("b")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get: %v", err)
	}
	c, err := ru.NewCursor("t", CursorOptions{})
	must(t, err)
	for ok := c.First(); ok; ok = c.Next() {
	}
	if !errors.Is(c.Err(), ErrCorrupt) {
		t.Fatalf("cursor: %v", c.Err())
	}
	c.Close()
	// An unversioned key inside an ident's range.
	must(t, e.db.Set(appendBareKey(nil, ii.id, []byte("c")), []byte{1}, pebble.Sync))
	ru.AbandonSnapshot()
	c, err = ru.NewCursor("t", CursorOptions{Lower: []byte("c")})
	must(t, err)
	if c.First() || !errors.Is(c.Err(), ErrCorrupt) {
		t.Fatalf("bare key: %v", c.Err())
	}
	c.Close()
	for _, k := range [][]byte{nil, {1}, {0, 0, 0, 1, 9}, bytes.Repeat([]byte{9}, 14)} {
		if _, _, _, _, err := decodeEngineKey(k); err == nil && len(k) < 5 {
			t.Errorf("decodeEngineKey(%x) accepted", k)
		}
		_ = splitKey(k) // must not panic
	}
	for _, v := range [][]byte{nil, {0}, {valueHeaderTombstone, 1}} {
		if _, _, err := decodeValue(v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeValue(%x): %v", v, err)
		}
	}
}

func TestComparerOrder(t *testing.T) {
	keys := [][]byte{
		appendVersionedKey(nil, 1, []byte("a"), 5),
		appendBareKey(nil, 1, []byte("a")),
		appendVersionedKey(nil, 1, []byte("a"), 7),
		appendVersionedKey(nil, 1, []byte("a\x00"), 1),
		appendVersionedKey(nil, 1, []byte(""), 1),
		appendVersionedKey(nil, 1, []byte("b"), 1),
		appendVersionedKey(nil, 2, []byte(""), 9),
	}
	sort.Slice(keys, func(i, j int) bool { return compareKeys(keys[i], keys[j]) < 0 })
	var got []string
	for _, k := range keys {
		got = append(got, fmt.Sprint(keyFormatter(k)))
	}
	want := []string{"1/@0.1", "1/61", "1/61@0.7", "1/61@0.5", "1/6100@0.1", "1/62@0.1", "2/@0.9"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v\nwant  %v", got, want)
	}
	a := appendVersionedKey(nil, 3, []byte("xyz"), 4)
	if p := splitKey(a); !bytes.Equal(a[:p], appendBareKey(nil, 3, []byte("xyz"))) {
		t.Fatal("split")
	}
	succ := mvccComparer.ImmediateSuccessor(nil, a[:splitKey(a)])
	if compareKeys(a, succ) >= 0 || compareKeys(succ, appendVersionedKey(nil, 3, []byte("xyz\x00"), 1)) > 0 {
		t.Fatal("immediate successor")
	}
}

func TestRecordStore(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "coll", IdentOptions{})
	rs, err := OpenRecordStore(e, "coll")
	must(t, err)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	var ids []recordid.ID
	for i := range 10 {
		id, err := rs.Insert(ru, []byte(fmt.Sprint("doc", i)))
		must(t, err)
		ids = append(ids, id)
	}
	if err := rs.InsertWithID(ru, ids[3], []byte("dup")); !mongoerr.Is(err, mongoerr.DuplicateKey) {
		t.Fatalf("duplicate insert: %v", err)
	}
	must(t, w.Commit())
	w.End()
	if ids[0].Int64() != 1 || ids[9].Int64() != 10 {
		t.Fatal(ids)
	}
	doc, ok, err := rs.Get(ru, ids[4])
	if err != nil || !ok || string(doc) != "doc4" {
		t.Fatal(doc, ok, err)
	}

	// Cursor with a yield in the middle during which the next records change.
	c, err := rs.NewCursor(ru, false)
	must(t, err)
	var seen []int64
	for range 3 {
		id, _, ok := c.Next()
		if !ok {
			t.Fatal("short")
		}
		seen = append(seen, id.Int64())
	}
	c.Save()
	ru.AbandonSnapshot()
	w2 := e.NewRecoveryUnit()
	ww := w2.BeginUnitOfWork()
	must(t, rs.Delete(w2, ids[2])) // the saved record
	must(t, rs.Delete(w2, ids[3]))
	must(t, ww.Commit())
	ww.End()
	w2.Close()
	_, err = c.Restore()
	must(t, err)
	for {
		id, _, ok := c.Next()
		if !ok {
			break
		}
		seen = append(seen, id.Int64())
	}
	must(t, c.Err())
	c.Close()
	if !slices.Equal(seen, []int64{1, 2, 3, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("seen %v", seen)
	}
	// Save/Restore where the saved record survives: no duplicates.
	c, err = rs.NewCursor(ru, true)
	must(t, err)
	id, _, _ := c.Next()
	c.Save()
	ru.AbandonSnapshot()
	_, err = c.Restore()
	must(t, err)
	id2, _, _ := c.Next()
	if id.Int64() != 10 || id2.Int64() != 9 {
		t.Fatalf("reverse restore %v %v", id, id2)
	}
	if id3, _, ok := c.SeekID(recordid.Long(4)); !ok || id3.Int64() != 2 { // 3 and 4 are deleted
		t.Fatalf("reverse SeekID(4) = %v %v", id3, ok)
	}
	c.Close()
	if r, _ := rs.Counts(); r != 8 {
		t.Fatalf("records %d", r)
	}
	rs2, err := OpenRecordStore(e, "coll")
	must(t, err)
	w = ru.BeginUnitOfWork()
	id, err = rs2.Insert(ru, []byte("x"))
	must(t, err)
	must(t, w.Commit())
	w.End()
	if id.Int64() != 11 {
		t.Fatalf("reopened store allocates %v", id)
	}
}

func TestOplogTruncation(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "oplog", IdentOptions{Oplog: true})
	rs, err := OpenRecordStore(e, "oplog")
	must(t, err)
	payload := bytes.Repeat([]byte("x"), 200)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	insert := func(from, to int) {
		for i := from; i <= to; i++ {
			w := ru.BeginUnitOfWork()
			must(t, ru.SetCommitTimestamp(optime.Timestamp(i)))
			must(t, rs.InsertWithID(ru, recordid.Long(int64(i)), payload))
			must(t, w.Commit())
			w.End()
		}
	}
	insert(1, 100)
	e.SetPinnedOplogTimestamp(optime.Timestamp(30))
	e.SetOplogMaxSize("oplog", 10_000)
	must(t, e.truncateOplogs())
	entries := func() []int64 {
		ru := e.NewRecoveryUnit()
		defer ru.Close()
		c, err := rs.NewCursor(ru, false)
		must(t, err)
		defer c.Close()
		var out []int64
		for id, _, ok := c.Next(); ok; id, _, ok = c.Next() {
			out = append(out, id.Int64())
		}
		return out
	}
	got := entries()
	// Segments hold 6 entries (1024-byte minimum segment): 25..30 contains the pin.
	if got[0] != 25 || got[len(got)-1] != 100 {
		t.Fatalf("pinned at 30: oplog spans %d..%d, want 25..100", got[0], got[len(got)-1])
	}
	e.SetPinnedOplogTimestamp(0)
	must(t, e.truncateOplogs())
	got = entries()
	if len(got)*200 > 10_000+1000 || got[len(got)-1] != 100 {
		t.Fatalf("after truncation %d entries ending at %d", len(got), got[len(got)-1])
	}
	if r, _ := rs.Counts(); r != int64(len(got)) {
		t.Fatalf("counts %d, entries %d", r, len(got))
	}
	must(t, e.TruncateOplogAfter("oplog", optime.Timestamp(95)))
	if got = entries(); got[len(got)-1] != 95 {
		t.Fatalf("TruncateOplogAfter: last %d", got[len(got)-1])
	}
}

// TestModelRandom compares point reads and cursors (both directions, random bounds, random
// read timestamps, with uncommitted own writes) against a simple in-memory model.
func TestModelRandom(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "t", IdentOptions{})
	type version struct {
		ts   optime.Timestamp
		val  string
		tomb bool
	}
	model := map[string][]version{} // newest last
	rng := rand.New(rand.NewPCG(42, 7))
	keyOf := func() string { return fmt.Sprintf("k%02d", rng.IntN(40)) }
	visible := func(key string, at optime.Timestamp, own map[string]*string) (string, bool) {
		if v, ok := own[key]; ok {
			if v == nil {
				return "", false
			}
			return *v, true
		}
		vs := model[key]
		for i := len(vs) - 1; i >= 0; i-- {
			if vs[i].ts <= at {
				return vs[i].val, !vs[i].tomb
			}
		}
		return "", false
	}
	rounds := 60
	if testing.Short() {
		rounds = 20
	}
	var now optime.Timestamp = 1
	for round := range rounds {
		// Commit a batch of writes at a new timestamp.
		now += optime.Timestamp(1 + rng.IntN(3))
		ru := e.NewRecoveryUnit()
		w := ru.BeginUnitOfWork()
		must(t, ru.SetCommitTimestamp(now))
		latest := map[string]version{}
		for range 1 + rng.IntN(8) {
			k := keyOf()
			if rng.IntN(3) == 0 {
				must(t, ru.Delete("t", []byte(k)))
				latest[k] = version{ts: now, tomb: true}
			} else {
				v := fmt.Sprint("v", round, "-", rng.IntN(1000))
				must(t, ru.Put("t", []byte(k), []byte(v)))
				latest[k] = version{ts: now, val: v}
			}
		}
		must(t, w.Commit())
		w.End()
		ru.Close()
		for k, v := range latest {
			model[k] = append(model[k], v)
		}

		// Read at a random timestamp with random own writes on top.
		at := optime.Timestamp(1 + rng.IntN(int(now)+1))
		ru = e.NewRecoveryUnit()
		must(t, ru.SetReadSource(ReadProvided, at))
		own := map[string]*string{}
		var ww *WriteUnitOfWork
		if rng.IntN(2) == 0 {
			ww = ru.BeginUnitOfWork()
			for range rng.IntN(6) {
				k := keyOf()
				if rng.IntN(2) == 0 {
					must(t, ru.Delete("t", []byte(k)))
					own[k] = nil
				} else {
					v := "own" + k
					must(t, ru.Put("t", []byte(k), []byte(v)))
					own[k] = &v
				}
			}
		}
		var all []string
		for i := range 40 {
			k := fmt.Sprintf("k%02d", i)
			want, wantOK := visible(k, at, own)
			got, gotOK, err := ru.Get("t", []byte(k))
			must(t, err)
			if string(got) != want || gotOK != wantOK {
				t.Fatalf("round %d at %v Get(%s) = %q,%v want %q,%v", round, at, k, got, gotOK, want, wantOK)
			}
			if wantOK {
				all = append(all, k+"="+want)
			}
		}
		for range 4 {
			var opts CursorOptions
			lo, hi := "", ""
			if rng.IntN(2) == 0 {
				lo = keyOf()
				opts.Lower = []byte(lo)
			}
			if rng.IntN(2) == 0 {
				hi = keyOf()
				opts.Upper = []byte(hi)
			}
			opts.Reverse = rng.IntN(2) == 0
			var want []string
			for _, kv := range all {
				k := kv[:3]
				if (lo == "" || k >= lo) && (hi == "" || k < hi) {
					want = append(want, kv)
				}
			}
			if opts.Reverse {
				slices.Reverse(want)
			}
			if got := scan(t, ru, "t", opts); !slices.Equal(got, want) {
				t.Fatalf("round %d at %v cursor %+v\n got %v\nwant %v", round, at, opts, got, want)
			}
			// Seek from a random key.
			sk := keyOf()
			c, err := ru.NewCursor("t", opts)
			must(t, err)
			var wantSeek []string
			for _, kv := range want {
				if (!opts.Reverse && kv[:3] >= sk) || (opts.Reverse && kv[:3] <= sk) {
					wantSeek = append(wantSeek, kv)
				}
			}
			var gotSeek []string
			for ok := c.Seek([]byte(sk)); ok; ok = c.Next() {
				gotSeek = append(gotSeek, string(c.Key())+"="+string(c.Value()))
			}
			c.Close()
			if !slices.Equal(gotSeek, wantSeek) {
				t.Fatalf("round %d seek %s %+v\n got %v\nwant %v", round, sk, opts, gotSeek, wantSeek)
			}
		}
		if ww != nil {
			ww.End()
		}
		ru.Close()
	}
}

// TestTailableRestore: a cursor saved after reaching the end continues after its last key
// once new entries are visible (tailable oplog readers).
func TestTailableRestore(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "oplog", IdentOptions{Oplog: true})
	rs, err := OpenRecordStore(e, "oplog")
	must(t, err)
	add := func(n int64) {
		ru := e.NewRecoveryUnit()
		defer ru.Close()
		w := ru.BeginUnitOfWork()
		must(t, ru.SetCommitTimestamp(optime.Timestamp(n)))
		must(t, rs.InsertWithID(ru, recordid.Long(n), []byte("e")))
		must(t, w.Commit())
		w.End()
	}
	add(1)
	add(2)
	reader := e.NewRecoveryUnit()
	defer reader.Close()
	c, err := rs.NewCursor(reader, false)
	must(t, err)
	defer c.Close()
	var seen []int64
	drain := func() {
		for id, _, ok := c.Next(); ok; id, _, ok = c.Next() {
			seen = append(seen, id.Int64())
		}
		must(t, c.Err())
	}
	drain()
	for _, n := range []int64{3, 4} {
		c.Save()
		reader.AbandonSnapshot()
		add(n)
		_, err := c.Restore()
		must(t, err)
		drain()
	}
	if !slices.Equal(seen, []int64{1, 2, 3, 4}) {
		t.Fatalf("tailing saw %v", seen)
	}
}

func TestFormatVersionChecked(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, Logger: quietLogger(), CacheSize: 8 << 20}
	e, err := Open(opts)
	must(t, err)
	must(t, e.db.Set(metaFormatKey, encodeUint64(formatVersion+1), pebble.Sync))
	must(t, e.Close())
	if e, err := Open(opts); err == nil {
		_ = e.Close()
		t.Fatal("opened a directory with a newer format version")
	}
}
