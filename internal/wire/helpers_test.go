package wire

import (
	"bytes"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// mustDoc marshals v (a bson.D or map) into raw BSON.
func mustDoc(t testing.TB, v any) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parse parses a whole message into a fresh Message.
func parse(b []byte) (*Message, error) {
	var m Message
	err := m.Parse(b)
	return &m, err
}

// wantCode fails unless err is a *mongoerr.Error with code c.
func wantCode(t *testing.T, err error, c mongoerr.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", c)
	}
	if got := mongoerr.CodeOf(err); got != c {
		t.Fatalf("got code %v (%v), want %v", got, err, c)
	}
}

// equalDocs fails unless two documents are byte-identical.
func equalDocs(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got  %v\n want %v", what, bsoncore.Document(got), bsoncore.Document(want))
	}
}

func isFraming(err error) bool { return errors.Is(err, ErrFraming) }

// cloneSetLen returns a copy of msg with the header length replaced.
func withLen(msg []byte, n int32) []byte {
	b := bytes.Clone(msg)
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	return b
}
