package routing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/sharding/shardkey"
)

var testUUID = catalog.UUID{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}

// chunksAt splits the key space of p at the given keys (sorted, distinct) and assigns the
// chunks to shards; versions are 1|0, 1|1, ...
func chunksAt(p *shardkey.Pattern, gen Generation, splits []bsoncore.Document, shards []string) []Chunk {
	bounds := append(append([]bsoncore.Document{p.GlobalMin()}, splits...), p.GlobalMax())
	out := make([]Chunk, len(bounds)-1)
	for i := range out {
		out[i] = Chunk{ID: bson.NewObjectID(), CollectionUUID: testUUID, Min: bounds[i], Max: bounds[i+1],
			Shard: shards[i%len(shards)], Version: cv(1, uint32(i), gen)}
	}
	return out
}

func intKey(p *shardkey.Pattern, vals ...any) bsoncore.Document {
	vs := make([]bsoncore.Value, len(vals))
	for i, v := range vals {
		t, data, err := bson.MarshalValue(v)
		if err != nil {
			panic(err)
		}
		vs[i] = bsoncore.Value{Type: bsoncore.Type(t), Data: data}
	}
	return p.KeyFromValues(vs...)
}

func TestRoutingTableBasics(t *testing.T) {
	p := shardkey.MustParse(docOf(t, bson.D{{Key: "a", Value: 1}}))
	splits := []bsoncore.Document{intKey(p, 0), intKey(p, 10), intKey(p, "m")}
	chunks := chunksAt(p, gen1, splits, []string{"s0", "s1"})
	// Any input order.
	rev := slices.Clone(chunks)
	slices.Reverse(rev)
	rt, err := New(testUUID, p, gen1, rev)
	if err != nil {
		t.Fatal(err)
	}
	if rt.NumChunks() != 4 || !slices.Equal(rt.Shards(), []string{"s0", "s1"}) {
		t.Fatalf("chunks %d shards %v", rt.NumChunks(), rt.Shards())
	}
	if !rt.Version().Equal(cv(1, 3, gen1)) || !rt.ShardVersion("s0").Equal(cv(1, 2, gen1)) ||
		!rt.ShardVersion("s1").Equal(cv(1, 3, gen1)) || !rt.ShardVersion("s9").Equal(cv(0, 0, gen1)) {
		t.Errorf("versions: coll %s s0 %s s1 %s s9 %s", rt.Version(), rt.ShardVersion("s0"), rt.ShardVersion("s1"), rt.ShardVersion("s9"))
	}
	for _, c := range []struct {
		doc  bson.D
		want string
	}{
		{bson.D{{Key: "a", Value: -5}}, "s0"},
		{bson.D{{Key: "a", Value: 0}}, "s1"}, // min is inclusive
		{bson.D{{Key: "a", Value: 9.5}}, "s1"},
		{bson.D{{Key: "a", Value: int64(10)}}, "s0"},
		{bson.D{{Key: "a", Value: "z"}}, "s1"},
		{bson.D{{Key: "a", Value: "b"}}, "s0"}, // numbers sort before strings
		{bson.D{{Key: "b", Value: 1}}, "s0"},   // missing: null, before numbers
		{bson.D{{Key: "a", Value: bson.MaxKey{}}}, "s1"},
	} {
		got, err := rt.ShardForDoc(docOf(t, c.doc))
		if err != nil || got != c.want {
			t.Errorf("ShardForDoc(%v) = %s, %v; want %s", c.doc, got, err, c.want)
		}
	}
	if _, err := rt.ShardForKey(docOf(t, bson.D{{Key: "b", Value: 1}})); !mongoerr.Is(err, mongoerr.ShardKeyNotFound) {
		t.Errorf("ShardForKey of a non-key: %v", err)
	}
	if _, err := rt.ShardForDoc(docOf(t, bson.D{{Key: "a", Value: bson.A{1}}})); !mongoerr.Is(err, mongoerr.ShardKeyNotFound) {
		t.Errorf("ShardForDoc of an array key: %v", err)
	}
	// Ranges are inclusive: [5, 10] touches the chunk starting at 10.
	got, _ := rt.ShardsForRanges([]shardkey.Range{{Min: intKey(p, 5), Max: intKey(p, 10)}})
	if !slices.Equal(got, []string{"s0", "s1"}) {
		t.Errorf("ShardsForRanges([5, 10]) = %v", got)
	}
	if got, _ := rt.ShardsForRanges([]shardkey.Range{{Min: intKey(p, 1), Max: intKey(p, 9)}}); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("ShardsForRanges([1, 9]) = %v", got)
	}
	if got, _ := rt.ShardsForQuery(docOf(t, bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{}}}}}), false); !slices.Equal(got, []string{"s0"}) {
		t.Errorf("a query matching nothing targets the global min's shard, got %v", got)
	}
}

func TestRoutingTableValidation(t *testing.T) {
	p := shardkey.MustParse(docOf(t, bson.D{{Key: "a", Value: 1}}))
	good := chunksAt(p, gen1, []bsoncore.Document{intKey(p, 0), intKey(p, 10)}, []string{"s0", "s1"})
	mod := func(f func(cs []Chunk) []Chunk) []Chunk { return f(slices.Clone(good)) }
	for _, c := range []struct {
		name   string
		chunks []Chunk
		msg    string
	}{
		{"empty", nil, "has no chunks"},
		{"gap", mod(func(cs []Chunk) []Chunk { cs[1].Max = intKey(p, 5); return cs }),
			"Gap exists in the routing table between chunks [{ a: 0 }, { a: 5 }) and [{ a: 10 }, { a: MaxKey })"},
		{"overlap", mod(func(cs []Chunk) []Chunk { cs[1].Max = intKey(p, 15); return cs }),
			"Overlap exists in the routing table between chunks [{ a: 0 }, { a: 15 }) and [{ a: 10 }, { a: MaxKey })"},
		{"no min", mod(func(cs []Chunk) []Chunk { return cs[1:] }), "Routing table does not start at the global min { a: MinKey }"},
		{"no max", mod(func(cs []Chunk) []Chunk { return cs[:2] }), "Routing table does not end at the global max { a: MaxKey }"},
		{"other generation", mod(func(cs []Chunk) []Chunk { cs[2].Version = cv(3, 0, gen2); return cs }), "another collection generation"},
		{"bad bounds", mod(func(cs []Chunk) []Chunk { cs[1].Max = docOf(t, bson.D{{Key: "b", Value: 10}}); return cs }), "do not match the shard key pattern"},
		{"min >= max", mod(func(cs []Chunk) []Chunk { cs[1].Max = intKey(p, 0); return cs }), "min that is not less than its max"},
	} {
		_, err := New(testUUID, p, gen1, c.chunks)
		if !mongoerr.Is(err, mongoerr.ConflictingOperationInProgress) || !strings.Contains(msg(err), c.msg) {
			t.Errorf("%s: %v, want ConflictingOperationInProgress containing %q", c.name, err, c.msg)
		}
	}
	rt, err := New(testUUID, p, gen1, good)
	if err != nil {
		t.Fatal(err)
	}
	// Incremental updates: another generation or an older version is refused.
	if _, err := rt.Update([]Chunk{{Min: p.GlobalMin(), Max: intKey(p, 0), Shard: "s1", Version: cv(9, 0, gen2)}}); !mongoerr.Is(err, mongoerr.ConflictingOperationInProgress) {
		t.Errorf("update from another generation: %v", err)
	}
	if _, err := rt.Update([]Chunk{{Min: p.GlobalMin(), Max: intKey(p, 0), Shard: "s1", Version: cv(1, 0, gen1)}}); !mongoerr.Is(err, mongoerr.ConflictingOperationInProgress) {
		t.Errorf("update with an older version: %v", err)
	}
	// A changed chunk that leaves a hole (its neighbour's change missing) is caught.
	if _, err := rt.Update([]Chunk{{Min: p.GlobalMin(), Max: intKey(p, -5), Shard: "s1", Version: cv(2, 0, gen1)}}); !mongoerr.Is(err, mongoerr.ConflictingOperationInProgress) {
		t.Errorf("update leaving a gap: %v", err)
	}
	// Refresh rebuilds on a generation change.
	re := chunksAt(p, gen2, nil, []string{"s1"})
	nt, err := Refresh(rt, testUUID, p, gen2, re)
	if err != nil || nt.NumChunks() != 1 || nt.Generation() != gen2 {
		t.Errorf("Refresh to gen2: %v", err)
	}
}

func TestChunkConfigDoc(t *testing.T) {
	p := shardkey.MustParse(docOf(t, bson.D{{Key: "a", Value: 1}}))
	since := bson.Timestamp{T: 77, I: 1}
	c := Chunk{ID: epoch1, CollectionUUID: testUUID, Min: p.GlobalMin(), Max: intKey(p, 5), Shard: "shard0",
		Version: cv(2, 3, gen1), OnCurrentShardSince: &since, History: []HistoryEntry{{ValidAfter: since, Shard: "shard0"}}}
	d := c.ConfigDoc()
	want := `{ _id: ObjectId('0102030405060708090a0b0c'), uuid: BinData(4, 09090909090909090909090909090909), min: { a: MinKey }, max: { a: 5 }, shard: "shard0", lastmod: Timestamp(2, 3), onCurrentShardSince: Timestamp(77, 1), history: [ { validAfter: Timestamp(77, 1), shard: "shard0" } ] }`
	if got := bsonutil.FormatDoc(d); got != want {
		t.Errorf("ConfigDoc =\n%s\nwant\n%s", got, want)
	}
	back, err := ParseConfigChunk(d, gen1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.ConfigDoc(), d) || back.Version != c.Version {
		t.Errorf("round trip differs: %s", bsonutil.FormatDoc(back.ConfigDoc()))
	}
	for _, c := range []struct {
		doc  bson.D
		code mongoerr.Code
		msg  string
	}{
		{bson.D{{Key: "_id", Value: epoch1}}, mongoerr.NoSuchKey, `Missing expected field "uuid"`},
		{bson.D{{Key: "_id", Value: epoch1}, {Key: "uuid", Value: bson.Binary{Subtype: 4, Data: testUUID[:]}}, {Key: "min", Value: "x"}},
			mongoerr.TypeMismatch, `"min" had the wrong type. Expected object, found string`},
		{bson.D{{Key: "_id", Value: epoch1}, {Key: "uuid", Value: bson.Binary{Subtype: 4, Data: testUUID[:]}}, {Key: "min", Value: bson.D{{Key: "a", Value: 5}}},
			{Key: "max", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "shard", Value: "s"}, {Key: "lastmod", Value: bson.Timestamp{T: 1}}},
			mongoerr.FailedToParse, "min is not less than max for chunk [{ a: 5 }, { a: 1 })"},
		{bson.D{{Key: "_id", Value: epoch1}, {Key: "uuid", Value: bson.Binary{Subtype: 4, Data: testUUID[:]}}, {Key: "min", Value: bson.D{{Key: "a", Value: 1}}},
			{Key: "max", Value: bson.D{{Key: "b", Value: 5}}}, {Key: "shard", Value: "s"}, {Key: "lastmod", Value: bson.Timestamp{T: 1}}},
			mongoerr.BadValue, "min and max don't have matching keys"},
		{bson.D{{Key: "_id", Value: epoch1}, {Key: "uuid", Value: bson.Binary{Subtype: 4, Data: testUUID[:]}}, {Key: "min", Value: bson.D{{Key: "a", Value: 1}}},
			{Key: "max", Value: bson.D{{Key: "a", Value: 5}}}, {Key: "shard", Value: "s"}, {Key: "lastmod", Value: int64(1)}},
			mongoerr.TypeMismatch, `"lastmod" had the wrong type. Expected timestamp, found long`},
	} {
		_, err := ParseConfigChunk(docOf(t, c.doc), gen1)
		if !mongoerr.Is(err, c.code) || !strings.HasPrefix(msg(err), c.msg) {
			t.Errorf("ParseConfigChunk(%v) = %v, want %v %q", c.doc, err, c.code, c.msg)
		}
	}
}

// --- property tests ---

// randValue draws a shard key value of a mix of types (no arrays: shard keys hold none);
// ok false means the field is missing.
func randValue(r *rand.Rand) (any, bool) {
	switch r.IntN(10) {
	case 0:
		return nil, false
	case 1:
		return nil, true
	case 2, 3, 4:
		return int32(r.IntN(21) - 10), true
	case 5:
		return float64(r.IntN(21)-10) + 0.5, true
	case 6:
		return int64(r.IntN(21) - 10), true
	case 7:
		return string(rune('a' + r.IntN(6))), true
	case 8:
		return r.IntN(2) == 0, true
	default:
		return bson.D{{Key: "x", Value: r.IntN(3)}}, true
	}
}

func randDoc(r *rand.Rand, fields []string) bsoncore.Document {
	var d bson.D
	for _, f := range fields {
		if v, ok := randValue(r); ok {
			d = append(d, bson.E{Key: f, Value: v})
		}
	}
	d = append(d, bson.E{Key: "z", Value: r.IntN(5)})
	b, _ := bson.Marshal(d)
	return b
}

// randTable splits the key space of p at up to n random keys of random documents.
func randTable(t testing.TB, r *rand.Rand, p *shardkey.Pattern, n int, shards []string) *RoutingTable {
	var splits []bsoncore.Document
	for i := 0; i < n; i++ {
		k, err := p.ExtractKey(randDoc(r, p.Fields()))
		if err != nil {
			t.Fatal(err)
		}
		splits = append(splits, k)
	}
	slices.SortFunc(splits, bsonutil.CompareDocuments)
	splits = slices.CompactFunc(splits, func(a, b bsoncore.Document) bool { return bsonutil.CompareDocuments(a, b) == 0 })
	cs := chunksAt(p, gen1, splits, shards)
	for i := range cs {
		cs[i].Shard = shards[r.IntN(len(shards))]
	}
	rt, err := New(testUUID, p, gen1, cs)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// bruteChunks returns the indexes of every chunk whose [min, max) holds key, by BSON comparison.
func bruteChunks(rt *RoutingTable, key bsoncore.Document) []int {
	var out []int
	for i, c := range rt.Chunks() {
		if bsonutil.CompareDocuments(c.Min, key) <= 0 && bsonutil.CompareDocuments(key, c.Max) < 0 {
			out = append(out, i)
		}
	}
	return out
}

var testPatterns = []bson.D{
	{{Key: "a", Value: 1}},
	{{Key: "a", Value: 1}, {Key: "b", Value: 1}},
	{{Key: "a", Value: "hashed"}},
	{{Key: "a", Value: 1}, {Key: "b", Value: "hashed"}},
}

// TestPropertyEveryKeyInOneChunk: for random splits, every key lies in exactly one chunk, the
// one ChunkForKey finds.
func TestPropertyEveryKeyInOneChunk(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, kp := range testPatterns {
		p := shardkey.MustParse(docOf(t, kp))
		for iter := 0; iter < 30; iter++ {
			rt := randTable(t, r, p, r.IntN(20), []string{"s0", "s1", "s2"})
			for k := 0; k < 200; k++ {
				key, err := p.ExtractKey(randDoc(r, p.Fields()))
				if err != nil {
					t.Fatal(err)
				}
				idx := bruteChunks(rt, key)
				if len(idx) != 1 {
					t.Fatalf("%s: key %s is in chunks %v", p, bsonutil.FormatDoc(key), idx)
				}
				c, err := rt.ChunkForKey(key)
				if err != nil || c != rt.Chunks()[idx[0]] {
					t.Fatalf("%s: ChunkForKey(%s) = %v, %v; want %s", p, bsonutil.FormatDoc(key), c, err, rt.Chunks()[idx[0]].String())
				}
			}
		}
	}
}

// history simulates the config server's chunk metadata under random splits, moves and merges,
// bumping versions as MongoDB does (split/merge: minor increments of the collection version;
// move: a new major version).
type history struct {
	p      *shardkey.Pattern
	chunks []Chunk // sorted by min
	coll   ChunkVersion
}

func (h *history) step(t testing.TB, r *rand.Rand, shards []string) {
	i := r.IntN(len(h.chunks))
	c := h.chunks[i]
	switch r.IntN(3) {
	case 0: // split at a random key inside the chunk
		k, _ := h.p.ExtractKey(randDoc(r, h.p.Fields()))
		if bsonutil.CompareDocuments(c.Min, k) >= 0 || bsonutil.CompareDocuments(k, c.Max) >= 0 {
			return
		}
		v1, _ := h.coll.IncMinor()
		v2, _ := v1.IncMinor()
		left, right := c, c
		left.Max, left.Version = k, v1
		right.Min, right.Version, right.ID = k, v2, bson.NewObjectID()
		h.chunks = slices.Replace(h.chunks, i, i+1, left, right)
		h.coll = v2
	case 1: // move
		v, _ := h.coll.IncMajor()
		c.Shard, c.Version = shards[r.IntN(len(shards))], v
		h.chunks[i] = c
		h.coll = v
	default: // merge with the next chunk if on the same shard
		if i+1 >= len(h.chunks) || h.chunks[i+1].Shard != c.Shard {
			return
		}
		v, _ := h.coll.IncMinor()
		c.Max, c.Version = h.chunks[i+1].Max, v
		h.chunks = slices.Replace(h.chunks, i, i+2, c)
		h.coll = v
	}
}

// since returns the chunks with lastmod >= v: the catalog cache's incremental query.
func (h *history) since(v ChunkVersion) []Chunk {
	var out []Chunk
	for _, c := range h.chunks {
		if !c.Version.placementLess(v) {
			out = append(out, c)
		}
	}
	r := slices.Clone(out)
	slices.Reverse(r) // any order
	return r
}

func sameTable(a, b *RoutingTable) error {
	if a.NumChunks() != b.NumChunks() {
		return fmt.Errorf("%d chunks vs %d", a.NumChunks(), b.NumChunks())
	}
	for i := range a.Chunks() {
		x, y := a.Chunks()[i], b.Chunks()[i]
		if !slices.Equal(x.Min, y.Min) || !slices.Equal(x.Max, y.Max) || x.Shard != y.Shard || x.Version != y.Version {
			return fmt.Errorf("chunk %d: %s vs %s", i, x.String(), y.String())
		}
	}
	if a.Version() != b.Version() || !slices.Equal(a.Shards(), b.Shards()) {
		return fmt.Errorf("versions %s vs %s, shards %v vs %v", a.Version(), b.Version(), a.Shards(), b.Shards())
	}
	for _, s := range a.Shards() {
		if a.ShardVersion(s) != b.ShardVersion(s) {
			return fmt.Errorf("shard %s: %s vs %s", s, a.ShardVersion(s), b.ShardVersion(s))
		}
	}
	return nil
}

// TestPropertyIncrementalEqualsRebuild: after random splits, moves and merges, updating a
// cached table with the chunks changed since its version gives the table a full rebuild gives.
func TestPropertyIncrementalEqualsRebuild(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	shards := []string{"s0", "s1", "s2"}
	for _, kp := range testPatterns {
		p := shardkey.MustParse(docOf(t, kp))
		for iter := 0; iter < 30; iter++ {
			start := randTable(t, r, p, r.IntN(8), shards)
			h := &history{p: p, chunks: derefAll(start.Chunks()), coll: start.Version()}
			cached := start
			for round := 0; round < 6; round++ {
				for s := r.IntN(6); s > 0; s-- {
					h.step(t, r, shards)
				}
				full, err := New(testUUID, p, gen1, h.chunks)
				if err != nil {
					t.Fatal(err)
				}
				inc, err := Refresh(cached, testUUID, p, gen1, h.since(cached.Version()))
				if err != nil {
					t.Fatalf("%s: incremental refresh: %v", p, err)
				}
				if err := sameTable(inc, full); err != nil {
					t.Fatalf("%s: incremental != rebuild: %v", p, err)
				}
				cached = inc
			}
		}
	}
}

// randFilter builds a random filter over the fields (and a non-key field z).
func randFilter(r *rand.Rand, fields []string, depth int) bson.D {
	fs := append(slices.Clone(fields), "z")
	f := fs[r.IntN(len(fs))]
	val := func() any {
		v, ok := randValue(r)
		if !ok {
			return nil
		}
		return v
	}
	switch k := r.IntN(12); {
	case k < 3:
		return bson.D{{Key: f, Value: val()}}
	case k == 3:
		in := bson.A{}
		for n := r.IntN(4); n > 0; n-- {
			in = append(in, val())
		}
		return bson.D{{Key: f, Value: bson.D{{Key: "$in", Value: in}}}}
	case k < 7:
		ops := []string{"$gt", "$gte", "$lt", "$lte"}
		return bson.D{{Key: f, Value: bson.D{{Key: ops[r.IntN(4)], Value: val()}}}}
	case k == 7:
		return bson.D{{Key: f, Value: bson.D{{Key: "$ne", Value: val()}}}}
	case k == 8:
		return bson.D{{Key: f, Value: bson.D{{Key: "$exists", Value: r.IntN(2) == 0}}}}
	default:
		if depth > 2 {
			return bson.D{{Key: f, Value: val()}}
		}
		op := []string{"$and", "$or", "$nor"}[r.IntN(3)]
		arr := bson.A{}
		for n := 1 + r.IntN(3); n > 0; n-- {
			arr = append(arr, randFilter(r, fields, depth+1))
		}
		return bson.D{{Key: op, Value: arr}}
	}
}

// TestPropertyTargetingNeverMissesAShard: for random filters over random routing tables, every
// random document the filter matches lives on a shard the filter is targeted to.
func TestPropertyTargetingNeverMissesAShard(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	shards := []string{"s0", "s1", "s2", "s3"}
	narrowed := 0
	for _, kp := range testPatterns {
		p := shardkey.MustParse(docOf(t, kp))
		for iter := 0; iter < 40; iter++ {
			rt := randTable(t, r, p, 2+r.IntN(20), shards)
			docs := make([]bsoncore.Document, 300)
			for i := range docs {
				docs[i] = randDoc(r, p.Fields())
			}
			for q := 0; q < 40; q++ {
				f := randFilter(r, p.Fields(), 0)
				fd := docOf(t, f)
				m, err := query.Parse(fd, query.ParseOptions{})
				if err != nil {
					t.Fatal(err)
				}
				targeted, err := rt.ShardsForQuery(fd, false)
				if err != nil {
					t.Fatalf("ShardsForQuery(%v): %v", f, err)
				}
				if len(targeted) < len(rt.Shards()) {
					narrowed++
				}
				for _, d := range docs {
					ok, err := m.Matches(d)
					if err != nil {
						t.Fatal(err)
					}
					if !ok {
						continue
					}
					s, err := rt.ShardForDoc(d)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Contains(targeted, s) {
						rs, _ := p.Ranges(fd, false)
						t.Fatalf("%s: filter %v matches %s on %s but targets %v (ranges %d)", p, f, bsonutil.FormatDoc(d), s, targeted, len(rs))
					}
				}
			}
		}
	}
	// The test must exercise targeting, not only broadcasts.
	if narrowed < 100 {
		t.Errorf("only %d queries were narrowed to fewer shards", narrowed)
	}
}

func derefAll(cs []*Chunk) []Chunk {
	out := make([]Chunk, len(cs))
	for i, c := range cs {
		out[i] = *c
	}
	return out
}
