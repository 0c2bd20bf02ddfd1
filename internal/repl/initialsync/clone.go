package initialsync

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// cloneAll is the DatabasesCloner: every database but local, every collection of it.
func (s *Syncer) cloneAll(ctx context.Context, cl *mongo.Client, ts optime.Timestamp) error {
	dbs, err := cl.ListDatabaseNames(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("listDatabases: %w", err)
	}
	var todo []string
	for _, db := range dbs {
		if db != "local" {
			todo = append(todo, db)
		}
	}
	s.mu.Lock()
	s.st.dbsTotal = len(todo)
	s.mu.Unlock()
	for _, db := range todo {
		if err := s.cloneDatabase(ctx, cl.Database(db), ts); err != nil {
			return err
		}
		s.mu.Lock()
		s.st.dbsCloned++
		s.mu.Unlock()
	}
	return nil
}

// cloneDatabase is the DatabaseCloner.
func (s *Syncer) cloneDatabase(ctx context.Context, db *mongo.Database, ts optime.Timestamp) error {
	cur, err := db.ListCollections(ctx, bson.D{{Key: "type", Value: "collection"}})
	if err != nil {
		return fmt.Errorf("listCollections %s: %w", db.Name(), err)
	}
	var infos []bson.Raw
	for cur.Next(ctx) {
		infos = append(infos, append(bson.Raw(nil), cur.Current...))
	}
	if err := cur.Err(); err != nil {
		return err
	}
	_ = cur.Close(ctx)
	for _, info := range infos {
		name, _ := info.Lookup("name").StringValueOK()
		ns := db.Name() + "." + name
		if ns == "config.system.sessions" || ns == oplog.PreImagesNS {
			continue // every member keeps its own
		}
		if err := s.cloneCollection(ctx, db.Collection(name), ns, bsoncore.Document(info), ts); err != nil {
			return fmt.Errorf("clone %s: %w", ns, err)
		}
		s.mu.Lock()
		s.st.collsCloned++
		s.mu.Unlock()
	}
	return nil
}

// unitAt runs f in a unit whose writes are timestamped ts, retrying WriteConflicts. The
// writes log no oplog entries (the clone copies data, the oplog comes from the source).
func (s *Syncer) unitAt(ctx context.Context, ru *storage.RecoveryUnit, ts optime.Timestamp, f func() error) error {
	release := opobserver.UnreplicatedWrites(ru)
	defer release()
	return storage.WriteConflictRetry(ctx, "initialSyncClone", func() error {
		defer ru.AbandonSnapshot()
		w := ru.BeginUnitOfWork()
		defer w.End()
		if err := ru.SetTimestamp(ts); err != nil {
			return err
		}
		if err := f(); err != nil {
			return err
		}
		return w.Commit()
	})
}

// cloneCollection is the CollectionCloner: create the collection with the source's UUID and
// options, its indexes (on the empty collection), then copy the documents.
func (s *Syncer) cloneCollection(ctx context.Context, coll *mongo.Collection, ns string, info bsoncore.Document, ts optime.Timestamp) error {
	opts, _ := info.Lookup("options").DocumentOK()
	b := bsoncore.NewDocumentBuilder()
	if u, ok := info.Lookup("info").DocumentOK(); ok {
		if v, err := u.LookupErr("uuid"); err == nil {
			st, data, ok := v.BinaryOK()
			if !ok || st != 4 || len(data) != 16 {
				return mongoerr.Newf(mongoerr.BadValue, "listCollections info.uuid of %s is not a UUID", ns)
			}
			b.AppendBinary("uuid", 4, data)
		}
	}
	if opts != nil {
		els, err := opts.Elements()
		if err != nil {
			return err
		}
		for _, e := range els {
			if e.Key() != "uuid" {
				b.AppendValue(e.Key(), e.Value())
			}
		}
	}
	createOpts := b.Build()

	// Index specs first (listIndexes), so the clone's inserts maintain them.
	icur, err := coll.Indexes().List(ctx)
	if err != nil {
		return fmt.Errorf("listIndexes: %w", err)
	}
	var specs []bsoncore.Document
	for icur.Next(ctx) {
		name, _ := icur.Current.Lookup("name").StringValueOK()
		if clustered, _ := icur.Current.Lookup("clustered").BooleanOK(); name == catalog.IDIndexName || clustered {
			// The _id index (a clustered collection's too) comes with the collection.
			continue
		}
		specs = append(specs, bsoncore.Document(append([]byte(nil), icur.Current...)))
	}
	if err := icur.Err(); err != nil {
		return err
	}
	_ = icur.Close(ctx)

	ru := s.cfg.Engine.NewRecoveryUnit()
	defer ru.Close()
	var uuid catalog.UUID
	err = s.unitAt(ctx, ru, ts, func() error {
		m, err := s.cfg.Catalog.CreateCollection(ru, ns, createOpts)
		if err != nil {
			return err
		}
		uuid = m.UUID
		for _, spec := range specs {
			if _, err := s.cfg.Catalog.AddIndex(ru, ns, withoutNS(spec), true, nil); err != nil &&
				!mongoerr.Is(err, mongoerr.IndexAlreadyExists) {
				return fmt.Errorf("index %v: %w", spec, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	dst, err := s.cfg.Colls.ByUUID(uuid)
	if err != nil {
		return err
	}

	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(int32(s.cfg.CloneBatch)))
	if err != nil {
		return fmt.Errorf("find: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	batch := make([]bsoncore.Document, 0, s.cfg.CloneBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := s.unitAt(ctx, ru, ts, func() error {
			for _, d := range batch {
				// A document the source changed while we scanned may collide on a
				// unique index with an earlier copy; the oplog replay fixes it.
				if _, err := dst.InsertDocument(ru, d); err != nil && !mongoerr.Is(err, mongoerr.DuplicateKey) {
					return err
				}
			}
			return nil
		})
		s.mu.Lock()
		s.st.docsCloned += int64(len(batch))
		s.mu.Unlock()
		batch = batch[:0]
		return err
	}
	for cur.Next(ctx) {
		batch = append(batch, bsoncore.Document(append([]byte(nil), cur.Current...)))
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := cur.Err(); err != nil {
		return err
	}
	return flush()
}

// withoutNS drops a legacy "ns" field from an index spec.
func withoutNS(spec bsoncore.Document) bsoncore.Document {
	if _, err := spec.LookupErr("ns"); err != nil {
		return spec
	}
	b := bsoncore.NewDocumentBuilder()
	els, _ := spec.Elements()
	for _, e := range els {
		if e.Key() != "ns" {
			b.AppendValue(e.Key(), e.Value())
		}
	}
	return b.Build()
}
