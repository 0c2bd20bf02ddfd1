package balancer

// The balancer policy (MongoDB 7.0's BalancerPolicy::balance, _singleZoneBalanceBasedOnDataSize,
// _getLeastLoadedReceiverShard, _getMostOverloadedShard, ZoneInfo::getZoneForChunk and the
// chunk selection policy's getSplitCandidatesToEnforceZoneRanges). Pure: it reads a
// collection's distribution and the cluster's shards and returns what to do; it does no IO.

import (
	"fmt"
	"slices"
	"sort"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// Shard is one shard's statistics for the policy (MongoDB's ShardStatistics): its id,
// whether it is draining (removeShard) and its zones.
type Shard struct {
	ID       string
	Draining bool
	Zones    []string
}

func (s Shard) inZone(zone string) bool { return slices.Contains(s.Zones, zone) }

// Chunk is one chunk of the collection: [Min, Max) on Shard.
type Chunk struct {
	Min, Max bsoncore.Document
	Shard    string
	Jumbo    bool
}

// ZoneRange is a config.tags range with bounds extended to the full shard key.
type ZoneRange struct {
	Min, Max bsoncore.Document
	Zone     string
}

// Distribution is one collection's state for a round (MongoDB's DistributionStatus with the
// CollectionDataSizeInfoForBalancing): its chunks in key order tiling the key space, its
// zone ranges sorted by Min without overlaps, and the collection's data size on each shard
// in bytes as the shards report it (_shardsvrGetStatsForBalancing; a shard without an entry
// has no statistics this round and is neither donor nor recipient for balancing).
type Distribution struct {
	NS                string
	Chunks            []Chunk
	Zones             []ZoneRange
	DataSize          map[string]int64
	MaxChunkSizeBytes int64
}

// Reason is why a migration was chosen (MongoDB's MigrationReason), also the
// firstComplianceViolation of balancerCollectionStatus.
type Reason int

const (
	ReasonNone Reason = iota
	ReasonDrain
	ReasonZoneViolation
	ReasonChunksImbalance
)

// String is the balancerCollectionStatus spelling.
func (r Reason) String() string {
	switch r {
	case ReasonDrain:
		return "draining"
	case ReasonZoneViolation:
		return "zoneViolation"
	case ReasonChunksImbalance:
		return "chunksImbalance"
	}
	return ""
}

// Migration is one chunk to move (MongoDB's MigrateInfo).
type Migration struct {
	NS       string
	From, To string
	Min, Max bsoncore.Document
	// ForceJumbo: the move may not fail for the chunk's size (always off draining shards,
	// otherwise the balancer's attemptToBalanceJumboChunks).
	ForceJumbo bool
	Reason     Reason
}

func (m Migration) String() string {
	return fmt.Sprintf("%s: [%s, %s), from %s, to %s", m.NS, bsonutil.FormatDoc(m.Min), bsonutil.FormatDoc(m.Max), m.From, m.To)
}

// Split is one chunk to split at zone boundaries (MongoDB's SplitInfo).
type Split struct {
	NS       string
	Shard    string
	Min, Max bsoncore.Document
	Points   []bsoncore.Document
}

// Knobs deliberately break the policy; only the simulation sets them, to prove that its
// checker catches a policy that is wrong.
type Knobs struct {
	// ReuseShards keeps donor and recipient available after a migration is chosen, so a
	// shard can be in two migrations of one round.
	ReuseShards bool
	// IgnoreZones lets a recipient outside the chunk's zone take it.
	IgnoreZones bool
	// MoveJumbo schedules chunks flagged jumbo.
	MoveJumbo bool
	// NoThreshold balances any difference, not only one of three chunk sizes or more.
	NoThreshold bool
}

// Options are a round's settings.
type Options struct {
	// ForceJumbo is config.settings balancer attemptToBalanceJumboChunks.
	ForceJumbo bool
	Knobs      Knobs
}

// ZoneFor is ZoneInfo::getZoneForChunk: the zone whose range contains [min, max), "" when
// none does (a chunk that only partly overlaps a zone belongs to none).
func ZoneFor(zones []ZoneRange, min, max bsoncore.Document) string {
	// The first zone whose max is above min.
	i := sort.Search(len(zones), func(i int) bool { return bsonutil.CompareDocuments(zones[i].Max, min) > 0 })
	if i == len(zones) {
		return ""
	}
	z := zones[i]
	if bsonutil.CompareDocuments(z.Min, min) <= 0 && bsonutil.CompareDocuments(max, z.Max) <= 0 {
		return z.Zone
	}
	return ""
}

// chunkAt is the index of the chunk containing key.
func chunkAt(chunks []Chunk, key bsoncore.Document) int {
	i := sort.Search(len(chunks), func(i int) bool { return bsonutil.CompareDocuments(chunks[i].Max, key) > 0 })
	if i == len(chunks) {
		return len(chunks) - 1
	}
	return i
}

// SplitsForZones is getSplitCandidatesToEnforceZoneRanges: the chunks a zone boundary falls
// inside, with the boundaries as split points (one Split per chunk, points in order).
// The global max can never be inside a chunk.
func SplitsForZones(d Distribution) []Split {
	if len(d.Chunks) == 0 {
		return nil
	}
	var out []Split
	add := func(i int, point bsoncore.Document) {
		c := d.Chunks[i]
		if bsonutil.CompareDocuments(c.Min, point) >= 0 || bsonutil.CompareDocuments(point, c.Max) >= 0 {
			return
		}
		if n := len(out); n > 0 && bsonutil.CompareDocuments(out[n-1].Min, c.Min) == 0 {
			last := out[n-1].Points[len(out[n-1].Points)-1]
			if bsonutil.CompareDocuments(point, last) > 0 {
				out[n-1].Points = append(out[n-1].Points, point)
			}
			return
		}
		out = append(out, Split{NS: d.NS, Shard: c.Shard, Min: c.Min, Max: c.Max, Points: []bsoncore.Document{point}})
	}
	for _, z := range d.Zones {
		add(chunkAt(d.Chunks, z.Min), z.Min)
		add(chunkAt(d.Chunks, z.Max), z.Max)
	}
	sort.SliceStable(out, func(i, j int) bool { return bsonutil.CompareDocuments(out[i].Min, out[j].Min) < 0 })
	return out
}

// CheckZoneBoundaries is the check _getMigrateCandidatesForCollection makes before
// balancing: a zone boundary inside a chunk postpones the collection's balancing until the
// chunk is split.
func CheckZoneBoundaries(d Distribution) error {
	if s := SplitsForZones(d); len(s) > 0 {
		z := d.Zones[0]
		for _, zr := range d.Zones {
			for _, p := range s[0].Points {
				if bsonutil.CompareDocuments(zr.Min, p) == 0 || bsonutil.CompareDocuments(zr.Max, p) == 0 {
					z = zr
				}
			}
		}
		return mongoerr.Newf(mongoerr.IllegalOperation,
			"Zone boundaries %s -->> %s  on  %s fall in the middle of an existing chunk [%s, %s). Balancing for collection %s will be postponed until the chunk is split appropriately.",
			bsonutil.FormatDoc(z.Min), bsonutil.FormatDoc(z.Max), z.Zone, bsonutil.FormatDoc(s[0].Min), bsonutil.FormatDoc(s[0].Max), d.NS)
	}
	return nil
}

// Balance is BalancerPolicy::balance for one collection: the migrations to run now and the
// reason of the first. available holds the shards not yet in a migration this round; each
// chosen migration removes its donor and recipient (one migration per shard per round).
// In order: chunks off draining shards, then chunks outside their zone's shards, then per
// zone (and the unzoned rest) from the shard with the most data of the collection to the
// least loaded one, while the donor has more than the zone's ideal (its shards' data / their
// number) and the two differ by at least three maximum chunk sizes. Chunks flagged jumbo
// are never scheduled.
func Balance(shards []Shard, d Distribution, available map[string]bool, o Options) ([]Migration, Reason) {
	var out []Migration
	first := ReasonNone
	byShard := map[string][]Chunk{}
	for _, c := range d.Chunks {
		byShard[c.Shard] = append(byShard[c.Shard], c)
	}
	take := func(m Migration) {
		out = append(out, m)
		if first == ReasonNone {
			first = m.Reason
		}
		if !o.Knobs.ReuseShards {
			delete(available, m.From)
			delete(available, m.To)
		}
	}
	jumbo := func(c Chunk) bool { return c.Jumbo && !o.Knobs.MoveJumbo }

	// 1) Chunks on draining shards.
	for _, s := range shards {
		if !s.Draining || !available[s.ID] || len(byShard[s.ID]) == 0 {
			continue
		}
		for _, c := range byShard[s.ID] {
			if jumbo(c) {
				continue
			}
			to, _, ok := leastLoaded(shards, d, ZoneFor(d.Zones, c.Min, c.Max), available, o.Knobs)
			if !ok {
				continue
			}
			take(Migration{NS: d.NS, From: s.ID, To: to, Min: c.Min, Max: c.Max, ForceJumbo: true, Reason: ReasonDrain})
			break
		}
		if len(out) == 0 {
			delete(available, s.ID)
		}
		if len(available) < 2 {
			return out, first
		}
	}

	// 2) Chunks outside their zone's shards.
	if len(d.Zones) > 0 {
		for _, s := range shards {
			if !available[s.ID] {
				continue
			}
			for _, c := range byShard[s.ID] {
				zone := ZoneFor(d.Zones, c.Min, c.Max)
				if zone == "" || s.inZone(zone) || jumbo(c) {
					continue
				}
				to, _, ok := leastLoaded(shards, d, zone, available, o.Knobs)
				if !ok {
					continue
				}
				take(Migration{NS: d.NS, From: s.ID, To: to, Min: c.Min, Max: c.Max, ForceJumbo: o.ForceJumbo, Reason: ReasonZoneViolation})
				break
			}
			if len(available) < 2 {
				return out, first
			}
		}
	}

	// 3) Toward the ideal data size per shard, zone by zone, then the unzoned chunks.
	var zones []string
	for _, z := range d.Zones {
		if !slices.Contains(zones, z.Zone) {
			zones = append(zones, z.Zone)
		}
	}
	sort.Strings(zones)
	zones = append(zones, "")
	for _, zone := range zones {
		var n, total int64
		for _, s := range shards {
			if zone != "" && !s.inZone(zone) {
				continue
			}
			if size, ok := d.DataSize[s.ID]; ok {
				total += size
				n++
			}
		}
		if n == 0 || total <= 0 {
			continue
		}
		ideal := total / n
		// Each migration removes two shards from available, so the loop ends; the bound
		// keeps a broken knob from spinning.
		for range len(d.Chunks) + 1 {
			m, ok := singleZone(shards, d, byShard, zone, ideal, available, o)
			if !ok {
				break
			}
			take(m)
		}
	}
	return out, first
}

// singleZone is _singleZoneBalanceBasedOnDataSize: one migration within zone, if any.
func singleZone(shards []Shard, d Distribution, byShard map[string][]Chunk, zone string, ideal int64, available map[string]bool, o Options) (Migration, bool) {
	from, fromSize, ok := mostOverloaded(shards, d, available)
	if !ok {
		return Migration{}, false
	}
	to, toSize, ok := leastLoaded(shards, d, zone, available, o.Knobs)
	threshold := 3 * d.MaxChunkSizeBytes
	if o.Knobs.NoThreshold {
		threshold = 1
	}
	if !ok || from == to || fromSize <= ideal || fromSize-toSize < threshold {
		return Migration{}, false
	}
	for _, c := range byShard[from] {
		if ZoneFor(d.Zones, c.Min, c.Max) != zone || c.Jumbo && !o.Knobs.MoveJumbo {
			continue
		}
		return Migration{NS: d.NS, From: from, To: to, Min: c.Min, Max: c.Max, ForceJumbo: o.ForceJumbo, Reason: ReasonChunksImbalance}, true
	}
	return Migration{}, false
}

// leastLoaded is _getLeastLoadedReceiverShard: the available shard with the least data of
// the collection that may receive a chunk of zone (not draining, in the zone if any).
func leastLoaded(shards []Shard, d Distribution, zone string, available map[string]bool, k Knobs) (string, int64, bool) {
	best, min, found := "", int64(0), false
	for _, s := range shards {
		if !available[s.ID] || s.Draining || zone != "" && !s.inZone(zone) && !k.IgnoreZones {
			continue
		}
		size, ok := d.DataSize[s.ID]
		if !ok {
			continue
		}
		if !found || size < min {
			best, min, found = s.ID, size, true
		}
	}
	return best, min, found
}

// mostOverloaded is _getMostOverloadedShard: the available shard with the most data of the
// collection. As in MongoDB 7.0 the zone plays no part here; a donor without a chunk of the
// zone being balanced ends that zone's balancing for the round.
func mostOverloaded(shards []Shard, d Distribution, available map[string]bool) (string, int64, bool) {
	worst, max, found := "", int64(0), false
	for _, s := range shards {
		if !available[s.ID] {
			continue
		}
		size, ok := d.DataSize[s.ID]
		if !ok {
			continue
		}
		if !found || size > max {
			worst, max, found = s.ID, size, true
		}
	}
	return worst, max, found
}
