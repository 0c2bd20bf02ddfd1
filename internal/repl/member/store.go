package member

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/operation"
	"humongo/internal/repl/coord"
)

// Store keeps the coordinator's single-document local collections (local.system.replset,
// local.replset.election) in the node's storage.
type Store struct{ DB *operation.DB }

var _ coord.Store = Store{}

// Load returns the collection's only document, or nil.
func (s Store) Load(ctx context.Context, ns string) (bsoncore.Document, error) {
	return s.DB.FirstDocument(ctx, ns)
}

// Save replaces the collection's only document; durable waits for the journal.
func (s Store) Save(ctx context.Context, ns string, doc bsoncore.Document, durable bool) error {
	op := s.DB.NewOp(ctx)
	defer op.Close()
	err := op.WriteCollection(ctx, ns, true, func(coll *index.Collection) error {
		cur, err := coll.RecordStore().NewCursor(op.RU, false)
		if err != nil {
			return err
		}
		rid, old, ok := cur.Next()
		if err := cur.Err(); err != nil {
			return err
		}
		if ok {
			return coll.UpdateDocument(op.RU, rid, append(bsoncore.Document(nil), old...), doc)
		}
		_, err = coll.InsertDocument(op.RU, doc)
		return err
	})
	if err != nil || !durable {
		return err
	}
	return s.DB.Engine.WaitUntilDurable(ctx)
}
