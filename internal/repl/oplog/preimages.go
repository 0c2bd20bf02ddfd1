package oplog

// Change stream pre-images (MongoDB 6.0's changeStreamPreAndPostImages; MongoDB's
// ChangeStreamPreImagesCollectionManager and the op observer's writeChangeStreamPreImageEntry):
// every update, replace and delete of a collection with the option records the document as it
// was before in config.system.preimages, in the same storage unit and at the same timestamp
// as the write and its oplog entry:
//
//	{_id: {nsUUID: <collection UUID>, ts: <entry ts>, applyOpsIndex: <long>},
//	 operationTime: <entry wall clock>, preImage: <document before the write>}
//
// applyOpsIndex is 0 outside transactions; inside one, ts is the applyOps entry that holds
// the operation and applyOpsIndex its index in that entry's array. A primary writes them as
// it logs (OnUpdate, OnDelete, LogTransaction); a secondary as it applies the entries
// (applyCRUD), from the document it read before applying: the oplog carries no pre-image.
// The collection is every node's own (opobserver.PreImagesNS: its writes are never logged);
// Open creates it, clustered by _id, and initial sync neither drops nor clones it.
// internal/changestream/images reads and expires them.

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/storage"
)

// PreImagesNS is config.system.preimages.
const PreImagesNS = opobserver.PreImagesNS

// AppendPreImageID appends the pre-image _id {nsUUID, ts, applyOpsIndex} as a document.
func AppendPreImageID(dst []byte, uuid catalog.UUID, ts optime.Timestamp, applyOpsIndex int64) []byte {
	start, dst := bsoncore.AppendDocumentStart(dst)
	dst = bsoncore.AppendBinaryElement(dst, "nsUUID", 4, uuid[:])
	dst = bsoncore.AppendTimestampElement(dst, "ts", ts.Secs(), ts.Inc())
	dst = bsoncore.AppendInt64Element(dst, "applyOpsIndex", applyOpsIndex)
	dst, _ = bsoncore.AppendDocumentEnd(dst, start)
	return dst
}

// PreImageDoc builds a config.system.preimages document.
func PreImageDoc(uuid catalog.UUID, ts optime.Timestamp, applyOpsIndex int64, wallMillis int64, pre bsoncore.Document) bsoncore.Document {
	start, d := bsoncore.AppendDocumentStart(make([]byte, 0, len(pre)+96))
	idStart, d := bsoncore.AppendDocumentElementStart(d, "_id")
	d = bsoncore.AppendBinaryElement(d, "nsUUID", 4, uuid[:])
	d = bsoncore.AppendTimestampElement(d, "ts", ts.Secs(), ts.Inc())
	d = bsoncore.AppendInt64Element(d, "applyOpsIndex", applyOpsIndex)
	d, _ = bsoncore.AppendDocumentEnd(d, idStart)
	d = bsoncore.AppendDateTimeElement(d, "operationTime", wallMillis)
	d = bsoncore.AppendDocumentElement(d, "preImage", pre)
	d, _ = bsoncore.AppendDocumentEnd(d, start)
	return d
}

// writePreImage inserts a pre-image in ru's open unit at the unit's current timestamp.
func writePreImage(ru *storage.RecoveryUnit, colls *index.Collections, uuid catalog.UUID, ts optime.Timestamp, applyOpsIndex int64, wallMillis int64, pre bsoncore.Document) error {
	if colls == nil {
		return fmt.Errorf("oplog: no write path to record the pre-image of %s", uuid)
	}
	c, err := colls.Get(PreImagesNS)
	if err != nil {
		return fmt.Errorf("oplog: the change stream pre-images collection is not present: %w", err)
	}
	_, err = c.InsertDocument(ru, PreImageDoc(uuid, ts, applyOpsIndex, wallMillis, pre))
	return err
}

// preImagesOptions are config.system.preimages' create options: clustered by _id, in the
// legacy {clusteredIndex: true} form MongoDB gives it.
var preImagesOptions = bsoncore.NewDocumentBuilder().AppendBoolean("clusteredIndex", true).Build()

// EnsurePreImagesCollection creates config.system.preimages if it is missing (unlogged: every
// member has its own).
func EnsurePreImagesCollection(ctx context.Context, e *storage.Engine, cat *catalog.Catalog) error {
	if _, ok := cat.Latest().ByNS(PreImagesNS); ok {
		return nil
	}
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	return storage.WriteConflictRetry(ctx, "createPreImagesCollection", func() error {
		defer ru.AbandonSnapshot()
		w := ru.BeginUnitOfWork()
		defer w.End()
		if _, ok := cat.Latest().ByNS(PreImagesNS); ok {
			return nil
		}
		if _, err := cat.CreateCollection(ru, PreImagesNS, preImagesOptions); err != nil {
			return err
		}
		return w.Commit()
	})
}

// wallOf is an entry's wall clock in milliseconds (its ts seconds when it has none).
func wallOf(raw bsoncore.Document, ts optime.Timestamp) int64 {
	if v, err := raw.LookupErr("wall"); err == nil {
		if ms, ok := v.DateTimeOK(); ok {
			return ms
		}
	}
	return int64(ts.Secs()) * 1000
}
