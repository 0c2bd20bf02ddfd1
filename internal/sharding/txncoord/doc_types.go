package txncoord

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// Namespace is where coordinators persist their state (MongoDB's
// NamespaceString::kTransactionCoordinatorsNamespace).
const (
	DB         = "config"
	Collection = "transaction_coordinators"
)

// Decision is a coordinator's outcome: commit at CommitTimestamp, or abort with AbortStatus.
type Decision struct {
	Commit          bool
	CommitTimestamp bson.Timestamp
	AbortStatus     *mongoerr.Error
}

// Err is the decision as coordinateCommitTransaction answers it: nil for commit, the abort
// status for abort.
func (d Decision) Err() error {
	if d.Commit {
		return nil
	}
	if d.AbortStatus == nil {
		return mongoerr.New(mongoerr.NoSuchTransaction, "Transaction was aborted")
	}
	return d.AbortStatus
}

// document is the decision's {decision, commitTimestamp | abortStatus} (CoordinatorCommitDecision).
func (d Decision) document() bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	if d.Commit {
		return b.AppendString("decision", "commit").AppendTimestamp("commitTimestamp", d.CommitTimestamp.T, d.CommitTimestamp.I).Build()
	}
	st := d.AbortStatus
	if st == nil {
		st = mongoerr.New(mongoerr.NoSuchTransaction, "Transaction was aborted")
	}
	return b.AppendString("decision", "abort").AppendDocument("abortStatus", bsoncore.NewDocumentBuilder().
		AppendInt32("code", int32(st.Code)).AppendString("codeName", st.Code.Name()).AppendString("errmsg", st.Msg).Build()).Build()
}

func parseDecision(doc bsoncore.Document) (Decision, error) {
	switch s, _ := doc.Lookup("decision").StringValueOK(); s {
	case "commit":
		t, i, ok := doc.Lookup("commitTimestamp").TimestampOK()
		if !ok {
			return Decision{}, mongoerr.New(mongoerr.FailedToParse, "commit decision without a commitTimestamp")
		}
		return Decision{Commit: true, CommitTimestamp: bson.Timestamp{T: t, I: i}}, nil
	case "abort":
		st, _ := doc.Lookup("abortStatus").DocumentOK()
		code, _ := st.Lookup("code").AsInt64OK()
		msg, _ := st.Lookup("errmsg").StringValueOK()
		if code == 0 {
			code = int64(mongoerr.NoSuchTransaction)
		}
		return Decision{AbortStatus: mongoerr.New(mongoerr.Code(code), msg)}, nil
	default:
		return Decision{}, mongoerr.Newf(mongoerr.FailedToParse, "unknown coordinator decision %q", s)
	}
}

// Doc is one config.transaction_coordinators document: {_id: {lsid, txnNumber},
// participants: [shardId], decision?}.
type Doc struct {
	Lsid         bsoncore.Document
	TxnNumber    int64
	Participants []string
	Decision     *Decision
}

// ID is the document's _id, {lsid, txnNumber} (OperationSessionInfo).
func (d *Doc) ID() bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendDocument("lsid", d.Lsid).AppendInt64("txnNumber", d.TxnNumber).Build()
}

// key identifies the coordinator in memory.
func (d *Doc) key() string { return fmt.Sprintf("%x/%d", []byte(d.Lsid), d.TxnNumber) }

// Document is the whole document as stored.
func (d *Doc) Document() bsoncore.Document {
	arr := bsoncore.NewArrayBuilder()
	for _, p := range d.Participants {
		arr.AppendString(p)
	}
	b := bsoncore.NewDocumentBuilder().AppendDocument("_id", d.ID()).AppendArray("participants", arr.Build())
	if d.Decision != nil {
		b.AppendDocument("decision", d.Decision.document())
	}
	return b.Build()
}

// ParseDoc reads a stored coordinator document.
func ParseDoc(raw bsoncore.Document) (*Doc, error) {
	lsid, ok := raw.Lookup("_id", "lsid").DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.FailedToParse, "transaction coordinator document without _id.lsid: %s", raw)
	}
	n, ok := raw.Lookup("_id", "txnNumber").AsInt64OK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.FailedToParse, "transaction coordinator document without _id.txnNumber: %s", raw)
	}
	d := &Doc{Lsid: append(bsoncore.Document(nil), lsid...), TxnNumber: n}
	arr, _ := raw.Lookup("participants").ArrayOK()
	vals, _ := arr.Values()
	for _, v := range vals {
		s, ok := v.StringValueOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.FailedToParse, "transaction coordinator document with a non-string participant: %s", raw)
		}
		d.Participants = append(d.Participants, s)
	}
	if dd, ok := raw.Lookup("decision").DocumentOK(); ok {
		dec, err := parseDecision(dd)
		if err != nil {
			return nil, err
		}
		d.Decision = &dec
	}
	return d, nil
}
