package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addListIndexes(r *service.Registry) {
	add(r, &service.Command{
		Name:      "listIndexes",
		Handler:   runListIndexes,
		Help:      "list indexes for a collection",
		Secondary: service.SecondaryOptIn,
	})
}

// runListIndexes returns the ready indexes' specs as stored ({v, key, name, ...options} in
// the order the user gave the options), in catalog order.
func runListIndexes(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "listIndexes"
	ns, err := ddlCollectionNS(env, cmd)
	if err != nil {
		return nil, err
	}
	if err := checkStrict(cmd, c, "cursor", "includeBuildUUIDs", "includeIndexBuildInfo", "collectionUUID"); err != nil {
		return nil, err
	}
	batchSize, err := ddlParseCursorOption(c, cmd)
	if err != nil {
		return nil, err
	}
	op := db.NewOp(ctx)
	defer op.Close()
	meta, _, release, err := op.ReadCollection(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer func() { release() }()
	if meta == nil {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "ns does not exist: %s", ns)
	}
	if v := lookup(cmd, "collectionUUID"); v.Type != 0 {
		if err := ddlCheckCollectionUUID(v, meta); err != nil {
			return nil, err
		}
	}
	specs := ddlIndexSpecs(meta)
	release()
	release = func() {}
	_, coll := catalog.SplitNS(ns)
	return cursorFirstBatch(ctx, env, env.DB+".$cmd.listIndexes."+coll, cursor.SliceSource(specs), batchSize)
}
