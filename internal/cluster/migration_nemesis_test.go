package cluster

// Issue 13's process-level acceptance test of chunk migration under faults (spec:
// sharding.md "The live migration protocol", "Orphaned range deletion"; checklist section 2
// and 7): chunks move back and forth between two 3-member shards while a writer inserts and
// updates through the router with retryable writes and a reader counts, and the primaries of
// the shards and of the config server are killed with kill -9 in turn.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

const nemesisKeys = 800 // shard key values k in [0, 800), chunks of 100

// nemesisLedger is what the writer knows about its writes: inserts acknowledged and
// attempted, and per document the $inc updates acknowledged and attempted.
type nemesisLedger struct {
	mu        sync.Mutex
	acked     map[int]bool // inserts acknowledged
	attempted int          // inserts attempted (ids 0 .. attempted-1)
	ackedN    map[int]int  // acknowledged $inc per _id
	triedN    map[int]int  // attempted $inc per _id
}

func (l *nemesisLedger) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *nemesisLedger) attemptedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attempted
}

// TestShardedMigrationNemesis: afterwards no acknowledged write is lost or duplicated, every
// count and listing of the _ids through the router was exact (between the inserts
// acknowledged before it started and those attempted before it ended, each _id once), no
// orphans remain after the cleanup delay, and
// config.migrationCoordinators and config.rangeDeletions are empty on both shards.
func TestShardedMigrationNemesis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster of 2 shards of 3 members and 3 config servers")
	}
	// Elections a little slower than ShortElections: ten processes on a loaded CI machine
	// (the race detector, other packages' tests) miss 2 s heartbeat timeouts and flap.
	settings := bson.D{{Key: "electionTimeoutMillis", Value: 4000}, {Key: "heartbeatIntervalMillis", Value: 1000},
		{Key: "heartbeatTimeoutSecs", Value: 4}}
	d := Start(t, Topology{Kind: Sharded, Shards: 2, Members: 3, ConfigMembers: 3},
		Options{ReplSetSettings: settings, StartTimeout: 2 * time.Minute, Args: []string{"--setParameter", "orphanCleanupDelaySecs=1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) error { return admin.RunCommand(ctx, cmd).Err() }
	must := func(cmd bson.D) {
		t.Helper()
		if err := run(cmd); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name
	must(bson.D{{Key: "balancerStop", Value: 1}}) // only the test moves chunks
	must(bson.D{{Key: "enableSharding", Value: "nem"}, {Key: "primaryShard", Value: s0}})
	must(bson.D{{Key: "shardCollection", Value: "nem.c"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
	for k := 100; k < nemesisKeys; k += 100 {
		must(bson.D{{Key: "split", Value: "nem.c"}, {Key: "middle", Value: bson.D{{Key: "k", Value: k}}}})
	}
	for k := 0; k < nemesisKeys; k += 200 {
		must(bson.D{{Key: "moveChunk", Value: "nem.c"}, {Key: "find", Value: bson.D{{Key: "k", Value: k}}}, {Key: "to", Value: s1}})
	}
	coll := d.Client.Database("nem").Collection("c")
	led := &nemesisLedger{acked: map[int]bool{}, ackedN: map[int]int{}, triedN: map[int]int{}}

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var moves, moveErrs, counts, writeErrs atomic.Int64
	countErr := make(chan error, 1)
	wg.Add(3)
	go func() { // the writer: inserts, and $inc updates of acknowledged documents
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		for wctx.Err() == nil {
			led.mu.Lock()
			id := led.attempted
			var upd = -1
			if len(led.acked) > 0 && rng.IntN(3) == 0 {
				upd = rng.IntN(id)
				if !led.acked[upd] {
					upd = -1
				}
			}
			if upd < 0 {
				led.attempted++
			} else {
				led.triedN[upd]++
			}
			led.mu.Unlock()
			if upd < 0 {
				_, err := coll.InsertOne(wctx, bson.D{{Key: "_id", Value: id}, {Key: "k", Value: id % nemesisKeys}, {Key: "n", Value: 0}})
				led.mu.Lock()
				if err == nil {
					led.acked[id] = true
				}
				led.mu.Unlock()
				if err != nil {
					writeErrs.Add(1)
				}
				continue
			}
			_, err := coll.UpdateOne(wctx, bson.D{{Key: "_id", Value: upd}, {Key: "k", Value: upd % nemesisKeys}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
			if err == nil {
				led.mu.Lock()
				led.ackedN[upd]++
				led.mu.Unlock()
			} else {
				writeErrs.Add(1)
			}
		}
	}()
	go func() { // the reader: every count is exact; every other read lists the _ids, each once
		defer wg.Done()
		for i := 0; wctx.Err() == nil; i++ {
			lo := led.ackedCount()
			var n int64
			var err error
			var dup []int
			at := time.Now()
			if i%2 == 0 {
				n, err = coll.CountDocuments(wctx, bson.D{})
			} else {
				n, dup, err = nemesisListIDs(wctx, coll)
			}
			hi := led.attemptedCount()
			if err != nil {
				continue // a failover in progress
			}
			counts.Add(1)
			if int(n) < lo || int(n) > hi || len(dup) > 0 {
				err := fmt.Errorf("at %s: %d documents through the router (by %s), with %d inserts acknowledged before and %d attempted; _ids seen twice %v; %s",
					at.UTC().Format("15:04:05.000"), n, map[bool]string{true: "count", false: "listing the _ids"}[i%2 == 0], lo, hi, dup,
					nemesisDuplicates(wctx, d, coll)+"\n"+nemesisWhere(wctx, d, dup)+nemesisLogsAround(d, at))
				select {
				case countErr <- err:
				default:
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	go func() { // the mover: chunks back and forth
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 4))
		chunks := d.Client.Database("config").Collection("chunks")
		for wctx.Err() == nil {
			k := rng.IntN(nemesisKeys/100) * 100
			var c struct{ Shard string }
			if err := chunks.FindOne(wctx, bson.D{{Key: "min.k", Value: k}}).Decode(&c); err != nil {
				moveErrs.Add(1)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			to := s0
			if c.Shard == s0 {
				to = s1
			}
			move := bson.D{{Key: "moveChunk", Value: "nem.c"}, {Key: "find", Value: bson.D{{Key: "k", Value: k}}}, {Key: "to", Value: to}}
			if rng.IntN(2) == 0 { // the recipient waits for w: 2 after each cloned batch
				move = append(move, bson.E{Key: "_secondaryThrottle", Value: true})
			}
			if err := run(move); err != nil {
				moveErrs.Add(1)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			moves.Add(1)
		}
	}()

	// The nemesis: kill -9 the primary of shard0, of shard1, then of the config servers,
	// each while chunks are moving, and bring it back.
	for _, set := range []*Deployment{d.Shards[0], d.Shards[1], d.Config} {
		select {
		case <-time.After(4 * time.Second):
		case <-ctx.Done():
		}
		f, err := set.FailPrimary(ctx, FaultKill, time.Minute)
		if err != nil {
			stop()
			wg.Wait()
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if err := set.Heal(ctx, f, time.Minute); err != nil {
			stop()
			wg.Wait()
			t.Fatal(err)
		}
		t.Logf("%v", f)
	}
	time.Sleep(4 * time.Second)
	stop()
	wg.Wait()
	select {
	case err := <-countErr:
		// A read that saw a document twice was the storage GC's: it deleted a range-deleted
		// record's tombstone and its older versions in two batches, so the old record came
		// back between them (storage TestGCNeverResurrectsADeletedKey).
		t.Fatal(err)
	default:
	}
	t.Logf("%d inserts acknowledged of %d attempted, %d write errors; %d chunk moves, %d failed; %d counts",
		led.ackedCount(), led.attemptedCount(), writeErrs.Load(), moves.Load(), moveErrs.Load(), counts.Load())
	if moves.Load() < 5 || counts.Load() < 20 || led.ackedCount() < 100 {
		t.Fatalf("the workload did not run: %d moves, %d counts, %d inserts", moves.Load(), counts.Load(), led.ackedCount())
	}

	// Drain: every coordinator and range deletion task resolves, every orphan goes.
	var lastErr error
	for ctx.Err() == nil {
		if lastErr = nemesisDrained(ctx, d, led); lastErr == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if lastErr != nil {
		t.Fatal(lastErr)
	}
	n, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil || int(n) < led.ackedCount() || int(n) > led.attemptedCount() {
		t.Fatalf("final count through the router %d (%v), %d acknowledged, %d attempted", n, err, led.ackedCount(), led.attemptedCount())
	}
}

// nemesisDrained checks the shards' primaries directly (unversioned reads see orphans too):
// no coordinator or range deletion documents, every acknowledged insert exactly once across
// both shards, nothing that was never attempted, and each document's n between its
// acknowledged and attempted updates.
func nemesisDrained(ctx context.Context, d *Deployment, led *nemesisLedger) error {
	seen := map[int]string{}
	for _, sh := range d.Shards {
		p, err := sh.Primary(ctx)
		if err != nil {
			return err
		}
		cl := sh.DirectClient(p)
		for _, c := range []string{"migrationCoordinators", "rangeDeletions"} {
			if n, err := cl.Database("config").Collection(c).CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
				return fmt.Errorf("%s: config.%s has %d documents (%v)", sh.Topology.Name, c, n, err)
			}
		}
		cur, err := cl.Database("nem").Collection("c").Find(ctx, bson.D{})
		if err != nil {
			return err
		}
		var docs []struct {
			ID int `bson:"_id"`
			N  int `bson:"n"`
		}
		if err := cur.All(ctx, &docs); err != nil {
			return err
		}
		led.mu.Lock()
		for _, doc := range docs {
			if other, dup := seen[doc.ID]; dup {
				led.mu.Unlock()
				return fmt.Errorf("_id %d on %s and on %s", doc.ID, other, sh.Topology.Name)
			}
			seen[doc.ID] = sh.Topology.Name
			if doc.ID >= led.attempted {
				led.mu.Unlock()
				return fmt.Errorf("_id %d was never inserted", doc.ID)
			}
			if doc.N < led.ackedN[doc.ID] || doc.N > led.triedN[doc.ID] {
				led.mu.Unlock()
				return fmt.Errorf("_id %d: n %d, %d updates acknowledged, %d attempted", doc.ID, doc.N, led.ackedN[doc.ID], led.triedN[doc.ID])
			}
		}
		led.mu.Unlock()
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	for id := range led.acked {
		if _, ok := seen[id]; !ok {
			return fmt.Errorf("acknowledged insert %d lost", id)
		}
	}
	return nil
}

// nemesisDuplicates describes the documents the router returns more than once (a count too
// high), with where each shard's primary has them.
func nemesisDuplicates(ctx context.Context, d *Deployment, coll *mongo.Collection) string {
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$_id"}, {Key: "c", Value: bson.D{{Key: "$sum", Value: 1}}}, {Key: "k", Value: bson.D{{Key: "$first", Value: "$k"}}}}}},
		{{Key: "$match", Value: bson.D{{Key: "c", Value: bson.D{{Key: "$gt", Value: 1}}}}}}})
	if err != nil {
		return "duplicates: " + err.Error()
	}
	var dups []bson.M
	if err := cur.All(ctx, &dups); err != nil {
		return "duplicates: " + err.Error()
	}
	out := fmt.Sprintf("duplicates through the router now: %v", dups)
	var chunks []bson.M
	if c, err := d.Client.Database("config").Collection("chunks").Find(ctx, bson.D{}); err == nil {
		_ = c.All(ctx, &chunks)
	}
	out += fmt.Sprintf("; chunks: %v", chunks)
	return out
}

// nemesisListIDs reads every _id through the router: how many, and those seen twice.
func nemesisListIDs(ctx context.Context, coll *mongo.Collection) (int64, []int, error) {
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(10000))
	if err != nil {
		return 0, nil, err
	}
	defer cur.Close(ctx)
	seen := map[int]bool{}
	var n int64
	var dup []int
	for cur.Next(ctx) {
		id, _ := cur.Current.Lookup("_id").AsInt64OK()
		if seen[int(id)] {
			dup = append(dup, int(id))
		}
		seen[int(id)] = true
		n++
	}
	return n, dup, cur.Err()
}

// nemesisLogsAround is every process's log from 2 s before at to 0.5 s after it, without
// connection and replication chatter: what each node did when a read went wrong.
func nemesisLogsAround(d *Deployment, at time.Time) string {
	var procs []*Process
	for _, sh := range d.Shards {
		procs = append(procs, sh.Nodes...)
	}
	procs = append(procs, d.Config.Nodes...)
	procs = append(procs, d.Routers...)
	var b strings.Builder
	for _, p := range procs {
		data, err := os.ReadFile(p.LogPath())
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "--- %s\n", p.Name())
		for _, line := range strings.Split(string(data), "\n") {
			i := strings.Index(line, `"$date":"`)
			if i < 0 || strings.Contains(line, `"c":"NETWORK"`) || strings.Contains(line, `"oplog.rs"`) ||
				strings.Contains(line, "replSetHeartbeat") || strings.Contains(line, "replSetUpdatePosition") {
				continue
			}
			ts, err := time.Parse("2006-01-02T15:04:05.000Z07:00", line[i+9:min(len(line), i+9+29)])
			if err != nil {
				continue
			}
			if ts.After(at.Add(-2*time.Second)) && ts.Before(at.Add(500*time.Millisecond)) {
				if len(line) > 700 {
					line = line[:700]
				}
				b.WriteString(line)
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

// nemesisWhere says which member of which shard holds each of ids now (unversioned reads,
// orphans included), and each shard primary's filtering metadata of nem.c.
func nemesisWhere(ctx context.Context, d *Deployment, ids []int) string {
	var b strings.Builder
	for _, sh := range d.Shards {
		for _, n := range sh.Nodes {
			if !n.Running() {
				continue
			}
			cl := sh.DirectClient(n)
			for _, id := range ids {
				var doc bson.M
				err := cl.Database("nem").Collection("c", options.Collection().SetReadPreference(readpref.PrimaryPreferred())).
					FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc)
				fmt.Fprintf(&b, "%s: _id %d: %v %v\n", n.Name(), id, doc, err)
			}
			raw, err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "getShardVersion", Value: "nem.c"}, {Key: "fullMetadata", Value: true}}).Raw()
			fmt.Fprintf(&b, "%s: getShardVersion %v %v\n", n.Name(), raw, err)
		}
	}
	return b.String()
}
