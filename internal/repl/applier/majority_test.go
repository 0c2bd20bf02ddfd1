package applier_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/repl/applier"
	"humongo/internal/repl/applier/repltest"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// TestMajorityWriteDoesNotWaitOutTheLongPoll: the secondaries' oplog fetchers long-poll the
// primary with a 30 s awaitData getMore; w:"majority" inserts must complete because the
// oplog write wakes those getMores (and the applied batch is reported at once), not because
// a poll ran out. Asserted structurally on the primary's awaitData counters: during the
// inserts no wait expired and waits ended by notification. Latencies are logged only.
func TestMajorityWriteDoesNotWaitOutTheLongPoll(t *testing.T) {
	const longPoll = 30 * time.Second
	ns := repltest.StartReplSet(t, repltest.ReplSetOptions{Member: repltest.MemberOptions{AwaitTime: longPoll}})
	p := ns[0]
	stats := p.Srv.State().Cursors().AwaitStats()
	coll := p.Client.Database("app").Collection("wmaj", options.Collection().SetWriteConcern(writeconcern.Majority()))
	// Liveness only: a single insert that waited for a poll to run out would exceed this.
	ctx, cancel := context.WithTimeout(context.Background(), longPoll-5*time.Second)
	defer cancel()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: -1}}); err != nil { // creates the collection
		t.Fatalf("first w:majority insert: %v", err)
	}
	notified0, expired0 := stats.Notified.Load(), stats.Expired.Load()
	const n = 50
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatalf("w:majority insert %d: %v", i, err)
		}
		lat = append(lat, time.Since(t0))
	}
	notified, expired := stats.Notified.Load()-notified0, stats.Expired.Load()-expired0
	slices.Sort(lat)
	t.Logf("%d w:majority inserts: p50 %v, max %v; primary's awaitData waits: %d notified, %d expired",
		n, lat[n/2], lat[n-1], notified, expired)
	if expired != 0 {
		t.Errorf("%d awaitData getMores on the primary waited out their maxTimeMS during w:majority inserts", expired)
	}
	if notified == 0 {
		t.Errorf("no awaitData getMore on the primary was woken by an oplog write")
	}
}

// countRaw counts ns's documents on n straight from its storage engine at the newest data:
// what a read without the lastApplied timestamp would see.
func countRaw(t *testing.T, n *repltest.Node, ns string) int {
	t.Helper()
	meta, ok := n.DB.Catalog.Latest().ByNS(ns)
	if !ok {
		return 0
	}
	coll, err := n.DB.Colls.ByUUID(meta.UUID)
	if err != nil {
		t.Fatal(err)
	}
	ru := n.DB.Engine.NewRecoveryUnit()
	defer ru.Close()
	cur, err := coll.RecordStore().NewCursor(ru, false)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	c := 0
	for {
		if _, _, ok := cur.Next(); !ok {
			break
		}
		c++
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return c
}

// batchGate pauses the appliers of chosen members after a batch touching ns has committed
// its writes and before their lastApplied moves.
type batchGate struct {
	ns      string
	engines map[*storage.Engine]bool
	paused  chan struct{} // closed at the first pause
	release chan struct{}
	once    sync.Once
	hits    atomic.Int64

	mu     sync.Mutex
	bounds []int // cumulative inserts into ns after each gated batch
}

// isBound reports whether n inserts is a batch boundary seen by the gate.
func (g *batchGate) isBound(n int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Contains(g.bounds, n)
}

func newBatchGate(t *testing.T, ns string, members ...*repltest.Node) *batchGate {
	g := &batchGate{ns: ns, engines: map[*storage.Engine]bool{}, paused: make(chan struct{}), release: make(chan struct{}),
		bounds: []int{0}}
	for _, m := range members {
		g.engines[m.DB.Engine] = true
	}
	remove := applier.SetBeforeBatchCompletesHook(func(e *storage.Engine, entries []*oplog.Entry) {
		if !g.engines[e] || !slices.ContainsFunc(entries, func(x *oplog.Entry) bool { return x.NS == ns }) {
			return
		}
		g.hits.Add(1)
		g.mu.Lock()
		n := g.bounds[len(g.bounds)-1]
		for _, x := range entries {
			if x.NS == ns && x.Op == "i" {
				n++
			}
		}
		g.bounds = append(g.bounds, n)
		g.mu.Unlock()
		g.once.Do(func() { close(g.paused) })
		<-g.release
	})
	// Registered after the members' own cleanups, so it runs first: a paused applier must
	// be let go before its node stops.
	t.Cleanup(func() {
		g.open()
		remove()
	})
	return g
}

func (g *batchGate) open() {
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

func (g *batchGate) waitPaused(t *testing.T) {
	t.Helper()
	select {
	case <-g.paused:
	case <-time.After(30 * time.Second):
		t.Fatal("no applier batch reached the gate")
	}
}

func ids(t *testing.T, cur *mongo.Cursor) []int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []int32
	for cur.Next(ctx) {
		out = append(out, cur.Current.Lookup("_id").Int32())
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSecondaryReadsNeverSeeHalfABatch: a secondary's applier has committed every write of a
// batch of 100 inserts (the raw storage shows them) but has not moved lastApplied yet. Reads
// through the command layer with a secondary read preference — find, a getMore of a cursor
// opened before the batch, count, distinct and aggregate — see none of the batch; once the
// batch completes they see all of it.
func TestSecondaryReadsNeverSeeHalfABatch(t *testing.T) {
	ns := repltest.StartReplSet(t, repltest.ReplSetOptions{})
	p, s := ns[0], ns[1]
	const coll = "app.batches"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wmaj := options.Collection().SetWriteConcern(writeconcern.Majority())
	pc := p.Client.Database("app").Collection("batches", wmaj)
	seeds := []any{bson.D{{Key: "_id", Value: 0}, {Key: "g", Value: "seed"}}, bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: "seed"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "g", Value: "seed"}}}
	if _, err := pc.InsertMany(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	top := repltest.TopOfOplog(t, p)
	waitLastApplied(t, s, top)

	sc := s.Client.Database("app").Collection("batches", options.Collection().SetReadPreference(readpref.Secondary()))
	// A cursor opened before the batch, with two seeds still to come in getMores.
	early, err := sc.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = early.Close(context.Background()) }()
	if !early.Next(ctx) {
		t.Fatalf("no first document: %v", early.Err())
	}
	// Another one, iterated only after the batch: each getMore reads at the lastApplied of
	// its time (MongoDB's kLastApplied read source), so it sees the batch then.
	late, err := sc.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = late.Close(context.Background()) }()
	if !late.Next(ctx) {
		t.Fatalf("no first document: %v", late.Err())
	}

	g := newBatchGate(t, coll, s)
	batch := make([]any, 100)
	for i := range batch {
		batch[i] = bson.D{{Key: "_id", Value: 100 + i}, {Key: "g", Value: "batch"}}
	}
	if _, err := p.Client.Database("app").Collection("batches").InsertMany(ctx, batch); err != nil {
		t.Fatal(err)
	}
	g.waitPaused(t)
	raw := countRaw(t, s, coll)
	t.Logf("paused batch: %d documents in the secondary's storage, %d of them committed by the paused batch", raw, raw-3)
	if raw <= 3 {
		t.Fatalf("the paused batch committed no document (raw count %d): the gate is in the wrong place", raw)
	}
	if got := ids(t, early); !slices.Equal(got, []int32{1, 2}) {
		t.Errorf("getMore of a cursor opened before the batch returned %v, want [1 2]", got)
	}
	cur, err := sc.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, cur); !slices.Equal(got, []int32{0, 1, 2}) {
		t.Errorf("find on the secondary during the batch returned %v, want the 3 seeds", got)
	}
	if n, err := sc.CountDocuments(ctx, bson.D{}); err != nil || n != 3 {
		t.Errorf("countDocuments on the secondary during the batch = %d, %v; want 3", n, err)
	}
	// With a predicate: a count without one answers from the collection's record count,
	// metadata that is not versioned by timestamp (as MongoDB's fast count), so it may show
	// the batch's committed inserts early.
	var cnt bson.Raw
	if err := s.Client.Database("app").RunCommand(ctx, bson.D{{Key: "count", Value: "batches"},
		{Key: "query", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 0}}}}}},
		options.RunCmd().SetReadPreference(readpref.Secondary())).Decode(&cnt); err != nil {
		t.Fatal(err)
	} else if n := cnt.Lookup("n").AsInt64(); n != 3 {
		t.Errorf("count on the secondary during the batch = %d, want 3", n)
	}
	var gs []string
	if err := sc.Distinct(ctx, "g", bson.D{}).Decode(&gs); err != nil {
		t.Fatal(err)
	} else if !slices.Equal(gs, []string{"seed"}) {
		t.Errorf("distinct on the secondary during the batch = %v, want [seed]", gs)
	}

	g.open()
	want := 3 + len(batch)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := sc.CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		// The batch's documents may have come in several applier batches; a read must end
		// at one of their boundaries (recorded before lastApplied moves past them).
		if !g.isBound(int(n) - 3) {
			t.Fatalf("count on the secondary = %d: not at an applier batch boundary %v", n, g.bounds)
		}
		if n == int64(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the secondary never showed the whole batch (count %d)", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := ids(t, late); len(got) != want-1 || got[0] != 1 || got[len(got)-1] != 199 {
		t.Errorf("getMores after the batch of a cursor opened before it returned %v, want 1, 2, 100..199", got)
	}
}

func waitLastApplied(t *testing.T, n *repltest.Node, top bson.Timestamp) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := n.RC.LastApplied()
		if a.TS.Secs() > top.T || (a.TS.Secs() == top.T && a.TS.Inc() >= top.I) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not apply up to %v (lastApplied %v)", n.Host, top, a)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMajorityCursorReadsOnlyCommittedData is MongoDB's
// read_concern_majority_getmore_secondaries.js on the primary: with both secondaries' appliers
// held before they complete a batch, writes are not majority-committed, and a majority
// cursor's first batch and getMores return only the committed documents. After the
// secondaries go on, a new majority read sees everything.
func TestMajorityCursorReadsOnlyCommittedData(t *testing.T) {
	ns := repltest.StartReplSet(t, repltest.ReplSetOptions{})
	p := ns[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wmaj := p.Client.Database("test").Collection("coll", options.Collection().SetWriteConcern(writeconcern.Majority()))
	for i := range 4 {
		if _, err := wmaj.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	g := newBatchGate(t, "test.coll", ns[1], ns[2])
	w1 := p.Client.Database("test").Collection("coll", options.Collection().SetWriteConcern(writeconcern.W1()))
	for i := 4; i < 8; i++ {
		if _, err := w1.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	g.waitPaused(t)
	major := p.Client.Database("test").Collection("coll", options.Collection().SetReadConcern(readconcern.Majority()))
	cur, err := major.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, cur); !slices.Equal(got, []int32{0, 1, 2, 3}) {
		t.Errorf("majority find and getMores returned %v, want the committed [0 1 2 3]", got)
	}
	// A majority cursor whose getMores run after the commit point moved: they read the
	// newest committed snapshot of their time (MongoDB's kMajorityCommitted read source).
	before, err := major.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = before.Close(context.Background()) }()
	for range 2 {
		if !before.Next(ctx) {
			t.Fatalf("majority cursor: %v", before.Err())
		}
	}
	// The same for an aggregation cursor.
	beforeAgg, err := major.Aggregate(ctx, bson.A{bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}},
		options.Aggregate().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = beforeAgg.Close(context.Background()) }()
	for range 2 {
		if !beforeAgg.Next(ctx) {
			t.Fatalf("majority aggregation cursor: %v", beforeAgg.Err())
		}
	}
	local, err := w1.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, local); len(got) != 8 {
		t.Errorf("local find on the primary returned %v, want all 8", got)
	}
	g.open()
	if _, err := wmaj.InsertOne(ctx, bson.D{{Key: "_id", Value: 8}}); err != nil {
		t.Fatal(err)
	}
	cur, err = major.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, cur); len(got) != 9 {
		t.Errorf("majority find after the secondaries caught up returned %v, want 9 documents", got)
	}
	if got := ids(t, before); !slices.Equal(got, []int32{2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("getMores of a majority cursor after the commit point moved returned %v, want [2..8]", got)
	}
	if got := ids(t, beforeAgg); !slices.Equal(got, []int32{2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("getMores of a majority aggregation cursor after the commit point moved returned %v, want [2..8]", got)
	}
}

// BenchmarkMajorityInsert measures acknowledged w:"majority" inserts of 1 KB documents on an
// in-process 3-member set (every member and the client share the machine). Run with
// -cpuprofile to see the w:"majority" path; threads: 1, 16, 64.
func BenchmarkMajorityInsert(b *testing.B) {
	benchInsert(b, 3, writeconcern.Majority())
}

// BenchmarkOneMemberInsert is the primary's share: a one-member set, w:1 and w:"majority".
func BenchmarkOneMemberInsert(b *testing.B) {
	b.Run("w=1", func(b *testing.B) { benchInsert(b, 1, writeconcern.W1()) })
	b.Run("w=majority", func(b *testing.B) { benchInsert(b, 1, writeconcern.Majority()) })
}

func benchInsert(b *testing.B, members int, wc *writeconcern.WriteConcern) {
	ns := repltest.StartReplSet(b, repltest.ReplSetOptions{Members: members})
	coll := ns[0].Client.Database("bench").Collection("usertable", options.Collection().SetWriteConcern(wc))
	val := make([]byte, 100)
	for i := range val {
		val[i] = 'a' + byte(i%26)
	}
	doc := func(id int64) bson.D {
		d := bson.D{{Key: "_id", Value: fmt.Sprintf("user%d", id)}}
		for f := range 10 {
			d = append(d, bson.E{Key: fmt.Sprintf("field%d", f), Value: string(val)})
		}
		return d
	}
	var next atomic.Int64
	for _, threads := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			ctx := context.Background()
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			var failed atomic.Value
			b.ResetTimer()
			for range threads {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						if _, err := coll.InsertOne(ctx, doc(next.Add(1))); err != nil {
							failed.Store(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
		})
	}
}
