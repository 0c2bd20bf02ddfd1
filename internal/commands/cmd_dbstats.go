package commands

import (
	"context"
	"syscall"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addDbStats(r *service.Registry) {
	add(r, &service.Command{
		Name:      "dbStats",
		Auth:      service.AuthOnDB(auth.DbStats),
		Aliases:   []string{"dbstats"},
		Handler:   runDBStats,
		Help:      "Get stats on a database. Not instantaneous. Slower for databases with large .ns files.\nExample: { dbStats:1, scale:1 }",
		Secondary: service.SecondaryAlways,
	})
}

// runDBStats reports the database's collections, documents and sizes. Counts come from the
// fast counts; storage and index sizes are estimates (see ddlCollectionSizes); fsUsedSize and
// fsTotalSize describe the file system holding the data directory.
func runDBStats(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "dbStats"
	if err := checkStrict(cmd, c, "scale", "freeStorage"); err != nil {
		return nil, err
	}
	if !catalog.ValidDBName(env.DB) {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid db name: %s", env.DB)
	}
	scale, err := ddlScaleArg(c, cmd)
	if err != nil {
		return nil, err
	}
	freeStorage, err := ddlBoolArg(c, "freeStorage", lookup(cmd, "freeStorage"))
	if err != nil {
		return nil, err
	}
	var colls, objects, dataSize, storageSize, indexes, indexSize int64
	for _, m := range db.Catalog.Latest().Collections(env.DB) {
		if err := ddlCheckCtx(ctx); err != nil {
			return nil, err
		}
		count, data, storage, idx, names, _ := ddlCollectionSizes(db, m)
		colls++
		objects += count
		dataSize += data
		storageSize += storage
		indexes += int64(len(names))
		indexSize += idx
	}
	var fsUsed, fsTotal float64
	var st syscall.Statfs_t
	if err := syscall.Statfs(ddlDBPath(db), &st); err == nil {
		fsTotal = float64(st.Blocks) * float64(st.Bsize)
		fsUsed = fsTotal - float64(st.Bfree)*float64(st.Bsize)
	}
	sc := float64(scale)
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "db", env.DB)
		b = bsoncore.AppendInt64Element(b, "collections", colls)
		b = bsoncore.AppendInt64Element(b, "views", 0)
		b = bsoncore.AppendInt64Element(b, "objects", objects)
		avg := 0.0
		if objects > 0 {
			avg = float64(dataSize) / float64(objects)
		}
		b = bsoncore.AppendDoubleElement(b, "avgObjSize", avg)
		b = bsoncore.AppendDoubleElement(b, "dataSize", float64(dataSize)/sc)
		b = bsoncore.AppendDoubleElement(b, "storageSize", float64(storageSize)/sc)
		// {freeStorage: 1} adds the free-space figures, as in mongod. Storage here is
		// estimated from live data (ddlCollectionSizes), so it holds no reusable free space:
		// the figures are 0 by construction, not by default.
		if freeStorage {
			b = bsoncore.AppendDoubleElement(b, "freeStorageSize", 0)
		}
		b = bsoncore.AppendInt64Element(b, "indexes", indexes)
		b = bsoncore.AppendDoubleElement(b, "indexSize", float64(indexSize)/sc)
		if freeStorage {
			b = bsoncore.AppendDoubleElement(b, "indexFreeStorageSize", 0)
		}
		b = bsoncore.AppendDoubleElement(b, "totalSize", float64(storageSize+indexSize)/sc)
		if freeStorage {
			b = bsoncore.AppendDoubleElement(b, "totalFreeStorageSize", 0)
		}
		b = bsoncore.AppendInt64Element(b, "scaleFactor", scale)
		b = bsoncore.AppendDoubleElement(b, "fsUsedSize", fsUsed/sc)
		return bsoncore.AppendDoubleElement(b, "fsTotalSize", fsTotal/sc)
	}), nil
}

// ddlScaleArg parses the optional `scale` argument (>= 1, default 1).
func ddlScaleArg(cmdName string, cmd bsoncore.Document) (int64, error) {
	v := lookup(cmd, "scale")
	if v.Type == 0 {
		return 1, nil
	}
	n, err := ddlSafeLong(cmdName, "scale", v)
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, mongoerr.Newf(mongoerr.Location51024, "BSON field 'scale' value must be >= 1, actual value '%d'", n)
	}
	return n, nil
}
