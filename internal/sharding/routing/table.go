package routing

import (
	"bytes"
	"slices"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/recordid"
	"humongo/internal/sharding/shardkey"
)

// RoutingTable is the routing information of one sharded collection generation (MongoDB's
// RoutingTableHistory over a ChunkMap): its chunks sorted by min, covering
// [GlobalMin, GlobalMax) without gap or overlap, with keystring-encoded bounds so that a
// lookup is a binary search of byte strings. It is immutable: Update returns a new table.
type RoutingTable struct {
	uuid    catalog.UUID
	gen     Generation
	pattern *shardkey.Pattern
	chunks  []*Chunk // shared, immutable: tables built by Update share unchanged chunks
	minKS   [][]byte // minKS[i] is the keystring of chunks[i].Min
	maxKS   [][]byte // maxKS[i] is the keystring of chunks[i].Max
	collVer ChunkVersion
	shardV  map[string]ChunkVersion
	shards  []string // sorted
	// atTime and histErr are set in a view of the placement at a past cluster time (At):
	// histErr[i] is StaleChunkHistory when chunk i's history does not reach back that far.
	atTime  *bson.Timestamp
	histErr []error
}

// encodeKey returns the keystring of a shard key document's values (all fields ascending:
// shard keys have no descending fields, and hashed fields hold NumberLongs).
func encodeKey(key bsoncore.Document) []byte {
	ks, _ := keystring.Encode(shardkey.Values(key), 0, recordid.ID{})
	return ks
}

// inconsistent is the error MongoDB raises for a routing table that does not cover the key
// space exactly (ConflictingOperationInProgress: a concurrent change, the caller refreshes).
func inconsistent(format string, args ...any) error {
	return mongoerr.Newf(mongoerr.ConflictingOperationInProgress, format, args...)
}

// entry is a chunk with its encoded bounds.
type entry struct {
	c        *Chunk
	min, max []byte
}

// checkChunk validates one chunk against the table's generation and pattern and encodes its
// bounds.
func (rt *RoutingTable) checkChunk(c Chunk, what string) (entry, error) {
	if !c.Version.SameCollection(rt.gen) || c.Version.Epoch != rt.gen.Epoch {
		return entry{}, inconsistent("%s %s has a version of another collection generation than the routing table's %s",
			what, c.String(), ChunkVersion{Generation: rt.gen})
	}
	if !rt.pattern.IsShardKey(c.Min) || !rt.pattern.IsShardKey(c.Max) {
		return entry{}, inconsistent("%s %s has bounds that do not match the shard key pattern %s", what, c.RangeString(), rt.pattern)
	}
	e := entry{c: &c, min: encodeKey(c.Min), max: encodeKey(c.Max)}
	if bytes.Compare(e.min, e.max) >= 0 {
		return entry{}, inconsistent("%s %s has a min that is not less than its max", what, c.RangeString())
	}
	return e, nil
}

// New builds and validates the routing table of a collection from all its chunks (a full
// refresh). Chunks may come in any order; each must be of generation gen, have bounds that
// are keys of pattern, and together they must cover [GlobalMin, GlobalMax) with no gap or
// overlap.
func New(uuid catalog.UUID, pattern *shardkey.Pattern, gen Generation, chunks []Chunk) (*RoutingTable, error) {
	rt := &RoutingTable{uuid: uuid, gen: gen, pattern: pattern}
	es := make([]entry, len(chunks))
	for i, c := range chunks {
		e, err := rt.checkChunk(c, "Chunk")
		if err != nil {
			return nil, err
		}
		es[i] = e
	}
	if err := rt.install(es); err != nil {
		return nil, err
	}
	return rt, nil
}

// install sorts the checked entries by min, verifies that they cover the key space exactly
// and indexes them.
func (rt *RoutingTable) install(es []entry) error {
	if len(es) == 0 {
		return inconsistent("Routing table for collection with uuid %s has no chunks", rt.uuid)
	}
	byMin := func(a, b entry) int { return bytes.Compare(a.min, b.min) }
	if !slices.IsSortedFunc(es, byMin) {
		slices.SortStableFunc(es, byMin)
	}
	if !bytes.Equal(es[0].min, encodeKey(rt.pattern.GlobalMin())) {
		return inconsistent("Routing table does not start at the global min %s: first chunk is %s",
			bsonutil.FormatDoc(rt.pattern.GlobalMin()), es[0].c.RangeString())
	}
	if last := es[len(es)-1]; !bytes.Equal(last.max, encodeKey(rt.pattern.GlobalMax())) {
		return inconsistent("Routing table does not end at the global max %s: last chunk is %s",
			bsonutil.FormatDoc(rt.pattern.GlobalMax()), last.c.RangeString())
	}
	for i := 1; i < len(es); i++ {
		switch c := bytes.Compare(es[i-1].max, es[i].min); {
		case c < 0:
			return inconsistent("Gap exists in the routing table between chunks %s and %s",
				es[i-1].c.RangeString(), es[i].c.RangeString())
		case c > 0:
			return inconsistent("Overlap exists in the routing table between chunks %s and %s",
				es[i-1].c.RangeString(), es[i].c.RangeString())
		}
	}
	rt.chunks = make([]*Chunk, len(es))
	rt.minKS = make([][]byte, len(es))
	rt.maxKS = make([][]byte, len(es))
	rt.shardV = map[string]ChunkVersion{}
	rt.collVer = ChunkVersion{Generation: rt.gen}
	for i, e := range es {
		rt.chunks[i], rt.minKS[i], rt.maxKS[i] = e.c, e.min, e.max
		if rt.collVer.placementLess(e.c.Version) {
			rt.collVer = e.c.Version
		}
		if v, ok := rt.shardV[e.c.Shard]; !ok || v.placementLess(e.c.Version) {
			rt.shardV[e.c.Shard] = e.c.Version
		}
	}
	rt.shards = make([]string, 0, len(rt.shardV))
	for s := range rt.shardV {
		rt.shards = append(rt.shards, s)
	}
	slices.Sort(rt.shards)
	return nil
}

// Update applies the chunks changed since the table's version (the catalog cache's
// incremental refresh: config.chunks with lastmod >= the collection version): each changed
// chunk replaces the chunks its range overlaps. Changed chunks must be of the table's
// generation and not older than its version; after a drop/re-create or a refined shard key
// the caller builds a new table (Refresh does so). The result is validated as New validates;
// the unchanged chunks keep their encoded bounds.
func (rt *RoutingTable) Update(changed []Chunk) (*RoutingTable, error) {
	if len(changed) == 0 {
		return rt, nil
	}
	ch := make([]entry, len(changed))
	for i, c := range changed {
		e, err := rt.checkChunk(c, "Changed chunk")
		if err != nil {
			return nil, err
		}
		if c.Version.placementLess(rt.collVer) {
			return nil, inconsistent("Changed chunk %s has a version older than the routing table's %s", c.String(), rt.collVer)
		}
		ch[i] = e
	}
	// Apply in version order so that a later change of the same range wins.
	slices.SortStableFunc(ch, func(a, b entry) int {
		switch {
		case a.c.Version.placementLess(b.c.Version):
			return -1
		case b.c.Version.placementLess(a.c.Version):
			return 1
		}
		return 0
	})
	// cur stays sorted by min and free of overlaps: each change removes the chunks its range
	// overlaps (found by binary search on the encoded bounds) and takes their place.
	cur := make([]entry, len(rt.chunks), len(rt.chunks)+len(ch))
	for i := range rt.chunks {
		cur[i] = entry{c: rt.chunks[i], min: rt.minKS[i], max: rt.maxKS[i]}
	}
	for _, e := range ch {
		i := sort.Search(len(cur), func(k int) bool { return bytes.Compare(cur[k].max, e.min) > 0 })
		j := sort.Search(len(cur), func(k int) bool { return bytes.Compare(cur[k].min, e.max) >= 0 })
		cur = slices.Replace(cur, i, max(i, j), e)
	}
	nt := &RoutingTable{uuid: rt.uuid, gen: rt.gen, pattern: rt.pattern}
	if err := nt.install(cur); err != nil {
		return nil, err
	}
	return nt, nil
}

// Refresh is the catalog cache's refresh decision: with no previous table, or one of another
// generation (epoch or timestamp changed), chunks must be all the collection's chunks and a
// new table is built; otherwise chunks are the changes since old's version.
func Refresh(old *RoutingTable, uuid catalog.UUID, pattern *shardkey.Pattern, gen Generation, chunks []Chunk) (*RoutingTable, error) {
	if old == nil || old.gen != gen || old.uuid != uuid {
		return New(uuid, pattern, gen, chunks)
	}
	return old.Update(chunks)
}

// UUID is the collection's uuid.
func (rt *RoutingTable) UUID() catalog.UUID { return rt.uuid }

// Generation is the collection's epoch and timestamp.
func (rt *RoutingTable) Generation() Generation { return rt.gen }

// Pattern is the shard key pattern.
func (rt *RoutingTable) Pattern() *shardkey.Pattern { return rt.pattern }

// Chunks returns the chunks sorted by min; the caller must not modify them.
func (rt *RoutingTable) Chunks() []*Chunk { return rt.chunks }

// NumChunks is the number of chunks.
func (rt *RoutingTable) NumChunks() int { return len(rt.chunks) }

// Version is the collection version: the highest chunk version.
func (rt *RoutingTable) Version() ChunkVersion { return rt.collVer }

// ShardVersion is the shard's placement version: the highest version of its chunks, or 0|0
// of the collection's generation when it owns none (RoutingTableHistory::getVersion).
func (rt *RoutingTable) ShardVersion(shard string) ChunkVersion {
	if v, ok := rt.shardV[shard]; ok {
		return v
	}
	return ChunkVersion{Generation: rt.gen}
}

// Shards returns the shards owning at least one chunk, sorted.
func (rt *RoutingTable) Shards() []string { return rt.shards }

// chunkIndexKS returns the index of the chunk containing the key with keystring ks: the first
// chunk whose max is greater (upper_bound by max). A key at or past GlobalMax (MaxKey) maps
// to the last chunk.
func (rt *RoutingTable) chunkIndexKS(ks []byte) int {
	i := sort.Search(len(rt.maxKS), func(i int) bool { return bytes.Compare(rt.maxKS[i], ks) > 0 })
	if i == len(rt.maxKS) {
		i--
	}
	return i
}

// ChunkForKey returns the chunk owning a shard key (a document with the pattern's fields, as
// ExtractKey returns: hashed fields already hashed); MongoDB's findIntersectingChunk. It
// checks and encodes the key in one pass over its bytes.
func (rt *RoutingTable) ChunkForKey(key bsoncore.Document) (*Chunk, error) {
	var b keystring.Builder
	fields := rt.pattern.Fields()
	n := 0
	ok := len(key) >= 5
	if ok {
		rest := key[4 : len(key)-1]
		for len(rest) > 0 {
			e, r, valid := bsoncore.ReadElement(rest)
			if !valid || n >= len(fields) || e.Key() != fields[n] || e.Value().Type == bsoncore.TypeArray {
				ok = false
				break
			}
			b.AppendValue(e.Value())
			rest = r
			n++
		}
	}
	if !ok || n != len(fields) || b.Err() != nil {
		return nil, mongoerr.Newf(mongoerr.ShardKeyNotFound, "%s is not a shard key for the collection's shard key pattern %s",
			bsonutil.FormatDoc(key), rt.pattern)
	}
	return rt.chunkAt(rt.chunkIndexKS(b.Bytes()))
}

// ShardForKey returns the shard owning a shard key.
func (rt *RoutingTable) ShardForKey(key bsoncore.Document) (string, error) {
	c, err := rt.ChunkForKey(key)
	if err != nil {
		return "", err
	}
	return c.Shard, nil
}

// ShardForDoc returns the shard a document belongs to (its shard key extracted first).
func (rt *RoutingTable) ShardForDoc(doc bsoncore.Document) (string, error) {
	key, err := rt.pattern.ExtractKey(doc)
	if err != nil {
		return "", err
	}
	return rt.ShardForKey(key)
}

// ShardsForRanges returns the shards owning a chunk that overlaps one of the inclusive ranges
// (MongoDB's getShardIdsForRange with isMaxInclusive, over a BoundList), sorted. No ranges,
// no shards. In a view of a past time (At), a range reaching a chunk whose history does not
// go back that far is StaleChunkHistory.
func (rt *RoutingTable) ShardsForRanges(ranges []shardkey.Range) ([]string, error) {
	set := map[string]bool{}
	for _, r := range ranges {
		lo := rt.chunkIndexKS(encodeKey(r.Min))
		hi := rt.chunkIndexKS(encodeKey(r.Max))
		for i := lo; i <= hi; i++ {
			c, err := rt.chunkAt(i)
			if err != nil {
				return nil, err
			}
			set[c.Shard] = true
		}
		if len(set) == len(rt.shards) && rt.histErr == nil {
			break
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

// ShardsForQuery returns the shards a find filter can match documents on (the targeter's
// getShardIdsForQuery), never none; collated says the query has a non-simple collation.
func (rt *RoutingTable) ShardsForQuery(filter bsoncore.Document, collated bool) ([]string, error) {
	ranges, err := rt.pattern.Ranges(filter, collated)
	if err != nil {
		return nil, err
	}
	shards, err := rt.ShardsForRanges(ranges)
	if err != nil {
		return nil, err
	}
	if len(shards) == 0 {
		// As MongoDB (SERVER-4914): callers expect a shard even when nothing can match; the
		// owner of the global min answers with no documents.
		c, err := rt.chunkAt(0)
		if err != nil {
			return nil, err
		}
		shards = []string{c.Shard}
	}
	return shards, nil
}
