package commands

import (
	"context"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/operation"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
)

// TestTTLMayDelete: the TTL monitor deletes on a standalone, and on a replica-set member only
// while the coordinator (through the oplog writer) says it is a writable primary; a member
// whose replication is not attached yet does not delete (its deletes would not be logged).
func TestTTLMayDelete(t *testing.T) {
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	standalone := NewState(db, service.Config{})
	if !ttlMayDelete(standalone) {
		t.Error("a standalone's TTL monitor must delete")
	}
	member := NewState(db, service.Config{CmdLine: service.CmdLine{Parsed: bsoncore.NewDocumentBuilder().
		AppendDocument("replication", bsoncore.NewDocumentBuilder().AppendString("replSetName", "rs0").Build()).Build()}})
	if ttlMayDelete(member) {
		t.Error("a --replSet member deletes before its replication is attached")
	}
	var writable atomic.Bool
	w, err := oplog.Open(context.Background(), oplog.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls,
		MaxSizeBytes: 16 << 20, Term: func() (int64, bool) { return 1, writable.Load() }, TempDir: db.TempDir})
	if err != nil {
		t.Fatal(err)
	}
	db.SetObserver(w)
	if ttlMayDelete(member) {
		t.Error("a member that is not a writable primary deletes")
	}
	writable.Store(true)
	if !ttlMayDelete(member) {
		t.Error("a writable primary does not delete")
	}
}
