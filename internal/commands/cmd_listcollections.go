package commands

import (
	"context"
	"sort"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/cursor"
	"humongo/internal/operation"
	"humongo/internal/query"
	"humongo/internal/service"
)

func addListCollections(r *service.Registry) {
	add(r, &service.Command{
		Name:      "listCollections",
		Handler:   runListCollections,
		Help:      "list collections for this db",
		Secondary: service.SecondaryOptIn,
		Auth:      service.AuthListCollections,
	})
}

// runListCollections lists the database's collections ordered by name. Each entry is
// {name, type: "collection", options, info: {readOnly: false, uuid}, idIndex} (idIndex is
// absent for clustered collections), or {name, type} with nameOnly. The filter applies to
// the entries as returned. With authorizedCollections only the collections the user holds
// a privilege on are listed.
func runListCollections(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "listCollections"
	if err := checkStrict(cmd, c, "filter", "nameOnly", "authorizedCollections", "cursor", "includePendingDrops"); err != nil {
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
	if _, err := ddlBoolArg(c, "authorizedCollections", lookup(cmd, "authorizedCollections")); err != nil {
		return nil, err
	}
	batchSize, err := ddlParseCursorOption(c, cmd)
	if err != nil {
		return nil, err
	}
	colls := db.Catalog.Latest().Collections(env.DB)
	sort.Slice(colls, func(i, j int) bool { return colls[i].NS < colls[j].NS })
	entries := make([]bsoncore.Document, 0, len(colls))
	for _, m := range colls {
		entries = append(entries, ddlCollectionEntry(m, nameOnly))
	}
	// Views are listed from <db>.system.views with type "view" (agg_views.go), in name
	// order with the collections.
	views, err := viewList(ctx, env, env.DB, nameOnly)
	if err != nil {
		return nil, err
	}
	if len(views) > 0 {
		entries = append(entries, views...)
		sort.SliceStable(entries, func(i, j int) bool {
			return lookup(entries[i], "name").StringValue() < lookup(entries[j], "name").StringValue()
		})
	}
	var out []bsoncore.Document
	for _, entry := range entries {
		if err := ddlCheckCtx(ctx); err != nil {
			return nil, err
		}
		if !service.ListCollectionVisible(env.Auth, cmd, env.DB, lookup(entry, "name").StringValue()) {
			continue
		}
		if matcher != nil {
			ok, err := matcher.Matches(entry)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, entry)
	}
	return cursorFirstBatch(ctx, env, env.DB+".$cmd.listCollections", cursor.SliceSource(out), batchSize)
}

// ddlCollectionEntry is one listCollections entry.
func ddlCollectionEntry(m *catalog.CollectionMeta, nameOnly bool) bsoncore.Document {
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "name", m.Coll())
		b = bsoncore.AppendStringElement(b, "type", "collection")
		if nameOnly {
			return b
		}
		b = bsoncore.AppendDocumentElement(b, "options", operation.UserOptions(m))
		ii, b := bsoncore.AppendDocumentElementStart(b, "info")
		b = bsoncore.AppendBooleanElement(b, "readOnly", false)
		b = bsoncore.AppendBinaryElement(b, "uuid", 4, m.UUID[:])
		b, _ = bsoncore.AppendDocumentEnd(b, ii)
		if !m.Clustered {
			if ix, ok := m.Index(catalog.IDIndexName); ok {
				b = bsoncore.AppendDocumentElement(b, "idIndex", ix.Spec)
			}
		}
		return b
	})
}

// ddlFilterArg parses an optional `filter` document with the query matcher.
func ddlFilterArg(cmdName string, cmd bsoncore.Document) (*query.Matcher, error) {
	v := lookup(cmd, "filter")
	if v.Type == 0 || v.Type == bsoncore.TypeNull {
		return nil, nil
	}
	f, ok := v.DocumentOK()
	if !ok {
		return nil, typeMismatch(cmdName, "filter", v.Type, "object")
	}
	return query.Parse(f, query.ParseOptions{AllowExpr: true})
}
