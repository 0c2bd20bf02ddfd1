package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// fuzzSeeds returns one valid message of every kind, plain and compressed.
func fuzzSeeds(t testing.TB) [][]byte {
	body := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "t"}, {Key: "o", Value: bson.D{{Key: "a", Value: bson.A{1, "x", 2.5}}}}})
	d := mustDoc(t, bson.D{{Key: "_id", Value: 1}})
	msgs := [][]byte{
		AppendMsg(nil, 1, 0, 0, body),
		AppendMsg(nil, 1, 0, FlagChecksumPresent|FlagMoreToCome, body),
		(&Msg{Body: body, Sequences: []Sequence{{Identifier: "documents", Docs: []bsoncore.Document{d, d}}}}).Append(nil, 2, 0),
		driverQuery(3, 0, "admin.$cmd", mustDoc(t, bson.D{{Key: "$query", Value: bson.D{{Key: "hello", Value: 1}}}, {Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "primary"}}}}), d),
	}
	for _, c := range allCompressors {
		b, err := AppendCompressed(nil, msgs[2], c)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, b)
	}
	return msgs
}

// FuzzReadMessage feeds arbitrary bytes to a Reader as a connection would: it must not
// panic or hang, must stop at the first framing error, and must not allocate beyond what
// the bytes justify (the Reader's growth and the decompression checks bound it).
func FuzzReadMessage(f *testing.F) {
	seeds := fuzzSeeds(f)
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add(bytes.Join(seeds, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		var m Message
		var cmd []byte
		for i := 0; ; i++ {
			if i > len(data)/HeaderLen+1 {
				t.Fatalf("read %d messages from %d bytes", i, len(data))
			}
			err := r.ReadMessage(&m)
			if err == io.EOF || errors.Is(err, ErrFraming) {
				return
			}
			if err != nil {
				continue
			}
			switch m.OpCode {
			case OpMsg:
				var cerr error
				if cmd, cerr = m.Msg.AppendCommand(cmd[:0]); cerr == nil {
					if err := ValidateBSON(cmd); err != nil {
						t.Fatalf("merged command is invalid BSON: %v", err)
					}
				}
				// Re-encoding and re-parsing a valid message gives the same message.
				again := m.Msg.Append(nil, m.Header.RequestID, m.Header.ResponseTo)
				m2, err := parse(again)
				if err != nil {
					t.Fatalf("re-encoded message does not parse: %v", err)
				}
				if !bytes.Equal(m2.Msg.Body, m.Msg.Body) || len(m2.Msg.Sequences) != len(m.Msg.Sequences) {
					t.Fatal("re-encoded message differs")
				}
			case OpQuery:
				if c, err := m.Query.Command(); err == nil {
					if err := ValidateBSON(c); err != nil {
						t.Fatalf("upconverted command is invalid BSON: %v", err)
					}
				}
			}
		}
	})
}
