package ddl

// Zones in shardCollection (spec: sharding.md "Sharding a collection"; MongoDB 7.0's
// CreateCollectionCoordinator::_createPolicy, getTagsAndValidate,
// validateShardKeyAgainstExistingZones and InitialSplitPolicy's tag-based policies): the
// collection's config.tags ranges, read from the config server before the initial chunks are
// made, must be ranges of the proposed shard key; an empty collection then gets a chunk per
// zone range on a shard of that zone (round robin among the zone's shards) and a chunk per
// gap between ranges (round robin over all shards, sorted by id), or with
// presplitHashedZones each zone range presplit at hashed values over the zone's shards.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

// LoadZones reads ns's zone ranges from config.tags (sorted by min) and, when there are
// any, each zone's shards from config.shards (in the catalog's order), both at majority
// read concern, as 7.0's getTagsForCollection and buildTagsToShardIdsMap do.
func LoadZones(ctx context.Context, remote *Remote, ns string) ([]configsvr.Zone, map[string][]string, error) {
	majority := bsoncore.NewDocumentBuilder().AppendString("level", "majority").Build()
	find := func(coll string, filter, sort bsoncore.Document) ([]bsoncore.Document, error) {
		b := bsoncore.NewDocumentBuilder().AppendString("find", coll).AppendDocument("filter", filter)
		if sort != nil {
			b.AppendDocument("sort", sort)
		}
		cmd := b.AppendDocument("readConcern", majority).Build()
		return cursorAll(ctx, func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
			return Run(ctx, remote.Config(), db, cmd)
		}, "config", coll, cmd)
	}
	docs, err := find("tags", bsoncore.NewDocumentBuilder().AppendString("ns", ns).Build(),
		bsoncore.NewDocumentBuilder().AppendInt32("min", 1).Build())
	if err != nil {
		return nil, nil, err
	}
	if len(docs) == 0 {
		return nil, nil, nil
	}
	zones := make([]configsvr.Zone, 0, len(docs))
	for _, d := range docs {
		z, err := configsvr.ParseZone(d)
		if err != nil {
			return nil, nil, err
		}
		zones = append(zones, z)
	}
	shardDocs, err := find("shards", bsoncore.NewDocumentBuilder().Build(), nil)
	if err != nil {
		return nil, nil, err
	}
	zoneShards := map[string][]string{}
	for _, d := range shardDocs {
		id, _ := d.Lookup("_id").StringValueOK()
		tags, _ := d.Lookup("tags").ArrayOK()
		vals, _ := tags.Values()
		for _, v := range vals {
			if t, ok := v.StringValueOK(); ok && id != "" {
				zoneShards[t] = append(zoneShards[t], id)
			}
		}
	}
	return zones, zoneShards, nil
}

// ValidateZones is validateShardKeyAgainstExistingZones: every zone range's bounds have the
// proposed key's fields, in order, and a hashed field's bounds are NumberLong, MinKey or
// MaxKey.
func ValidateZones(p *shardkey.Pattern, zones []configsvr.Zone) error {
	key := p.Doc()
	proposed, _ := key.Elements()
	for _, z := range zones {
		mins, _ := z.Min.Elements()
		maxs, _ := z.Max.Elements()
		for i := 0; i < len(mins) && i < len(proposed); i++ {
			if i >= len(maxs) || mins[i].Key() != maxs[i].Key() {
				return mongoerr.Newf(mongoerr.InvalidOptions, "the min and max of the existing zone %s -->> %s have non-matching keys",
					bsonutil.FormatDoc(z.Min), bsonutil.FormatDoc(z.Max))
			}
			last := i+1 == len(mins)
			if mins[i].Key() != proposed[i].Key() || last != (i+1 == len(proposed)) {
				return mongoerr.Newf(mongoerr.InvalidOptions, "the proposed shard key %s does not match with the shard key of the existing zone %s -->> %s",
					bsonutil.FormatDoc(key), bsonutil.FormatDoc(z.Min), bsonutil.FormatDoc(z.Max))
			}
			if i == p.HashedField() && (!validHashedBound(mins[i].Value()) || !validHashedBound(maxs[i].Value())) {
				return mongoerr.Newf(mongoerr.InvalidOptions,
					"cannot do hash sharding with the proposed key %s because there exists a zone %s -->> %s whose boundaries are not of type NumberLong, MinKey or MaxKey",
					bsonutil.FormatDoc(key), bsonutil.FormatDoc(z.Min), bsonutil.FormatDoc(z.Max))
			}
		}
	}
	return nil
}

func validHashedBound(v bsoncore.Value) bool {
	return v.Type == bsoncore.TypeInt64 || v.Type == bsoncore.TypeMinKey || v.Type == bsoncore.TypeMaxKey
}

// zoneChunks is AbstractTagsBasedSplitPolicy::createFirstChunks: the zone ranges in key
// order, each split by split (SingleChunkPerTagSplitPolicy: one chunk on the zone's next
// shard; PresplitHashedZonesSplitPolicy: hashed split points over the zone's shards), and a
// chunk for every gap before, between and after them on the next of all shards (sorted),
// round robin. shards is the cluster's shards, sorted.
func zoneChunks(sp SplitParams, shards []string, split func(z configsvr.Zone) ([]bsoncore.Document, []shardCount)) ([]routing.Chunk, error) {
	p := sp.Pattern
	var b chunkBuilder
	b.init(sp)
	hole := 0
	nextHole := func() string {
		s := shards[hole%len(shards)]
		hole++
		return s
	}
	last := p.GlobalMin()
	for _, z := range sp.Zones {
		if bsonutil.CompareDocuments(z.Min, last) > 0 {
			b.add(last, z.Min, nextHole())
		}
		if len(sp.ZoneShards[z.Name]) == 0 {
			return nil, mongoerr.Newf(mongoerr.Location50973,
				"Cannot shard collection %s due to zone %s which is not assigned to a shard. Please assign this zone to a shard.", sp.NS, z.Name)
		}
		points, dist := split(z)
		i := 0
		for _, d := range dist {
			for range d.n {
				min, max := z.Min, z.Max
				if i > 0 {
					min = points[i-1]
				}
				if i < len(points) {
					max = points[i]
				}
				b.add(min, max, d.shard)
				i++
			}
		}
		last = z.Max
	}
	if bsonutil.CompareDocuments(last, p.GlobalMax()) < 0 {
		b.add(last, p.GlobalMax(), nextHole())
	}
	return b.chunks, nil
}

// shardCount is a number of consecutive chunks of a zone range for one shard.
type shardCount struct {
	shard string
	n     int
}

// singleChunkPerZone is SingleChunkPerTagSplitPolicy: each zone range is one chunk, on the
// zone's shards in turn.
func singleChunkPerZone(sp SplitParams, shards []string) ([]routing.Chunk, error) {
	next := map[string]int{}
	return zoneChunks(sp, shards, func(z configsvr.Zone) ([]bsoncore.Document, []shardCount) {
		zs := sp.ZoneShards[z.Name]
		s := zs[next[z.Name]%len(zs)]
		next[z.Name]++
		return nil, []shardCount{{shard: s, n: 1}}
	})
}

// presplitHashedZones is PresplitHashedZonesSplitPolicy: after validating the zones
// (_validate), each zone range is cut at hashed split points into ceil(chunksPerShard /
// zonesOfShard) consecutive chunks for each of its shards, where chunksPerShard is
// ceil(numInitialChunks / shardsWithZones) and numInitialChunks defaults to twice the
// number of shards that have zones.
func presplitHashedZones(sp SplitParams, shards []string) ([]routing.Chunk, error) {
	p := sp.Pattern
	if !sp.Empty || len(sp.Zones) == 0 || !p.IsHashed() {
		return nil, mongoerr.New(mongoerr.Location31387,
			"'presplitHashedZones' is only supported when the collection is empty, zones are set up and shard key pattern has a hashed field")
	}
	if p.IsHashedPrefix() {
		if len(sp.Zones) != 1 || bsonutil.CompareDocuments(sp.Zones[0].Min, p.GlobalMin()) != 0 ||
			bsonutil.CompareDocuments(sp.Zones[0].Max, p.GlobalMax()) != 0 {
			return nil, mongoerr.New(mongoerr.Location31412,
				"For hashed prefix shard keys, 'presplitHashedZones' is only supported when there is a single zone defined which covers entire shard key range")
		}
	} else {
		for _, z := range sp.Zones {
			if err := checkPresplitZone(p, z); err != nil {
				return nil, err
			}
		}
	}
	zonesPerShard := map[string]int{}
	for _, z := range sp.Zones {
		for _, s := range sp.ZoneShards[z.Name] {
			zonesPerShard[s]++
		}
	}
	if len(zonesPerShard) == 0 {
		// Every zone is without shards: the first one is refused by zoneChunks.
		return zoneChunks(sp, shards, nil)
	}
	n := sp.NumInitialChunks
	if n == 0 {
		n = int64(len(zonesPerShard)) * 2
	}
	ceil := func(x, y int64) int64 { return x/y + min(x%y, 1) }
	perShard := ceil(n, int64(len(zonesPerShard)))
	return zoneChunks(sp, shards, func(z configsvr.Zone) ([]bsoncore.Document, []shardCount) {
		var dist []shardCount
		total := 0
		for _, s := range sp.ZoneShards[z.Name] {
			c := int(ceil(perShard, int64(zonesPerShard[s])))
			dist = append(dist, shardCount{shard: s, n: c})
			total += c
		}
		// The fields before the hashed one, from the zone's lower bound.
		var prefix []bsoncore.Element
		elems, _ := z.Min.Elements()
		for _, e := range elems {
			if e.Key() == p.Fields()[p.HashedField()] {
				break
			}
			prefix = append(prefix, e)
		}
		return hashedSplitPoints(p, prefix, total), dist
	})
}

// checkPresplitZone is the per-zone part of PresplitHashedZonesSplitPolicy::_validate for a
// key whose prefix is a range field: the lower bound's prefix fields are not MinKey or
// MaxKey, at least one differs from the upper bound's, the hashed field and the fields after
// it are MinKey in the lower bound.
func checkPresplitZone(p *shardkey.Pattern, z configsvr.Zone) error {
	mins, _ := z.Min.Elements()
	maxs, _ := z.Max.Elements()
	h := p.HashedField()
	different := false
	for i := 0; i < h; i++ {
		t := mins[i].Value().Type
		if t == bsoncore.TypeMinKey || t == bsoncore.TypeMaxKey {
			return mongoerr.Newf(mongoerr.Location31388,
				"One or more zones are not defined in a manner that supports hashed pre-splitting. Cannot have MinKey or MaxKey in the lower bound for fields preceding the hashed field but found one, for zone %s", z.Name)
		}
		if bsonutil.Compare(mins[i].Value(), maxs[i].Value()) != 0 {
			different = true
		}
	}
	if !different {
		return mongoerr.Newf(mongoerr.Location31390,
			"One or more zones are not defined in a manner that supports hashed pre-splitting. The value preceding hashed field of the upper bound should be greater than that of lower bound, for zone %s", z.Name)
	}
	if mins[h].Value().Type != bsoncore.TypeMinKey {
		return mongoerr.Newf(mongoerr.Location31389,
			"One or more zones are not defined in a manner that supports hashed pre-splitting. The hashed field value for lower bound must be MinKey, for zone %s", z.Name)
	}
	for _, e := range mins[h+1:] {
		if e.Value().Type != bsoncore.TypeMinKey {
			return mongoerr.Newf(mongoerr.Location31391,
				"One or more zones are not defined in a manner that supports hashed pre-splitting. The fields after the hashed field must have MinKey value, for zone %s", z.Name)
		}
	}
	return nil
}

// chunkBuilder appends chunks with versions 1|0, 1|1, ... and history [{validAfter: the
// collection timestamp, shard}] (7.0's appendChunk).
type chunkBuilder struct {
	sp     SplitParams
	v      routing.ChunkVersion
	chunks []routing.Chunk
}

func (b *chunkBuilder) init(sp SplitParams) {
	b.sp = sp
	b.v = routing.ChunkVersion{Major: 1, Generation: sp.Gen}
}

func (b *chunkBuilder) add(min, max bsoncore.Document, shard string) {
	since := b.sp.Gen.Timestamp
	b.chunks = append(b.chunks, routing.Chunk{ID: bson.NewObjectID(), CollectionUUID: b.sp.UUID, Min: min, Max: max,
		Shard: shard, Version: b.v, OnCurrentShardSince: &since,
		History: []routing.HistoryEntry{{ValidAfter: b.sp.Gen.Timestamp, Shard: shard}}})
	b.v.Minor++
}
