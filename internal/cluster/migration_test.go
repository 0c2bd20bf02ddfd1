package cluster

// Chunk migration through the router (spec: sharding.md "The live migration protocol"):
// chunks move back and forth between two shards while a writer inserts, updates and deletes
// through the router and a reader counts; afterwards no acknowledged write is lost or
// duplicated, every count was within what the acknowledged writes allow, each document is
// owned by exactly one shard, and the coordinators are gone. Bad moveChunk/moveRange input
// answers MongoDB's errors with nothing changed. A chunk of 1 KB documents is moved alone
// to measure the throughput and the critical section.

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestShardedMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	// No orphan cleanup delay: a range can move back once the donor's deleter removed it.
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{Args: []string{"--setParameter", "orphanCleanupDelaySecs=0"}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) bson.Raw {
		t.Helper()
		raw, err := admin.RunCommand(ctx, cmd).Raw()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return raw
	}
	fails := func(cmd bson.D, code int32, msg string) {
		t.Helper()
		err := admin.RunCommand(ctx, cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Message, msg) {
			t.Fatalf("%v: want code %d with %q, got %v", cmd, code, msg, err)
		}
	}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name
	run(bson.D{{Key: "enableSharding", Value: "mig"}, {Key: "primaryShard", Value: s0}})
	run(bson.D{{Key: "shardCollection", Value: "mig.c"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
	run(bson.D{{Key: "split", Value: "mig.c"}, {Key: "middle", Value: bson.D{{Key: "k", Value: 500}}}})
	coll := d.Client.Database("mig").Collection("c")
	const initial = 1000
	docs := make([]any, initial)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "v", Value: 0}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	chunks := func() string {
		t.Helper()
		cur, err := d.Config.Client.Database("config").Collection("chunks").Find(ctx, bson.D{},
			options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var all []bson.M
		if err := cur.All(ctx, &all); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, c := range all {
			b.WriteString(bson.Raw(must(bson.Marshal(bson.D{{Key: "min", Value: c["min"]}, {Key: "max", Value: c["max"]}, {Key: "shard", Value: c["shard"]}, {Key: "lastmod", Value: c["lastmod"]}}))).String())
		}
		return b.String()
	}

	// Bad input: MongoDB's errors, nothing changed.
	before := chunks()
	fails(bson.D{{Key: "moveChunk", Value: "mig.c"}, {Key: "find", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "to", Value: s0}},
		72, "Destination shard cannot be the same as source")
	fails(bson.D{{Key: "moveChunk", Value: "mig.c"}, {Key: "find", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "to", Value: "nosuch"}},
		70, "because that shard does not exist")
	fails(bson.D{{Key: "moveChunk", Value: "mig.c"}, {Key: "bounds", Value: bson.A{bson.D{{Key: "k", Value: 0}}, bson.D{{Key: "k", Value: 10}}}},
		{Key: "to", Value: s1}}, 72, "no chunk found with the shard key bounds")
	fails(bson.D{{Key: "moveChunk", Value: "mig.c"}, {Key: "to", Value: s1}}, 72, "need to specify either a find query, or both lower and upper bounds.")
	fails(bson.D{{Key: "moveChunk", Value: "mig.c"}, {Key: "find", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "to", Value: 5}},
		14, "'to' must be of type String")
	fails(bson.D{{Key: "moveChunk", Value: "mig.nosharded"}, {Key: "find", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "to", Value: s1}},
		118, "to be sharded")
	fails(bson.D{{Key: "moveRange", Value: "mig.c"}, {Key: "toShard", Value: s1}, {Key: "min", Value: bson.D{{Key: "k", Value: 400}}},
		{Key: "max", Value: bson.D{{Key: "k", Value: 600}}}}, 13388, "is not owned by this shard")
	fails(bson.D{{Key: "moveRange", Value: "mig.c"}, {Key: "toShard", Value: s1}, {Key: "min", Value: bson.D{{Key: "x", Value: 1}}}},
		72, "are not valid for shard key pattern")
	fails(bson.D{{Key: "moveRange", Value: "mig.c"}, {Key: "toShard", Value: s1}, {Key: "min", Value: bson.D{{Key: "k", Value: 1}}},
		{Key: "secondaryThrottle", Value: "yes"}}, 14, "BSON field 'moveRange.secondaryThrottle' is the wrong type 'string', expected type 'bool'")
	fails(bson.D{{Key: "moveRange", Value: "mig.c"}, {Key: "min", Value: bson.D{{Key: "k", Value: 1}}}},
		40414, "BSON field 'moveRange.toShard' is missing but a required field")
	if after := chunks(); after != before {
		t.Fatalf("a refused move changed config.chunks:\n%s\n%s", before, after)
	}

	// The workload: a writer and a counting reader through the router while chunks move.
	var (
		mu                                       sync.Mutex
		expect                                   = map[int]int{} // _id → v, acknowledged
		shardKeyOfID                             = map[int]int{} // _id → k
		insIssued, insAcked, delIssued, delAcked atomic.Int64
	)
	for i := 0; i < initial; i++ {
		expect[i], shardKeyOfID[i] = 0, i
	}
	insIssued.Store(initial)
	insAcked.Store(initial)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Add(2)
	// The writer's updates and deletes carry the shard key: each goes to one shard. (A
	// single write by _id alone is broadcast, and the router sends it to every shard again
	// when one answers StaleConfig, which a migration's critical section makes likely: its
	// n may then be wrong; see internal/router/write_batch.go.)
	go func() { // writer
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		next := initial
		for {
			select {
			case <-stop:
				return
			default:
			}
			switch op := rng.IntN(10); {
			case op < 5:
				id := next
				next++
				k := rng.IntN(1000)
				mu.Lock()
				shardKeyOfID[id] = k
				mu.Unlock()
				insIssued.Add(1)
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "k", Value: k}, {Key: "v", Value: 0}}); err != nil {
					errs <- err
					return
				}
				insAcked.Add(1)
				mu.Lock()
				expect[id] = 0
				mu.Unlock()
			case op < 8:
				id := rng.IntN(next)
				mu.Lock()
				_, ok := expect[id]
				mu.Unlock()
				if !ok {
					continue
				}
				if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "k", Value: shardKeyOfID[id]}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				expect[id]++
				mu.Unlock()
			default:
				id := rng.IntN(next)
				mu.Lock()
				_, ok := expect[id]
				mu.Unlock()
				if !ok {
					continue
				}
				delIssued.Add(1)
				res, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "k", Value: shardKeyOfID[id]}})
				if err != nil {
					errs <- err
					return
				}
				if res.DeletedCount != 1 {
					where := ""
					for _, sh := range d.Shards {
						n, _ := sh.Client.Database("mig").Collection("c").CountDocuments(ctx, bson.D{{Key: "_id", Value: id}})
						where += " " + sh.Topology.Name + ":" + itoa(n)
					}
					for _, sh := range d.Shards {
						cur, err := sh.Client.Database("local").Collection("oplog.rs").Find(ctx, bson.D{{Key: "$or", Value: bson.A{
							bson.D{{Key: "o._id", Value: id}}, bson.D{{Key: "o2._id", Value: id}}}}})
						if err == nil {
							var all []bson.Raw
							_ = cur.All(ctx, &all)
							for _, e := range all {
								t.Logf("%s oplog: %s", sh.Topology.Name, e)
							}
						}
					}
					n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}})
					errs <- errors.New("a delete of acknowledged document " + itoa(int64(id)) + " deleted nothing; on shards" + where + "; via router " + itoa(n))
					return
				}
				delAcked.Add(1)
				mu.Lock()
				delete(expect, id)
				mu.Unlock()
			}
		}
	}()
	counts := 0
	var badCounts atomic.Int64
	go func() { // reader
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Between the reads before and after the count, at least the inserts
			// acknowledged before minus the deletes issued by the end are there, at most
			// the inserts issued by the end minus the deletes acknowledged before.
			insA, delA := insAcked.Load(), delAcked.Load()
			n, err := coll.CountDocuments(ctx, bson.D{})
			if err != nil {
				errs <- err
				return
			}
			lo, hi := insA-delIssued.Load(), insIssued.Load()-delA
			if n < lo || n > hi {
				badCounts.Add(1)
				t.Logf("count out of bounds: %d not in [%d, %d]", n, lo, hi)
			}
			counts++
		}
	}()
	owner := map[bool]string{false: s0, true: s0}
	for i := 0; i < 6; i++ {
		high := i%2 == 0
		key := 0
		if high {
			key = 700
		}
		to := s1
		if owner[high] == s1 {
			to = s0
		}
		start := time.Now()
		move := bson.D{{Key: "moveChunk", Value: "mig.c"}, {Key: "find", Value: bson.D{{Key: "k", Value: key}}}, {Key: "to", Value: to}}
		switch i {
		case 2: // the recipient waits for the default throttle (w: 1 on these one-member shards)
			move = append(move, bson.E{Key: "_secondaryThrottle", Value: true})
		case 3:
			move = append(move, bson.E{Key: "_secondaryThrottle", Value: true}, bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}})
		}
		run(move)
		owner[high] = to
		t.Logf("move %d of k=%d to %s: %v", i, key, to, time.Since(start))
		if i == 0 {
			// The version transitions (commitChunkMigration): the migrated chunk gets
			// the collection's major + 1 and minor 0, the donor's remaining (control) chunk
			// the same major and minor 1.
			want := `{"min": {"k": {"$minKey":1}},"max": {"k": {"$numberInt":"500"}},"shard": "` + s0 + `","lastmod": {"$timestamp":{"t":2,"i":1}}}` +
				`{"min": {"k": {"$numberInt":"500"}},"max": {"k": {"$maxKey":1}},"shard": "` + s1 + `","lastmod": {"$timestamp":{"t":2,"i":0}}}`
			if got := chunks(); got != want {
				t.Fatalf("config.chunks after the first move:\n%s\nwant\n%s", got, want)
			}
		}
		if i == 1 {
			// The donor's last chunk left: no control chunk, the migrated one at 3|0.
			want := `{"min": {"k": {"$minKey":1}},"max": {"k": {"$numberInt":"500"}},"shard": "` + s1 + `","lastmod": {"$timestamp":{"t":3,"i":0}}}` +
				`{"min": {"k": {"$numberInt":"500"}},"max": {"k": {"$maxKey":1}},"shard": "` + s1 + `","lastmod": {"$timestamp":{"t":2,"i":0}}}`
			if got := chunks(); got != want {
				t.Fatalf("config.chunks after the second move:\n%s\nwant\n%s", got, want)
			}
		}
		cleanRanges(ctx, t, d, "mig.c", "k")
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%d counts while moving; %d inserts, %d deletes", counts, insAcked.Load(), delAcked.Load())
	defer func() {
		if n := badCounts.Load(); n > 0 {
			t.Errorf("%d counts out of bounds", n)
		}
	}()

	// Every acknowledged write, exactly once, through the router.
	cur, err := coll.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		ID int `bson:"_id"`
		V  int `bson:"v"`
	}
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, g := range got {
		if seen[g.ID] {
			t.Fatalf("document %d returned twice", g.ID)
		}
		seen[g.ID] = true
		want, ok := expect[g.ID]
		if !ok {
			t.Fatalf("document %d should not exist", g.ID)
		}
		if g.V != want {
			t.Fatalf("document %d: v = %d, want %d", g.ID, g.V, want)
		}
	}
	if len(got) != len(expect) {
		for id := range expect {
			if !seen[id] {
				t.Logf("missing: %d (k %d)", id, shardKeyOfID[id])
				dumpOplog(ctx, t, d, id)
			}
		}
		t.Fatalf("%d documents, want %d", len(got), len(expect))
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != int64(len(expect)) {
		t.Fatalf("count %d (%v), want %d", n, err, len(expect))
	}
	// The coordinators are done; no task is left pending.
	for _, sh := range d.Shards {
		cfg := sh.Client.Database("config")
		if n, err := cfg.Collection("migrationCoordinators").CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
			t.Errorf("%s: %d migrationCoordinators (%v)", sh.Topology.Name, n, err)
		}
		if n, err := cfg.Collection("rangeDeletions").CountDocuments(ctx, bson.D{{Key: "pending", Value: true}}); err != nil || n != 0 {
			t.Errorf("%s: %d pending rangeDeletions (%v)", sh.Topology.Name, n, err)
		}
	}

	// Throughput: a chunk of 1 KB documents moved alone.
	run(bson.D{{Key: "shardCollection", Value: "mig.big"}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}})
	big := d.Client.Database("mig").Collection("big")
	const n = 20000
	pad := strings.Repeat("x", 1000)
	batch := make([]any, 0, 1000)
	for i := 0; i < n; i++ {
		batch = append(batch, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}})
		if len(batch) == cap(batch) {
			if _, err := big.InsertMany(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	statsOf := func(i int) bson.Raw {
		raw, err := d.Shards[i].Client.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		return raw.Lookup("shardingStatistics").Document()
	}
	// Bigger than config.settings' chunksize (1 MB here): ChunkTooBig unless forced.
	if _, err := d.Config.Client.Database("config").Collection("settings").UpdateOne(ctx, bson.D{{Key: "_id", Value: "chunksize"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "value", Value: 1}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
		t.Fatal(err)
	}
	fails(bson.D{{Key: "moveChunk", Value: "mig.big"}, {Key: "find", Value: bson.D{{Key: "_id", Value: 0}}}, {Key: "to", Value: s1}},
		153, "Cannot move chunk: the maximum number of documents for a chunk is")
	crit0 := statsOf(0).Lookup("totalCriticalSectionTimeMillis").AsInt64()
	start := time.Now()
	run(bson.D{{Key: "moveChunk", Value: "mig.big"}, {Key: "find", Value: bson.D{{Key: "_id", Value: 0}}}, {Key: "to", Value: s1},
		{Key: "forceJumbo", Value: true}})
	el := time.Since(start)
	crit := statsOf(0).Lookup("totalCriticalSectionTimeMillis").AsInt64() - crit0
	mb := float64(n*1030) / (1 << 20)
	t.Logf("MEASURED: moved %d docs (%.1f MB) in %v: %.1f MB/s, %.0f docs/s; critical section %d ms",
		n, mb, el, mb/el.Seconds(), float64(n)/el.Seconds(), crit)
	if c, err := big.CountDocuments(ctx, bson.D{}); err != nil || c != n {
		t.Fatalf("big: %d (%v), want %d", c, err, n)
	}

	// The same chunk back while a writer updates its documents.
	cleanRanges(ctx, t, d, "mig.big", "_id")
	stopW := make(chan struct{})
	var updates atomic.Int64
	werr := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(3, 4))
		for {
			select {
			case <-stopW:
				werr <- nil
				return
			default:
			}
			id := rng.IntN(n)
			if _, err := big.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "u", Value: 1}}}}); err != nil {
				werr <- err
				return
			}
			updates.Add(1)
		}
	}()
	crit1 := statsOf(1).Lookup("totalCriticalSectionTimeMillis").AsInt64()
	start = time.Now()
	run(bson.D{{Key: "moveChunk", Value: "mig.big"}, {Key: "find", Value: bson.D{{Key: "_id", Value: 0}}}, {Key: "to", Value: s0},
		{Key: "forceJumbo", Value: true}})
	el = time.Since(start)
	close(stopW)
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	crit = statsOf(1).Lookup("totalCriticalSectionTimeMillis").AsInt64() - crit1
	t.Logf("MEASURED with writes: moved %d docs (%.1f MB) in %v: %.1f MB/s, %.0f docs/s; critical section %d ms; %d updates acknowledged meanwhile",
		n, mb, el, mb/el.Seconds(), float64(n)/el.Seconds(), crit, updates.Load())
	var sum struct {
		N int64 `bson:"n"`
		U int64 `bson:"u"`
	}
	cur, err = big.Aggregate(ctx, bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil},
		{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$sum", Value: "$u"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Next(ctx) || cur.Decode(&sum) != nil || sum.N != n || sum.U != updates.Load() {
		t.Fatalf("after the move under updates: %d documents with %d increments, want %d and %d", sum.N, sum.U, n, updates.Load())
	}
	// Each migration is in config.changelog, as sh.status() reads it ("Migration Results for
	// the last 24 hours"): the donor's moveChunk.from with its six steps' times and the
	// recipient's moveChunk.to.
	var from struct {
		Details struct {
			Note  string `bson:"note"`
			From  string `bson:"from"`
			To    string `bson:"to"`
			Step6 *int64 `bson:"step 6 of 6"`
		} `bson:"details"`
	}
	changelog := d.Config.Client.Database("config").Collection("changelog")
	// The move back from s1 (the refused too-big move's aborted entry, from s0, is written
	// when the donor's migration ends, which on a loaded machine can be after later moves).
	if err := changelog.FindOne(ctx, bson.D{{Key: "what", Value: "moveChunk.from"}, {Key: "ns", Value: "mig.big"}, {Key: "details.from", Value: s1}},
		options.FindOne().SetSort(bson.D{{Key: "time", Value: -1}})).Decode(&from); err != nil ||
		from.Details.Note != "success" || from.Details.From != s1 || from.Details.To != s0 || from.Details.Step6 == nil {
		t.Fatalf("the last moveChunk.from of mig.big in config.changelog: %+v %v", from, err)
	}
	if n, err := changelog.CountDocuments(ctx, bson.D{{Key: "what", Value: "moveChunk.to"}, {Key: "details.note", Value: "success"}}); err != nil || n < 8 {
		t.Fatalf("moveChunk.to entries: %d %v", n, err)
	}
	checkMalformedMigrationCommands(t, ctx, d, "mig.c")
	checkMoveRangeWithoutMax(t, ctx, d)
}

// checkMoveRangeWithoutMax: configureCollectionBalancing gives a collection its own chunk size
// (and checks its arguments as MongoDB does); moveRange with only min then moves a range of
// about that size (the donor's computeOtherBound), not the whole chunk.
func checkMoveRangeWithoutMax(t *testing.T, ctx context.Context, d *Deployment) {
	t.Helper()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) {
		t.Helper()
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	fails := func(cmd bson.D, code int32, msg string) {
		t.Helper()
		err := admin.RunCommand(ctx, cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Message, msg) {
			t.Fatalf("%v: want code %d with %q, got %v", cmd, code, msg, err)
		}
	}
	s1 := d.Shards[1].Topology.Name
	// Only this test moves or splits chunks from here on: the balancer stops (config.settings'
	// chunksize is 1 MB here, so it would even mig.big out) and so does auto-splitting
	// (the shards' splitters trust the settings they read for a second).
	run(bson.D{{Key: "balancerStop", Value: 1}})
	if _, err := d.Client.Database("config").Collection("settings").UpdateOne(ctx, bson.D{{Key: "_id", Value: "autosplit"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "enabled", Value: false}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	run(bson.D{{Key: "shardCollection", Value: "mig.r"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
	colls := d.Client.Database("config").Collection("collections")
	r := d.Client.Database("mig").Collection("r")
	if _, err := r.InsertOne(ctx, bson.D{{Key: "_id", Value: -1}, {Key: "k", Value: -1}}); err != nil { // the splitter rereads the settings
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	const n = 3000 // of about 1 KB: 3 MB
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "pad", Value: strings.Repeat("r", 1000)}}
	}
	if _, err := r.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	cfg := func(fields ...bson.E) bson.D {
		return append(bson.D{{Key: "configureCollectionBalancing", Value: "mig.r"}}, fields...)
	}
	fails(cfg(bson.E{Key: "chunkSize", Value: 2000}), 72, "Chunk size '2000' out of range [1MB, 1GB]")
	fails(cfg(bson.E{Key: "chunkSize", Value: "x"}), 14, "chunkSize' is the wrong type 'string'")
	fails(cfg(bson.E{Key: "defragmentCollection", Value: true}), 115, "defragmentCollection is not supported")
	fails(bson.D{{Key: "configureCollectionBalancing", Value: "nodot"}, {Key: "chunkSize", Value: 1}}, 73, "Invalid namespace specified 'nodot'")
	fails(bson.D{{Key: "configureCollectionBalancing", Value: "mig.none"}, {Key: "chunkSize", Value: 1}}, 118, "but matched 0")
	run(cfg(bson.E{Key: "chunkSize", Value: 1}, bson.E{Key: "enableAutoMerger", Value: false}))
	var coll bson.M
	if err := colls.FindOne(ctx, bson.D{{Key: "_id", Value: "mig.r"}}).Decode(&coll); err != nil ||
		coll["maxChunkSizeBytes"] != int64(1<<20) || coll["enableAutoMerge"] != false {
		t.Fatalf("config.collections after configureCollectionBalancing: %v %v", coll, err)
	}

	run(bson.D{{Key: "moveRange", Value: "mig.r"}, {Key: "toShard", Value: s1}, {Key: "min", Value: bson.D{{Key: "k", Value: 0}}}})
	cur, err := d.Client.Database("config").Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: coll["uuid"]}},
		options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var chunks []struct {
		Min   bson.Raw `bson:"min"`
		Max   bson.Raw `bson:"max"`
		Shard string   `bson:"shard"`
	}
	if err := cur.All(ctx, &chunks); err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 3 || chunks[1].Shard != s1 || chunks[0].Shard == s1 || chunks[2].Shard == s1 {
		t.Fatalf("chunks after moveRange without max: %v", chunks)
	}
	end, ok := chunks[1].Max.Lookup("k").AsInt64OK()
	if !ok || end < 400 || end > 1300 {
		t.Fatalf("moveRange without max moved [0, %v): want about 1 MB (about 1,000 documents of 1 KB)", chunks[1].Max)
	}
	if got, err := d.Shards[1].Client.Database("mig").Collection("r").CountDocuments(ctx, bson.D{}); err != nil || got != end {
		t.Fatalf("%s holds %d documents of mig.r (%v), want %d", s1, got, err, end)
	}
	if got, err := r.CountDocuments(ctx, bson.D{}); err != nil || got != n+1 {
		t.Fatalf("mig.r through the router: %d (%v), want %d", got, err, n+1)
	}
	t.Logf("moveRange without max (chunk size 1 MB) moved [0, %d)", end)

	run(cfg(bson.E{Key: "chunkSize", Value: 0}))
	coll = nil
	if err := colls.FindOne(ctx, bson.D{{Key: "_id", Value: "mig.r"}}).Decode(&coll); err != nil || coll["maxChunkSizeBytes"] != nil {
		t.Fatalf("config.collections after chunkSize 0: %v %v", coll, err)
	}
}

// cleanRanges waits until the shards' range deleters have removed every range deletion task
// of ns (and so its orphans), so that a range can move back to a shard that donated it (the
// recipient waits for overlapping range deletions only receiveChunkWaitForRangeDeleterTimeoutMS).
func cleanRanges(ctx context.Context, t *testing.T, d *Deployment, ns, _ string) {
	t.Helper()
	for _, sh := range d.Shards {
		tasks := sh.Client.Database("config").Collection("rangeDeletions")
		for {
			n, err := tasks.CountDocuments(ctx, bson.D{{Key: "nss", Value: ns}})
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: %d range deletion tasks of %s remain", sh.Topology.Name, n, ns)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// dumpOplog logs the oplog entries of document id on every shard.
func dumpOplog(ctx context.Context, t *testing.T, d *Deployment, id int) {
	for _, sh := range d.Shards {
		cur, err := sh.Client.Database("local").Collection("oplog.rs").Find(ctx, bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "o._id", Value: id}}, bson.D{{Key: "o2._id", Value: id}}}}})
		if err != nil {
			continue
		}
		var all []bson.Raw
		_ = cur.All(ctx, &all)
		for _, e := range all {
			t.Logf("%s oplog: %s", sh.Topology.Name, e)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
