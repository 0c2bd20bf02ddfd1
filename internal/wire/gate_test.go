package wire

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// largeInsert is an OP_MSG insert whose documents sequence makes it about size bytes.
func largeInsert(t *testing.T, size int) []byte {
	t.Helper()
	body := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}})
	var docs []bsoncore.Document
	for total := 0; total < size; {
		d := mustDoc(t, bson.D{{Key: "p", Value: bson.Binary{Data: make([]byte, 64<<10)}}})
		docs = append(docs, d)
		total += len(d)
	}
	m := Msg{Body: body, Sequences: []Sequence{{Identifier: "documents", Docs: docs}}}
	return m.Append(nil, 1, 0)
}

// A large message passes the gate before its body is read, holds the admission until
// Release, and its buffers are not kept; small messages do not pass the gate. A refusal is a
// framing error.
func TestReaderGateAndRelease(t *testing.T) {
	big := largeInsert(t, 3<<20)
	small := AppendMsg(nil, 2, 0, 0, mustDoc(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}))
	var stream bytes.Buffer
	stream.Write(small)
	stream.Write(big)
	stream.Write(small)

	r := NewReader(&stream)
	var admitted, released []int
	r.SetGate(func(n int) (func(), error) {
		admitted = append(admitted, n)
		return func() { released = append(released, n) }, nil
	})
	var m Message
	if err := r.ReadMessage(&m); err != nil || len(admitted) != 0 {
		t.Fatalf("small message: err %v, gate calls %v", err, admitted)
	}
	if err := r.ReadMessage(&m); err != nil {
		t.Fatal(err)
	}
	if len(admitted) != 1 || admitted[0] != len(big) || len(released) != 0 {
		t.Fatalf("large message: admitted %v released %v, want [%d] []", admitted, released, len(big))
	}
	cmd, err := m.Msg.Command()
	if err != nil {
		t.Fatal(err)
	}
	if cap(cmd) > len(cmd)+len(cmd)/64 { // allocation size classes round up a little
		t.Errorf("merged command has capacity %d for %d bytes: grown, not sized", cap(cmd), len(cmd))
	}
	r.ReleaseBuffers()
	if cap(r.buf) > keepBufferCap || len(m.Msg.Sequences) != 0 {
		t.Errorf("after ReleaseBuffers the reader keeps %d bytes and %d sequences", cap(r.buf), len(m.Msg.Sequences))
	}
	if len(released) != 0 {
		t.Fatal("ReleaseBuffers gave the admission back")
	}
	if _, err := cmd.LookupErr("documents", "40"); err != nil {
		t.Fatalf("merged command damaged after the buffers were released: %v", err)
	}
	r.Release()
	r.Release() // idempotent
	if len(released) != 1 {
		t.Fatalf("released %v after Release, want one", released)
	}
	if err := r.ReadMessage(&m); err != nil || len(admitted) != 1 {
		t.Fatalf("small message after: err %v, gate calls %v", err, admitted)
	}

	refused := errors.New("no room")
	r = NewReader(bytes.NewReader(big))
	r.SetGate(func(int) (func(), error) { return nil, refused })
	if err := r.ReadMessage(&m); !isFraming(err) {
		t.Fatalf("refused admission: %v, want a framing error", err)
	}
}

// A large message costs about one buffer of its size: after the first megabyte the reader
// allocates the exact length instead of doubling (which allocated twice the message).
func TestReaderLargeMessageAllocation(t *testing.T) {
	big := largeInsert(t, 6<<20)
	var m Message
	r := NewReader(bytes.NewReader(big))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := r.ReadMessage(&m); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(len(big))*3/2 {
		t.Errorf("reading a %d-byte message allocated %d bytes", len(big), got)
	}
}

// A small compressed message that decompresses to a large one is admitted for its
// decompressed size.
func TestReaderGateCompressed(t *testing.T) {
	big := largeInsert(t, 3<<20) // zeros: compresses to a few kB
	comp, err := AppendCompressed(nil, big, CompressorZstd)
	if err != nil {
		t.Fatal(err)
	}
	if len(comp) > LargeMessageBytes {
		t.Fatalf("compressed message is %d bytes; the test needs a small one", len(comp))
	}
	r := NewReader(bytes.NewReader(comp))
	var admitted []int
	released := 0
	r.SetGate(func(n int) (func(), error) {
		admitted = append(admitted, n)
		return func() { released++ }, nil
	})
	var m Message
	if err := r.ReadMessage(&m); err != nil {
		t.Fatal(err)
	}
	if len(admitted) != 1 || admitted[0] != len(big) {
		t.Fatalf("admitted %v, want [%d]", admitted, len(big))
	}
	r.Release()
	if released != 1 {
		t.Fatalf("released %d times", released)
	}
}
