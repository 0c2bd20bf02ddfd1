package txncoord

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// Store persists coordinator documents; each write returns once it is majority committed.
type Store interface {
	// WriteParticipants upserts doc's participant list (a document that already has a
	// decision is not replaced: the write then fails).
	WriteParticipants(ctx context.Context, doc *Doc) error
	// WriteDecision adds doc's decision to its document.
	WriteDecision(ctx context.Context, doc *Doc) error
	// Delete removes doc's document.
	Delete(ctx context.Context, doc *Doc) error
	// List returns every stored document.
	List(ctx context.Context) ([]*Doc, error)
}

// RunFunc runs one command on this node in-process (an error for ok: 0).
type RunFunc func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error)

// LocalStore is the Store over this node's config.transaction_coordinators.
type LocalStore struct {
	Run RunFunc
	// WaitMajority waits until this node's last write is majority committed.
	WaitMajority func(ctx context.Context) error
}

func (s LocalStore) write(ctx context.Context, cmd bsoncore.Document) (bsoncore.Document, error) {
	reply, err := s.Run(ctx, DB, cmd)
	if err != nil {
		return nil, err
	}
	if arr, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		if vals, _ := arr.Values(); len(vals) > 0 {
			we, _ := vals[0].DocumentOK()
			code, _ := we.Lookup("code").AsInt64OK()
			msg, _ := we.Lookup("errmsg").StringValueOK()
			return nil, mongoerr.New(mongoerr.Code(code), msg)
		}
	}
	if err := s.WaitMajority(ctx); err != nil {
		return nil, err
	}
	return reply, nil
}

func update(q, u bsoncore.Document, upsert bool) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("update", Collection).AppendArray("updates", bsoncore.NewArrayBuilder().
		AppendDocument(bsoncore.NewDocumentBuilder().AppendDocument("q", q).AppendDocument("u", u).AppendBoolean("upsert", upsert).Build()).Build()).Build()
}

// WriteParticipants is MongoDB's persistParticipantsList: an upsert of {_id, participants}
// matching only a document without a decision (one with a decision makes the upsert's
// insert fail with DuplicateKey).
func (s LocalStore) WriteParticipants(ctx context.Context, doc *Doc) error {
	q := bsoncore.NewDocumentBuilder().AppendDocument("_id", doc.ID()).
		AppendDocument("decision", bsoncore.NewDocumentBuilder().AppendBoolean("$exists", false).Build()).Build()
	d := *doc
	d.Decision = nil
	if _, err := s.write(ctx, update(q, d.Document(), true)); err != nil {
		return fmt.Errorf("persist the participant list of %s: %w", doc.key(), err)
	}
	return nil
}

// WriteDecision is persistDecision: {$set: {decision}} on the document with the same
// participants (it must exist).
func (s LocalStore) WriteDecision(ctx context.Context, doc *Doc) error {
	q := bsoncore.NewDocumentBuilder().AppendDocument("_id", doc.ID()).Build()
	u := bsoncore.NewDocumentBuilder().AppendDocument("$set", bsoncore.NewDocumentBuilder().
		AppendDocument("decision", doc.Decision.document()).Build()).Build()
	reply, err := s.write(ctx, update(q, u, false))
	if err != nil {
		return fmt.Errorf("persist the decision of %s: %w", doc.key(), err)
	}
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 1 {
		return mongoerr.Newf(mongoerr.NoSuchTransaction, "the coordinator document of %s is gone", doc.key())
	}
	return nil
}

// Delete is deleteCoordinatorDoc.
func (s LocalStore) Delete(ctx context.Context, doc *Doc) error {
	cmd := bsoncore.NewDocumentBuilder().AppendString("delete", Collection).AppendArray("deletes", bsoncore.NewArrayBuilder().
		AppendDocument(bsoncore.NewDocumentBuilder().AppendDocument("q", bsoncore.NewDocumentBuilder().AppendDocument("_id", doc.ID()).Build()).
			AppendInt32("limit", 1).Build()).Build()).Build()
	if _, err := s.write(ctx, cmd); err != nil {
		return fmt.Errorf("delete the coordinator document of %s: %w", doc.key(), err)
	}
	return nil
}

// List reads every document (a coordinator's are few: one per transaction committing).
func (s LocalStore) List(ctx context.Context) ([]*Doc, error) {
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", Collection).AppendInt32("batchSize", 1<<30).Build()
	reply, err := s.Run(ctx, DB, cmd)
	if err != nil {
		return nil, fmt.Errorf("read %s.%s: %w", DB, Collection, err)
	}
	arr, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := arr.Values()
	var out []*Doc
	for _, v := range vals {
		raw, _ := v.DocumentOK()
		d, err := ParseDoc(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}
