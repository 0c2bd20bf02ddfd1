package router

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/changestream"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
)

// csTok is a resume token document with `_data` data (the merge never decodes one).
func csTok(data string) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("_data", data).Build()
}

// csEv is an event with token data.
func csEv(data, op string) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendDocument("_id", csTok(data)).AppendString("operationType", op).Build()
}

// fakeShard answers getMores from a script; each answer is held back by delay.
type fakeShard struct {
	mu      sync.Mutex
	replies []csReply
	err     error
	delay   time.Duration
	calls   int
	awaits  []time.Duration
	active  *atomic.Int32 // getMores in flight over all the test's shards
	maxSeen *atomic.Int32
	killed  bool
}

func (f *fakeShard) more(ctx context.Context, _ int64, await time.Duration) (csReply, error) {
	if f.active != nil {
		n := f.active.Add(1)
		defer f.active.Add(-1)
		for {
			m := f.maxSeen.Load()
			if n <= m || f.maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
	}
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.awaits = append(f.awaits, await)
	if f.err != nil {
		return csReply{}, f.err
	}
	if len(f.replies) == 0 {
		return csReply{open: true}, nil
	}
	r := f.replies[0]
	f.replies = f.replies[1:]
	return r, nil
}

func (f *fakeShard) kill() { f.mu.Lock(); f.killed = true; f.mu.Unlock() }

// newCSSource builds a source over shards whose first batches are firsts (events, PBRT).
func newCSSource(t *testing.T, shards []*fakeShard, firsts []csReply) *csSource {
	t.Helper()
	s := &csSource{pos: csTok("00"), aggCtx: &agg.Context{}}
	for i, f := range shards {
		q := &csQueue{shard: f, open: true}
		if err := q.add(firsts[i].docs, firsts[i].pbrt); err != nil {
			t.Fatal(err)
		}
		s.m.qs = append(s.m.qs, q)
	}
	return s
}

// datas lists the `_id._data` of a batch's events.
func datas(t *testing.T, b *cursor.Batch) []string {
	t.Helper()
	reply := cursor.AppendReply(b, 0, "db.c", cursor.ReplyOptions{})
	arr := reply.Lookup("cursor", "nextBatch").Array()
	vals, _ := arr.Values()
	var out []string
	for _, v := range vals {
		d, _ := tokenData(v.Document().Lookup("_id").Document())
		out = append(out, d)
	}
	return out
}

func pbrtData(s *csSource) string {
	d, _ := tokenData(s.postBatchResumeToken())
	return d
}

// The merge rule: the smallest buffered event goes out only when every open shard with
// nothing buffered promised nothing smaller.
func TestCSMergeRule(t *testing.T) {
	q := func(pbrt string, open bool, evs ...string) *csQueue {
		c := &csQueue{pbrtData: pbrt, open: open}
		for _, e := range evs {
			c.buf = append(c.buf, csEvent{data: e})
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		qs      []*csQueue
		next    int
		starved []int
	}{
		{"nothing buffered", []*csQueue{q("10", true), q("20", true)}, -1, []int{0, 1}},
		{"an idle shard behind holds the event", []*csQueue{q("30", true, "20"), q("15", true)}, -1, []int{1}},
		{"an idle shard past it lets it go", []*csQueue{q("30", true, "20"), q("25", true)}, 0, nil},
		{"the smaller head of two", []*csQueue{q("40", true, "30"), q("40", true, "20")}, 1, nil},
		{"ties go to the earlier shard", []*csQueue{q("40", true, "20"), q("40", true, "20")}, 0, nil},
		{"a closed shard holds nothing up", []*csQueue{q("30", true, "20"), q("", false)}, 0, nil},
		{"a buffering shard does not block with its PBRT", []*csQueue{q("25", true, "24"), q("50", true, "22")}, 1, nil},
		{"only the shards behind are asked", []*csQueue{q("30", true, "20"), q("10", true), q("60", true)}, -1, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &csMerge{qs: tc.qs}
			if got := m.next(); got != tc.next {
				t.Errorf("next = %d, want %d", got, tc.next)
			}
			if got := m.starved(); !slices.Equal(got, tc.starved) {
				t.Errorf("starved = %v, want %v", got, tc.starved)
			}
		})
	}
}

// Events come out in `_data` order across shards, held back until the other shard's PBRT
// passes them; the PBRT of each reply is where the client resumes.
func TestCSSourceMerge(t *testing.T) {
	a := &fakeShard{}
	b := &fakeShard{replies: []csReply{
		{docs: []bsoncore.Document{csEv("20", "insert")}, pbrt: csTok("25"), open: true},
		{pbrt: csTok("40"), open: true},
	}}
	s := newCSSource(t, []*fakeShard{a, b}, []csReply{
		{docs: []bsoncore.Document{csEv("10", "insert"), csEv("30", "update")}, pbrt: csTok("30")},
		{pbrt: csTok("05")},
	})
	ctx := context.Background()
	batch, err := s.fill(ctx, cursor.DefaultFirstBatch, 0)
	if err != nil || batch.Len() != 0 {
		t.Fatalf("first batch: %v %v", datas(t, batch), err)
	}
	if got := pbrtData(s); got != "00" {
		t.Errorf("PBRT before anything: %q, want the start token", got)
	}
	batch, err = s.fill(ctx, cursor.Unlimited, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := datas(t, batch); !slices.Equal(got, []string{"10", "20"}) {
		t.Fatalf("second batch %v", got)
	}
	if a.calls != 0 || b.calls != 1 {
		t.Errorf("getMores: a %d, b %d; want only the shard holding the merge up asked", a.calls, b.calls)
	}
	if got := pbrtData(s); got != "20" {
		t.Errorf("PBRT with 30 still buffered: %q, want the last event's", got)
	}
	batch, err = s.fill(ctx, cursor.Unlimited, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := datas(t, batch); !slices.Equal(got, []string{"30"}) {
		t.Fatalf("third batch %v", got)
	}
	if got := pbrtData(s); got != "30" {
		t.Errorf("PBRT: %q, want 30 (the last event; a's PBRT is no further)", got)
	}
	// Nothing more: an empty batch once the await time is spent, with the PBRT moved to the
	// shards' smallest.
	a.replies = []csReply{{pbrt: csTok("45"), open: true}}
	b.replies = []csReply{{pbrt: csTok("50"), open: true}}
	start := time.Now()
	batch, err = s.fill(ctx, cursor.Unlimited, 50*time.Millisecond)
	if err != nil || batch.Len() != 0 {
		t.Fatalf("idle batch: %v %v", datas(t, batch), err)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("idle getMore returned after %v, before its await time", el)
	}
	if got := pbrtData(s); got != "45" {
		t.Errorf("idle PBRT: %q, want 45", got)
	}
}

// Starved shards are asked concurrently, each with the await time left.
func TestCSSourceConcurrentGetMores(t *testing.T) {
	var active, maxSeen atomic.Int32
	mk := func(data string) *fakeShard {
		return &fakeShard{delay: 100 * time.Millisecond, active: &active, maxSeen: &maxSeen, replies: []csReply{
			{docs: []bsoncore.Document{csEv(data, "insert")}, pbrt: csTok("20"), open: true},
		}}
	}
	a, b, c := mk("10"), mk("11"), mk("12")
	s := newCSSource(t, []*fakeShard{a, b, c}, []csReply{{pbrt: csTok("01")}, {pbrt: csTok("01")}, {pbrt: csTok("01")}})
	start := time.Now()
	batch, err := s.fill(context.Background(), cursor.Unlimited, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 250*time.Millisecond {
		t.Errorf("three 100 ms getMores took %v: not concurrent", el)
	}
	if maxSeen.Load() != 3 {
		t.Errorf("at most %d getMores in flight, want 3", maxSeen.Load())
	}
	if got := datas(t, batch); !slices.Equal(got, []string{"10", "11", "12"}) {
		t.Errorf("batch %v", got)
	}
	for _, f := range []*fakeShard{a, b, c} {
		if len(f.awaits) != 1 || f.awaits[0] <= time.Second {
			t.Errorf("awaits %v, want the time left of 2 s", f.awaits)
		}
	}
}

// A collection's drop invalidates the stream on every shard: the first invalidate goes out
// once and the stream ends.
func TestCSSourceInvalidate(t *testing.T) {
	a, b := &fakeShard{}, &fakeShard{}
	s := newCSSource(t, []*fakeShard{a, b}, []csReply{
		{docs: []bsoncore.Document{csEv("10", "insert"), csEv("20", "drop"), csEv("21", "invalidate")}, pbrt: csTok("21")},
		{docs: []bsoncore.Document{csEv("21", "invalidate")}, pbrt: csTok("21")},
	})
	batch, err := s.fill(context.Background(), cursor.Unlimited, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := datas(t, batch); !slices.Equal(got, []string{"10", "20", "21"}) {
		t.Fatalf("batch %v", got)
	}
	if !s.exhausted() {
		t.Error("the stream goes on after its invalidate")
	}
	s.Close()
	if !a.killed || !b.killed {
		t.Error("the shards' cursors were not killed")
	}
}

// Resuming from an event: the router skips up to it and fails when it is not there.
func TestCSSourceResume(t *testing.T) {
	evs := []bsoncore.Document{csEv("10", "insert"), csEv("20", "insert"), csEv("30", "insert")}
	s := newCSSource(t, []*fakeShard{{}}, []csReply{{docs: evs, pbrt: csTok("30")}})
	s.resume = "20"
	batch, err := s.fill(context.Background(), cursor.Unlimited, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := datas(t, batch); !slices.Equal(got, []string{"30"}) {
		t.Fatalf("resumed batch %v", got)
	}
	s = newCSSource(t, []*fakeShard{{}}, []csReply{{docs: evs, pbrt: csTok("30")}})
	s.resume = "15"
	if _, err := s.fill(context.Background(), cursor.Unlimited, 0); !mongoerr.Is(err, mongoerr.ChangeStreamFatalError) {
		t.Fatalf("resume from a missing event: %v, want ChangeStreamFatalError", err)
	}
}

// The user's stages run on the router; one that changes _id fails the stream.
func TestCSSourcePipeline(t *testing.T) {
	stage := func(d bson.D) []bsoncore.Document {
		b, _ := bson.Marshal(d)
		return []bsoncore.Document{b}
	}
	evs := []bsoncore.Document{csEv("10", "insert"), csEv("20", "delete"), csEv("30", "insert")}
	s := newCSSource(t, []*fakeShard{{}}, []csReply{{docs: evs, pbrt: csTok("30")}})
	var err error
	s.pipeline, err = agg.Parse(stage(bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}), agg.ParseContext{DB: "db"})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := s.fill(context.Background(), cursor.Unlimited, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := datas(t, batch); !slices.Equal(got, []string{"10", "30"}) {
		t.Fatalf("filtered batch %v", got)
	}
	s = newCSSource(t, []*fakeShard{{}}, []csReply{{docs: evs, pbrt: csTok("30")}})
	s.pipeline, _ = agg.Parse(stage(bson.D{{Key: "$set", Value: bson.D{{Key: "_id", Value: 1}}}}), agg.ParseContext{DB: "db"})
	if _, err := s.fill(context.Background(), cursor.Unlimited, 0); !mongoerr.Is(err, mongoerr.ChangeStreamFatalError) {
		t.Fatalf("a pipeline changing _id: %v, want ChangeStreamFatalError", err)
	}
}

// A shard's failed getMore ends the stream with its code, labelled resumable when it is.
func TestCSSourceShardError(t *testing.T) {
	a := &fakeShard{err: mongoerr.New(mongoerr.HostUnreachable, "gone")}
	s := newCSSource(t, []*fakeShard{a}, []csReply{{pbrt: csTok("01")}})
	_, err := s.fill(context.Background(), cursor.Unlimited, time.Second)
	err = changestream.ResumableError(err)
	e, ok := mongoerr.As(err)
	if !ok || e.Code != mongoerr.HostUnreachable || !slices.Contains(e.Labels, mongoerr.LabelResumableChangeStream) {
		t.Fatalf("error %v, want HostUnreachable labelled %s", err, mongoerr.LabelResumableChangeStream)
	}
}
