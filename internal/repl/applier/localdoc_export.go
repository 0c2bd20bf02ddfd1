package applier

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/storage"
)

// LoadLocalDoc returns the single document of the unreplicated `local` collection ns, or nil
// when the collection or its document does not exist (replication state documents such as
// local.replset.minvalid; internal/repl/recovery uses it).
func LoadLocalDoc(e *storage.Engine, cat *catalog.Catalog, colls *index.Collections, ns string) (bsoncore.Document, error) {
	return localDoc{e: e, cat: cat, colls: colls, ns: ns}.Load()
}

// SaveLocalDoc replaces the single document of the `local` collection ns with doc, creating
// the collection if needed. The write is untimestamped (local tables keep it across
// RecoverToStable) and not journaled before return (callers wait for durability).
func SaveLocalDoc(ctx context.Context, e *storage.Engine, cat *catalog.Catalog, colls *index.Collections, ns string, doc bsoncore.Document) error {
	return localDoc{e: e, cat: cat, colls: colls, ns: ns}.Save(ctx, doc)
}
