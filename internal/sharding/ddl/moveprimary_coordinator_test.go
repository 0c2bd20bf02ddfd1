package ddl

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
)

// The movePrimary coordinator's state document: what a checkpoint records is what a resumed
// instance reads, and a request to another shard conflicts (117, MongoDB's message).
func TestMovePrimaryCoordinatorDocument(t *testing.T) {
	s := &CoordinatorService{}
	first := bsoncore.NewDocumentBuilder().AppendDocument("_id", coordinatorDocID("app", opMovePrimary)).
		AppendString("toShard", "shard1").Build()
	m, err := newMovePrimary(s, first)
	if err != nil {
		t.Fatal(err)
	}
	if m.to != "shard1" || m.ns != "app" || m.noop || len(m.moved) != 0 {
		t.Fatalf("a new coordinator: %+v", m)
	}
	if err := m.CheckJoin(first); err != nil {
		t.Fatalf("the same recipient does not join: %v", err)
	}
	other := bsoncore.NewDocumentBuilder().AppendDocument("_id", coordinatorDocID("app", opMovePrimary)).
		AppendString("toShard", "shard2").Build()
	if me, ok := mongoerr.As(m.CheckJoin(other)); !ok || me.Code != mongoerr.ConflictingOperationInProgress ||
		me.Msg != "Another movePrimary operation with different arguments is already running ont the same database" {
		t.Fatalf("another recipient: %v", m.CheckJoin(other))
	}

	// A checkpoint's fields, read back by a resumed instance.
	m.expected = routing.DatabaseVersion{UUID: catalog.UUID{1, 2, 3}, Timestamp: bson.Timestamp{T: 7, I: 1}, LastMod: 4}
	m.colls, m.moved = []string{"a", "b"}, []string{"a", "b", "v"}
	b := bsoncore.NewDocumentBuilder().AppendDocument("_id", coordinatorDocID("app", opMovePrimary)).
		AppendString("toShard", "shard1").AppendString("phase", "commit").AppendBoolean("noop", m.noop).
		AppendDocument("expectedDatabaseVersion", m.expected.Doc())
	appendStrings(b, "clonedCollections", m.colls)
	appendStrings(b, "movedNames", m.moved)
	r, err := newMovePrimary(s, b.Build())
	if err != nil {
		t.Fatal(err)
	}
	if r.phase != "commit" || r.expected != m.expected || !slices.Equal(r.colls, m.colls) || !slices.Equal(r.moved, m.moved) || r.fresh || r.inSection {
		t.Fatalf("resumed: %+v, want %+v", r, m)
	}
}
