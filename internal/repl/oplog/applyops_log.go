package oplog

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/storage"
)

// ApplyOpsNS is the namespace of applyOps entries.
const ApplyOpsNS = "admin.$cmd"

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
	slots, err := w.logEntries(ru, []entry{{op: "c", ns: ApplyOpsNS, o: o}})
	if err != nil {
		return optime.OpTime{}, err
	}
	return slots[0], nil
}
