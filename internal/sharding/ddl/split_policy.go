package ddl

import (
	"math"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

// MaxInitialChunksPerShard and MaxInitialChunksTotal bound numInitialChunks (7.0's
// shardsvr create collection: 8192 per shard, one million in all).
const (
	MaxInitialChunksPerShard = 8192
	MaxInitialChunksTotal    = 1000 * 1000
)

// SplitParams are InitialSplitPolicy's inputs.
type SplitParams struct {
	Pattern          *shardkey.Pattern
	UUID             catalog.UUID
	Gen              routing.Generation // the new collection's epoch and timestamp (validAfter)
	Primary          string             // the database's primary shard
	Shards           []string           // every shard of the cluster
	NumInitialChunks int64              // 0: the default
	Presplit         bool               // presplitHashedZones
	Empty            bool               // the collection holds no document
	NS               string             // the collection (for messages)
	// Zones are the collection's zone ranges (config.tags, sorted by min) and ZoneShards
	// each zone's shards (zones.go).
	Zones      []configsvr.Zone
	ZoneShards map[string][]string
}

// InitialChunks is 7.0's InitialSplitPolicy::calculateOptimizationStrategy: the zones must
// be ranges of the key (ValidateZones); presplitHashedZones presplits the zone ranges
// (zones.go); an empty collection with zones gets a chunk per zone range and per gap
// (SingleChunkPerTagSplitPolicy, zones.go); without zones, a hashed-prefix key on an empty
// collection gets numInitialChunks chunks (default 2 per shard) cut at evenly spaced hash
// values symmetric around 0, dealt to the shards (sorted by id) in contiguous runs of
// numInitialChunks/numShards; anything else one chunk [MinKey, MaxKey) on the primary.
// Versions are 1|0, 1|1, ... in key order, each chunk with history [{validAfter: the
// collection timestamp, shard}].
func InitialChunks(sp SplitParams) ([]routing.Chunk, error) {
	p := sp.Pattern
	n := sp.NumInitialChunks
	if n < 0 {
		return nil, mongoerr.Newf(mongoerr.InvalidOptions, "numInitialChunks must be a non-negative number, was %d", n)
	}
	if n != 0 && !(p.IsHashed() && sp.Empty) {
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"numInitialChunks is only supported when the collection is empty and has a hashed field in the shard key pattern")
	}
	if n != 0 && !p.IsHashedPrefix() && !sp.Presplit {
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"When the prefix of the hashed shard key is a range field, 'numInitialChunks' can only be used when the 'presplitHashedZones' is true")
	}
	if len(sp.Zones) > 0 {
		if err := ValidateZones(p, sp.Zones); err != nil {
			return nil, err
		}
	}
	shards := append([]string(nil), sp.Shards...)
	sort.Strings(shards)
	if len(shards) == 0 {
		shards = []string{sp.Primary}
	}
	// The bound on numInitialChunks (7.0 checks it with the command's arguments) also bounds
	// the memory the zone presplit takes.
	if n > int64(len(shards))*MaxInitialChunksPerShard || n > MaxInitialChunksTotal {
		return nil, errTooManyChunks(len(shards))
	}
	switch {
	case sp.Presplit:
		return presplitHashedZones(sp, shards)
	case len(sp.Zones) > 0 && sp.Empty:
		return singleChunkPerZone(sp, shards)
	}
	var splitPoints []bsoncore.Document
	contiguous := 1
	if p.IsHashedPrefix() && sp.Empty && len(sp.Zones) == 0 {
		if n == 0 {
			n = 2 * int64(len(shards))
		}
		if n > int64(len(shards))*MaxInitialChunksPerShard || n > MaxInitialChunksTotal {
			return nil, errTooManyChunks(len(shards))
		}
		splitPoints = HashedSplitPoints(p, int(n))
		contiguous = max(int(n)/len(shards), 1)
	} else {
		shards = []string{sp.Primary}
	}
	chunks := make([]routing.Chunk, 0, len(splitPoints)+1)
	v := routing.ChunkVersion{Major: 1, Generation: sp.Gen}
	for i := 0; i <= len(splitPoints); i++ {
		min, max := p.GlobalMin(), p.GlobalMax()
		if i > 0 {
			min = splitPoints[i-1]
		}
		if i < len(splitPoints) {
			max = splitPoints[i]
		}
		shard := shards[(i/contiguous)%len(shards)]
		if i == 0 && len(splitPoints)+1 < len(shards) {
			shard = sp.Primary
		}
		since := sp.Gen.Timestamp
		chunks = append(chunks, routing.Chunk{ID: bson.NewObjectID(), CollectionUUID: sp.UUID, Min: min, Max: max,
			Shard: shard, Version: v, OnCurrentShardSince: &since,
			History: []routing.HistoryEntry{{ValidAfter: sp.Gen.Timestamp, Shard: shard}}})
		v.Minor++
	}
	return chunks, nil
}

func errTooManyChunks(shards int) error {
	return mongoerr.Newf(mongoerr.InvalidOptions,
		"numInitialChunks cannot be more than either: %d, %d * number of shards; or %d",
		int64(shards)*MaxInitialChunksPerShard, MaxInitialChunksPerShard, MaxInitialChunksTotal)
}

// HashedSplitPoints is 7.0's calculateHashedSplitPoints with an empty prefix: n-1 split
// points on the hashed field at multiples of (MaxInt64/n)*2, symmetric around 0, the
// fields after the hashed one MinKey.
func HashedSplitPoints(p *shardkey.Pattern, n int) []bsoncore.Document {
	return hashedSplitPoints(p, nil, n)
}

// hashedSplitPoints is calculateHashedSplitPoints with a prefix: the given elements (the
// fields before the hashed one), then the hashed value, then MinKey.
func hashedSplitPoints(p *shardkey.Pattern, prefix []bsoncore.Element, n int) []bsoncore.Document {
	if n <= 1 {
		return nil
	}
	interval := (int64(math.MaxInt64) / int64(n)) * 2
	build := func(h int64) bsoncore.Document {
		b := bsoncore.NewDocumentBuilder()
		for _, e := range prefix {
			b.AppendValue(e.Key(), e.Value())
		}
		for i, f := range p.Fields() {
			switch {
			case i == p.HashedField():
				b.AppendInt64(f, h)
			case i > p.HashedField():
				b.AppendMinKey(f)
			}
		}
		return b.Build()
	}
	var pts []bsoncore.Document
	var cur int64
	if n%2 == 0 {
		pts = append(pts, build(cur))
		cur += interval
	} else {
		cur += interval / 2
	}
	for i := 0; i < (n-1)/2; i++ {
		pts = append(pts, build(cur), build(-cur))
		cur += interval
	}
	sort.Slice(pts, func(i, j int) bool { return bsonutil.CompareDocuments(pts[i], pts[j]) < 0 })
	return pts
}
