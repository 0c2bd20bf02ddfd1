package catalog

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/storage"
)

// A clustered collection gets its unique _id index from CreateCollection itself, carrying a
// collection-level expireAfterSeconds, so a secondary applying the create entry (which calls
// only CreateCollection) builds the same catalog as the primary: before, the primary's
// command added the index and secondaries had none (listIndexes and dbHash differed).
func TestClusteredCollectionHasIDIndex(t *testing.T) {
	e, c := setup(t)
	opts := doc(t, bson.D{{Key: "clusteredIndex", Value: bson.D{{Key: "v", Value: 2}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "name", Value: "ci"}, {Key: "unique", Value: true}}}, {Key: "expireAfterSeconds", Value: int64(60)}})
	var m *CollectionMeta
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		var err error
		m, err = c.CreateCollection(ru, "db.clustered", opts)
		return err
	})
	if !m.Clustered {
		t.Fatalf("not clustered: %+v", m)
	}
	ix, ok := m.Index(IDIndexName)
	if !ok || !ix.Ready {
		t.Fatalf("clustered collection without a ready _id index: %+v", m.Indexes)
	}
	if v, ok := bsoncore.Document(ix.Spec).Lookup("expireAfterSeconds").AsInt64OK(); !ok || v != 60 {
		t.Errorf("_id index spec %s lacks expireAfterSeconds 60", bsoncore.Document(ix.Spec))
	}
}
