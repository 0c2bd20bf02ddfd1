package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/service"
)

func addDrop(r *service.Registry) {
	add(r, &service.Command{
		Name:    "drop",
		Auth:    service.AuthOnNS(auth.DropCollection),
		Handler: runDrop,
		Help:    "drop a collection\n{drop : <collectionName>}",
		Writes:  true,
	})
}

// runDrop drops a collection. Since MongoDB 7.0 dropping a collection that does not exist
// succeeds with a bare {ok: 1}; an existing one answers {nIndexesWas, ns, ok}.
func runDrop(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	ns, err := ddlCollectionNS(env, cmd)
	if err != nil {
		return nil, err
	}
	if err := checkStrict(cmd, "drop", "collectionUUID"); err != nil {
		return nil, err
	}
	if err := ddlCheckDroppable(ns); err != nil {
		return nil, err
	}
	if _, ok := db.Catalog.Latest().ByNS(ns); !ok {
		// Dropping a view removes its definition from system.views.
		if found, err := viewDrop(ctx, env, ns); err != nil || found {
			if err != nil {
				return nil, err
			}
			return doc(func(b []byte) []byte { return bsoncore.AppendStringElement(b, "ns", ns) }), nil
		}
	}
	op := db.NewOp(ctx)
	defer op.Close()
	nIndexes := -1
	err = op.DDL(ctx, ns, func() error {
		m, ok := db.Catalog.Latest().ByNS(ns)
		if !ok {
			nIndexes = -1
			return nil
		}
		if v := lookup(cmd, "collectionUUID"); v.Type != 0 {
			if err := ddlCheckCollectionUUID(v, m); err != nil {
				return err
			}
		}
		nIndexes = len(ddlIndexSpecs(m))
		if dropFromMigrate(ctx) {
			defer opobserver.WithFromMigrate(op.RU)()
		}
		if err := db.Observer().OnDropCollection(op.RU, ns, m.UUID); err != nil {
			return err
		}
		if err := db.Catalog.DropCollection(op.RU, ns); err != nil {
			return err
		}
		ddlForgetOnCommit(op, m.UUID)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if nIndexes < 0 {
		return emptyDoc, nil
	}
	ddlKillCursors(env, ns)
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendInt32Element(b, "nIndexesWas", int32(nIndexes))
		return bsoncore.AppendStringElement(b, "ns", ns)
	}), nil
}

// ddlCheckDroppable refuses system collections MongoDB does not let users drop.
func ddlCheckDroppable(ns string) error {
	if !ddlIsSystem(ns) {
		return nil
	}
	_, coll := catalog.SplitNS(ns)
	switch coll {
	case "system.profile", "system.js", "system.views", "system.buckets":
		return nil
	}
	return mongoerr.Newf(mongoerr.IllegalOperation, "can't drop system collection %s", ns)
}

// ddlCheckCollectionUUID implements the collectionUUID argument: the named collection must
// have that UUID (CollectionUUIDMismatch otherwise).
func ddlCheckCollectionUUID(v bsoncore.Value, m *catalog.CollectionMeta) error {
	sub, data, ok := v.BinaryOK()
	if !ok || sub != 4 || len(data) != 16 {
		return mongoerr.New(mongoerr.InvalidUUID, "collectionUUID must be a UUID")
	}
	if string(data) != string(m.UUID[:]) {
		return mongoerr.Newf(mongoerr.CollectionUUIDMismatch, "Collection UUID does not match that specified")
	}
	return nil
}

type dropFromMigrateKey struct{}

// withDropFromMigrate marks the drops run with ctx as a sharded drop's participant's, whose
// entries carry fromMigrate (opobserver.WithFromMigrate).
func withDropFromMigrate(ctx context.Context) context.Context {
	return context.WithValue(ctx, dropFromMigrateKey{}, true)
}

func dropFromMigrate(ctx context.Context) bool {
	v, _ := ctx.Value(dropFromMigrateKey{}).(bool)
	return v
}
