package fetcher_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/applier/repltest"
	"humongo/internal/repl/fetcher"
	"humongo/internal/repl/oplog"
)

// onceChooser offers host once, then nothing; it records denylisted hosts.
type onceChooser struct {
	host string

	mu          sync.Mutex
	offered     bool
	blacklisted chan string
}

func (c *onceChooser) ChooseSyncSource(optime.OpTime) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.offered {
		return ""
	}
	c.offered = true
	return c.host
}

func (c *onceChooser) BlacklistSyncSource(host string, _ time.Time) { c.blacklisted <- host }

// oplogEntries reads the source's whole oplog through the driver.
func oplogEntries(t *testing.T, n *repltest.Node) []bson.Raw {
	t.Helper()
	ctx := context.Background()
	cur, err := n.Client.Database("local").Collection("oplog.rs").Find(ctx, bson.D{},
		options.Find().SetSort(bson.D{{Key: "$natural", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.Raw
	for cur.Next(ctx) {
		out = append(out, append(bson.Raw(nil), cur.Current...))
	}
	return out
}

func opTimeOf(t *testing.T, raw bson.Raw) optime.OpTime {
	t.Helper()
	ot, err := oplog.EntryOpTime(bsoncore.Document(raw))
	if err != nil {
		t.Fatal(err)
	}
	return ot
}

// runUntilGivenUp runs a fetcher from last against p until it gives up on p: it denylists
// it, or (rollback required) its Run returns after calling OnRollbackRequired.
func runUntilGivenUp(t *testing.T, p *repltest.Node, last optime.OpTime) (*fetcher.Fetcher, *fetcher.Buffer, bool) {
	t.Helper()
	ch := &onceChooser{host: p.Host, blacklisted: make(chan string, 1)}
	var rollback atomic.Bool
	buf := fetcher.NewBuffer(0)
	f := fetcher.New(fetcher.Config{Chooser: ch, Buffer: buf, LastFetched: last, AwaitTime: 50 * time.Millisecond,
		NoSourceWait: 10 * time.Millisecond, OnRollbackRequired: func(string, optime.OpTime) { rollback.Store(true) }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	select {
	case h := <-ch.blacklisted:
		if h != p.Host {
			t.Errorf("blacklisted %q, want %q", h, p.Host)
		}
		cancel()
		<-done
	case err := <-done:
		// Only a required rollback ends Run by itself; the source is not denylisted then.
		if !mongoerr.Is(err, mongoerr.OplogStartMissing) {
			t.Errorf("Run returned %v before giving up on its source", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("fetcher never gave up on its source")
	}
	return f, buf, rollback.Load()
}

// TestFirstBatchChecks: the find must return our last fetched entry first; otherwise the
// source is behind us, too far ahead (our entry fell off its oplog), or we diverged.
func TestFirstBatchChecks(t *testing.T) {
	p := repltest.StartPrimary(t)
	ctx := context.Background()
	for i := range 5 {
		if _, err := p.Client.Database("app").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	es := oplogEntries(t, p)
	if len(es) < 5 {
		t.Fatalf("only %d oplog entries", len(es))
	}
	mid := opTimeOf(t, es[len(es)/2])
	top := opTimeOf(t, es[len(es)-1])
	cases := []struct {
		name     string
		last     optime.OpTime
		code     mongoerr.Code
		rollback bool
	}{
		{"same ts, other term: diverged", optime.OpTime{TS: mid.TS, Term: mid.Term + 7}, mongoerr.OplogStartMissing, true},
		{"ts missing inside the source's oplog: diverged", optime.OpTime{TS: mid.TS - 1, Term: mid.Term}, mongoerr.OplogStartMissing, true},
		{"before the source's oldest entry: too stale", optime.OpTime{TS: optime.MakeTimestamp(1, 1), Term: 1}, mongoerr.TooStaleToSyncFromSource, false},
		{"ahead of the source: source behind", optime.OpTime{TS: top.TS + optime.MakeTimestamp(100, 0), Term: top.Term}, mongoerr.InvalidSyncSource, false},
		// The spec's rollback trigger: our last entry is newer than anything the source has,
		// but the source's newest entry is in a newer term (we were an old primary).
		{"ahead of the source in an older term: diverged", optime.OpTime{TS: top.TS + optime.MakeTimestamp(100, 0), Term: top.Term - 1}, mongoerr.OplogStartMissing, true},
	}
	if mid.TS-1 == opTimeOf(t, es[len(es)/2-1]).TS {
		cases = append(cases[:1], cases[2:]...) // no gap below mid to probe
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, buf, rollback := runUntilGivenUp(t, p, c.last)
			if !mongoerr.Is(f.LastError(), c.code) {
				t.Fatalf("error %v, want code %d", f.LastError(), c.code)
			}
			if rollback != c.rollback {
				t.Fatalf("rollback required: %v, want %v", rollback, c.rollback)
			}
			if n, _ := buf.Len(); n != 0 {
				t.Fatalf("%d entries buffered from a bad source", n)
			}
		})
	}

	// From a matching optime: every later entry, in order, without the first.
	buf := fetcher.NewBuffer(0)
	f := fetcher.New(fetcher.Config{Chooser: fetcher.FixedSource{Host: p.Host}, Buffer: buf, LastFetched: mid,
		AwaitTime: 50 * time.Millisecond, StopAt: top})
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := f.Run(rctx); err != nil {
		t.Fatal(err)
	}
	var got []optime.OpTime
	for {
		if n, _ := buf.Len(); n == 0 {
			break
		}
		b, err := buf.Next(rctx, 1000, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range b {
			got = append(got, opTimeOf(t, bson.Raw(d)))
		}
	}
	var want []optime.OpTime
	for _, e := range es {
		if ot := opTimeOf(t, e); mid.TS < ot.TS {
			want = append(want, ot)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("fetched %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("entry %d: %v, want %v", i, got[i], want[i])
		}
	}
	if f.LastFetched() != top {
		t.Fatalf("lastFetched %v, want %v", f.LastFetched(), top)
	}
}

// TestSourceRolledBackDuringFirstBatchCheck: a source whose rollback id changed between the
// find and the check of its first batch may have rolled back in between, so the check proved
// nothing: the fetcher gives up on it (InvalidSyncSource, denylisted) and buffers nothing.
func TestSourceRolledBackDuringFirstBatchCheck(t *testing.T) {
	p := repltest.StartPrimary(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := p.Client.Database("app").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	es := oplogEntries(t, p)
	first := opTimeOf(t, es[0])
	var calls atomic.Int64
	ch := &onceChooser{host: p.Host, blacklisted: make(chan string, 1)}
	buf := fetcher.NewBuffer(0)
	f := fetcher.New(fetcher.Config{Chooser: ch, Buffer: buf, LastFetched: first, AwaitTime: 50 * time.Millisecond,
		NoSourceWait: 10 * time.Millisecond,
		RBID:         func(context.Context, string) (int64, error) { return calls.Add(1), nil }})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.Run(rctx) }()
	select {
	case <-ch.blacklisted:
	case err := <-done:
		t.Fatalf("Run returned %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("fetcher never gave up on a source that rolled back")
	}
	cancel()
	<-done
	if !mongoerr.Is(f.LastError(), mongoerr.InvalidSyncSource) {
		t.Fatalf("error %v, want InvalidSyncSource", f.LastError())
	}
	if n, _ := buf.Len(); n != 0 {
		t.Fatalf("%d entries buffered from a source that rolled back", n)
	}
	if calls.Load() != 2 {
		t.Fatalf("rollback id read %d times, want 2 (before the find, after the first batch)", calls.Load())
	}
}
