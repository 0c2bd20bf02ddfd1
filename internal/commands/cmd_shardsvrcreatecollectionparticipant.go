package commands

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func shardsvrCreateCollectionParticipantCommand() *service.Command {
	return &service.Command{
		Name:      "_shardsvrCreateCollectionParticipant",
		Auth:      service.AuthInternal,
		Handler:   runShardsvrCreateCollectionParticipant,
		Help:      "Internal command. Do not call directly. Creates a collection.",
		Secondary: service.SecondaryNever,
		Writes:    true,
	}
}

// runShardsvrCreateCollectionParticipant creates the collection a shard is about to own
// chunks of with the UUID and options the database's primary shard has, then its indexes
// ({_shardsvrCreateCollectionParticipant: coll, indexes, options, collectionUUID, idIndex,
// primaryShardId}). A collection already there with the same UUID is kept (a retry); one
// with another UUID is refused.
func runShardsvrCreateCollectionParticipant(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_shardsvrCreateCollectionParticipant"
	if _, err := requireShard(env, name); err != nil {
		return nil, err
	}
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	ns, err := ddlCollectionNS(env, cmd)
	if err != nil {
		return nil, err
	}
	st, data, ok := lookup(cmd, "collectionUUID").BinaryOK()
	if !ok || st != 4 || len(data) != 16 {
		return nil, mongoerr.Newf(mongoerr.InvalidUUID, "BSON field '%s.collectionUUID' must be a UUID", name)
	}
	uuid := catalog.UUID(data)
	opts, _ := lookup(cmd, "options").DocumentOK()
	withUUID := bsoncore.NewDocumentBuilder()
	if elems, err := opts.Elements(); err == nil {
		for _, e := range elems {
			if e.Key() != "uuid" {
				withUUID.AppendValue(e.Key(), e.Value())
			}
		}
	}
	withUUID.AppendBinary("uuid", 4, uuid[:])
	createOpts := withUUID.Build()

	op := db.NewOp(ctx)
	err = op.DDL(ctx, ns, func() error {
		if m, ok := db.Catalog.Latest().ByNS(ns); ok {
			if m.UUID == uuid {
				return nil
			}
			return mongoerr.Newf(mongoerr.NamespaceExists,
				"Collection %s already exists on this shard with UUID %s, not %s", ns, m.UUID, uuid)
		}
		return ddlCreateCollection(op, ns, createOpts)
	})
	op.Close()
	if err != nil {
		return nil, err
	}
	if ixs, ok := lookup(cmd, "indexes").ArrayOK(); ok {
		if vals, _ := ixs.Values(); len(vals) > 0 {
			_, coll, _ := strings.Cut(ns, ".")
			create := bsoncore.NewDocumentBuilder().AppendString("createIndexes", coll).AppendArray("indexes", ixs).Build()
			if _, err := internalRunner(env.State, env.Registry)(ctx, env.DB, create); err != nil {
				return nil, err
			}
		}
	}
	return waitMajority(ctx, env, emptyDoc)
}
