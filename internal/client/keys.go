package client

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/optime"
	"humongo/internal/vclock"
)

// FindSigningKeys reads the cluster-time signing keys that expire after t from a config
// server replica set (a shard's and a router's key source), at majority, from the nearest
// member (MongoDB's config reads' selector). Keys are few (one per rotation interval), so
// one batch holds them.
func FindSigningKeys(ctx context.Context, rs *ReplicaSet, t optime.Timestamp) ([]vclock.Key, error) {
	cmd := bson.D{{Key: "find", Value: "system.keys"},
		{Key: "filter", Value: bson.Raw(vclock.KeysFilter(t))},
		{Key: "sort", Value: bson.D{{Key: "expiresAt", Value: 1}}},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}},
		{Key: "batchSize", Value: 10000}, {Key: "singleBatch", Value: true}}
	raw, err := rs.RunCommand(ctx, "admin", cmd, readpref.Nearest())
	if err != nil {
		return nil, err
	}
	batch, _ := bsoncore.Document(raw).Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := batch.Values()
	docs := make([]bsoncore.Document, 0, len(vals))
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			docs = append(docs, d)
		}
	}
	return vclock.ParseKeys(docs), nil
}
