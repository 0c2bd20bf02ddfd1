package wire

import (
	"fmt"
	"io"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func benchBody(b *testing.B) bsoncore.Document {
	return mustDoc(b, bson.D{{Key: "find", Value: "coll"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 42}}},
		{Key: "limit", Value: 1}, {Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}},
		{Key: "$db", Value: "test"}})
}

// BenchmarkParseMsg parses a small OP_MSG (a find by _id, ~130 bytes) into a reused Message.
func BenchmarkParseMsg(b *testing.B) {
	msg := AppendMsg(nil, 1, 0, 0, benchBody(b))
	var m Message
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Parse(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadMessage is ParseMsg plus the Reader's framing over an in-memory stream.
func BenchmarkReadMessage(b *testing.B) {
	msg := AppendMsg(nil, 1, 0, 0, benchBody(b))
	r := NewReader(&loopReader{msg: msg})
	var m Message
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := r.ReadMessage(&m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseInsertBatch parses an insert of 100 small documents sent as a sequence and
// merges it into the command.
func BenchmarkParseInsertBatch(b *testing.B) {
	d := mustDoc(b, bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "a name"}, {Key: "n", Value: 3.5}})
	docs := make([]bsoncore.Document, 100)
	for i := range docs {
		docs[i] = d
	}
	msg := (&Msg{Body: mustDoc(b, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "t"}}), Sequences: []Sequence{{Identifier: "documents", Docs: docs}}}).Append(nil, 1, 0)
	var m Message
	var cmd []byte
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Parse(msg); err != nil {
			b.Fatal(err)
		}
		var err error
		if cmd, err = m.Msg.AppendCommand(cmd[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendMsg builds a small OP_MSG reply into a reused buffer.
func BenchmarkAppendMsg(b *testing.B) {
	body := benchBody(b)
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendMsg(buf[:0], 2, 1, 0, body)
	}
}

// BenchmarkWriteMsgCompressed writes a 4 KB reply through each compressor.
func BenchmarkWriteMsgCompressed(b *testing.B) {
	arr := bson.A{}
	for i := range 40 {
		arr = append(arr, bson.D{{Key: "_id", Value: i}, {Key: "name", Value: "some name"}, {Key: "v", Value: 1.5}})
	}
	body := mustDoc(b, bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: arr}, {Key: "id", Value: int64(0)}}}, {Key: "ok", Value: 1.0}})
	for _, c := range append([]Compressor{CompressorNone}, allCompressors...) {
		b.Run(fmt.Sprint("c", int(c), c), func(b *testing.B) {
			w := NewWriter(io.Discard)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.WriteMsg(2, 1, 0, body, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
