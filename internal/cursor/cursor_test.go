package cursor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

func docs(n int) []bsoncore.Document {
	out := make([]bsoncore.Document, n)
	for i := range out {
		out[i] = bsoncore.NewDocumentBuilder().AppendInt32("i", int32(i)).Build()
	}
	return out
}

func TestManagerLifecycle(t *testing.T) {
	now := time.Unix(1000, 0)
	var open, timedOut atomic.Int64
	m := NewManager(Options{
		Now:     func() time.Time { return now },
		Timeout: func() time.Duration { return time.Minute },
		Metrics: Metrics{Open: &open, TimedOut: &timedOut},
	})
	a := &Cursor{NS: "d.c", Source: SliceSource(docs(3))}
	b := &Cursor{NS: "d.c", Source: SliceSource(docs(3)), NoTimeout: true}
	ida, idb := m.Register(a), m.Register(b)
	if ida == 0 || idb == 0 || ida == idb || open.Load() != 2 {
		t.Fatalf("ids %d %d open %d", ida, idb, open.Load())
	}
	c, err := m.Pin(ida)
	if err != nil || c != a {
		t.Fatal(err)
	}
	if _, err := m.Pin(ida); !mongoerr.Is(err, mongoerr.CursorInUse) {
		t.Fatalf("double pin: %v", err)
	}
	// Killing a pinned cursor defers removal to Unpin.
	killed, nf, _, _ := m.Kill([]int64{ida, 7})
	if len(killed) != 1 || len(nf) != 1 || !a.Killed() || m.Len() != 2 {
		t.Fatalf("kill %v %v len %d", killed, nf, m.Len())
	}
	m.Unpin(a, false)
	if _, err := m.Pin(ida); !mongoerr.Is(err, mongoerr.CursorNotFound) {
		t.Fatalf("after kill: %v", err)
	}
	// Idle reaping spares noCursorTimeout cursors.
	d := &Cursor{NS: "d.c", Source: SliceSource(docs(1))}
	m.Register(d)
	now = now.Add(2 * time.Minute)
	if n := m.ReapIdle(now); n != 1 || timedOut.Load() != 1 || m.Len() != 1 {
		t.Fatalf("reaped %d len %d", n, m.Len())
	}
	if open.Load() != 1 {
		t.Fatalf("open %d", open.Load())
	}
}

func TestFillBatchAndReply(t *testing.T) {
	c := &Cursor{NS: "d.c", Source: SliceSource(docs(5))}
	b, ex, err := FillBatch(context.Background(), c, 3)
	if err != nil || ex || b.Len() != 3 {
		t.Fatalf("%d %v %v", b.Len(), ex, err)
	}
	b, ex, err = FillBatch(context.Background(), c, Unlimited)
	if err != nil || !ex || b.Len() != 2 {
		t.Fatalf("%d %v %v", b.Len(), ex, err)
	}
	r := AppendReply(b, 0, "d.c", ReplyOptions{})
	if got := bsoncore.Document(r).String(); got != `{"cursor": {"id": {"$numberLong":"0"},"ns": "d.c","nextBatch": [{"i": {"$numberInt":"3"}},{"i": {"$numberInt":"4"}}]}}` {
		t.Fatal(got)
	}
	// A batch never exceeds 16 MiB except for its first document.
	big := make([]byte, 6<<20)
	bd := bsoncore.NewDocumentBuilder().AppendBinary("b", 0, big).Build()
	c = &Cursor{NS: "d.c", Source: SliceSource([]bsoncore.Document{bd, bd, bd, bd})}
	b, _, _ = FillBatch(context.Background(), c, Unlimited)
	if b.Len() != 2 {
		t.Fatalf("16MiB rule: %d", b.Len())
	}
	b, ex, _ = FillBatch(context.Background(), c, Unlimited)
	if b.Len() != 2 || !ex {
		t.Fatalf("stash: %d %v", b.Len(), ex)
	}
}
