package cluster

// Helpers shared by several of the package's process-level tests: environment knobs, the
// nemesis tests' set-up, the versioned-document workloads' final-state checks (crash and
// majority), rollback checks (partition and rollback), and index listings (initial sync).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/cluster/checker"
	"humongo/internal/repl/rollback"
)

// envCount reads a positive count from the environment (def when unset).
func envCount(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// envSeed reads HUMONGO_SEED, defaulting to the clock.
func envSeed(t *testing.T) uint64 {
	if s := os.Getenv("HUMONGO_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HUMONGO_SEED=%q: %v", s, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// faultTest is what the nemesis tests (majority, linearizable) set up the same way: a number
// of fault cycles, a seed, and a partitionable replica set of 3 with short elections.
type faultTest struct {
	cycles int
	seed   uint64
	rng    *rand.Rand // the test's stream (stream number chosen by the test) of seed
	start  time.Time  // before the set started
	d      *Deployment
}

// startFaultTest reads the cycle count from cyclesVar (def when unset) and the seed from
// HUMONGO_SEED, starts the set, and returns a context bounded by 40 s a cycle plus slack
// (cancelled at cleanup).
func startFaultTest(t *testing.T, cyclesVar string, def int, stream uint64, slack time.Duration) (*faultTest, context.Context) {
	t.Helper()
	ft := &faultTest{cycles: envCount(t, cyclesVar, def), seed: envSeed(t)}
	t.Logf("seed %d, %d fault cycles (HUMONGO_SEED, %s)", ft.seed, ft.cycles, cyclesVar)
	ft.rng = rand.New(rand.NewPCG(ft.seed, stream))
	ft.start = time.Now()
	ft.d = Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 3},
		Options{ReplSetSettings: ShortElections, Partitionable: true})
	t.Logf("replica set of 3 up in %v", time.Since(ft.start).Round(time.Millisecond))
	ft.d.LogReplOnFailure(t, 60)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(ft.cycles)*40*time.Second+slack)
	t.Cleanup(cancel)
	return ft, ctx
}

// versionedDocs is the model the versioned-document workloads (crash_test.go,
// majority_test.go) keep of what their writers were told. Every document has an int64 field
// "v", its version for checker.LostWrites:
//   - "i-<writer>-<seq>": inserted once with v 1;
//   - "c<k>": a counter, v is the number of $inc applied; an acknowledged $inc raises the lower
//     bound, and every attempt (acknowledged or not) raises the upper bound, because a write
//     whose reply was lost may or may not have been applied, and a retried one must apply at
//     most once;
//   - "w<writer>": replaced by its writer only, with v = the writer's next sequence number, so
//     its versions only grow; the final v must lie between the last acknowledged and the last
//     attempted replacement.
type versionedDocs struct {
	lost *checker.LostWrites

	counterAcked    []atomic.Int64
	counterAttempts []atomic.Int64

	// Per writer, written only by that writer's goroutine while it runs and read by the test
	// after every writer stopped (the test's WaitGroup orders the two).
	insertSeq  []int64 // ids i-w-1 .. i-w-insertSeq were attempted
	replaceSeq []int64 // the last replacement attempted had v = replaceSeq
}

func newVersionedDocs(writers, counters int) versionedDocs {
	return versionedDocs{lost: checker.NewLostWrites(),
		counterAcked: make([]atomic.Int64, counters), counterAttempts: make([]atomic.Int64, counters),
		insertSeq: make([]int64, writers), replaceSeq: make([]int64, writers)}
}

// errBadWriteResult marks a write the server acknowledged with an impossible result (it
// matched or modified other than one document): a server bug, not a lost reply.
var errBadWriteResult = errors.New("unexpected write result")

// seed inserts the counters and the writers' documents at v 0 and records them as
// acknowledged at that version.
func (m *versionedDocs) seed(ctx context.Context, coll *mongo.Collection) error {
	var docs []any
	for k := range m.counterAcked {
		docs = append(docs, bson.D{{Key: "_id", Value: "c" + strconv.Itoa(k)}, {Key: "v", Value: int64(0)}})
	}
	for k := range m.insertSeq {
		docs = append(docs, bson.D{{Key: "_id", Value: "w" + strconv.Itoa(k)}, {Key: "v", Value: int64(0)}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		return fmt.Errorf("insert the counters: %w", err)
	}
	for k := range m.counterAcked {
		m.lost.Ack("c"+strconv.Itoa(k), 0)
	}
	for k := range m.insertSeq {
		m.lost.Ack("w"+strconv.Itoa(k), 0)
	}
	return nil
}

// write does one of writer's writes, chosen by rng: 50% inserts, 25% $inc on a random
// counter, 25% replacements of the writer's own document. A non-empty pad is stored in
// inserted and replaced documents. An acknowledged write is recorded in lost; op names the
// write for the caller's log.
func (m *versionedDocs) write(ctx context.Context, coll *mongo.Collection, writer int, rng *rand.Rand, pad string) (op string, err error) {
	withPad := func(d bson.D) bson.D {
		if pad != "" {
			d = append(d, bson.E{Key: "pad", Value: pad})
		}
		return d
	}
	switch r := rng.IntN(4); {
	case r < 2:
		m.insertSeq[writer]++
		id := fmt.Sprintf("i-%d-%d", writer, m.insertSeq[writer])
		if _, err := coll.InsertOne(ctx, withPad(bson.D{{Key: "_id", Value: id}, {Key: "v", Value: int64(1)}})); err != nil {
			return "insert " + id, err
		}
		m.lost.Ack(id, 1)
		return "insert " + id, nil
	case r == 2:
		k := rng.IntN(len(m.counterAcked))
		id := "c" + strconv.Itoa(k)
		m.counterAttempts[k].Add(1)
		res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: int64(1)}}}})
		if err == nil && (res.MatchedCount != 1 || res.ModifiedCount != 1) {
			err = fmt.Errorf("%w: $inc %s matched %d modified %d", errBadWriteResult, id, res.MatchedCount, res.ModifiedCount)
		}
		if err != nil {
			return "$inc " + id, err
		}
		// The acknowledged count is a lower bound on the counter; Ack keeps the maximum, so
		// concurrent acknowledgements may record out of order.
		m.lost.Ack(id, m.counterAcked[k].Add(1))
		return "$inc " + id, nil
	default:
		m.replaceSeq[writer]++
		v := m.replaceSeq[writer]
		id := "w" + strconv.Itoa(writer)
		res, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, withPad(bson.D{{Key: "v", Value: v}}))
		if err == nil && (res.MatchedCount != 1 || res.ModifiedCount != 1) {
			err = fmt.Errorf("%w: replace %s matched %d modified %d", errBadWriteResult, id, res.MatchedCount, res.ModifiedCount)
		}
		if err != nil {
			return "replace " + id, err
		}
		m.lost.Ack(id, v)
		return "replace " + id, nil
	}
}

// phantoms reports documents or versions in final that no writer attempted: a fault may
// lose unacknowledged writes, but must never invent one or apply one twice.
func (m *versionedDocs) phantoms(final map[string]int64) []string {
	writers, counters := len(m.insertSeq), len(m.counterAttempts)
	var out []string
	bad := func(format string, a ...any) {
		if len(out) < 20 {
			out = append(out, fmt.Sprintf(format, a...))
		}
	}
	for id, v := range final {
		var writer, seq int
		switch {
		case strings.HasPrefix(id, "i-"):
			if _, err := fmt.Sscanf(id, "i-%d-%d", &writer, &seq); err != nil || writer < 0 || writer >= writers {
				bad("%s: unknown document", id)
			} else if seq < 1 || int64(seq) > m.insertSeq[writer] {
				bad("%s: never inserted (writer %d attempted %d inserts)", id, writer, m.insertSeq[writer])
			} else if v != 1 {
				bad("%s: v=%d, inserted with 1", id, v)
			}
		case strings.HasPrefix(id, "c"):
			k, err := strconv.Atoi(id[1:])
			if err != nil || k < 0 || k >= counters {
				bad("%s: unknown document", id)
			} else if most := m.counterAttempts[k].Load(); v > most {
				bad("%s: v=%d but only %d $inc were attempted: a write was applied twice", id, v, most)
			}
		case strings.HasPrefix(id, "w"):
			k, err := strconv.Atoi(id[1:])
			if err != nil || k < 0 || k >= writers {
				bad("%s: unknown document", id)
			} else if v > m.replaceSeq[k] {
				bad("%s: v=%d but the last replacement attempted had v=%d", id, v, m.replaceSeq[k])
			}
		default:
			bad("%s: unknown document", id)
		}
	}
	return out
}

// readVersions reads the whole of coll as id -> v.
func readVersions(ctx context.Context, coll *mongo.Collection) (map[string]int64, error) {
	cur, err := coll.Find(ctx, bson.D{})
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.Background())
	final := make(map[string]int64)
	for cur.Next(ctx) {
		id, ok := cur.Current.Lookup("_id").StringValueOK()
		if !ok {
			return nil, fmt.Errorf("document with a non-string _id: %v", cur.Current)
		}
		v, ok := cur.Current.Lookup("v").AsInt64OK()
		if !ok {
			return nil, fmt.Errorf("document without a numeric v: %v", cur.Current)
		}
		if _, dup := final[id]; dup {
			return nil, fmt.Errorf("_id %q returned twice", id)
		}
		final[id] = v
	}
	return final, cur.Err()
}

// waitPrimaryAndSecondaries waits for d's primary and returns it and the other members.
func waitPrimaryAndSecondaries(t *testing.T, ctx context.Context, d *Deployment) (*Process, []*Process) {
	t.Helper()
	primary, err := d.WaitForPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var secondaries []*Process
	for _, n := range d.Nodes {
		if n != primary {
			secondaries = append(secondaries, n)
		}
	}
	return primary, secondaries
}

// waitNewPrimary waits up to within for a primary other than old and returns it.
func waitNewPrimary(t *testing.T, ctx context.Context, d *Deployment, old *Process, within time.Duration) *Process {
	t.Helper()
	ectx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	p, err := d.WaitForPrimary(ectx, old)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// rbInsertBase inserts app.c {_id: 0..9, v: "base"} with w:"majority" through primary and
// waits until every secondary has them: data no rollback may touch.
func rbInsertBase(t *testing.T, ctx context.Context, d *Deployment, primary *Process, secondaries []*Process) {
	t.Helper()
	base := d.DirectClient(primary).Database("app").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	for i := range 10 {
		if _, err := base.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: "base"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range secondaries {
		rbWaitDocs(t, ctx, d, s, "c", 10)
	}
}

// rbWaitRolledBack waits until node's rollback id moves on from before (its rollback
// finished), checks that it moved by exactly one, waits for node to be SECONDARY again, and
// returns the new rollback id.
func rbWaitRolledBack(t *testing.T, ctx context.Context, d *Deployment, cl *mongo.Client, node *Process, before int32) int32 {
	t.Helper()
	var after int32
	for {
		if after = rbTryRBID(ctx, cl); after != before && after != 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never rolled back (rbid still %d)", node.Name(), before)
		case <-time.After(pollInterval):
		}
	}
	if after != before+1 {
		t.Fatalf("rbid went from %d to %d, want +1", before, after)
	}
	if err := d.WaitForState(ctx, node, "SECONDARY"); err != nil {
		t.Fatal(err)
	}
	return after
}

// rbReadFiles calls each for every document in node's rollback files
// (<dbpath>/rollback/<ns>/removed.*.bson) and returns the files' paths.
func rbReadFiles(t *testing.T, node *Process, each func(file string, doc bsoncore.Document)) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(node.DBPath(), "rollback", "*", "removed.*.bson"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		docs, err := rollback.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range docs {
			each(f, doc)
		}
	}
	return files
}

// indexNames lists db.docs's indexes on n as "name key,…" in listIndexes order, so two
// members' lists compare equal only if they hold the same indexes on the same keys.
func indexNames(t *testing.T, ctx context.Context, d *Deployment, n *Process, db string) string {
	t.Helper()
	specs, err := memberIndexSpecs(ctx, d, n, db, "docs")
	if err != nil {
		t.Fatalf("listIndexes on %s: %v", n.Name(), err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, fmt.Sprint(s["name"], s["key"]))
	}
	return strings.Join(names, ",")
}

// memberIndexSpecs lists the index specs of db.coll on n through its direct client.
func memberIndexSpecs(ctx context.Context, d *Deployment, n *Process, db, coll string) ([]bson.M, error) {
	cur, err := d.DirectClient(n).Database(db).Collection(coll).Indexes().List(ctx)
	if err != nil {
		return nil, err
	}
	var specs []bson.M
	if err := cur.All(ctx, &specs); err != nil {
		return nil, err
	}
	return specs, nil
}
