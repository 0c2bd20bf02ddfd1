package fetcher

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func entry(op string, pad int) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("op", op).AppendString("pad", string(make([]byte, pad))).Build()
}

func isCmd(d bsoncore.Document) bool { op, _ := d.Lookup("op").StringValueOK(); return op == "c" }

func TestBufferBatching(t *testing.T) {
	ctx := context.Background()
	b := NewBuffer(1 << 20)
	docs := []bsoncore.Document{entry("i", 0), entry("i", 0), entry("u", 0), entry("c", 0), entry("c", 0), entry("d", 0),
		entry("i", 100), entry("i", 100), entry("i", 100)}
	if err := b.Push(ctx, docs); err != nil {
		t.Fatal(err)
	}
	size := len(docs[6])
	var got []int
	for {
		n, _ := b.Len()
		if n == 0 {
			break
		}
		batch, err := b.Next(ctx, 2, 2*size, isCmd)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, len(batch))
	}
	// [i i] [u] (ends before a command) [c] [c] [d i] (2 ops) [i i]
	want := []int{2, 1, 1, 1, 2, 2}
	if len(got) != len(want) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("batches %v, want %v", got, want)
		}
	}
}

func TestBufferBackPressure(t *testing.T) {
	ctx := context.Background()
	d := entry("i", 1000)
	b := NewBuffer(2 * len(d))
	if err := b.Push(ctx, []bsoncore.Document{d, d}); err != nil {
		t.Fatal(err)
	}
	pushed := make(chan error, 1)
	go func() { pushed <- b.Push(ctx, []bsoncore.Document{d}) }()
	select {
	case err := <-pushed:
		t.Fatalf("push into a full buffer returned %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := b.Next(ctx, 1, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-pushed; err != nil {
		t.Fatal(err)
	}
	// A push larger than the whole buffer still goes into an empty buffer.
	b2 := NewBuffer(10)
	if err := b2.Push(ctx, []bsoncore.Document{d}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b2.Push(cctx, []bsoncore.Document{d}); err == nil {
		t.Fatal("push into a full buffer with a cancelled context succeeded")
	}
	if _, err := NewBuffer(0).Next(cctx, 1, 1, nil); err == nil {
		t.Fatal("Next on an empty buffer with a cancelled context succeeded")
	}
}
