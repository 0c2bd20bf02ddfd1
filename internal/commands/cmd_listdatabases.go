package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addListDatabases(r *service.Registry) {
	add(r, &service.Command{
		Name:      "listDatabases",
		Handler:   runListDatabases,
		Help:      "{ listDatabases:1, [filter: <filterObject>] [, nameOnly: true ] }\nlist databases on this server",
		AdminOnly: true,
		Secondary: service.SecondaryOptIn,
		// The handler decides what the user sees (service.ListDatabasesFilter).
		Auth: service.AuthAnyUser,
	})
}

// runListDatabases lists the databases that hold at least one collection, sorted by name.
// sizeOnDisk is the sum of the collections' estimated storage and index sizes (see
// ddlCollectionSizes); empty is true when the database holds no documents. The filter is
// matched against {name, sizeOnDisk, empty} (or {name} with nameOnly). A user without
// listDatabases on the cluster sees only the databases it holds a privilege in.
func runListDatabases(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "listDatabases"
	if err := checkStrict(cmd, c, "filter", "nameOnly", "authorizedDatabases"); err != nil {
		return nil, err
	}
	matcher, err := ddlFilterArg(c, cmd)
	if err != nil {
		return nil, err
	}
	nameOnly, err := ddlBoolArg(c, "nameOnly", lookup(cmd, "nameOnly"))
	if err != nil {
		return nil, err
	}
	if _, err := ddlBoolArg(c, "authorizedDatabases", lookup(cmd, "authorizedDatabases")); err != nil {
		return nil, err
	}
	visible, err := service.ListDatabasesFilter(env.Auth, cmd)
	if err != nil {
		return nil, err
	}
	snap := db.Catalog.Latest()
	var entries []bsoncore.Document
	var total int64
	for _, name := range snap.Databases() {
		if err := ddlCheckCtx(ctx); err != nil {
			return nil, err
		}
		if !visible(name) {
			continue
		}
		var size, objects int64
		for _, m := range snap.Collections(name) {
			count, _, storageSize, indexSize, _, _ := ddlCollectionSizes(db, m)
			size += storageSize + indexSize
			objects += count
		}
		entry := doc(func(b []byte) []byte {
			b = bsoncore.AppendStringElement(b, "name", name)
			if nameOnly {
				return b
			}
			b = bsoncore.AppendInt64Element(b, "sizeOnDisk", size)
			return bsoncore.AppendBooleanElement(b, "empty", objects == 0)
		})
		if matcher != nil {
			ok, err := matcher.Matches(entry)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		total += size
		entries = append(entries, entry)
	}
	return doc(func(b []byte) []byte {
		ai, b := bsoncore.AppendArrayElementStart(b, "databases")
		for i, e := range entries {
			b = bsoncore.AppendDocumentElement(b, itoa(int64(i)), e)
		}
		b, _ = bsoncore.AppendArrayEnd(b, ai)
		if !nameOnly {
			b = bsoncore.AppendInt64Element(b, "totalSize", total)
			b = bsoncore.AppendInt64Element(b, "totalSizeMb", total/(1024*1024))
		}
		return b
	}), nil
}
