package router

// dbStats through the router (MongoDB 7.0's cluster_db_stats_cmd): the command goes to every
// shard; the reply is each shard's answer under raw (keyed by its connection string), the
// database's name, and the shards' figures summed: counts as integers, sizes (already scaled
// by the shards) as doubles, avgObjSize weighted by each shard's objects.

import (
	"context"
	"math"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func dbStatsCommand() *service.Command {
	return &service.Command{
		Name:      "dbStats",
		Auth:      service.AuthOnDB(auth.DbStats),
		Handler:   runRouterDBStats,
		Help:      "Get stats on a database. Not instantaneous. Slower for databases with large .ns files.\nExample: { dbStats:1, scale:1 }",
		Secondary: service.SecondaryAlways,
	}
}

func runRouterDBStats(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	shards, err := c.allShards(ctx)
	if err != nil {
		return nil, err
	}
	q := forward(cmd, nil, nil)
	replies := c.broadcast(ctx, env.DB, shards, func(string) bsoncore.Document { return q })
	raw, err := c.rawResponses(ctx, replies, false)
	if err != nil {
		return nil, err
	}
	var collections, views, objects, indexes int64
	var unscaledData, dataSize, storageSize, totalSize, indexSize, fsUsed, fsTotal float64
	var freeStorage, indexFree, totalFree float64
	for _, sr := range replies {
		r := sr.reply
		n := replyInt(r, "objects")
		collections += replyInt(r, "collections")
		views += replyInt(r, "views")
		objects += n
		indexes += replyInt(r, "indexes")
		unscaledData += replyFloat(r, "avgObjSize") * float64(n)
		dataSize += replyFloat(r, "dataSize")
		storageSize += replyFloat(r, "storageSize")
		totalSize += replyFloat(r, "totalSize")
		indexSize += replyFloat(r, "indexSize")
		fsUsed += replyFloat(r, "fsUsedSize")
		fsTotal += replyFloat(r, "fsTotalSize")
		freeStorage += replyFloat(r, "freeStorageSize")
		indexFree += replyFloat(r, "indexFreeStorageSize")
		totalFree += replyFloat(r, "totalFreeStorageSize")
	}
	withFree := service.Truthy(cmd.Lookup("freeStorage"))
	scale := int64(1)
	if v := cmd.Lookup("scale"); v.Type != 0 {
		if scale, err = service.IntArg("dbStats", "scale", v); err != nil {
			return nil, err
		}
	}
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(raw)+512))
	out = append(out, raw[4:len(raw)-1]...) // raw
	out = bsoncore.AppendStringElement(out, "db", env.DB)
	out = appendLongNumber(out, "collections", collections)
	out = appendLongNumber(out, "views", views)
	out = appendLongNumber(out, "objects", objects)
	avg := 0.0
	if objects > 0 {
		avg = unscaledData / float64(objects)
	}
	out = bsoncore.AppendDoubleElement(out, "avgObjSize", avg)
	out = bsoncore.AppendDoubleElement(out, "dataSize", dataSize)
	out = bsoncore.AppendDoubleElement(out, "storageSize", storageSize)
	if withFree {
		out = bsoncore.AppendDoubleElement(out, "freeStorageSize", freeStorage)
	}
	out = appendLongNumber(out, "indexes", indexes)
	out = bsoncore.AppendDoubleElement(out, "indexSize", indexSize)
	if withFree {
		out = bsoncore.AppendDoubleElement(out, "indexFreeStorageSize", indexFree)
	}
	out = bsoncore.AppendDoubleElement(out, "totalSize", totalSize)
	if withFree {
		out = bsoncore.AppendDoubleElement(out, "totalFreeStorageSize", totalFree)
	}
	out = appendLongNumber(out, "scaleFactor", scale)
	out = bsoncore.AppendDoubleElement(out, "fsUsedSize", fsUsed)
	out = bsoncore.AppendDoubleElement(out, "fsTotalSize", fsTotal)
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out, nil
}

// appendLongNumber is BSONObjBuilder::appendNumber of a long long: an int when it fits.
func appendLongNumber(b []byte, key string, n int64) []byte {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return bsoncore.AppendInt32Element(b, key, int32(n))
	}
	return bsoncore.AppendInt64Element(b, key, n)
}

// replyFloat reads a numeric field of a reply as a double (0 when absent).
func replyFloat(d bsoncore.Document, key string) float64 {
	f, _ := service.AsFloat(d.Lookup(key))
	return f
}
