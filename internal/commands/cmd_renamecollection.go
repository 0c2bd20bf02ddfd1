package commands

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/opobserver"
	"humongo/internal/service"
	"humongo/internal/storage"
)

func addRenameCollection(r *service.Registry) {
	add(r, &service.Command{
		Name:      "renameCollection",
		Auth:      service.AuthRenameCollection,
		Handler:   runRenameCollection,
		Help:      " example: { renameCollection: foo.a, to: bar.b }",
		AdminOnly: true,
		Writes:    true,
	})
}

// Cross-database renames copy documents in batches bounded by these (one unit per batch).
const (
	ddlRenameBatchDocs  = 1000
	ddlRenameBatchBytes = 4 << 20
)

// runRenameCollection renames a collection. Within a database it is a catalog rename that
// keeps the UUID, idents and indexes. Across databases it copies the documents and index
// specs into a temporary collection of the target database in bounded batches, then renames
// the temporary collection to the target and drops the source in one unit, as MongoDB does;
// the target gets a new UUID.
func runRenameCollection(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "renameCollection"
	if err := checkStrict(cmd, c, "to", "dropTarget", "stayTemp", "collectionUUID"); err != nil {
		return nil, err
	}
	src := commandArg(cmd)
	from, ok := src.StringValueOK()
	if !ok {
		return nil, typeMismatch(c, c, src.Type, "string")
	}
	tv := lookup(cmd, "to")
	if tv.Type == 0 {
		return nil, mongoerr.New(codeMissingField, "BSON field 'renameCollection.to' is missing but a required field")
	}
	to, ok := tv.StringValueOK()
	if !ok {
		return nil, typeMismatch(c, "to", tv.Type, "string")
	}
	dropTarget, err := ddlBoolArg(c, "dropTarget", lookup(cmd, "dropTarget"))
	if err != nil {
		return nil, err
	}
	if _, err := ddlBoolArg(c, "stayTemp", lookup(cmd, "stayTemp")); err != nil {
		return nil, err
	}
	if catalog.ValidateNS(from) != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid source namespace: %s", from)
	}
	if catalog.ValidateNS(to) != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid target namespace: %s", to)
	}
	if ddlIsSystem(from) {
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "error with source namespace: cannot write to '%s'", from)
	}
	if ddlIsSystem(to) {
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "error with target namespace: cannot write to '%s'", to)
	}
	if from == to {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "Can't rename a collection to itself")
	}
	op := db.NewOp(ctx)
	defer op.Close()
	scope, err := op.Locker.LockCollections(ctx, lock.ModeX, from, to)
	if err != nil {
		return nil, err
	}
	defer func() { _ = scope.Release() }()

	snap := db.Catalog.Latest()
	srcMeta, ok := snap.ByNS(from)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "Source collection %s does not exist", from)
	}
	if v := lookup(cmd, "collectionUUID"); v.Type != 0 {
		if err := ddlCheckCollectionUUID(v, srcMeta); err != nil {
			return nil, err
		}
	}
	tgtMeta, tgtExists := snap.ByNS(to)
	if tgtExists && !dropTarget {
		return nil, mongoerr.New(mongoerr.NamespaceExists, "target namespace exists")
	}
	fromDB, _ := catalog.SplitNS(from)
	toDB, _ := catalog.SplitNS(to)
	if fromDB == toDB {
		err = op.InUnit(ctx, func() error {
			ra := opobserver.RenameArgs{From: from, To: to, UUID: srcMeta.UUID}
			if tgtExists {
				ra.DropTarget, ra.HasDropTarget = tgtMeta.UUID, true
			}
			if err := db.Observer().OnRenameCollection(op.RU, &ra); err != nil {
				return err
			}
			if err := db.Catalog.RenameCollection(op.RU, from, to, dropTarget); err != nil {
				return err
			}
			if tgtExists {
				ddlForgetOnCommit(op, tgtMeta.UUID)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		ddlKillCursors(env, from, to)
		return emptyDoc, nil
	}
	if err := ddlRenameAcrossDatabases(ctx, op, srcMeta, to, tgtMeta); err != nil {
		return nil, err
	}
	ddlKillCursors(env, from, to)
	return emptyDoc, nil
}

// ddlRenameAcrossDatabases copies src into a temporary collection of the target database and
// swaps it in. The caller holds X locks on both namespaces. On failure the temporary
// collection is dropped and nothing else has changed.
func ddlRenameAcrossDatabases(ctx context.Context, op *operation.Context, src *catalog.CollectionMeta, to string, tgt *catalog.CollectionMeta) (err error) {
	db := op.DB
	toDB, _ := catalog.SplitNS(to)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tmp := toDB + ".tmp" + hex.EncodeToString(rnd[:]) + ".renameCollection"
	// The temporary collection's UUID is chosen here so its index entries can name it.
	tmpUUID := catalog.NewUUID()
	tmpOpts := doc(func(b []byte) []byte {
		b = bsoncore.AppendBinaryElement(b, "uuid", 4, tmpUUID[:])
		u := operation.UserOptions(src)
		return append(b, u[4:len(u)-1]...)
	})
	err = op.InUnit(ctx, func() error {
		if err := ddlCreateCollection(op, tmp, tmpOpts); err != nil {
			return err
		}
		for _, ix := range src.ReadyIndexes() {
			if ix.IsIDIndex() {
				continue
			}
			im, err := db.Catalog.AddIndex(op.RU, tmp, ix.Spec, true, nil)
			if err != nil {
				return err
			}
			if err := db.Observer().OnCreateIndexes(op.RU, tmp, tmpUUID, []bsoncore.Document{im.Spec}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Best effort: a leftover temporary collection is harmless and visible to the user.
			_ = op.InUnit(context.WithoutCancel(ctx), func() error {
				if m, ok := db.Catalog.Latest().ByNS(tmp); ok {
					ddlForgetOnCommit(op, m.UUID)
					return db.Catalog.DropCollection(op.RU, tmp)
				}
				return nil
			})
		}
	}()
	tmpColl, err := db.Colls.Get(tmp)
	if err != nil {
		return err
	}
	srcColl, err := db.Colls.ByUUID(src.UUID)
	if err != nil {
		return err
	}
	// The source is X-locked, so one snapshot for the whole copy sees a stable collection.
	readRU := db.Engine.NewRecoveryUnit()
	defer readRU.Close()
	cur, err := srcColl.RecordStore().NewCursor(readRU, false)
	if err != nil {
		return err
	}
	defer cur.Close()
	batch := make([]bsoncore.Document, 0, 64)
	var batchBytes int
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := op.InUnit(ctx, func() error {
			_, err := tmpColl.InsertDocuments(op.RU, batch)
			return err
		})
		batch, batchBytes = batch[:0], 0
		return err
	}
	for {
		_, raw, ok := cur.Next()
		if !ok {
			if err := cur.Err(); storage.IsPrepareConflict(err) {
				// A record a prepared transaction wrote (transactions hold no locks between
				// statements): copy it as decided, from a new snapshot once it commits or
				// aborts; the cursor redoes its move.
				cur.Save()
				readRU.AbandonSnapshot()
				if err := storage.WaitPrepareConflict(ctx, err); err != nil {
					return err
				}
				if _, err := cur.Restore(); err != nil && !storage.IsPrepareConflict(err) {
					return err
				}
				continue
			}
			break
		}
		batch = append(batch, append(bsoncore.Document(nil), raw...))
		batchBytes += len(raw)
		if len(batch) >= ddlRenameBatchDocs || batchBytes >= ddlRenameBatchBytes {
			if err := ddlCheckCtx(ctx); err != nil {
				return err
			}
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := cur.Err(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	return op.InUnit(ctx, func() error {
		// Each entry before its catalog writes, so they carry its timestamp.
		ra := opobserver.RenameArgs{From: tmp, To: to, UUID: tmpUUID}
		if tgt != nil {
			ra.DropTarget, ra.HasDropTarget = tgt.UUID, true
		}
		if err := db.Observer().OnRenameCollection(op.RU, &ra); err != nil {
			return err
		}
		if err := db.Catalog.RenameCollection(op.RU, tmp, to, tgt != nil); err != nil {
			return err
		}
		if err := db.Observer().OnDropCollection(op.RU, src.NS, src.UUID); err != nil {
			return err
		}
		if err := db.Catalog.DropCollection(op.RU, src.NS); err != nil {
			return err
		}
		forget := []catalog.UUID{src.UUID}
		if tgt != nil {
			forget = append(forget, tgt.UUID)
		}
		ddlForgetOnCommit(op, forget...)
		return nil
	})
}
