package migration

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
)

// Decision is a migration's outcome as the coordinator document records it.
type Decision string

const (
	Undecided Decision = ""
	Committed Decision = "committed"
	Aborted   Decision = "aborted"
)

// CoordinatorDoc is a config.migrationCoordinators document (MongoDB 7.0's
// migration_coordinator_document.idl): {_id: migrationId, lsid, txnNumber, nss,
// collectionUuid, donorShardId, recipientShardId, range: {min, max},
// preMigrationChunkVersion, decision?}.
type CoordinatorDoc struct {
	ID                       catalog.UUID
	LSID                     catalog.UUID
	TxnNumber                int64
	NS                       string
	CollectionUUID           catalog.UUID
	Donor, Recipient         string
	Min, Max                 bsoncore.Document
	PreMigrationChunkVersion routing.ChunkVersion
	Decision                 Decision
}

// Doc renders the document.
func (d CoordinatorDoc) Doc() bsoncore.Document {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = bsoncore.AppendBinaryElement(b, "_id", 4, d.ID[:])
	b = bsoncore.AppendDocumentElement(b, "lsid", bsoncore.NewDocumentBuilder().AppendBinary("id", 4, d.LSID[:]).Build())
	b = bsoncore.AppendInt64Element(b, "txnNumber", d.TxnNumber)
	b = bsoncore.AppendStringElement(b, "nss", d.NS)
	b = bsoncore.AppendBinaryElement(b, "collectionUuid", 4, d.CollectionUUID[:])
	b = bsoncore.AppendStringElement(b, "donorShardId", d.Donor)
	b = bsoncore.AppendStringElement(b, "recipientShardId", d.Recipient)
	b = bsoncore.AppendDocumentElement(b, "range", rangeDoc(d.Min, d.Max))
	b = d.PreMigrationChunkVersion.AppendShardVersion(b, "preMigrationChunkVersion")
	if d.Decision != Undecided {
		b = bsoncore.AppendStringElement(b, "decision", string(d.Decision))
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

func rangeDoc(min, max bsoncore.Document) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendDocument("min", min).AppendDocument("max", max).Build()
}

func uuidField(doc bsoncore.Document, path ...string) (catalog.UUID, bool) {
	st, data, ok := doc.Lookup(path...).BinaryOK()
	if !ok || st != 4 || len(data) != 16 {
		return catalog.UUID{}, false
	}
	return catalog.UUID(data), true
}

// ParseCoordinatorDoc reads a config.migrationCoordinators document.
func ParseCoordinatorDoc(doc bsoncore.Document) (CoordinatorDoc, error) {
	var d CoordinatorDoc
	var ok bool
	bad := func(field string) error {
		return mongoerr.Newf(mongoerr.FailedToParse, "bad config.migrationCoordinators document: field %s: %s", field, doc)
	}
	if d.ID, ok = uuidField(doc, "_id"); !ok {
		return d, bad("_id")
	}
	d.LSID, _ = uuidField(doc, "lsid", "id")
	d.TxnNumber, _ = doc.Lookup("txnNumber").AsInt64OK()
	if d.NS, ok = doc.Lookup("nss").StringValueOK(); !ok {
		return d, bad("nss")
	}
	if d.CollectionUUID, ok = uuidField(doc, "collectionUuid"); !ok {
		return d, bad("collectionUuid")
	}
	if d.Donor, ok = doc.Lookup("donorShardId").StringValueOK(); !ok {
		return d, bad("donorShardId")
	}
	if d.Recipient, ok = doc.Lookup("recipientShardId").StringValueOK(); !ok {
		return d, bad("recipientShardId")
	}
	if d.Min, ok = doc.Lookup("range", "min").DocumentOK(); !ok {
		return d, bad("range.min")
	}
	if d.Max, ok = doc.Lookup("range", "max").DocumentOK(); !ok {
		return d, bad("range.max")
	}
	if v, err := routing.ParseShardVersion(doc.Lookup("preMigrationChunkVersion")); err == nil {
		d.PreMigrationChunkVersion = v
	}
	dec, _ := doc.Lookup("decision").StringValueOK()
	d.Decision = Decision(dec)
	return d, nil
}

// RangeDeletionTask is a config.rangeDeletions document (MongoDB 7.0's
// range_deletion_task.idl): {_id: migrationId, nss, collectionUuid, donorShardId, range,
// pending?, whenToClean, keyPattern, preMigrationShardVersion?}.
type RangeDeletionTask struct {
	ID                       catalog.UUID
	NS                       string
	CollectionUUID           catalog.UUID
	Donor                    string
	Min, Max                 bsoncore.Document
	Pending                  bool
	WhenToClean              string // "now" | "delayed"
	KeyPattern               bsoncore.Document
	PreMigrationShardVersion *routing.ChunkVersion
	// NumOrphanDocs is how many documents the task will delete, as far as known (the
	// balancer leaves them out of a shard's data size; the deleter decrements it).
	NumOrphanDocs int64
}

// Doc renders the document.
func (t RangeDeletionTask) Doc() bsoncore.Document {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = bsoncore.AppendBinaryElement(b, "_id", 4, t.ID[:])
	b = bsoncore.AppendStringElement(b, "nss", t.NS)
	b = bsoncore.AppendBinaryElement(b, "collectionUuid", 4, t.CollectionUUID[:])
	b = bsoncore.AppendStringElement(b, "donorShardId", t.Donor)
	b = bsoncore.AppendDocumentElement(b, "range", rangeDoc(t.Min, t.Max))
	if t.Pending {
		b = bsoncore.AppendBooleanElement(b, "pending", true)
	}
	b = bsoncore.AppendStringElement(b, "whenToClean", t.WhenToClean)
	b = bsoncore.AppendDocumentElement(b, "keyPattern", t.KeyPattern)
	b = bsoncore.AppendInt64Element(b, "numOrphanDocs", t.NumOrphanDocs)
	if t.PreMigrationShardVersion != nil {
		b = t.PreMigrationShardVersion.AppendShardVersion(b, "preMigrationShardVersion")
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// Steps are the coordinator's effects (MigrationCoordinator's IO), one small call each, so
// that the decisions above them can run against a simulation.
type Steps interface {
	// InsertCoordinator / UpdateDecision / DeleteCoordinator write the donor's
	// config.migrationCoordinators document (majority).
	InsertCoordinator(ctx context.Context, d CoordinatorDoc) error
	UpdateDecision(ctx context.Context, id catalog.UUID, dec Decision) error
	DeleteCoordinator(ctx context.Context, id catalog.UUID) error
	// InsertRangeDeletion writes a task in the donor's config.rangeDeletions (majority).
	InsertRangeDeletion(ctx context.Context, t RangeDeletionTask) error
	// DeleteRangeDeletion / MarkRangeDeletionReady act on shard's config.rangeDeletions
	// document id (the donor's own or the recipient's).
	DeleteRangeDeletion(ctx context.Context, shard string, id catalog.UUID) error
	MarkRangeDeletionReady(ctx context.Context, shard string, id catalog.UUID) error
	// ChunkOwner reads the authoritative owner of the chunk of ns (uuid) whose range
	// contains [min, max) from the config server's config.chunks.
	ChunkOwner(ctx context.Context, ns string, uuid catalog.UUID, min, max bsoncore.Document) (string, error)
	// EnsureChunkVersionIsGreaterThan has the config server bump the version of the chunk
	// holding [min, max) past v while it is still on the donor at v or older
	// (_configsvrEnsureChunkVersionIsGreaterThan, majority): a commit of the migration
	// still on its way then fails its version check instead of landing after the decision.
	EnsureChunkVersionIsGreaterThan(ctx context.Context, ns string, uuid catalog.UUID, min, max bsoncore.Document, v routing.ChunkVersion) error
	// Refresh refreshes the donor's filtering metadata of ns from the config server.
	Refresh(ctx context.Context, ns string) error
}

// Coordinator is MigrationCoordinator: the donor's durable record of one migration and the
// sequences that end it.
type Coordinator struct {
	Doc   CoordinatorDoc
	Steps Steps
	// Orphans is the donor task's numOrphanDocs: the documents in the range when the
	// migration started.
	Orphans int64
}

// Start writes the coordinator document, then the donor's pending range deletion task (the
// migration's range, deleted only if the migration commits).
func (c *Coordinator) Start(ctx context.Context, keyPattern bsoncore.Document, whenToClean string) error {
	if err := c.Steps.InsertCoordinator(ctx, c.Doc); err != nil {
		return fmt.Errorf("persist the migration coordinator document: %w", err)
	}
	t := RangeDeletionTask{ID: c.Doc.ID, NS: c.Doc.NS, CollectionUUID: c.Doc.CollectionUUID, Donor: c.Doc.Donor,
		Min: c.Doc.Min, Max: c.Doc.Max, Pending: true, WhenToClean: whenToClean, KeyPattern: keyPattern, NumOrphanDocs: c.Orphans}
	v := c.Doc.PreMigrationChunkVersion
	t.PreMigrationShardVersion = &v
	if err := c.Steps.InsertRangeDeletion(ctx, t); err != nil {
		return fmt.Errorf("persist the donor's range deletion task: %w", err)
	}
	return nil
}

// Decide records the decision durably before either sequence runs.
func (c *Coordinator) Decide(ctx context.Context, dec Decision) error {
	if err := c.Steps.UpdateDecision(ctx, c.Doc.ID, dec); err != nil {
		return fmt.Errorf("persist the migration decision: %w", err)
	}
	c.Doc.Decision = dec
	return nil
}

// Complete runs the recorded decision's sequence and deletes the coordinator document:
// committed: the recipient's task is deleted, then the donor's is marked ready (the range
// deleter removes the donor's orphans); aborted: the donor's task is deleted, then the
// recipient's is marked ready (its copies are removed). Each step is idempotent, so a
// coordinator resumed after a crash runs the whole sequence again.
func (c *Coordinator) Complete(ctx context.Context) error {
	id := c.Doc.ID
	switch c.Doc.Decision {
	case Committed:
		if err := c.Steps.DeleteRangeDeletion(ctx, c.Doc.Recipient, id); err != nil {
			return fmt.Errorf("delete the recipient's range deletion task: %w", err)
		}
		if err := c.Steps.MarkRangeDeletionReady(ctx, c.Doc.Donor, id); err != nil {
			return fmt.Errorf("mark the donor's range deletion task ready: %w", err)
		}
	case Aborted:
		if err := c.Steps.DeleteRangeDeletion(ctx, c.Doc.Donor, id); err != nil {
			return fmt.Errorf("delete the donor's range deletion task: %w", err)
		}
		if err := c.Steps.MarkRangeDeletionReady(ctx, c.Doc.Recipient, id); err != nil {
			return fmt.Errorf("mark the recipient's range deletion task ready: %w", err)
		}
	default:
		return mongoerr.Newf(mongoerr.IllegalOperation, "migration %s has no decision yet", id)
	}
	return c.Steps.DeleteCoordinator(ctx, id)
}

// Recover resumes an unfinished coordinator after a donor step-up
// (migrationutil::resumeMigrationCoordinationsOnStepUp): without a recorded decision the
// config server's config.chunks says whether the commit happened (the donor still owns the
// range: aborted; otherwise committed); the donor's metadata is refreshed, then the
// decision's sequence runs.
func (c *Coordinator) Recover(ctx context.Context) error {
	if c.Doc.Decision == Undecided {
		// A commit the dead donor sent may still be on its way to the config server: fence
		// it off first, so that the owner read next is the final one.
		if err := c.Steps.EnsureChunkVersionIsGreaterThan(ctx, c.Doc.NS, c.Doc.CollectionUUID, c.Doc.Min, c.Doc.Max,
			c.Doc.PreMigrationChunkVersion); err != nil {
			return fmt.Errorf("fence off the migration's commit: %w", err)
		}
		owner, err := c.Steps.ChunkOwner(ctx, c.Doc.NS, c.Doc.CollectionUUID, c.Doc.Min, c.Doc.Max)
		if err != nil && !errors.Is(err, ErrCollectionGone) {
			return fmt.Errorf("read the migrated range's owner: %w", err)
		}
		// Aborted only while the donor still owns the range: the recipient may have moved
		// it on since the commit (the simulation found that; sim_test.go). Its own pending
		// range deletion task keeps the range from coming back to the donor meanwhile.
		// A dropped collection has nothing left to own: aborting clears the documents.
		dec := Committed
		if owner == c.Doc.Donor || errors.Is(err, ErrCollectionGone) {
			dec = Aborted
		}
		if err := c.Decide(ctx, dec); err != nil {
			return err
		}
	}
	if err := c.Steps.Refresh(ctx, c.Doc.NS); err != nil {
		return fmt.Errorf("refresh the filtering metadata of %s: %w", c.Doc.NS, err)
	}
	return c.Complete(ctx)
}

// NewSessionTxn returns a fresh lsid and txnNumber for a coordinator document.
func NewSessionTxn() (catalog.UUID, int64) { return catalog.NewUUID(), 0 }
