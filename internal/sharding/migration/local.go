package migration

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/lock"
	"humongo/internal/operation"
)

// Local is a shard's own storage as the migration reads and writes it: unversioned
// operations (never blocked by the critical section nor filtered by ownership).
type Local struct {
	DB      *operation.DB
	Tracker *Tracker
}

// ScanRange collects the _ids of ns's documents in r (the cloner's initial id collection)
// and the collection's UUID, document count and data size (for the chunk size check).
func (l *Local) ScanRange(ctx context.Context, ns string, r Range) (ids []bsoncore.Value, bytes int64, uuid catalog.UUID, collDocs, collBytes int64, err error) {
	op := l.DB.NewOp(ctx)
	defer op.Close()
	meta, coll, release, err := op.ReadCollection(ctx, ns)
	if err != nil {
		return nil, 0, uuid, 0, 0, err
	}
	defer release()
	if coll == nil {
		return nil, 0, uuid, 0, 0, nil
	}
	uuid = meta.UUID
	collDocs, collBytes = coll.RecordStore().Counts()
	cur, err := coll.RecordStore().NewCursor(op.RU, false)
	if err != nil {
		return nil, 0, uuid, 0, 0, err
	}
	defer cur.Close()
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, uuid, 0, 0, err
		}
		_, raw, ok := cur.Next()
		if !ok {
			break
		}
		doc := bsoncore.Document(raw)
		if r.Contains(doc) {
			ids = append(ids, copyValue(doc.Lookup("_id")))
			bytes += int64(len(doc))
		}
	}
	if err := cur.Err(); err != nil {
		return nil, 0, uuid, 0, 0, fmt.Errorf("scan %s: %w", ns, err)
	}
	return ids, bytes, uuid, collDocs, collBytes, nil
}

// FetchByIDs returns the current documents of ids (missing ones are skipped), copied.
func (l *Local) FetchByIDs(ctx context.Context, ns string, ids []bsoncore.Value) ([]bsoncore.Document, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	op := l.DB.NewOp(ctx)
	defer op.Close()
	_, coll, release, err := op.ReadCollection(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer release()
	if coll == nil {
		return nil, nil
	}
	out := make([]bsoncore.Document, 0, len(ids))
	for _, id := range ids {
		_, doc, found, err := coll.FindByID(op.RU, id)
		if err != nil {
			return nil, err
		}
		if found {
			out = append(out, append(bsoncore.Document(nil), doc...))
		}
	}
	return out, nil
}

// Apply writes a batch of the recipient's migration writes to ns in one unit, marked
// fromMigrate: deletes (of _ids whose local document is in r) first, then upserts by _id.
func (l *Local) Apply(ctx context.Context, ns string, r Range, deleted []bsoncore.Value, upserts []bsoncore.Document) error {
	if len(deleted) == 0 && len(upserts) == 0 {
		return nil
	}
	op := l.DB.NewOp(ctx)
	defer op.Close()
	unmark := l.Tracker.Mark(op.RU)
	defer unmark()
	return op.WriteCollection(ctx, ns, false, func(coll *index.Collection) error {
		if coll == nil {
			return fmt.Errorf("collection %s is gone on the recipient", ns)
		}
		for _, id := range deleted {
			rid, doc, found, err := coll.FindByID(op.RU, id)
			if err != nil {
				return err
			}
			if found && r.Contains(doc) {
				if err := coll.DeleteDocument(op.RU, rid, append(bsoncore.Document(nil), doc...)); err != nil {
					return err
				}
			}
		}
		for _, d := range upserts {
			rid, old, found, err := coll.FindByID(op.RU, d.Lookup("_id"))
			if err != nil {
				return err
			}
			if found {
				if err := coll.UpdateDocument(op.RU, rid, append(bsoncore.Document(nil), old...), d); err != nil {
					return err
				}
				continue
			}
			if _, err := coll.InsertDocument(op.RU, d); err != nil {
				return err
			}
		}
		return nil
	})
}

// DrainWrites waits for the writes to ns that passed their shard version check before now
// (they hold ns's collection lock in IX until their unit ends): it takes the lock in S once.
func (l *Local) DrainWrites(ctx context.Context, ns string) error {
	op := l.DB.NewOp(ctx)
	defer op.Close()
	scope, err := op.Locker.CollectionLock(ctx, ns, lock.ModeS)
	if err != nil {
		return err
	}
	return scope.Release()
}

// CoordinatorNamespaces returns the namespaces of this node's config.migrationCoordinators
// documents, read from its own storage (a node about to become primary cannot run commands
// on config yet).
func (l *Local) CoordinatorNamespaces(ctx context.Context) ([]string, error) {
	docs, err := l.ScanAll(ctx, "config.migrationCoordinators")
	var out []string
	for _, d := range docs {
		if ns, ok := d.Lookup("nss").StringValueOK(); ok {
			out = append(out, ns)
		}
	}
	return out, err
}
