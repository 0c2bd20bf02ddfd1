package coord_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
)

// TestInitiateOnConfigServer: replSetInitiate without a config marks a config server's set
// configsvr: true (as mongod's replSetInitiate does); one with a plain config is refused.
func TestInitiateOnConfigServer(t *testing.T) {
	self := "127.0.0.1:1"
	newCoord := func() *coord.Coordinator {
		rc := coord.New(coord.Options{SetName: "cfg", Self: self, ConfigServer: true,
			Store: &memStore{docs: map[string]bsoncore.Document{}}, Clock: newFakeClock()})
		if err := rc.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		return rc
	}
	plain := bsoncore.NewDocumentBuilder().AppendString("_id", "cfg").AppendArray("members", bsoncore.NewArrayBuilder().
		AppendDocument(bsoncore.NewDocumentBuilder().AppendInt32("_id", 0).AppendString("host", self).Build()).Build()).Build()
	if err := newCoord().Initiate(context.Background(), plain); mongoerr.CodeOf(err) != mongoerr.InvalidReplicaSetConfig {
		t.Fatalf("plain config on a config server: %v", err)
	}
	rc := newCoord()
	if err := rc.Initiate(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := rc.Config()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := cfg.Lookup("configsvr").BooleanOK(); !ok || !v {
		t.Fatalf("default config lacks configsvr: true: %s", cfg)
	}
}
