package index

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/recordid"
	"humongo/internal/storage"
)

func (v *env) count(coll *Collection) int {
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	c, err := coll.rs.NewCursor(ru, false)
	if err != nil {
		v.t.Fatal(err)
	}
	defer c.Close()
	n := 0
	for {
		if _, _, ok := c.Next(); !ok {
			break
		}
		n++
	}
	return n
}

func TestTTLPass(t *testing.T) {
	v := newEnv(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var now atomic.Int64
	now.Store(base.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	for _, dir := range []int{1, -1} {
		name := "t_asc"
		if dir < 0 {
			name = "t_desc"
		}
		spec := d{{"key", d{{"t", dir}}}, {"name", name}, {"expireAfterSeconds", int32(60)}}
		if _, _, err := v.build(spec, BuildOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dt := func(sec int) bson.DateTime {
		return bson.NewDateTimeFromTime(base.Add(time.Duration(sec) * time.Second))
	}
	docs := []d{
		{{"_id", 1}, {"t", dt(-120)}},              // expired
		{{"_id", 2}, {"t", dt(-30)}},               // not yet
		{{"_id", 3}, {"t", a{dt(100), dt(-61)}}},   // earliest date expired
		{{"_id", 4}, {"t", "not a date"}},          // never
		{{"_id", 5}},                               // missing
		{{"_id", 6}, {"t", a{dt(-500), dt(-400)}}}, // expired, two keys
		{{"_id", 7}, {"t", dt(-59)}},               // expires after 1 s more
	}
	for _, dd := range docs {
		if _, err := v.insert(doc(t, dd)); err != nil {
			t.Fatal(err)
		}
	}
	m := NewTTLMonitor(v.cs, TTLOptions{Now: clock})
	n, err := m.RunPass(context.Background())
	if err != nil || n != 3 {
		t.Fatalf("first pass deleted %d (%v), want 3", n, err)
	}
	if c := v.count(v.coll); c != 4 {
		t.Fatalf("%d documents left, want 4", c)
	}
	// The background loop with a short period picks up newly expired documents.
	now.Store(base.Add(2 * time.Second).UnixNano())
	m.SetPeriod(10 * time.Millisecond)
	m.Start(context.Background())
	defer m.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for v.count(v.coll) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("background monitor did not delete _id 7; %d documents", v.count(v.coll))
		}
		time.Sleep(5 * time.Millisecond)
	}
	m.Stop()
	if m.Passes() < 2 || m.Deleted() != 4 {
		t.Fatalf("passes %d deleted %d", m.Passes(), m.Deleted())
	}
	// Indexes stay consistent with the collection.
	v.checkIndexExact("t_asc")
	v.checkIndexExact("t_desc")
}

// TestTTLFairness: with a small per-visit target, a collection with few expired documents is
// emptied in the first subpass even though another has many.
func TestTTLFairness(t *testing.T) {
	v := newEnv(t)
	ru := v.e.NewRecoveryUnit()
	w := ru.BeginUnitOfWork()
	if _, err := v.cat.CreateCollection(ru, "test.small", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	w.End()
	ru.Close()
	small, err := v.cs.Get("test.small")
	if err != nil {
		t.Fatal(err)
	}
	spec := doc(t, d{{"key", d{{"t", 1}}}, {"name", "t_1"}, {"expireAfterSeconds", int32(0)}})
	for _, c := range []*Collection{v.coll, small} {
		if _, _, err := Build(context.Background(), c, spec, BuildOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	old := bson.NewDateTimeFromTime(time.Unix(1000, 0))
	for i := 0; i < 300; i++ {
		if _, err := v.insert(doc(t, d{{"_id", i}, {"t", old}})); err != nil {
			t.Fatal(err)
		}
	}
	ru = v.e.NewRecoveryUnit()
	if err := small.Write(context.Background(), ru, func() error {
		for i := 0; i < 5; i++ {
			if _, err := small.InsertDocument(ru, doc(t, d{{"_id", i}, {"t", old}})); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ru.Close()
	m := NewTTLMonitor(v.cs, TTLOptions{})
	m.SetIndexDeleteTargetDocs(50)
	var order []string
	m.opts.Delete = func(ctx context.Context, coll *Collection, ru *storage.RecoveryUnit, rid recordid.ID, dd bsoncore.Document) error {
		meta, _ := v.cat.Latest().ByUUID(coll.UUID())
		order = append(order, meta.NS)
		return coll.DeleteDocument(ru, rid, dd)
	}
	n, err := m.RunPass(context.Background())
	if err != nil || n != 305 {
		t.Fatalf("pass deleted %d (%v)", n, err)
	}
	// All five small deletions happen within the first 55 deletions (first subpass).
	smallSeen := 0
	for i, ns := range order {
		if ns == "test.small" {
			smallSeen++
			if i >= 55 {
				t.Fatalf("small collection's deletion #%d at position %d", smallSeen, i)
			}
		}
	}
	if smallSeen != 5 {
		t.Fatalf("small deletions %d", smallSeen)
	}
}
