package balancer

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

func chunksAt(owners string, bounds ...int64) []Chunk {
	// owners: one shard letter per chunk ("aab" → s-a, s-a, s-b); bounds are the inner split points.
	var out []Chunk
	lo := minKey()
	for i, o := range owners {
		hi := maxKey()
		if i < len(bounds) {
			hi = key(bounds[i])
		}
		out = append(out, Chunk{Min: lo, Max: hi, Shard: "s" + string(o)})
		lo = hi
	}
	return out
}

func all(shards []Shard) map[string]bool {
	m := map[string]bool{}
	for _, s := range shards {
		m[s.ID] = true
	}
	return m
}

func TestZoneFor(t *testing.T) {
	zones := []ZoneRange{{Min: key(10), Max: key(20), Zone: "A"}, {Min: key(20), Max: key(30), Zone: "B"}}
	for _, c := range []struct {
		min, max bsoncore.Document
		want     string
	}{
		{key(10), key(20), "A"}, {key(12), key(15), "A"}, {key(20), key(30), "B"},
		{key(5), key(15), ""}, {key(15), key(25), ""}, {key(30), maxKey(), ""}, {minKey(), key(10), ""},
	} {
		if got := ZoneFor(zones, c.min, c.max); got != c.want {
			t.Errorf("[%s, %s): %q, want %q", bsonutil.FormatDoc(c.min), bsonutil.FormatDoc(c.max), got, c.want)
		}
	}
}

func TestSplitsForZones(t *testing.T) {
	d := Distribution{NS: "db.c", Chunks: chunksAt("abc", 0, 100),
		Zones: []ZoneRange{{Min: key(10), Max: key(20), Zone: "A"}, {Min: key(20), Max: key(100), Zone: "B"}, {Min: key(150), Max: maxKey(), Zone: "C"}}}
	got := SplitsForZones(d)
	var s []string
	for _, sp := range got {
		var pts []string
		for _, p := range sp.Points {
			pts = append(pts, bsonutil.FormatDoc(p))
		}
		s = append(s, fmt.Sprintf("%s@%s:%s", sp.Shard, bsonutil.FormatDoc(sp.Min), strings.Join(pts, ",")))
	}
	want := "sb@{ x: 0 }:{ x: 10 },{ x: 20 }|sc@{ x: 100 }:{ x: 150 }"
	if strings.Join(s, "|") != want {
		t.Fatalf("splits %s, want %s", strings.Join(s, "|"), want)
	}
	err := CheckZoneBoundaries(d)
	if !mongoerr.Is(err, mongoerr.IllegalOperation) || !strings.Contains(err.Error(), "fall in the middle of an existing chunk [{ x: 0 }, { x: 100 })") {
		t.Fatalf("CheckZoneBoundaries: %v", err)
	}
	d.Zones = []ZoneRange{{Min: key(0), Max: key(100), Zone: "A"}}
	if got := SplitsForZones(d); len(got) != 0 || CheckZoneBoundaries(d) != nil {
		t.Fatalf("aligned zone: %v", got)
	}
}

// The data-size rule of 7.0: a donor above the ideal moves a chunk to the least loaded shard
// only when the two differ by three maximum chunk sizes or more.
func TestBalanceThreshold(t *testing.T) {
	shards := []Shard{{ID: "sa"}, {ID: "sb"}, {ID: "sc"}}
	d := Distribution{NS: "db.c", Chunks: chunksAt("aab", 0, 10), MaxChunkSizeBytes: 10,
		DataSize: map[string]int64{"sa": 40, "sb": 11, "sc": 10}}
	migs, reason := Balance(shards, d, all(shards), Options{})
	if len(migs) != 1 || migs[0].From != "sa" || migs[0].To != "sc" || reason != ReasonChunksImbalance ||
		bsonutil.CompareDocuments(migs[0].Min, minKey()) != 0 {
		t.Fatalf("%v %v", migs, reason)
	}
	d.DataSize["sa"] = 39
	if migs, reason := Balance(shards, d, all(shards), Options{}); len(migs) != 0 || reason != ReasonNone {
		t.Fatalf("below the threshold: %v %v", migs, reason)
	}
	// A shard without statistics is neither donor nor recipient.
	d.DataSize = map[string]int64{"sa": 100, "sb": 100}
	if migs, _ := Balance(shards, d, all(shards), Options{}); len(migs) != 0 {
		t.Fatalf("no statistics for sc: %v", migs)
	}
}

func TestBalanceDrainFirst(t *testing.T) {
	shards := []Shard{{ID: "sa", Draining: true}, {ID: "sb"}, {ID: "sc", Zones: []string{"Z"}}, {ID: "sd"}}
	d := Distribution{NS: "db.c", Chunks: chunksAt("abbb", 0, 10, 20), MaxChunkSizeBytes: 10,
		Zones:    []ZoneRange{{Min: key(10), Max: key(20), Zone: "Z"}},
		DataSize: map[string]int64{"sa": 5, "sb": 100, "sc": 0, "sd": 0}}
	d.Chunks[0].Jumbo = false
	migs, reason := Balance(shards, d, all(shards), Options{})
	if reason != ReasonDrain || len(migs) != 2 {
		t.Fatalf("%v %v", migs, reason)
	}
	// Draining: sa → the least loaded non-draining shard (sc, 0, first in order), forced.
	if m := migs[0]; m.From != "sa" || m.To != "sc" || !m.ForceJumbo {
		t.Fatalf("drain migration %v", m)
	}
	// Then the zone violation of [10, 20) on sb: sc is busy, no other shard of Z: nothing;
	// then balancing sb → sd.
	if m := migs[1]; m.From != "sb" || m.To != "sd" || m.Reason != ReasonChunksImbalance {
		t.Fatalf("second migration %v", m)
	}
	// A draining shard with only jumbo chunks leaves the round's available shards.
	d.Chunks[0].Jumbo = true
	avail := all(shards)
	migs, _ = Balance(shards, d, avail, Options{})
	if avail["sa"] || len(migs) == 0 || migs[0].Reason != ReasonZoneViolation || migs[0].To != "sc" {
		t.Fatalf("jumbo on the draining shard: %v, available %v", migs, avail)
	}
}

// Property: on random distributions, every migration Balance returns moves a non-jumbo chunk
// its donor owns to an available, non-draining shard of the chunk's zone; no shard is in two
// migrations; reasons come in priority order; the shards of the migrations leave available.
func TestBalanceProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		s := newSim(int64(iter), Knobs{})
		for i := range s.shards {
			s.shards[i].Draining = rng.IntN(5) == 0
		}
		// Zones may cross chunks here (no splits applied): Balance must still behave.
		d := s.distribution()
		if rng.IntN(4) == 0 {
			delete(d.DataSize, s.shards[rng.IntN(len(s.shards))].ID)
		}
		avail := all(s.shards)
		if rng.IntN(4) == 0 {
			delete(avail, s.shards[rng.IntN(len(s.shards))].ID)
		}
		before := map[string]bool{}
		for k := range avail {
			before[k] = true
		}
		migs, first := Balance(s.shards, d, avail, Options{})
		// A second collection balanced in the same round shares the available shards: its
		// migrations may not touch a shard of the first's.
		other := newSim(int64(iter)+100000, Knobs{}).distribution()
		more, _ := Balance(s.shards, other, avail, Options{})
		for _, m := range more {
			for _, p := range migs {
				if m.From == p.From || m.From == p.To || m.To == p.From || m.To == p.To {
					t.Fatalf("iter %d: second collection reuses a shard: %v and %v", iter, m, p)
				}
			}
		}
		busy := map[string]bool{}
		last := ReasonNone
		for i, m := range migs {
			if i == 0 && m.Reason != first {
				t.Fatalf("iter %d: first reason %v, migration %v", iter, first, m)
			}
			if m.Reason < last {
				t.Fatalf("iter %d: reasons out of order: %v", iter, migs)
			}
			last = m.Reason
			if busy[m.From] || busy[m.To] || !before[m.From] || !before[m.To] || avail[m.From] || avail[m.To] {
				t.Fatalf("iter %d: shard reused or unavailable: %v", iter, migs)
			}
			busy[m.From], busy[m.To] = true, true
			var c *Chunk
			for j := range d.Chunks {
				if bsonutil.CompareDocuments(d.Chunks[j].Min, m.Min) == 0 {
					c = &d.Chunks[j]
				}
			}
			to := s.shard(m.To)
			if c == nil || c.Shard != m.From || c.Jumbo || to.Draining || m.From == m.To {
				t.Fatalf("iter %d: bad migration %v (chunk %+v)", iter, m, c)
			}
			if z := ZoneFor(d.Zones, c.Min, c.Max); z != "" && !to.inZone(z) {
				t.Fatalf("iter %d: recipient outside zone %s: %v", iter, z, m)
			}
			if _, ok := d.DataSize[m.To]; !ok {
				t.Fatalf("iter %d: recipient without statistics: %v", iter, m)
			}
		}
		if len(before) < 2 && len(migs) > 0 {
			t.Fatalf("iter %d: migrations with fewer than two available shards", iter)
		}
	}
}
