package balancer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

// fakeCluster is an in-memory config catalog (answering the finds, updates and inserts the
// balancer runs on its node) and fake shards (answering _shardsvrGetStatsForBalancing from
// the chunks' sizes, splitChunk and _shardsvrMoveRange by changing the catalog as the
// config server's commits would).
type fakeCluster struct {
	t  *testing.T
	mu sync.Mutex

	settings  []bsoncore.Document
	shards    []Shard
	coll      catalogcache.Collection
	collExtra bson.D // extra fields of the config.collections entry (noBalance...)
	chunks    []routing.Chunk
	sizes     map[string]int64 // chunk min (formatted) → bytes
	tags      []ZoneRange
	actionlog []bsoncore.Document

	// moves in flight per shard, the most ever in flight at once, and the moves sent
	inFlight    map[string]int
	maxInFlight int
	current     int
	moves       []string
	splits      []string
	// tooBig chunks answer ChunkTooBig
	tooBig map[string]bool
	// armed makes the next move wait (on waiting) until another one starts, which proves
	// that a round's moves run concurrently
	armed   bool
	waiting chan struct{}
}

func newFakeCluster(t *testing.T, shards []Shard, owners string, bounds ...int64) *fakeCluster {
	f := &fakeCluster{t: t, shards: shards, sizes: map[string]int64{}, inFlight: map[string]int{}, tooBig: map[string]bool{}}
	f.coll = catalogcache.Collection{NS: "db.c", UUID: catalog.UUID{1, 2, 3}, Pattern: shardkey.MustParse(bsoncore.NewDocumentBuilder().AppendInt32("x", 1).Build()),
		Gen: routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 10, I: 1}}}
	v := routing.ChunkVersion{Generation: f.coll.Gen, Major: 1}
	for _, c := range chunksAt(owners, bounds...) {
		v.Minor++
		f.chunks = append(f.chunks, routing.Chunk{ID: bson.NewObjectID(), CollectionUUID: f.coll.UUID, Min: c.Min, Max: c.Max, Shard: c.Shard, Version: v})
		f.sizes[bsonutil.FormatDoc(c.Min)] = 1 << 20
	}
	return f
}

func cursorReply(docs []bsoncore.Document) bsoncore.Document {
	arr := bsoncore.NewArrayBuilder()
	for _, d := range docs {
		arr.AppendDocument(d)
	}
	return bsoncore.NewDocumentBuilder().AppendDocument("cursor", bsoncore.NewDocumentBuilder().AppendInt64("id", 0).
		AppendArray("firstBatch", arr.Build()).Build()).Build()
}

func (f *fakeCluster) run(_ context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := bsoncore.NewDocumentBuilder().AppendInt32("ok", 1).Build()
	name := cmd.Index(0).Key()
	switch name {
	case "find":
		var docs []bsoncore.Document
		switch coll := cmd.Lookup("find").StringValue(); coll {
		case "settings":
			docs = f.settings
		case "shards":
			for _, s := range f.shards {
				b := bsoncore.NewDocumentBuilder().AppendString("_id", s.ID).AppendString("host", s.ID+"/h:1")
				if s.Draining {
					b.AppendBoolean("draining", true)
				}
				if len(s.Zones) > 0 {
					a := bsoncore.NewArrayBuilder()
					for _, z := range s.Zones {
						a.AppendString(z)
					}
					b.AppendArray("tags", a.Build())
				}
				docs = append(docs, b.Build())
			}
		case "collections":
			d := configclient.CollectionDoc(f.coll, 1)
			if len(f.collExtra) > 0 {
				extra, _ := bson.Marshal(f.collExtra)
				els, _ := bsoncore.Document(extra).Elements()
				b := bsoncore.NewDocumentBuilder()
				de, _ := d.Elements()
				for _, e := range append(de, els...) {
					b.AppendValue(e.Key(), e.Value())
				}
				d = b.Build()
			}
			if id, ok := cmd.Lookup("filter", "_id").StringValueOK(); !ok || id == f.coll.NS {
				docs = append(docs, d)
			}
		case "chunks":
			for _, c := range f.chunks {
				docs = append(docs, c.ConfigDoc())
			}
		case "tags":
			for _, z := range f.tags {
				docs = append(docs, bsoncore.NewDocumentBuilder().AppendString("ns", f.coll.NS).AppendDocument("min", z.Min).
					AppendDocument("max", z.Max).AppendString("tag", z.Zone).Build())
			}
		default:
			f.t.Errorf("unexpected find on config.%s", coll)
		}
		return cursorReply(docs), nil
	case "update":
		u, _ := cmd.Lookup("updates").Array().Index(0).DocumentOK()
		min := u.Lookup("q", "min").Document()
		for i := range f.chunks {
			if bsonutil.CompareDocuments(f.chunks[i].Min, min) == 0 {
				f.chunks[i].Jumbo = u.Lookup("u", "$set", "jumbo").Boolean()
			}
		}
		return ok, nil
	case "create":
		return ok, nil
	case "insert":
		d, _ := cmd.Lookup("documents").Array().Index(0).DocumentOK()
		f.actionlog = append(f.actionlog, d)
		return ok, nil
	}
	f.t.Errorf("unexpected command on config: %s", cmd)
	return nil, mongoerr.New(mongoerr.CommandNotFound, "no such command")
}

func (f *fakeCluster) chunkIndex(min bsoncore.Document) int {
	return slices.IndexFunc(f.chunks, func(c routing.Chunk) bool { return bsonutil.CompareDocuments(c.Min, min) == 0 })
}

// Run is the shards' side.
func (f *fakeCluster) Run(ctx context.Context, shard, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	switch cmd.Index(0).Key() {
	case "_shardsvrGetStatsForBalancing":
		f.mu.Lock()
		defer f.mu.Unlock()
		var size int64
		for _, c := range f.chunks {
			if c.Shard == shard {
				size += f.sizes[bsonutil.FormatDoc(c.Min)]
			}
		}
		return bsoncore.NewDocumentBuilder().AppendArray("stats", bsoncore.NewArrayBuilder().AppendDocument(
			bsoncore.NewDocumentBuilder().AppendString("namespace", f.coll.NS).AppendInt64("collSize", size).Build()).Build()).Build(), nil
	case "splitChunk":
		f.mu.Lock()
		defer f.mu.Unlock()
		i := f.chunkIndex(cmd.Lookup("min").Document())
		if i < 0 || f.chunks[i].Shard != shard || cmd.Lookup("from").StringValue() != shard {
			f.t.Errorf("splitChunk to the wrong shard %s: %s", shard, cmd)
			return nil, mongoerr.New(mongoerr.ConflictingOperationInProgress, "no such chunk")
		}
		orig := f.chunks[i]
		keys, _ := cmd.Lookup("splitKeys").Array().Values()
		var pieces []routing.Chunk
		lo := orig.Min
		for j := 0; j <= len(keys); j++ {
			hi := orig.Max
			if j < len(keys) {
				hi = keys[j].Document()
			}
			p := orig
			p.Min, p.Max = lo, hi
			f.sizes[bsonutil.FormatDoc(lo)] = f.sizes[bsonutil.FormatDoc(orig.Min)]
			pieces = append(pieces, p)
			lo = hi
		}
		f.chunks = slices.Concat(f.chunks[:i], pieces, f.chunks[i+1:])
		f.splits = append(f.splits, fmt.Sprintf("%s@%s", shard, bsonutil.FormatDoc(orig.Min)))
		return bsoncore.NewDocumentBuilder().Build(), nil
	case "_shardsvrMoveRange":
		if cmd.Lookup("fromShard").StringValue() != shard {
			f.t.Errorf("_shardsvrMoveRange sent to %s, not its donor: %s", shard, cmd)
		}
		if e, _ := cmd.Lookup("epoch").ObjectIDOK(); bson.ObjectID(e) != f.coll.Gen.Epoch {
			f.t.Errorf("_shardsvrMoveRange with epoch %x", e)
		}
		to := cmd.Lookup("toShard").StringValue()
		f.mu.Lock()
		f.inFlight[shard]++
		f.inFlight[to]++
		if f.inFlight[shard] > 1 || f.inFlight[to] > 1 {
			f.t.Errorf("a shard is in two migrations at once: %s", cmd)
		}
		f.current++
		f.maxInFlight = max(f.maxInFlight, f.current)
		// When armed, the first move waits until a second one starts.
		var wait chan struct{}
		switch {
		case f.armed:
			f.armed, f.waiting = false, make(chan struct{})
			wait = f.waiting
		case f.waiting != nil:
			close(f.waiting)
			f.waiting = nil
		}
		f.mu.Unlock()
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
			}
		}
		defer func() {
			f.mu.Lock()
			f.inFlight[shard]--
			f.inFlight[to]--
			f.current--
			f.mu.Unlock()
		}()
		f.mu.Lock()
		defer f.mu.Unlock()
		i := f.chunkIndex(cmd.Lookup("min").Document())
		if i < 0 || f.chunks[i].Shard != shard {
			return nil, mongoerr.New(mongoerr.ConflictingOperationInProgress, "no such chunk")
		}
		if f.tooBig[bsonutil.FormatDoc(f.chunks[i].Min)] && cmd.Lookup("forceJumbo").StringValue() == "doNotForce" {
			return nil, mongoerr.New(mongoerr.ChunkTooBig, "Cannot move chunk: the maximum number of documents for a chunk is 1, the maximum chunk size is 1, average document size is 1. Found 2 documents in chunk")
		}
		f.chunks[i].Shard = to
		f.moves = append(f.moves, fmt.Sprintf("%s->%s@%s", shard, to, bsonutil.FormatDoc(f.chunks[i].Min)))
		return bsoncore.NewDocumentBuilder().Build(), nil
	}
	f.t.Errorf("unexpected shard command %s", cmd)
	return nil, mongoerr.New(mongoerr.CommandNotFound, "no such command")
}

func (f *fakeCluster) perShard() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]int{}
	for _, c := range f.chunks {
		m[c.Shard]++
	}
	return m
}

func newTestBalancer(f *fakeCluster) *Balancer {
	return New(Config{Run: f.run, Shards: f, Host: "cfg:1", Interval: func() time.Duration { return time.Millisecond },
		Throttle: func() time.Duration { return time.Millisecond }})
}

func doc(t *testing.T, d bson.D) bsoncore.Document {
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Rounds even out 12 chunks of 1 MB from two shards over four (chunk size 1 MB: a 3 MB
// difference moves), with the round's migrations running concurrently on disjoint shards.
func TestRoundsEvenOut(t *testing.T) {
	shards := []Shard{{ID: "s0"}, {ID: "s1"}, {ID: "s2"}, {ID: "s3"}}
	f := newFakeCluster(t, shards, "000000111111", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	f.settings = []bsoncore.Document{doc(t, bson.D{{Key: "_id", Value: "chunksize"}, {Key: "value", Value: 1}})}
	b := newTestBalancer(f)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.armed = true // the first round's two moves must overlap
	for round := 0; ; round++ {
		if round > 20 {
			t.Fatalf("no fixed point after 20 rounds: %v", f.perShard())
		}
		res, err := b.Round(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Candidates > 2 {
			t.Fatalf("round %d scheduled %d migrations over 4 shards", round, res.Candidates)
		}
		if res.Candidates == 0 {
			break
		}
	}
	got := f.perShard()
	// 4, 4, 2, 2: no two shards 3 MB apart any more.
	if got["s0"] != 4 || got["s1"] != 4 || got["s2"] != 2 || got["s3"] != 2 {
		t.Fatalf("not balanced: %v (moves %v)", got, f.moves)
	}
	if f.maxInFlight < 2 {
		t.Fatalf("migrations never ran concurrently (max in flight %d)", f.maxInFlight)
	}
}

// ChunkTooBig flags the chunk jumbo in config.chunks; the next rounds never schedule it.
func TestChunkTooBigMarksJumbo(t *testing.T) {
	shards := []Shard{{ID: "s0"}, {ID: "s1"}}
	f := newFakeCluster(t, shards, "0000", 1, 2, 3)
	f.settings = []bsoncore.Document{doc(t, bson.D{{Key: "_id", Value: "chunksize"}, {Key: "value", Value: 1}})}
	for _, c := range f.chunks {
		f.tooBig[bsonutil.FormatDoc(c.Min)] = true
	}
	b := newTestBalancer(f)
	ctx := context.Background()
	res, err := b.Round(ctx)
	if err != nil || res.Candidates != 1 || res.Jumbo != 1 || res.Moved != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if !f.chunks[0].Jumbo {
		t.Fatalf("the chunk was not flagged jumbo: %+v", f.chunks[0])
	}
	res, _ = b.Round(ctx)
	if res.Candidates != 1 || bsonutil.CompareDocuments(f.chunks[1].Min, key(1)) != 0 || !f.chunks[1].Jumbo {
		t.Fatalf("second round: %+v, chunks %v", res, f.chunks)
	}
	for _, m := range f.moves {
		t.Fatalf("a too big chunk moved: %s", m)
	}
	// attemptToBalanceJumboChunks: the size is no failure, but flagged chunks still never move.
	f.settings = append(f.settings, doc(t, bson.D{{Key: "_id", Value: "balancer"}, {Key: "attemptToBalanceJumboChunks", Value: true}}))
	res, _ = b.Round(ctx)
	if res.Candidates != 1 || res.Moved != 1 || len(f.moves) != 1 || f.moves[0] != "s0->s1@{ x: 2 }" {
		t.Fatalf("forced round: %+v %v", res, f.moves)
	}
}

// A zone boundary inside a chunk is split on the owning shard, then the zone's chunk moves
// to the zone's shard; the round is logged to config.actionlog.
func TestZoneSplitThenMove(t *testing.T) {
	shards := []Shard{{ID: "s0"}, {ID: "s1", Zones: []string{"Z"}}}
	f := newFakeCluster(t, shards, "00", 0)
	f.tags = []ZoneRange{{Min: key(10), Max: key(20), Zone: "Z"}}
	b := newTestBalancer(f)
	res, err := b.Round(context.Background())
	if err != nil || res.Splits != 1 || res.Moved != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if len(f.splits) != 1 || f.splits[0] != "s0@{ x: 0 }" || len(f.moves) != 1 || f.moves[0] != "s0->s1@{ x: 10 }" {
		t.Fatalf("splits %v moves %v", f.splits, f.moves)
	}
	compliant, violation, mb, err := b.CollectionStatus(context.Background(), "db.c")
	if err != nil || !compliant || violation != "" || mb != 128 {
		t.Fatalf("status after: %v %q %d %v", compliant, violation, mb, err)
	}
}

func TestRoundHonoursSettings(t *testing.T) {
	shards := []Shard{{ID: "s0"}, {ID: "s1"}}
	f := newFakeCluster(t, shards, "0000", 1, 2, 3)
	f.settings = []bsoncore.Document{doc(t, bson.D{{Key: "_id", Value: "chunksize"}, {Key: "value", Value: 1}})}
	b := newTestBalancer(f)
	ctx := context.Background()
	compliant, violation, _, err := b.CollectionStatus(ctx, "db.c")
	if err != nil || compliant || violation != "chunksImbalance" {
		t.Fatalf("status: %v %q %v", compliant, violation, err)
	}
	if _, _, _, err := b.CollectionStatus(ctx, "db.other"); !mongoerr.Is(err, mongoerr.NamespaceNotSharded) {
		t.Fatalf("unsharded: %v", err)
	}
	for _, c := range []struct {
		name     string
		settings bson.D
		extra    bson.D
		now      time.Time
	}{
		{"stopped", bson.D{{Key: "_id", Value: "balancer"}, {Key: "stopped", Value: true}}, nil, time.Now()},
		{"mode off", bson.D{{Key: "_id", Value: "balancer"}, {Key: "mode", Value: "off"}}, nil, time.Now()},
		{"outside the window", bson.D{{Key: "_id", Value: "balancer"}, {Key: "activeWindow", Value: bson.D{{Key: "start", Value: "01:00"}, {Key: "stop", Value: "02:00"}}}},
			nil, time.Date(2026, 1, 1, 3, 0, 0, 0, time.Local)},
		{"noBalance", nil, bson.D{{Key: "noBalance", Value: true}}, time.Now()},
	} {
		f.settings = f.settings[:1]
		if c.settings != nil {
			f.settings = append(f.settings, doc(t, c.settings))
		}
		f.collExtra = c.extra
		b.cfg.Now = func() time.Time { return c.now }
		res, err := b.Round(ctx)
		if err != nil || res.Candidates != 0 || len(f.moves) != 0 {
			t.Fatalf("%s: %+v %v %v", c.name, res, err, f.moves)
		}
	}
	// Inside a window crossing midnight, it balances.
	f.settings = append(f.settings[:1], doc(t, bson.D{{Key: "_id", Value: "balancer"}, {Key: "activeWindow", Value: bson.D{{Key: "start", Value: "23:00"}, {Key: "stop", Value: "02:00"}}}}))
	f.collExtra = nil
	b.cfg.Now = func() time.Time { return time.Date(2026, 1, 1, 1, 30, 0, 0, time.Local) }
	if res, err := b.Round(ctx); err != nil || res.Moved != 1 {
		t.Fatalf("inside the window: %+v %v", res, err)
	}
}

func TestParseBalancerSettings(t *testing.T) {
	for _, c := range []struct {
		d    bson.D
		mode string
		code mongoerr.Code
	}{
		{bson.D{}, "full", 0},
		{bson.D{{Key: "stopped", Value: false}}, "full", 0},
		{bson.D{{Key: "stopped", Value: true}, {Key: "mode", Value: "full"}}, "off", 0},
		{bson.D{{Key: "mode", Value: "autoSplitOnly"}}, "off", 0},
		{bson.D{{Key: "activeWindow", Value: bson.D{}}}, "", mongoerr.BadValue},
		{bson.D{{Key: "activeWindow", Value: bson.D{{Key: "start", Value: "10:00"}}}}, "", mongoerr.BadValue},
		{bson.D{{Key: "activeWindow", Value: bson.D{{Key: "start", Value: "25:00"}, {Key: "stop", Value: "10:00"}}}}, "", mongoerr.BadValue},
		{bson.D{{Key: "activeWindow", Value: bson.D{{Key: "start", Value: "10:00"}, {Key: "stop", Value: "10:00"}}}}, "", mongoerr.BadValue},
		{bson.D{{Key: "stopped", Value: "yes"}}, "", mongoerr.TypeMismatch},
	} {
		s, err := ParseBalancerSettings(doc(t, c.d))
		if c.code != 0 {
			if !mongoerr.Is(err, c.code) {
				t.Errorf("%v: %v, want code %v", c.d, err, c.code)
			}
			continue
		}
		if err != nil || s.Mode != c.mode {
			t.Errorf("%v: %+v %v, want mode %s", c.d, s, err, c.mode)
		}
	}
	if _, err := ParseChunkSize(doc(t, bson.D{{Key: "value", Value: 0}})); !mongoerr.Is(err, mongoerr.BadValue) {
		t.Errorf("chunksize 0: %v", err)
	}
	if n, err := ParseChunkSize(doc(t, bson.D{{Key: "value", Value: 64}})); err != nil || n != 64<<20 {
		t.Errorf("chunksize 64: %d %v", n, err)
	}
}

// fakeNode is a replica set member whose primary state the test flips.
type fakeNode struct {
	mu      sync.Mutex
	primary bool
	term    int64
	changed chan struct{}
}

func (n *fakeNode) TopologyVersion() (int64, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.term, n.changed
}
func (n *fakeNode) IsWritablePrimary() bool { n.mu.Lock(); defer n.mu.Unlock(); return n.primary }
func (n *fakeNode) Term() int64             { n.mu.Lock(); defer n.mu.Unlock(); return n.term }
func (n *fakeNode) set(primary bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.primary = primary
	if primary {
		n.term++
	}
	close(n.changed)
	n.changed = make(chan struct{})
}

// The loop runs rounds only while the node is primary, and again after a new step-up.
func TestLoopFollowsStepUpAndDown(t *testing.T) {
	shards := []Shard{{ID: "s0"}, {ID: "s1"}}
	f := newFakeCluster(t, shards, "00", 1)
	node := &fakeNode{changed: make(chan struct{})}
	b := newTestBalancer(f)
	b.cfg.Node = node
	stop := b.Start(context.Background())
	defer stop()
	waitRounds := func(atLeast int64) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, n := b.Status(); n >= atLeast {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d rounds", atLeast)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if b.running() {
		t.Fatal("the balancer runs on a secondary")
	}
	node.set(true)
	waitRounds(3)
	node.set(false)
	deadline := time.Now().Add(10 * time.Second)
	for b.running() {
		if time.Now().After(deadline) {
			t.Fatal("the balancer did not stop on step-down")
		}
		time.Sleep(time.Millisecond)
	}
	_, n := b.Status()
	if in, again := b.Status(); in || again != n {
		t.Fatalf("rounds after step-down: %v %d→%d", in, n, again)
	}
	node.set(true)
	waitRounds(n + 3)
	if err := b.JoinCurrentRound(context.Background()); err != nil {
		t.Fatal(err)
	}
}
