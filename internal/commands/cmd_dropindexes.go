package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addDropIndexes(r *service.Registry) {
	add(r, &service.Command{
		Name:    "dropIndexes",
		Auth:    service.AuthOnNS(auth.DropIndex),
		Aliases: []string{"deleteIndexes"},
		Handler: runDropIndexes,
		Help:    "drop indexes for a collection",
		Writes:  true,
	})
}

// runDropIndexes drops indexes by name, by key pattern, "*" (every index but _id) or a list of
// names, all in one unit: either every named index is dropped or none. Reply {nIndexesWas}.
func runDropIndexes(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "dropIndexes"
	ns, err := ddlCollectionNS(env, cmd)
	if err != nil {
		return nil, err
	}
	if err := checkStrict(cmd, c, "index", "collectionUUID"); err != nil {
		return nil, err
	}
	iv := lookup(cmd, "index")
	if iv.Type == 0 {
		return nil, mongoerr.New(codeMissingField, "BSON field 'dropIndexes.index' is missing but a required field")
	}
	switch iv.Type {
	case bsoncore.TypeString, bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
	default:
		return nil, typeMismatch(c, "index", iv.Type, "string", "object", "array")
	}
	op := db.NewOp(ctx)
	defer op.Close()
	var was int
	err = op.DDL(ctx, ns, func() error {
		m, ok := db.Catalog.Latest().ByNS(ns)
		if !ok {
			return mongoerr.Newf(mongoerr.NamespaceNotFound, "ns not found %s", ns)
		}
		if v := lookup(cmd, "collectionUUID"); v.Type != 0 {
			if err := ddlCheckCollectionUUID(v, m); err != nil {
				return err
			}
		}
		was = len(ddlIndexSpecs(m))
		names, err := ddlIndexesToDrop(m, iv)
		if err != nil {
			return err
		}
		for _, n := range names {
			if ix, ok := m.Index(n); ok {
				if err := db.Observer().OnDropIndex(op.RU, ns, m.UUID, n, ix.Spec); err != nil {
					return err
				}
			}
			if err := db.Catalog.DropIndex(op.RU, ns, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return doc(func(b []byte) []byte { return bsoncore.AppendInt32Element(b, "nIndexesWas", int32(was)) }), nil
}

// ddlIndexesToDrop resolves dropIndexes' `index` argument to index names.
func ddlIndexesToDrop(m *catalog.CollectionMeta, iv bsoncore.Value) ([]string, error) {
	byName := func(name string) (string, error) {
		if name == catalog.IDIndexName || (m.Clustered && name == ddlClusteredName(m)) {
			return "", mongoerr.New(mongoerr.InvalidOptions, "cannot drop _id index")
		}
		if _, ok := m.Index(name); !ok {
			return "", mongoerr.Newf(mongoerr.IndexNotFound, "index not found with name [%s]", name)
		}
		return name, nil
	}
	switch iv.Type {
	case bsoncore.TypeString:
		if iv.StringValue() == "*" {
			var out []string
			for i := range m.Indexes {
				if !m.Indexes[i].IsIDIndex() {
					out = append(out, m.Indexes[i].Name)
				}
			}
			return out, nil
		}
		n, err := byName(iv.StringValue())
		if err != nil {
			return nil, err
		}
		return []string{n}, nil
	case bsoncore.TypeEmbeddedDocument:
		kp := iv.Document()
		if ddlIsIDKey(iv) {
			if f, _ := service.AsFloat(lookup(kp, "_id")); f == 1 {
				return nil, mongoerr.New(mongoerr.InvalidOptions, "cannot drop _id index")
			}
		}
		var found []string
		for i := range m.Indexes {
			if m.Indexes[i].KeyPattern.String() == kp.String() {
				found = append(found, m.Indexes[i].Name)
			}
		}
		switch len(found) {
		case 0:
			return nil, mongoerr.Newf(mongoerr.IndexNotFound, "can't find index with key: %s", kp)
		case 1:
			return found, nil
		}
		return nil, mongoerr.Newf(mongoerr.AmbiguousIndexKeyPattern,
			"%d indexes found for key: %s, identify by name instead. Conflicting indexes: %v", len(found), kp, found)
	default:
		vals, err := iv.Array().Values()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid index list: %v", err)
		}
		var out []string
		for _, v := range vals {
			s, ok := v.StringValueOK()
			if !ok {
				return nil, typeMismatch("dropIndexes", "index", v.Type, "string")
			}
			if s == "*" {
				return nil, mongoerr.New(mongoerr.BadValue, "'*' cannot be used in a list of index names")
			}
			n, err := byName(s)
			if err != nil {
				return nil, err
			}
			out = append(out, n)
		}
		return out, nil
	}
}

// ddlClusteredName is the clustered index's name (clusteredIndex.name, default "_id_").
func ddlClusteredName(m *catalog.CollectionMeta) string {
	n, _ := lookup(ddlClusteredSpec(m), "name").StringValueOK()
	return n
}
