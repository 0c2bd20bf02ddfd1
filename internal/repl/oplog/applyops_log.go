package oplog

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/storage"
)

// ApplyOpsNS is the namespace of applyOps entries.
const ApplyOpsNS = "admin.$cmd"

// maxEntryO bounds an applyOps entry's o: BSON's 16 MB document limit less room for the
// entry's other fields.
const maxEntryO = 16<<20 - 1<<10

// LogApplyOps writes the applyOps command's one entry {op: "c", ns: "admin.$cmd", o:
// {applyOps: ops}} (no lsid: it is no transaction) in ru's open unit. It reserves one slot
// and leaves it as ru's current timestamp, so the caller applies the operations after it
// (with opobserver.UnreplicatedWrites, so they log nothing of their own) at the entry's
// timestamp, in the same unit: secondaries apply the entry atomically at that timestamp
// too (txn_apply.go).
func (w *Writer) LogApplyOps(ru *storage.RecoveryUnit, ops []bsoncore.Document) (optime.OpTime, error) {
	release := opobserver.WithSession(ru, nil)
	defer release()
	start, arr := bsoncore.AppendArrayStart(nil)
	for i, op := range ops {
		arr = bsoncore.AppendDocumentElement(arr, strconv.Itoa(i), op)
	}
	arr, _ = bsoncore.AppendArrayEnd(arr, start)
	ostart, o := bsoncore.AppendDocumentStart(nil)
	o = bsoncore.AppendArrayElement(o, "applyOps", arr)
	o, _ = bsoncore.AppendDocumentEnd(o, ostart)
	// The entry must stay a valid document for fetchers (BSON's 16 MB limit; the entry's
	// other fields take well under 1 KB).
	if len(o) > maxEntryO {
		return optime.OpTime{}, mongoerr.Newf(mongoerr.BSONObjectTooLarge,
			"applyOps operations take %d bytes, more than an oplog entry can hold (%d)", len(o), maxEntryO)
	}
	slots, err := w.logEntries(ru, []entry{{op: "c", ns: ApplyOpsNS, o: o}})
	if err != nil {
		return optime.OpTime{}, err
	}
	return slots[0], nil
}
