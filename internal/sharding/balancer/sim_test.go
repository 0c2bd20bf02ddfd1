package balancer

// A deterministic simulation of repeated balancer rounds (ARCHITECTURE.md tier 3): seeded
// random clusters (shards added and drained, zones, jumbo chunks, oversized chunks that fail
// to move and become jumbo) run round after round in virtual time, the simulation applying
// the policy's splits and migrations as the config server would commit them. Checked every
// round: at most one migration per shard, no flagged jumbo chunk scheduled, no recipient
// that is draining or outside the chunk's zone, chunks tiling the key space. Checked at the
// end, once the cluster stops changing: the rounds reach a fixed point without revisiting a
// placement (no oscillation), zones are respected, draining shards hold nothing movable, and
// without zones no shard is three chunk sizes above the least loaded one while it has a
// movable chunk. Knobs that break the policy must be caught.

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
)

var simSeeds = flag.Int("balancer.seeds", 1000, "seeds of TestSimulation")
var simSeed = flag.Int64("balancer.seed", -1, "run only this seed of TestSimulation")

const simMaxChunk = 10 // bytes; chunk sizes are small integers in the simulation

func key(v int64) bsoncore.Document { return bsoncore.NewDocumentBuilder().AppendInt64("x", v).Build() }
func minKey() bsoncore.Document     { return bsoncore.NewDocumentBuilder().AppendMinKey("x").Build() }
func maxKey() bsoncore.Document     { return bsoncore.NewDocumentBuilder().AppendMaxKey("x").Build() }

type simChunk struct {
	Chunk
	size int64
}

type sim struct {
	rng    *rand.Rand
	knobs  Knobs
	shards []Shard
	chunks []simChunk
	zones  []ZoneRange
	trace  []string
	nextID int
	// counters, summed over seeds to show the schedule bites
	moves, splits, jumboed, drained, added int
}

func (s *sim) logf(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf(format, args...))
	if len(s.trace) > 40 {
		s.trace = s.trace[1:]
	}
}

func (s *sim) addShard() string {
	id := fmt.Sprintf("s%d", s.nextID)
	s.nextID++
	s.shards = append(s.shards, Shard{ID: id})
	return id
}

func (s *sim) shard(id string) *Shard {
	for i := range s.shards {
		if s.shards[i].ID == id {
			return &s.shards[i]
		}
	}
	return nil
}

func newSim(seed int64, k Knobs) *sim {
	s := &sim{rng: rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)), knobs: k}
	n := 2 + s.rng.IntN(4)
	for range n {
		s.addShard()
	}
	// Chunk boundaries: sorted distinct points in [0, 1000).
	nChunks := 3 + s.rng.IntN(30)
	pts := map[int64]bool{}
	for len(pts) < nChunks-1 {
		pts[int64(s.rng.IntN(1000))] = true
	}
	var sorted []int64
	for p := range pts {
		sorted = append(sorted, p)
	}
	slices.Sort(sorted)
	lo := minKey()
	skewed := s.rng.IntN(2) == 0
	for i := 0; i <= len(sorted); i++ {
		hi := maxKey()
		if i < len(sorted) {
			hi = key(sorted[i])
		}
		owner := s.shards[0].ID
		if !skewed {
			owner = s.shards[s.rng.IntN(n)].ID
		}
		c := simChunk{Chunk: Chunk{Min: lo, Max: hi, Shard: owner}, size: 1 + int64(s.rng.IntN(simMaxChunk))}
		switch r := s.rng.IntN(20); {
		case r == 0:
			c.Jumbo, c.size = true, 5*simMaxChunk
		case r == 1:
			c.size = 3 * simMaxChunk // too big to move without forceJumbo: becomes jumbo when tried
		}
		s.chunks = append(s.chunks, c)
		lo = hi
	}
	// Zones: up to two non-overlapping ranges, each on one or two shards.
	if s.rng.IntN(2) == 0 {
		a, b, c := int64(s.rng.IntN(300)), int64(300+s.rng.IntN(300)), int64(600+s.rng.IntN(400))
		s.zones = append(s.zones, ZoneRange{Min: key(a), Max: key(b), Zone: "A"})
		if s.rng.IntN(2) == 0 {
			s.zones = append(s.zones, ZoneRange{Min: key(b), Max: key(c), Zone: "B"})
		}
		for _, z := range []string{"A", "B"} {
			for range 1 + s.rng.IntN(2) {
				sh := &s.shards[s.rng.IntN(len(s.shards))]
				if !sh.inZone(z) {
					sh.Zones = append(sh.Zones, z)
				}
			}
		}
	}
	return s
}

func (s *sim) distribution() Distribution {
	d := Distribution{NS: "db.c", Zones: s.zones, DataSize: map[string]int64{}, MaxChunkSizeBytes: simMaxChunk}
	for _, sh := range s.shards {
		d.DataSize[sh.ID] = 0
	}
	for _, c := range s.chunks {
		d.Chunks = append(d.Chunks, c.Chunk)
		d.DataSize[c.Shard] += c.size
	}
	return d
}

// perturb changes the cluster between rounds: a shard added, a shard starting to drain (one
// non-draining shard per zone and overall always remains), a drained shard removed.
func (s *sim) perturb() {
	switch r := s.rng.IntN(20); {
	case r == 0 && len(s.shards) < 8:
		id := s.addShard()
		if s.rng.IntN(3) == 0 && len(s.zones) > 0 {
			s.shard(id).Zones = []string{s.zones[s.rng.IntN(len(s.zones))].Zone}
		}
		s.added++
		s.logf("add shard %s %v", id, s.shard(id).Zones)
	case r == 1:
		cand := s.shards[s.rng.IntN(len(s.shards))]
		if cand.Draining {
			return
		}
		remains := func(zone string) bool {
			for _, sh := range s.shards {
				if sh.ID != cand.ID && !sh.Draining && (zone == "" || sh.inZone(zone)) {
					return true
				}
			}
			return false
		}
		if !remains("") {
			return
		}
		for _, z := range cand.Zones {
			if !remains(z) {
				return
			}
		}
		s.shard(cand.ID).Draining = true
		s.drained++
		s.logf("drain %s", cand.ID)
	case r == 2:
		for i, sh := range s.shards {
			if sh.Draining && !slices.ContainsFunc(s.chunks, func(c simChunk) bool { return c.Shard == sh.ID }) {
				s.shards = slices.Delete(s.shards, i, i+1)
				s.logf("remove %s", sh.ID)
				return
			}
		}
	}
}

// round runs one balancer round: zone splits, then the policy's migrations, applied. It
// returns what was done and the first invariant broken.
func (s *sim) round() (did bool, err error) {
	for _, sp := range SplitsForZones(s.distribution()) {
		i := slices.IndexFunc(s.chunks, func(c simChunk) bool { return bsonutil.CompareDocuments(c.Min, sp.Min) == 0 })
		if i < 0 || bsonutil.CompareDocuments(s.chunks[i].Max, sp.Max) != 0 || s.chunks[i].Shard != sp.Shard {
			return false, fmt.Errorf("split of a chunk that is not there: %+v", sp)
		}
		orig := s.chunks[i]
		bounds := append(append([]bsoncore.Document{orig.Min}, sp.Points...), orig.Max)
		var pieces []simChunk
		for j := 0; j+1 < len(bounds); j++ {
			p := orig
			p.Min, p.Max = bounds[j], bounds[j+1]
			p.size = max(1, orig.size/int64(len(bounds)-1))
			pieces = append(pieces, p)
		}
		s.chunks = slices.Concat(s.chunks[:i], pieces, s.chunks[i+1:])
		s.splits++
		did = true
	}
	d := s.distribution()
	if err := CheckZoneBoundaries(d); err != nil {
		return did, fmt.Errorf("zone boundary still inside a chunk after the splits: %v", err)
	}
	available := map[string]bool{}
	for _, sh := range s.shards {
		available[sh.ID] = true
	}
	migs, _ := Balance(s.shards, d, available, Options{Knobs: s.knobs})
	busy := map[string]bool{}
	for _, m := range migs {
		if busy[m.From] || busy[m.To] {
			return did, fmt.Errorf("a shard is in two migrations of one round: %v in %v", m, migs)
		}
		busy[m.From], busy[m.To] = true, true
		i := slices.IndexFunc(s.chunks, func(c simChunk) bool { return bsonutil.CompareDocuments(c.Min, m.Min) == 0 })
		if i < 0 || s.chunks[i].Shard != m.From || bsonutil.CompareDocuments(s.chunks[i].Max, m.Max) != 0 {
			return did, fmt.Errorf("migration of a chunk that is not on its donor: %v", m)
		}
		c := &s.chunks[i]
		to := s.shard(m.To)
		switch zone := ZoneFor(s.zones, c.Min, c.Max); {
		case c.Jumbo:
			return did, fmt.Errorf("jumbo chunk scheduled: %v", m)
		case m.From == m.To || to == nil:
			return did, fmt.Errorf("bad recipient: %v", m)
		case to.Draining:
			return did, fmt.Errorf("recipient is draining: %v", m)
		case zone != "" && !to.inZone(zone):
			return did, fmt.Errorf("recipient %s is not in the chunk's zone %s: %v", m.To, zone, m)
		}
		// The donor refuses a chunk above the maximum size unless forced (ChunkTooBig); the
		// balancer then flags it jumbo.
		if c.size > simMaxChunk && !m.ForceJumbo {
			c.Jumbo = true
			s.jumboed++
			s.logf("ChunkTooBig %v", m)
			did = true
			continue
		}
		c.Shard = m.To
		s.moves++
		s.logf("move %v (%s)", m, m.Reason)
		did = true
	}
	for i := range s.chunks {
		if i > 0 && bsonutil.CompareDocuments(s.chunks[i-1].Max, s.chunks[i].Min) != 0 {
			return did, fmt.Errorf("chunks do not tile at %d", i)
		}
	}
	return did, nil
}

func (s *sim) placement() string {
	var b strings.Builder
	for _, c := range s.chunks {
		fmt.Fprintf(&b, "%s:%s:%v;", bsonutil.FormatDoc(c.Min), c.Shard, c.Jumbo)
	}
	return b.String()
}

// run: 30 rounds with the cluster changing, then rounds on a still cluster until one does
// nothing; then the end invariants.
func (s *sim) run() error {
	for r := range 30 {
		s.perturb()
		if _, err := s.round(); err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
	}
	seen := map[string]bool{}
	limit := 4*len(s.chunks) + 10
	for r := 0; ; r++ {
		if r > limit {
			return fmt.Errorf("no fixed point after %d still rounds", limit)
		}
		p := s.placement()
		if seen[p] {
			return fmt.Errorf("oscillation: still round %d revisits a placement", r)
		}
		seen[p] = true
		did, err := s.round()
		if err != nil {
			return fmt.Errorf("still round %d: %w", r, err)
		}
		if !did {
			break
		}
	}
	d := s.distribution()
	for _, c := range s.chunks {
		sh := s.shard(c.Shard)
		if sh.Draining && !c.Jumbo {
			return fmt.Errorf("draining shard %s still holds the movable chunk %s", sh.ID, bsonutil.FormatDoc(c.Min))
		}
		if z := ZoneFor(s.zones, c.Min, c.Max); z != "" && !sh.inZone(z) && !c.Jumbo {
			return fmt.Errorf("chunk %s of zone %s ends on %s (zones %v)", bsonutil.FormatDoc(c.Min), z, sh.ID, sh.Zones)
		}
	}
	// Without zones the shards end within three chunk sizes of each other, unless the
	// shard with the most data (the donor MongoDB 7.0 picks) has only jumbo chunks left or
	// is at most at the ideal (MongoDB 7.0 counts every shard's data in it, a draining
	// shard's jumbo chunks too).
	if len(s.zones) == 0 {
		var low, high string
		var total int64
		for _, size := range d.DataSize {
			total += size
		}
		ideal := total / int64(len(d.DataSize))
		for _, sh := range s.shards {
			if sh.Draining && slices.ContainsFunc(s.chunks, func(c simChunk) bool { return c.Shard == sh.ID }) {
				continue // out of the round's available shards: only jumbo chunks left
			}
			if high == "" || d.DataSize[sh.ID] > d.DataSize[high] {
				high = sh.ID
			}
			if sh.Draining {
				continue
			}
			if low == "" || d.DataSize[sh.ID] < d.DataSize[low] {
				low = sh.ID
			}
		}
		movable := slices.ContainsFunc(s.chunks, func(c simChunk) bool { return c.Shard == high && !c.Jumbo })
		if d.DataSize[high]-d.DataSize[low] >= 3*simMaxChunk && d.DataSize[high] > ideal && movable {
			return fmt.Errorf("unbalanced at the fixed point: %s has %d, %s has %d", high, d.DataSize[high], low, d.DataSize[low])
		}
	}
	return nil
}

type simFail struct {
	seed  int64
	err   error
	trace string
}

func runSims(seeds int, k Knobs) (fails []simFail, total sim) {
	first, last := int64(1), int64(seeds)
	if *simSeed >= 0 {
		first, last = *simSeed, *simSeed
	}
	for seed := first; seed <= last; seed++ {
		s := newSim(seed, k)
		if err := s.run(); err != nil {
			fails = append(fails, simFail{seed, err, strings.Join(s.trace, "\n")})
		}
		total.moves += s.moves
		total.splits += s.splits
		total.jumboed += s.jumboed
		total.drained += s.drained
		total.added += s.added
	}
	return fails, total
}

func TestSimulation(t *testing.T) {
	start := time.Now()
	fails, total := runSims(*simSeeds, Knobs{})
	t.Logf("%d seeds in %v: %d moves, %d zone splits, %d became jumbo, %d shards drained, %d added",
		*simSeeds, time.Since(start).Round(time.Millisecond), total.moves, total.splits, total.jumboed, total.drained, total.added)
	for i, f := range fails {
		if i == 5 {
			t.Errorf("... %d more failing seeds", len(fails)-i)
			break
		}
		t.Errorf("seed %d: %v\nreplay: go test ./internal/sharding/balancer -run TestSimulation -balancer.seed %d -v\nlast events:\n%s",
			f.seed, f.err, f.seed, f.trace)
	}
	if *simSeed < 0 && (total.moves == 0 || total.splits == 0 || total.jumboed == 0 || total.drained == 0 || total.added == 0) {
		t.Errorf("schedule too gentle: %+v", total)
	}
}

// TestCheckerCatchesBrokenPolicies proves the checker can fail: each knob must be caught.
func TestCheckerCatchesBrokenPolicies(t *testing.T) {
	for _, c := range []struct {
		name string
		k    Knobs
	}{
		{"reuse-shards", Knobs{ReuseShards: true}},
		{"ignore-zones", Knobs{IgnoreZones: true}},
		{"move-jumbo", Knobs{MoveJumbo: true}},
		{"no-threshold", Knobs{NoThreshold: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fails, _ := runSims(300, c.k)
			if len(fails) == 0 {
				t.Fatalf("broken policy %q passed 300 seeds: the checker cannot fail", c.name)
			}
			t.Logf("caught at seed %d: %v", fails[0].seed, fails[0].err)
		})
	}
}

// TestSimulationDeterministic: a seed replays the same history.
func TestSimulationDeterministic(t *testing.T) {
	for _, seed := range []int64{1, 7, 42} {
		a, b := newSim(seed, Knobs{}), newSim(seed, Knobs{})
		ea, eb := a.run(), b.run()
		if fmt.Sprint(ea) != fmt.Sprint(eb) || a.placement() != b.placement() || strings.Join(a.trace, "|") != strings.Join(b.trace, "|") {
			t.Fatalf("seed %d not deterministic", seed)
		}
	}
}
