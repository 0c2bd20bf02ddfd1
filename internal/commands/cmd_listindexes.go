package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/catalog"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addListIndexes(r *service.Registry) {
	add(r, &service.Command{
		Name:      "listIndexes",
		Auth:      service.AuthOnNS(auth.ListIndexes),
		Handler:   runListIndexes,
		Help:      "list indexes for a collection",
		Secondary: service.SecondaryOptIn,
	})
}

// runListIndexes returns the ready indexes' specs in catalog order, as listIndexes shows them
// (listIndexesSpec).
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
	for i, sp := range specs {
		specs[i] = listIndexesSpec(sp)
	}
	release()
	release = func() {}
	_, coll := catalog.SplitNS(ns)
	return cursorFirstBatch(ctx, env, env.DB+".$cmd.listIndexes."+coll, cursor.SliceSource(specs), batchSize)
}

// listIndexesSpec is a stored index spec as listIndexes shows it: v, key and name first, then
// the options in the order they were given, with unique and sparse as booleans (the catalog
// keeps a number such as sparse: 12345 as given; listIndexes shows sparse: true, as MongoDB's
// index_sparse_create_index_non_boolean_value test pins).
func listIndexesSpec(spec bsoncore.Document) bsoncore.Document {
	elems, err := spec.Elements()
	if err != nil {
		return spec
	}
	return doc(func(b []byte) []byte {
		for _, k := range []string{"v", "key", "name"} {
			if v := lookup(spec, k); v.Type != 0 {
				b = bsoncore.AppendValueElement(b, k, v)
			}
		}
		for _, e := range elems {
			switch k := e.Key(); k {
			case "v", "key", "name":
			case "unique", "sparse":
				b = bsoncore.AppendBooleanElement(b, k, truthy(e.Value()))
			default:
				b = append(b, e...)
			}
		}
		return b
	})
}
