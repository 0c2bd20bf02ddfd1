package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ShardLocator is a Store over a sharded collection that can say which shard holds each
// record: Config.CrossShard needs one to tell single-shard transactions from cross-shard ones.
type ShardLocator interface {
	// LocateShards makes the records keys span at least two shards (splitting their range at
	// the median key and moving the upper part away if one shard holds them all) and returns
	// the shard of each key.
	LocateShards(ctx context.Context, keys []string) (map[string]string, error)
}

// shardChunk is a config.chunks entry: [Min, Max) of _id on Shard.
type shardChunk struct {
	Min   bson.Raw `bson:"min"`
	Max   bson.Raw `bson:"max"`
	Shard string   `bson:"shard"`
}

// LocateShards implements ShardLocator for a collection sharded on {_id: 1} through a router
// (MongoOptions.ShardKey "range"): the record keys are strings, placed by the chunk ranges in
// config.chunks.
func (s *MongoStore) LocateShards(ctx context.Context, keys []string) (map[string]string, error) {
	if len(keys) < 2 {
		return nil, fmt.Errorf("cross-shard transactions need at least 2 records, got %d", len(keys))
	}
	where, chunks, err := s.locate(ctx, keys)
	if err != nil {
		return nil, err
	}
	if distinctShards(where) >= 2 {
		return where, nil
	}
	var shards []struct {
		ID string `bson:"_id"`
	}
	cur, err := s.client.Database("config").Collection("shards").Find(ctx, bson.D{})
	if err == nil {
		err = cur.All(ctx, &shards)
	}
	if err != nil {
		return nil, fmt.Errorf("config.shards: %w", err)
	}
	owner := where[keys[0]]
	var to string
	for _, sh := range shards {
		if sh.ID != owner && (to == "" || sh.ID < to) {
			to = sh.ID
		}
	}
	if to == "" {
		return nil, fmt.Errorf("cross-shard transactions need a cluster of at least 2 shards, this one has %d", len(shards))
	}
	// Split at the median key (unless a chunk starts there already) and move the chunk that
	// starts there: about half the records move. _waitForDelete: the donor is clean when the
	// measurement starts, its range deletion not competing with it.
	sorted := slices.Sorted(slices.Values(keys))
	mid := sorted[len(sorted)/2]
	ns := s.coll.Database().Name() + "." + s.coll.Name()
	if !slices.ContainsFunc(chunks, func(c shardChunk) bool { return compareBound(c.Min.Lookup("_id"), mid) == 0 }) {
		if err := s.admin.RunCommand(ctx, bson.D{{Key: "split", Value: ns}, {Key: "middle", Value: bson.D{{Key: "_id", Value: mid}}}}).Err(); err != nil {
			return nil, fmt.Errorf("split %s at %q: %w", ns, mid, err)
		}
	}
	if err := s.admin.RunCommand(ctx, bson.D{{Key: "moveChunk", Value: ns}, {Key: "find", Value: bson.D{{Key: "_id", Value: mid}}},
		{Key: "to", Value: to}, {Key: "_waitForDelete", Value: true}}).Err(); err != nil {
		return nil, fmt.Errorf("move the chunk of %s at %q to %s: %w", ns, mid, to, err)
	}
	if where, _, err = s.locate(ctx, keys); err != nil {
		return nil, err
	}
	if distinctShards(where) < 2 {
		return nil, fmt.Errorf("%s: the records are still on one shard after moving the chunk at %q to %s", ns, mid, to)
	}
	return where, nil
}

// locate maps each key to its shard by the collection's chunks, which it returns too.
func (s *MongoStore) locate(ctx context.Context, keys []string) (map[string]string, []shardChunk, error) {
	ns := s.coll.Database().Name() + "." + s.coll.Name()
	config := s.client.Database("config")
	var coll struct {
		UUID bson.Binary `bson:"uuid"`
		Key  bson.D      `bson:"key"`
	}
	if err := config.Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Decode(&coll); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			err = errors.New("not in config.collections")
		}
		return nil, nil, fmt.Errorf("%s is not sharded: %w", ns, err)
	}
	if len(coll.Key) != 1 || coll.Key[0].Key != "_id" || coll.Key[0].Value == "hashed" {
		return nil, nil, fmt.Errorf("%s is sharded on %v: cross-shard transactions place records by _id ranges (shard it with --shard-key range)", ns, coll.Key)
	}
	var chunks []shardChunk
	cur, err := config.Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: coll.UUID}}, options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
	if err == nil {
		err = cur.All(ctx, &chunks)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("config.chunks of %s: %w", ns, err)
	}
	where := make(map[string]string, len(keys))
	for _, k := range keys {
		i := slices.IndexFunc(chunks, func(c shardChunk) bool {
			return compareBound(c.Min.Lookup("_id"), k) <= 0 && compareBound(c.Max.Lookup("_id"), k) > 0
		})
		if i < 0 {
			return nil, nil, fmt.Errorf("%s: no chunk holds _id %q", ns, k)
		}
		where[k] = chunks[i].Shard
	}
	return where, chunks, nil
}

// compareBound compares a chunk bound on _id with the string key k in BSON order: MinKey,
// numbers and null below every string, strings by their bytes, MaxKey and the other types
// above.
func compareBound(b bson.RawValue, k string) int {
	switch b.Type {
	case bson.TypeMinKey, bson.TypeNull, bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		return -1
	case bson.TypeString, bson.TypeSymbol:
		s, _ := b.StringValueOK()
		switch {
		case s < k:
			return -1
		case s > k:
			return 1
		}
		return 0
	}
	return 1
}

func distinctShards(where map[string]string) int {
	seen := map[string]bool{}
	for _, s := range where {
		seen[s] = true
	}
	return len(seen)
}
