package service

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// requireApiVersion makes apiVersion mandatory for every command of an external client,
// hello included; internal clients (and a pre-auth hello claiming internalClient) are exempt.
func TestRequireAPIVersion(t *testing.T) {
	ping := &Command{Name: "ping"}
	hello := &Command{Name: "hello"}
	plain := bsoncore.NewDocumentBuilder().AppendInt32("ping", 1).Build()
	versioned := bsoncore.NewDocumentBuilder().AppendInt32("ping", 1).AppendString("apiVersion", "1").Build()
	helloCmd := bsoncore.NewDocumentBuilder().AppendInt32("hello", 1).Build()
	internalHello := bsoncore.NewDocumentBuilder().AppendInt32("hello", 1).
		AppendDocument("internalClient", bsoncore.NewDocumentBuilder().AppendInt32("maxWireVersion", 21).Build()).Build()
	for _, c := range []struct {
		name     string
		cmd      *Command
		doc      bsoncore.Document
		internal bool
		want     mongoerr.Code
	}{
		{"external without apiVersion", ping, plain, false, mongoerr.Location498870},
		{"external hello without apiVersion", hello, helloCmd, false, mongoerr.Location498870},
		{"external with apiVersion", ping, versioned, false, 0},
		{"internal client", ping, plain, true, 0},
		{"hello claiming internalClient", hello, internalHello, false, 0},
	} {
		err := CheckAPIParameters(c.cmd, c.doc, true, false, c.internal)
		if got := mongoerr.CodeOf(err); got != c.want {
			t.Errorf("%s: %v, want code %d", c.name, err, c.want)
		}
	}
	if err := CheckAPIParameters(ping, plain, false, false, false); err != nil {
		t.Errorf("requireApiVersion off: %v", err)
	}
}
