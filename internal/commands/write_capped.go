package commands

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/operation"
	"humongo/internal/service"
)

// writeCappedTrim keeps a capped collection within its size and max after this unit
// inserted added documents of addedBytes in total: it deletes the oldest documents (RecordId
// order is insertion order) in the same unit, as MongoDB's capped deletes do. Concurrent
// inserters that race for the same oldest document get a WriteConflict and retry.
func writeCappedTrim(op *operation.Context, coll *index.Collection, added, addedBytes int64) error {
	meta, ok := op.Catalog().ByUUID(coll.UUID())
	if !ok || !meta.Capped {
		return nil
	}
	var size, maxDocs int64
	if f, ok := service.AsFloat(lookup(meta.Options, "size")); ok {
		size = int64(f)
	}
	if f, ok := service.AsFloat(lookup(meta.Options, "max")); ok {
		maxDocs = int64(f)
	}
	records, dataSize := coll.RecordStore().Counts()
	records += added
	dataSize += addedBytes
	over := func() bool {
		return (size > 0 && dataSize > size) || (maxDocs > 0 && records > maxDocs)
	}
	if !over() {
		return nil
	}
	cur, err := coll.RecordStore().NewCursor(op.RU, false)
	if err != nil {
		return err
	}
	defer cur.Close()
	// Never delete everything this unit just inserted: at least the newest document stays.
	for over() && records > 1 {
		rid, doc, ok := cur.Next()
		if !ok {
			break
		}
		d := append(bsoncore.Document(nil), doc...)
		if err := coll.DeleteDocument(op.RU, rid, d); err != nil {
			return err
		}
		records--
		dataSize -= int64(len(d))
	}
	return cur.Err()
}
