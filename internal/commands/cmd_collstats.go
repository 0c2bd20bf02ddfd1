package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/catalog"
	"humongo/internal/operation"
	"humongo/internal/service"
)

func addCollStats(r *service.Registry) {
	add(r, &service.Command{
		Name:      "collStats",
		Auth:      service.AuthOnNS(auth.CollStats),
		Aliases:   []string{"collstats"},
		Handler:   runCollStats,
		Help:      "{ collStats:\"blog.posts\" , scale : 1 } scale divides sizes e.g. for KB use 1024\n    avgObjSize - in bytes",
		Secondary: service.SecondaryAlways,
	})
}

// runCollStats reports a collection's size and index sizes (deprecated in MongoDB but still
// used by tools). Sizes as in dbStats: counts and data size exact, storage and index sizes
// estimated; numbers use MongoDB's appendNumber typing (int32 when small).
func runCollStats(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "collStats"
	ns, err := ddlCollectionNS(env, cmd)
	if err != nil {
		return nil, err
	}
	if err := checkStrict(cmd, c, "scale", "verbose", "waitForLock"); err != nil {
		return nil, err
	}
	scale, err := ddlScaleArg(c, cmd)
	if err != nil {
		return nil, err
	}
	op := db.NewOp(ctx)
	defer op.Close()
	m, _, release, err := op.ReadCollection(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer release()
	if m == nil {
		// MongoDB 7.0's collStats answers ok with zero statistics for a missing collection
		// (appendCollectionStorageStats fills them in and the command ignores its
		// NamespaceNotFound).
		return doc(func(b []byte) []byte {
			b = bsoncore.AppendStringElement(b, "ns", ns)
			for _, k := range []string{"size", "count", "numOrphanDocs", "storageSize", "totalSize", "nindexes", "totalIndexSize"} {
				b = bsoncore.AppendInt32Element(b, k, 0)
			}
			b = bsoncore.AppendDocumentElement(b, "indexDetails", bsoncore.NewDocumentBuilder().Build())
			b = bsoncore.AppendDocumentElement(b, "indexSizes", bsoncore.NewDocumentBuilder().Build())
			return bsoncore.AppendInt32Element(b, "scaleFactor", int32(min(scale, 1<<31-1)))
		}), nil
	}
	count, data, storage, idxTotal, names, sizes := ddlCollectionSizes(db, m)
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "ns", ns)
		b = ddlAppendNumber(b, "size", data/scale)
		b = ddlAppendNumber(b, "count", count)
		if count > 0 {
			b = ddlAppendNumber(b, "avgObjSize", data/count)
		}
		b = ddlAppendNumber(b, "numOrphanDocs", 0)
		b = ddlAppendNumber(b, "storageSize", storage/scale)
		b = ddlAppendNumber(b, "freeStorageSize", 0)
		b = bsoncore.AppendBooleanElement(b, "capped", m.Capped)
		if m.Capped {
			b = appendCappedLimits(b, db, m, scale)
		}
		b = bsoncore.AppendInt32Element(b, "nindexes", int32(len(names)))
		ai, b := bsoncore.AppendArrayElementStart(b, "indexBuilds")
		n := 0
		for i := range m.Indexes {
			if !m.Indexes[i].Ready {
				b = bsoncore.AppendStringElement(b, itoa(int64(n)), m.Indexes[i].Name)
				n++
			}
		}
		b, _ = bsoncore.AppendArrayEnd(b, ai)
		b = ddlAppendNumber(b, "totalIndexSize", idxTotal/scale)
		b = ddlAppendNumber(b, "totalSize", (storage+idxTotal)/scale)
		di, b := bsoncore.AppendDocumentElementStart(b, "indexSizes")
		for i, name := range names {
			b = ddlAppendNumber(b, name, sizes[i]/scale)
		}
		b, _ = bsoncore.AppendDocumentEnd(b, di)
		return bsoncore.AppendInt32Element(b, "scaleFactor", int32(min(scale, 1<<31-1)))
	}), nil
}

// appendCappedLimits appends a capped collection's max (documents) and maxSize (bytes /
// scale). The oplog's cap lives in the storage engine (--oplogSize, replSetResizeOplog), not
// in its options; rs.printReplicationInfo() reads it as maxSize.
func appendCappedLimits(b []byte, db *operation.DB, m *catalog.CollectionMeta, scale int64) []byte {
	if v := lookup(m.Options, "max"); v.Type != 0 {
		n, _ := v.AsInt64OK()
		b = ddlAppendNumber(b, "max", n)
	}
	if n := db.Engine.OplogMaxSize(m.Ident); n > 0 {
		b = ddlAppendNumber(b, "maxSize", n/scale)
	} else if v := lookup(m.Options, "size"); v.Type != 0 {
		n, _ := v.AsInt64OK()
		b = ddlAppendNumber(b, "maxSize", n/scale)
	}
	return b
}
