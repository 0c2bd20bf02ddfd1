package applier

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// TruncateAfterPointNS holds the oplogTruncateAfterPoint document (spec: "Startup Recovery").
const TruncateAfterPointNS = "local.replset.oplogTruncateAfterPoint"

// localDoc is the single document of an unreplicated `local` collection, written with the
// catalog and write path directly (the applier runs below the command layer).
type localDoc struct {
	e     *storage.Engine
	cat   *catalog.Catalog
	colls *index.Collections
	ns    string
}

func (l localDoc) collection(ctx context.Context, ru *storage.RecoveryUnit) (*index.Collection, error) {
	if m, ok := l.cat.Latest().ByNS(l.ns); ok {
		return l.colls.ByUUID(m.UUID)
	}
	err := storage.WriteConflictRetry(ctx, "createLocalCollection", func() error {
		defer ru.AbandonSnapshot()
		w := ru.BeginUnitOfWork()
		defer w.End()
		if _, ok := l.cat.Latest().ByNS(l.ns); ok {
			return nil
		}
		if _, err := l.cat.CreateCollection(ru, l.ns, nil); err != nil {
			return err
		}
		return w.Commit()
	})
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", l.ns, err)
	}
	m, ok := l.cat.Latest().ByNS(l.ns)
	if !ok {
		return nil, fmt.Errorf("%s missing after creation", l.ns)
	}
	return l.colls.ByUUID(m.UUID)
}

// Save replaces the collection's document with doc.
func (l localDoc) Save(ctx context.Context, doc bsoncore.Document) error {
	ru := l.e.NewRecoveryUnit()
	defer ru.Close()
	coll, err := l.collection(ctx, ru)
	if err != nil {
		return err
	}
	return storage.WriteConflictRetry(ctx, "saveLocalDoc", func() error {
		defer ru.AbandonSnapshot()
		w := ru.BeginUnitOfWork()
		defer w.End()
		cur, err := coll.RecordStore().NewCursor(ru, false)
		if err != nil {
			return err
		}
		defer cur.Close()
		rid, old, found := cur.Next()
		if err := cur.Err(); err != nil {
			return err
		}
		if found {
			err = coll.UpdateDocument(ru, rid, append(bsoncore.Document(nil), old...), doc)
		} else {
			_, err = coll.InsertDocument(ru, doc)
		}
		if err != nil {
			return err
		}
		return w.Commit()
	})
}

// Load returns the collection's document, or nil.
func (l localDoc) Load() (bsoncore.Document, error) {
	m, ok := l.cat.Latest().ByNS(l.ns)
	if !ok {
		return nil, nil
	}
	coll, err := l.colls.ByUUID(m.UUID)
	if err != nil {
		return nil, err
	}
	ru := l.e.NewRecoveryUnit()
	defer ru.Close()
	cur, err := coll.RecordStore().NewCursor(ru, false)
	if err != nil {
		return nil, err
	}
	_, doc, found := cur.Next()
	if !found {
		return nil, cur.Err()
	}
	return append(bsoncore.Document(nil), doc...), nil
}

func truncatePointDoc(ts optime.Timestamp) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("_id", "oplogTruncateAfterPoint").
		AppendTimestamp("oplogTruncateAfterPoint", ts.Secs(), ts.Inc()).Build()
}

// OplogTruncateAfterPoint reads the persisted point (null when none is set).
func OplogTruncateAfterPoint(e *storage.Engine, cat *catalog.Catalog, colls *index.Collections) (optime.Timestamp, error) {
	doc, err := localDoc{e: e, cat: cat, colls: colls, ns: TruncateAfterPointNS}.Load()
	if err != nil || doc == nil {
		return 0, err
	}
	s, i, ok := doc.Lookup("oplogTruncateAfterPoint").TimestampOK()
	if !ok {
		return 0, fmt.Errorf("%s: oplogTruncateAfterPoint is not a timestamp", TruncateAfterPointNS)
	}
	return optime.MakeTimestamp(s, i), nil
}

// SetOplogTruncateAfterPoint persists the point (null clears it).
func SetOplogTruncateAfterPoint(ctx context.Context, e *storage.Engine, cat *catalog.Catalog, colls *index.Collections, ts optime.Timestamp) error {
	return localDoc{e: e, cat: cat, colls: colls, ns: TruncateAfterPointNS}.Save(ctx, truncatePointDoc(ts))
}

// TopOfOplog reads the newest entry of the oplog (ident) with its term; null when empty.
// A reverse cursor ignores oplog visibility, so this is the newest written entry.
func TopOfOplog(e *storage.Engine, ident string) (optime.OpTime, error) {
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	c, err := ru.NewCursor(ident, storage.CursorOptions{Reverse: true})
	if err != nil {
		return optime.OpTime{}, err
	}
	defer c.Close()
	if !c.First() {
		return optime.OpTime{}, c.Err()
	}
	if _, err := recordid.FromKey(c.Key()); err != nil {
		return optime.OpTime{}, fmt.Errorf("oplog key: %w", err)
	}
	return oplog.EntryOpTime(bsoncore.Document(c.Value()))
}
