package validate

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/recordid"
)

// appendNumber appends n as int32 when it fits, else int64 (BSONObjBuilder::appendNumber),
// so replies look like MongoDB's.
func appendNumber(b *bsoncore.DocumentBuilder, key string, n int64) {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		b.AppendInt32(key, int32(n))
	} else {
		b.AppendInt64(key, n)
	}
}

func appendStrings(b *bsoncore.DocumentBuilder, key string, ss []string) {
	a := bsoncore.NewArrayBuilder()
	for _, s := range ss {
		a.AppendString(s)
	}
	b.AppendArray(key, a.Build())
}

func appendRecordID(a *bsoncore.ArrayBuilder, id recordid.ID) {
	if id.IsLong() {
		a.AppendInt64(id.Int64())
	} else {
		a.AppendBinary(0, id.Bytes())
	}
}

func entriesArray(ents []IndexEntry, missing bool) bsoncore.Array {
	a := bsoncore.NewArrayBuilder()
	for _, e := range ents {
		d := bsoncore.NewDocumentBuilder().AppendString("indexName", e.IndexName)
		if e.RecordID.IsLong() {
			d.AppendInt64("recordId", e.RecordID.Int64())
		} else {
			d.AppendBinary("recordId", 0, e.RecordID.Bytes())
		}
		if missing && e.IDKey != nil {
			d.AppendDocument("idKey", e.IDKey)
		}
		if e.IndexKey != nil {
			d.AppendDocument("indexKey", e.IndexKey)
		}
		a.AppendDocument(d.Build())
	}
	return a.Build()
}

// ToBSON renders the result as the validate command's reply fields (without ok), in
// MongoDB's order.
func (r *Result) ToBSON() bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	b.AppendString("ns", r.NS)
	b.AppendBinary("uuid", 4, r.UUID[:])
	appendNumber(b, "nInvalidDocuments", r.NInvalidDocuments)
	appendNumber(b, "nNonCompliantDocuments", r.NNonCompliantDocuments)
	appendNumber(b, "nrecords", r.NRecords)
	appendNumber(b, "nIndexes", int64(r.NIndexes))
	kpi := bsoncore.NewDocumentBuilder()
	det := bsoncore.NewDocumentBuilder()
	for _, name := range r.indexOrder() {
		appendNumber(kpi, name, r.KeysPerIndex[name])
		d := r.IndexDetails[name]
		db := bsoncore.NewDocumentBuilder().AppendBoolean("valid", d.Valid)
		if len(d.Warnings) > 0 {
			appendStrings(db, "warnings", d.Warnings)
		}
		if len(d.Errors) > 0 {
			appendStrings(db, "errors", d.Errors)
		}
		det.AppendDocument(name, db.Build())
	}
	b.AppendDocument("keysPerIndex", kpi.Build())
	b.AppendDocument("indexDetails", det.Build())
	b.AppendBoolean("valid", r.Valid)
	b.AppendBoolean("repaired", r.Repaired)
	appendStrings(b, "warnings", r.Warnings)
	appendStrings(b, "errors", r.Errors)
	b.AppendArray("extraIndexEntries", entriesArray(r.ExtraIndexEntries, false))
	b.AppendArray("missingIndexEntries", entriesArray(r.MissingIndexEntries, true))
	cr := bsoncore.NewArrayBuilder()
	for _, id := range r.CorruptRecords {
		appendRecordID(cr, id)
	}
	b.AppendArray("corruptRecords", cr.Build())
	return b.Build()
}

// indexOrder returns the validated index names in catalog order.
func (r *Result) indexOrder() []string {
	return r.order
}
