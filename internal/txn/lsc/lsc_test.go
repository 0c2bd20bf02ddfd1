package lsc

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
)

func TestExpiryAndLimits(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(30*time.Minute, 2, func() time.Time { return now })
	a, err := c.Start("")
	if err != nil || a.Key.UID != NoUserUID || a.Key.ID[6]>>4 != 4 {
		t.Fatalf("start: %+v %v", a, err)
	}
	b, _ := c.Start("")
	if _, err := c.Start(""); !mongoerr.Is(err, mongoerr.TooManyLogicalSessions) {
		t.Fatalf("third session: %v", err)
	}
	now = now.Add(20 * time.Minute)
	if err := c.VivifyAll([]Key{a.Key}, ""); err != nil {
		t.Fatal(err)
	}
	now = now.Add(15 * time.Minute) // b idle 35 min, a 15 min
	if c.Has(b.Key) || !c.Has(a.Key) || c.Len() != 1 {
		t.Fatalf("expiry: has a=%v b=%v len=%d", c.Has(a.Key), c.Has(b.Key), c.Len())
	}
	// endSessions only marks the session: the refresh removes it.
	c.End([]Key{a.Key})
	if !c.Ending(a.Key) || c.Len() != 1 {
		t.Fatalf("end: ending=%v len=%d", c.Ending(a.Key), c.Len())
	}
	// Without a refresh (a router), ended sessions do not pile up past the timeout.
	now = now.Add(31 * time.Minute)
	if c.Len() != 0 || c.Ending(a.Key) {
		t.Fatalf("after the timeout: len=%d ending=%v", c.Len(), c.Ending(a.Key))
	}
}

// memStore is a sessions collection in memory.
type memStore struct {
	setup   bool
	recs    map[Key]time.Time
	failRef error
}

func (s *memStore) Setup(context.Context) error { s.setup = true; return nil }
func (s *memStore) Exists(context.Context) (bool, error) {
	return s.setup, nil
}
func (s *memStore) Refresh(_ context.Context, recs []Record, now time.Time) error {
	if s.failRef != nil {
		return s.failRef
	}
	for _, r := range recs {
		s.recs[r.Key] = now
	}
	return nil
}
func (s *memStore) Remove(_ context.Context, keys []Key) error {
	for _, k := range keys {
		delete(s.recs, k)
	}
	return nil
}
func (s *memStore) FindRemoved(_ context.Context, keys []Key) ([]Key, error) {
	var out []Key
	for _, k := range keys {
		if _, ok := s.recs[k]; !ok {
			out = append(out, k)
		}
	}
	return out, nil
}

// memService has running-op sessions and cursors by session.
type memService struct {
	ops     []Key
	cursors map[Key]int
}

func (s *memService) ActiveOpSessions() []Key { return s.ops }
func (s *memService) OpenCursorSessions() []Key {
	var out []Key
	for k := range s.cursors {
		out = append(out, k)
	}
	return out
}
func (s *memService) KillCursors(match func(Key) bool) int {
	n := 0
	for k, c := range s.cursors {
		if match(k) {
			n += c
			delete(s.cursors, k)
		}
	}
	return n
}

func key(b byte) Key { return Key{ID: catalog.UUID{b}, UID: NoUserUID} }

func TestRefresh(t *testing.T) {
	now := time.Unix(5000, 0)
	c := New(30*time.Minute, 100, func() time.Time { return now })
	st := &memStore{recs: map[Key]time.Time{}}
	// expired: a cursor session whose record the TTL index removed; kept: one still stored.
	expired, kept, used, ended, running := key(1), key(2), key(3), key(4), key(5)
	st.recs[kept] = now.Add(-time.Minute)
	svc := &memService{ops: []Key{running, ended}, cursors: map[Key]int{expired: 2, kept: 1, ended: 1, used: 1}}
	for _, k := range []Key{used, ended} {
		if err := c.Vivify(k, ""); err != nil {
			t.Fatal(err)
		}
	}
	c.End([]Key{ended})
	now = now.Add(time.Minute)
	if err := c.Refresh(context.Background(), st, svc, true); err != nil {
		t.Fatal(err)
	}
	if !st.setup {
		t.Fatal("sessions collection not set up")
	}
	for _, k := range []Key{used, running} {
		if got, ok := st.recs[k]; !ok || !got.Equal(now) {
			t.Errorf("session %x: record %v %v, want lastUse %v", k.ID[0], got, ok, now)
		}
	}
	if _, ok := st.recs[ended]; ok {
		t.Error("ended session still stored")
	}
	var left []int
	for k := range svc.cursors {
		left = append(left, int(k.ID[0]))
	}
	sort.Ints(left)
	if len(left) != 2 || left[0] != 2 || left[1] != 3 {
		t.Errorf("cursors left for sessions %v, want [2 3] (expired and ended killed)", left)
	}
	s := c.Stats()
	if s.LastSessionsCollectionJobCursorsClosed != 3 || s.LastSessionsCollectionJobEntriesEnded != 1 ||
		s.LastSessionsCollectionJobEntriesRefreshed != 2 || s.SessionsCollectionJobCount != 1 {
		t.Errorf("stats %+v", s)
	}
	if c.Len() != 0 || c.Ending(ended) {
		t.Errorf("cache not emptied: len %d", c.Len())
	}

	// A failed upsert keeps the sessions for the next refresh.
	_ = c.Vivify(used, "")
	c.End([]Key{kept})
	st.failRef = errors.New("boom")
	if err := c.Refresh(context.Background(), st, svc, true); err == nil {
		t.Fatal("refresh did not fail")
	}
	if !c.Has(used) || !c.Ending(kept) {
		t.Fatal("failed refresh lost sessions")
	}
}

func TestRefreshNotWritable(t *testing.T) {
	c := New(30*time.Minute, 100, nil)
	st := &memStore{recs: map[Key]time.Time{}}
	a, b := key(1), key(2)
	svc := &memService{cursors: map[Key]int{b: 1}}
	_ = c.Vivify(a, "")
	c.End([]Key{b})
	if err := c.Refresh(context.Background(), st, svc, false); err != nil {
		t.Fatal(err)
	}
	if st.setup || len(st.recs) != 0 {
		t.Fatalf("a node that may not write wrote: setup=%v recs=%v", st.setup, st.recs)
	}
	if len(svc.cursors) != 0 || c.Len() != 0 {
		t.Fatalf("cursors %v len %d", svc.cursors, c.Len())
	}
}

type memTxns struct{ recs []TxnRecord }

func (m *memTxns) OlderThan(context.Context, time.Time) ([]TxnRecord, error) { return m.recs, nil }
func (m *memTxns) Remove(_ context.Context, recs []TxnRecord) (int, error) {
	gone := map[Key]bool{}
	for _, r := range recs {
		gone[r.Key] = true
	}
	var keep []TxnRecord
	for _, r := range m.recs {
		if !gone[r.Key] {
			keep = append(keep, r)
		}
	}
	n := len(m.recs) - len(keep)
	m.recs = keep
	return n, nil
}

func TestReap(t *testing.T) {
	c := New(30*time.Minute, 100, nil)
	st := &memStore{recs: map[Key]time.Time{}}
	alive, expired, busy, cached := key(1), key(2), key(3), key(4)
	st.recs[alive] = time.Now()
	txns := &memTxns{}
	for _, k := range []Key{alive, expired, busy, cached} {
		txns.recs = append(txns.recs, TxnRecord{Key: k})
	}
	_ = c.Vivify(cached, "")
	inUse := func(k Key) bool { return k == busy }
	var reaped []Key
	c.OnReap(func(keys []Key) { reaped = append(reaped, keys...) })
	// No sessions collection: nothing is reaped.
	if n, err := c.Reap(context.Background(), st, txns, time.Now(), inUse); n != 0 || err != nil {
		t.Fatalf("reap without the sessions collection: %d %v", n, err)
	}
	st.setup = true
	n, err := c.Reap(context.Background(), st, txns, time.Now(), inUse)
	if err != nil || n != 1 || len(txns.recs) != 3 || len(reaped) != 1 || reaped[0] != expired {
		t.Fatalf("reap: n=%d err=%v left=%v reaped=%v", n, err, txns.recs, reaped)
	}
	if c.Stats().LastTransactionReaperJobEntriesCleanedUp != 1 {
		t.Fatalf("stats %+v", c.Stats())
	}
}

func TestKillHooks(t *testing.T) {
	c := New(time.Minute, 10, nil)
	var got []Key
	c.OnKill(func(match func(Key) bool) {
		for _, k := range []Key{key(1), key(2)} {
			if match(k) {
				got = append(got, k)
			}
		}
	})
	c.NotifyKill(func(k Key) bool { return k == key(2) })
	if len(got) != 1 || got[0] != key(2) {
		t.Fatalf("hook saw %v", got)
	}
}
