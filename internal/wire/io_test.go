package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// TestReaderWriterStream writes a mixed sequence of messages with a Writer and reads them
// back with a Reader from the same byte stream.
func TestReaderWriterStream(t *testing.T) {
	var stream bytes.Buffer
	w := NewWriter(&stream)
	small := mustDoc(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	big := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "pad", Value: strings.Repeat("z", 3<<20)}, {Key: "$db", Value: "t"}})
	type sent struct {
		op   OpCode
		c    Compressor
		body bsoncore.Document
	}
	var want []sent
	for i, c := range append([]Compressor{CompressorNone}, allCompressors...) {
		for _, body := range []bsoncore.Document{small, big, small} {
			if err := w.WriteMsg(int32(i), 0, 0, body, c); err != nil {
				t.Fatal(err)
			}
			want = append(want, sent{OpMsg, c, body})
		}
		// OP_REPLY is what a server writes; feed the Reader an OP_QUERY in its place.
		q := driverQuery(int32(i), 0, "admin.$cmd", small, nil)
		if err := w.WriteMessage(q, c); err != nil {
			t.Fatal(err)
		}
		want = append(want, sent{OpQuery, c, small})
	}
	// A message error mid-stream must not desynchronise the Reader.
	bad := AppendMsg(nil, 99, 0, 1<<3, small)
	if err := w.WriteMessage(bad, CompressorNone); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMsg(100, 0, 0, small, CompressorNone); err != nil {
		t.Fatal(err)
	}

	r := NewReader(&stream)
	var m Message
	for i, s := range want {
		if err := r.ReadMessage(&m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.OpCode != s.op || m.Compressor != s.c {
			t.Fatalf("message %d: opcode %v compressor %v, want %v %v", i, m.OpCode, m.Compressor, s.op, s.c)
		}
		got := m.Msg.Body
		if s.op == OpQuery {
			got = m.Query.Query
		}
		equalDocs(t, "body", got, s.body)
	}
	err := r.ReadMessage(&m)
	wantCode(t, err, mongoerr.IllegalOpMsgFlag)
	if m.Header.RequestID != 99 || isFraming(err) {
		t.Fatalf("bad flags: header %+v framing %v", m.Header, isFraming(err))
	}
	if err := r.ReadMessage(&m); err != nil || m.Header.RequestID != 100 {
		t.Fatalf("after a message error: %v %+v", err, m.Header)
	}
	if cap(r.buf) > keepBufferCap {
		t.Fatalf("Reader kept a %d-byte buffer", cap(r.buf))
	}
	if err := r.ReadMessage(&m); err != io.EOF {
		t.Fatalf("at end of stream: %v, want io.EOF", err)
	}
}

func TestReaderTruncatedStream(t *testing.T) {
	msg := AppendMsg(nil, 1, 0, 0, mustDoc(t, bson.D{{Key: "ping", Value: 1}}))
	for _, n := range []int{1, 15, 16, 20, len(msg) - 1} {
		var m Message
		err := NewReader(bytes.NewReader(msg[:n])).ReadMessage(&m)
		if !isFraming(err) || errors.Is(err, io.EOF) {
			t.Fatalf("cut at %d: %v, want a framing error", n, err)
		}
	}
	// A header claiming 48 MB followed by nothing costs memory in proportion to what arrived.
	lie := withLen(msg, MaxMessageSizeBytes)
	r := NewReader(bytes.NewReader(lie))
	var m Message
	if err := r.ReadMessage(&m); !isFraming(err) {
		t.Fatalf("lying length: %v", err)
	}
	if cap(r.buf) > 1<<20 {
		t.Fatalf("allocated %d bytes for a %d-byte stream", cap(r.buf), len(lie))
	}
}

// loopReader replays one message forever, to measure steady-state reads.
type loopReader struct {
	msg []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.msg[l.off:])
	l.off = (l.off + n) % len(l.msg)
	return n, nil
}

func TestReaderDoesNotAllocate(t *testing.T) {
	body := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "t"}})
	d := mustDoc(t, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: "y"}})
	msg := (&Msg{Body: body, Sequences: []Sequence{{Identifier: "documents", Docs: []bsoncore.Document{d, d, d}}}}).Append(nil, 1, 0)
	r := NewReader(&loopReader{msg: msg})
	var m Message
	if err := r.ReadMessage(&m); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if err := r.ReadMessage(&m); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per small OP_MSG read, want 0", allocs)
	}
	out := make([]byte, 0, 1024)
	w := NewWriter(io.Discard)
	allocs = testing.AllocsPerRun(200, func() {
		out, _ = m.Msg.AppendCommand(out[:0])
		if err := w.WriteMsg(2, 1, 0, body, CompressorNone); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per AppendCommand+WriteMsg, want 0", allocs)
	}
}
