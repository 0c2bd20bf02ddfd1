package cluster

// Issue 5's linearizability acceptance (spec/replication.md, "Read Concern": linearizable
// reads; "Write Concern": majority): a register workload, a few single-document registers
// written with w:"majority" (updateOne upsert, and compare-and-set with findAndModify) and
// read with readConcern "linearizable", while the nemesis kills, pauses and partitions
// primaries away from the other members (clients still reach a partitioned primary, which
// takes operations until it steps down: its reads must not be linearizable-acknowledged and
// its writes not majority-acknowledged). The history must be linearizable (porcupine). A write whose outcome the client never learned
// (a timeout or network error outlasting the driver's retries) may or may not have happened:
// checker.CheckRegister models it as an operation that never returns.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/cluster/checker"
)

const (
	linDB      = "lin"
	linColl    = "registers"
	linKeys    = 3
	linClients = 5
	// linOpTimeout bounds one operation, retries included; an operation that does not
	// finish in it has an unknown outcome.
	linOpTimeout = 5 * time.Second
	// linCheckTimeout bounds porcupine; past it the result is Unknown and only logged.
	linCheckTimeout = 60 * time.Second
)

// linClient runs one client's operations until ctx ends, recording them in h.
func linClient(ctx context.Context, coll, rcoll *mongo.Collection, h *checker.RegisterHistory, client int, rng *rand.Rand, unknown *atomic.Int64) {
	var seq int64
	last := map[string]int64{} // the last value this client saw per key, for CAS
	for ctx.Err() == nil {
		key := fmt.Sprintf("k%d", rng.IntN(linKeys))
		op := checker.RegisterOp{Client: client, Key: key}
		opCtx, cancel := context.WithTimeout(ctx, linOpTimeout)
		op.Call = h.Now()
		var err error
		switch r := rng.IntN(10); {
		case r < 4:
			op.Kind = checker.RegRead
			var doc struct {
				V int64 `bson:"v"`
			}
			err = rcoll.FindOne(opCtx, bson.D{{Key: "_id", Value: key}}).Decode(&doc)
			switch {
			case err == nil:
				op.Found, op.Value = true, doc.V
				last[key] = doc.V
			case errors.Is(err, mongo.ErrNoDocuments):
				err = nil
			}
		case r < 8:
			seq++
			op.Kind, op.Value = checker.RegWrite, int64(client)*1_000_000+seq
			_, err = coll.UpdateOne(opCtx, bson.D{{Key: "_id", Value: key}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: op.Value}}}}, options.UpdateOne().SetUpsert(true))
			if err == nil {
				last[key] = op.Value
			}
		default:
			seq++
			op.Kind, op.Value, op.Expect = checker.RegCAS, int64(client)*1_000_000+seq, last[key]
			err = coll.FindOneAndUpdate(opCtx, bson.D{{Key: "_id", Value: key}, {Key: "v", Value: op.Expect}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: op.Value}}}}).Err()
			switch {
			case err == nil:
				op.OK = true
				last[key] = op.Value
			case errors.Is(err, mongo.ErrNoDocuments):
				err = nil
			}
		}
		op.Return = h.Now()
		cancel()
		if err != nil {
			// Unknown outcome: it may take effect at any time after Call, or never. (A read's
			// failure tells nothing and is dropped by the checker.)
			op.Unknown = true
			unknown.Add(1)
		}
		h.Add(op)
	}
}

func TestLinearizableRegisters(t *testing.T) {
	ft, ctx := startFaultTest(t, "HUMONGO_LIN_CYCLES", 4, 1, 90*time.Second)
	d, seed, rng, cycles, start := ft.d, ft.seed, ft.rng, ft.cycles, ft.start

	db := d.Client.Database(linDB)
	coll := db.Collection(linColl, options.Collection().SetWriteConcern(writeconcern.Majority()))
	rcoll := db.Collection(linColl, options.Collection().SetReadConcern(readconcern.Linearizable()))
	// Create the collection first: an implicit create inside the first upserts would be
	// more DDL under faults, which is not what this test is about.
	if err := db.CreateCollection(ctx, linColl); err != nil {
		t.Fatalf("create: %v", err)
	}

	h := checker.NewRegisterHistory()
	var unknown atomic.Int64
	wctx, stopClients := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for c := range linClients {
		crng := rand.New(rand.NewPCG(seed, uint64(c+100)))
		wg.Go(func() { linClient(wctx, coll, rcoll, h, c, crng, &unknown) })
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopClients()
			wg.Wait()
		}
	}
	defer stop()
	completed := func() int {
		n := 0
		for _, op := range h.Ops() {
			if !op.Unknown {
				n++
			}
		}
		return n
	}
	for cycle, kind := range faultSchedule(rng, cycles) {
		before := completed()
		waitFor(t, ctx, "operations before the fault", func() bool { return completed() >= before+30 })
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		f, err := d.FailPrimary(ctx, kind, majElect)
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		// Heal at once (see TestMajorityWritesSurviveFailovers for why), then let the
		// clients work against the new primary.
		if err := d.Heal(ctx, f, majRejoin); err != nil {
			t.Fatalf("cycle %d: heal: %v", cycle, err)
		}
		after := completed()
		actx, acancel := context.WithTimeout(ctx, majElect)
		waitFor(t, actx, "operations after the failover", func() bool { return completed() >= after+30 })
		acancel()
		t.Logf("cycle %d: %v; operations completing again %v after the fault", cycle, f, time.Since(f.At).Round(time.Millisecond))
	}
	stop()

	ops := h.Ops()
	counts := map[checker.RegisterOpKind]int{}
	for _, op := range ops {
		if !op.Unknown {
			counts[op.Kind]++
		}
	}
	t.Logf("%d operations (%d reads, %d writes, %d cas completed; %d unknown outcomes) in %v",
		len(ops), counts[checker.RegRead], counts[checker.RegWrite], counts[checker.RegCAS], unknown.Load(),
		time.Since(start).Round(time.Millisecond))
	checkStart := time.Now()
	ok, info := checker.CheckRegisterTimeout(ops, linCheckTimeout)
	t.Logf("porcupine: %v in %v", info.Result, time.Since(checkStart).Round(time.Millisecond))
	if !ok {
		// Keep the interactive view outside the test's temporary directory, which is removed.
		path := filepath.Join(os.TempDir(), fmt.Sprintf("humongo-linearizable-%d.html", seed))
		if fh, err := os.Create(path); err == nil {
			if err := info.Visualize(fh); err == nil {
				t.Logf("porcupine visualization: %s", path)
			}
			_ = fh.Close()
		}
		t.Fatalf("(seed %d) the history is not linearizable: %v", seed, info)
	}
}
