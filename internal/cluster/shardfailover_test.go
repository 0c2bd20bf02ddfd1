package cluster

// Issue 12's failover acceptance through humongos (spec/sharding.md "Routing", "Retrying
// internally"; MongoDB's AsyncRequestsSender retries with RetryPolicy::kIdempotent): with
// shards that are replica sets of 3, a kill -9 of one shard's primary and a step-down of the
// other's under a w:"majority" load through the router. The router must find each new primary
// by itself (its shard clients' SDAM), must retry where mongos does (reads, and retryable
// writes: the shard answers a repeated statement from its session history), and no
// acknowledged majority write may be lost (checker.LostWrites over the versioned-document
// workload of majority_test.go). Also the router with its config server down: it serves what
// it has cached and fails a refresh it must make with MongoDB's code, within a bound.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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
	sfDB       = "failover"
	sfColl     = "docs"
	sfWriters  = 4
	sfCounters = 3
	// sfOpTimeout bounds one operation of the probe (no driver retries): longer than an
	// election with ShortElections plus the router's server selection, so a probe that fails
	// does so because the router gave up, not because the test's deadline hit.
	sfOpTimeout = 20 * time.Second
)

// sfProbe is a client that never retries (RunCommand is never retried by the driver): what it
// sees is what the router answered. It sends retryable writes by hand (lsid and txnNumber,
// as drivers do) to an unsharded collection on each shard (the primary shards of sfDB and
// sfDB+"1"), and reads (a targeted find and a scatter count on the sharded collection).
type sfProbe struct {
	lost *checker.LostWrites

	mu  sync.Mutex
	ops []sfOp
	// txnNum is the last txnNumber sent. The session is the driver's (pooled, so its lsid may
	// have served the test's earlier writes with the driver's own txnNumbers): the probe's
	// numbers start far above any of those.
	txnNum int64
}

// sfOp is one probe operation and how it ended.
type sfOp struct {
	kind       string
	start, end time.Time
	err        error
}

// run probes until ctx ends, one operation after another, cycling through the kinds.
func (p *sfProbe) run(ctx context.Context, cl *mongo.Client, sess *mongo.Session) {
	sctx := mongo.NewSessionContext(ctx, sess)
	for i := 0; ctx.Err() == nil; i++ {
		var op sfOp
		op.start = time.Now()
		octx, cancel := context.WithTimeout(sctx, sfOpTimeout)
		switch i % 4 {
		case 0, 1:
			db := sfDB
			if i%4 == 1 {
				db = sfDB + "1"
			}
			op.kind = "retryable insert " + db
			p.txnNum++
			id := fmt.Sprintf("p-%d", i)
			var reply bson.Raw
			reply, op.err = cl.Database(db).RunCommand(octx, bson.D{
				{Key: "insert", Value: "probe"},
				{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}, {Key: "v", Value: int64(1)}}}},
				{Key: "txnNumber", Value: p.txnNum},
				{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}},
			}).Raw()
			op.err = wceOnly(op.err)
			if op.err == nil {
				op.err = insertReplyErr(reply)
			}
			if op.err == nil {
				p.lost.Ack(db+"/"+id, 1)
			}
		case 2:
			op.kind = "find by _id"
			op.err = cl.Database(sfDB).RunCommand(octx, bson.D{{Key: "find", Value: sfColl},
				{Key: "filter", Value: bson.D{{Key: "_id", Value: fmt.Sprintf("c%d", i%sfCounters)}}},
				{Key: "singleBatch", Value: true}}).Err()
		case 3:
			op.kind = "count"
			op.err = cl.Database(sfDB).RunCommand(octx, bson.D{{Key: "count", Value: sfColl}}).Err()
		}
		cancel()
		op.end = time.Now()
		if ctx.Err() != nil && op.err != nil {
			return // the probe was stopped mid-operation
		}
		p.mu.Lock()
		p.ops = append(p.ops, op)
		p.mu.Unlock()
	}
}

// errProbeWCE marks a probe insert whose reply carried a shard's writeConcernError: the
// router passes it on as mongos does (the write was done; its durability is unknown), it is
// no request the router failed.
var errProbeWCE = errors.New("writeConcernError")

// wceOnly marks err as errProbeWCE when it is only a shard's writeConcernError (the driver's
// RunCommand reports one as a WriteException).
func wceOnly(err error) error {
	var we mongo.WriteException
	if errors.As(err, &we) && we.WriteConcernError != nil && len(we.WriteErrors) == 0 {
		return fmt.Errorf("%w: %v", errProbeWCE, err)
	}
	return err
}

// insertReplyErr is the failure an ok: 1 insert reply reports (writeErrors, a
// writeConcernError, or not one document inserted), nil if it inserted its one document.
func insertReplyErr(reply bson.Raw) error {
	if we, err := reply.LookupErr("writeErrors"); err == nil {
		return fmt.Errorf("writeErrors %v", we)
	}
	if wce, err := reply.LookupErr("writeConcernError"); err == nil {
		return fmt.Errorf("%w %v", errProbeWCE, wce)
	}
	if n, ok := reply.Lookup("n").AsInt64OK(); !ok || n != 1 {
		return fmt.Errorf("inserted %v documents, want 1: %v", reply.Lookup("n"), reply)
	}
	return nil
}

// failed returns the probe's operations the router failed, and those that only carried a
// shard's writeConcernError.
func (p *sfProbe) failed() (failed, wce []sfOp) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, op := range p.ops {
		switch {
		case errors.Is(op.err, errProbeWCE):
			wce = append(wce, op)
		case op.err != nil:
			failed = append(failed, op)
		}
	}
	return failed, wce
}

// recovered returns how long after at the first probe operation of kind that started after
// at succeeded, ended (false if none has yet), and the longest operation of that kind that
// spanned at.
func (p *sfProbe) recovered(at time.Time, kind string) (first, longest time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, op := range p.ops {
		if !strings.HasPrefix(op.kind, kind) {
			continue
		}
		if op.start.Before(at) && op.end.After(at) && op.end.Sub(op.start) > longest {
			longest = op.end.Sub(op.start)
		}
		if !ok && op.err == nil && op.start.After(at) {
			first, ok = op.end.Sub(at), true
		}
	}
	return first, longest, ok
}

// count returns the probe's operations so far.
func (p *sfProbe) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ops)
}

// sfHeldOps holds two requests of the router on shard s's primary (failCommand with
// blockConnection for blockMS, on findAndModify and distinct, which the load does not send):
// a retryable findAndModify upsert into db's unsharded probe collection (db's primary shard
// is s; txnNumber txn, acknowledged ones recorded in lost) and a distinct over the sharded
// collection. Once both are held it runs fault, and returns how the two ended.
func sfHeldOps(t *testing.T, ctx context.Context, cl *mongo.Client, s *Deployment, db string, blockMS int, txn int64, lost *checker.LostWrites, fault func()) []sfOp {
	t.Helper()
	p, err := s.WaitForPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin := s.DirectClient(p).Database("admin")
	var fp struct {
		Count int64 `bson:"count"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"findAndModify", "distinct"}}, {Key: "blockConnection", Value: true},
			{Key: "blockTimeMS", Value: blockMS}, {Key: "failInternalCommands", Value: true}}}}).Decode(&fp); err != nil {
		t.Fatalf("configureFailPoint on %s: %v", p.Name(), err)
	}
	defer func() {
		if p.Running() {
			octx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = admin.RunCommand(octx, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Err()
		}
	}()
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	out := make(chan sfOp, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	hctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	id := fmt.Sprintf("held-%d", txn)
	wg.Go(func() {
		op := sfOp{kind: "findAndModify held on " + p.Name(), start: time.Now()}
		var reply bson.Raw
		reply, op.err = cl.Database(db).RunCommand(mongo.NewSessionContext(hctx, sess), bson.D{
			{Key: "findAndModify", Value: "probe"}, {Key: "query", Value: bson.D{{Key: "_id", Value: id}}},
			{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: int64(1)}}}}}, {Key: "upsert", Value: true},
			{Key: "txnNumber", Value: txn}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}},
		}).Raw()
		op.err = wceOnly(op.err)
		if op.err == nil {
			if wce, err := reply.LookupErr("writeConcernError"); err == nil {
				op.err = fmt.Errorf("%w %v", errProbeWCE, wce)
			} else if n, _ := reply.Lookup("lastErrorObject", "n").AsInt64OK(); n != 1 {
				op.err = fmt.Errorf("findAndModify upsert: %v", reply)
			} else {
				lost.Ack(db+"/"+id, 1)
			}
		}
		op.end = time.Now()
		out <- op
	})
	wg.Go(func() {
		op := sfOp{kind: "distinct held on " + p.Name(), start: time.Now()}
		op.err = cl.Database(sfDB).RunCommand(hctx, bson.D{{Key: "distinct", Value: sfColl}, {Key: "key", Value: "v"}}).Err()
		op.end = time.Now()
		out <- op
	})
	if err := admin.RunCommand(ctx, bson.D{{Key: "waitForFailPoint", Value: "failCommand"},
		{Key: "timesEntered", Value: fp.Count + 2}, {Key: "maxTimeMS", Value: 30000}}).Err(); err != nil {
		t.Fatalf("waitForFailPoint on %s: %v", p.Name(), err)
	}
	fault()
	return []sfOp{<-out, <-out}
}

// sfDescribe says how the held operations ended, relative to the fault at at.
func sfDescribe(ops []sfOp, at time.Time) string {
	var parts []string
	for _, op := range ops {
		res := "ok"
		if op.err != nil {
			res = op.err.Error()
		}
		parts = append(parts, fmt.Sprintf("%s: %s %v after the fault", op.kind, res, op.end.Sub(at).Round(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

// runAdmin runs cmd on the router's admin database, failing the test on an error.
func runAdmin(t *testing.T, ctx context.Context, cl *mongo.Client, cmd bson.D) {
	t.Helper()
	if err := cl.Database("admin").RunCommand(ctx, cmd).Err(); err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
}

func TestShardedPrimaryFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster of replica sets")
	}
	seed := envSeed(t)
	t.Logf("seed %d (HUMONGO_SEED)", seed)
	start := time.Now()
	d := Start(t, Topology{Kind: Sharded, Shards: 2, Members: 3}, Options{ReplSetSettings: ShortElections,
		Args: []string{"--setParameter", "enableTestCommands=1"}})
	for _, s := range d.Shards {
		s.LogReplOnFailure(t, 40)
	}
	t.Logf("%v up in %v", d.Topology, time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// failover.docs is sharded on a hashed _id (spread over both shards); the probe's
	// unsharded collections live on failover's primary shard (shard0) and failover1's
	// (shard1).
	runAdmin(t, ctx, d.Client, bson.D{{Key: "enableSharding", Value: sfDB}, {Key: "primaryShard", Value: "shard0"}})
	runAdmin(t, ctx, d.Client, bson.D{{Key: "enableSharding", Value: sfDB + "1"}, {Key: "primaryShard", Value: "shard1"}})
	runAdmin(t, ctx, d.Client, bson.D{{Key: "shardCollection", Value: sfDB + "." + sfColl},
		{Key: "key", Value: bson.D{{Key: "_id", Value: "hashed"}}}})
	coll := d.Client.Database(sfDB).Collection(sfColl, options.Collection().SetWriteConcern(writeconcern.Majority()))
	w := &majWorkload{versionedDocs: newVersionedDocs(sfWriters, sfCounters)}
	if err := w.seed(ctx, coll); err != nil {
		t.Fatal(err)
	}

	// The writers (the driver's retryable writes with a deadline, as applications use
	// them) and the probe (no driver retries) run through the whole test.
	wctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for k := range sfWriters {
		wrng := rand.New(rand.NewPCG(seed, uint64(k+1)))
		wg.Go(func() { w.run(wctx, coll, k, wrng) })
	}
	// The probe and the held operations send txnNumbers of their own: their sessions come
	// from a client of their own, so that no writer's driver ever reuses one of those lsids
	// with its own, lower, txnNumbers.
	pc := d.RouterClient(t, 0)
	probe := &sfProbe{lost: checker.NewLostWrites(), txnNum: 1 << 32}
	sess, err := pc.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	wg.Go(func() { probe.run(wctx, pc, sess) })
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopLoad()
			wg.Wait()
		}
	}
	defer stop()
	waitLoad := func(what string, acks int64, probes int) {
		t.Helper()
		lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
		defer lcancel()
		a0, p0 := w.acks.Load(), probe.count()
		waitFor(t, lctx, what, func() bool { return w.acks.Load() >= a0+acks && probe.count() >= p0+probes })
	}
	waitLoad("writes before the faults", 50, 8)
	loadStart := time.Now()

	// Fault 1: kill -9 of shard0's primary mid-load, with a retryable findAndModify and a
	// distinct held on it (sfHeldOps): the router must send both again to the new primary.
	var f *Fault
	held := sfHeldOps(t, ctx, pc, d.Shards[0], sfDB, 60000, 1<<33, probe.lost, func() {
		var err error
		if f, err = d.Shards[0].FailPrimary(ctx, FaultKill, majElect); err != nil {
			t.Error(err)
		}
	})
	if f == nil {
		t.FailNow()
	}
	waitLoad("writes after the kill", 50, 8)
	recoverInsert, spanInsert, _ := probe.recovered(f.At, "retryable insert "+sfDB)
	recoverFind, spanFind, _ := probe.recovered(f.At, "find")
	if err := d.Shards[0].Heal(ctx, f, majRejoin); err != nil {
		t.Fatal(err)
	}
	t.Logf("shard0: %v; through the router: %s; a probe insert on shard0 succeeded %v after the kill (the one in flight took %v), a probe find %v after (in flight %v)",
		f, sfDescribe(held, f.At), recoverInsert.Round(time.Millisecond), spanInsert.Round(time.Millisecond), recoverFind.Round(time.Millisecond), spanFind.Round(time.Millisecond))

	// Fault 2: shard1's primary steps down mid-load. The held operations wake up on a
	// secondary (NotWritablePrimary, NotPrimaryNoSecondaryOk) and what it was running is
	// interrupted (InterruptedDueToReplStateChange): the router retries on the new primary.
	var old, np *Process
	var downAt time.Time
	var elected time.Duration
	held2 := sfHeldOps(t, ctx, pc, d.Shards[1], sfDB+"1", 5000, 1<<34, probe.lost, func() {
		var err error
		downAt = time.Now()
		if old, err = d.Shards[1].StepDown(ctx, false); err != nil {
			t.Error(err)
			return
		}
		ectx, cancel := context.WithTimeout(ctx, majElect)
		defer cancel()
		if np, err = d.Shards[1].WaitForPrimary(ectx, old); err != nil {
			t.Error(err)
		}
		elected = time.Since(downAt)
	})
	if old == nil || np == nil {
		t.FailNow()
	}
	waitLoad("writes after the step-down", 50, 8)
	recoverStep, spanStep, _ := probe.recovered(downAt, "retryable insert "+sfDB+"1")
	t.Logf("shard1: %s stepped down, %s primary after %v; through the router: %s; a probe insert on shard1 succeeded %v after (in flight %v)",
		old.Name(), np.Name(), elected.Round(time.Millisecond), sfDescribe(held2, downAt), recoverStep.Round(time.Millisecond), spanStep.Round(time.Millisecond))
	for _, op := range append(held, held2...) {
		if op.err != nil && !errors.Is(op.err, errProbeWCE) {
			t.Errorf("%s held on the failed primary: %v", op.kind, op.err)
		}
	}
	// Writes cut short by stopping the load are no failures: count them before.
	failures := w.failures.Load()
	stop()
	loadTime := time.Since(loadStart)

	// Every acknowledged write is there, read back through the router at majority, and
	// nothing was applied twice or invented.
	rcoll := d.Client.Database(sfDB).Collection(sfColl, options.Collection().SetReadConcern(readconcern.Majority()))
	final, err := readVersions(ctx, rcoll)
	if err != nil {
		t.Fatalf("read back through the router: %v", err)
	}
	rep := w.lost.Check(final)
	if !rep.OK() {
		t.Errorf("(seed %d) acknowledged w:majority writes lost through the router: %v", seed, rep)
	}
	if ph := w.phantoms(final); len(ph) > 0 {
		t.Errorf("through the router:\n  %s", strings.Join(ph, "\n  "))
	}
	probeFinal := map[string]int64{}
	for _, db := range []string{sfDB, sfDB + "1"} {
		got, err := readVersions(ctx, d.Client.Database(db).Collection("probe", options.Collection().SetReadConcern(readconcern.Majority())))
		if err != nil {
			t.Fatal(err)
		}
		for id, v := range got {
			probeFinal[db+"/"+id] = v
		}
	}
	probeAcks, _ := probe.lost.Acked()
	if rep := probe.lost.Check(probeFinal); !rep.OK() {
		t.Errorf("acknowledged probe inserts lost: %v", rep)
	}
	// Both shards took part: the hashed key spread the documents.
	for i, s := range d.Shards {
		p, err := s.WaitForPrimary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.DirectClient(p).Database(sfDB).Collection(sfColl).CountDocuments(ctx, bson.D{})
		if err != nil || n == 0 {
			t.Errorf("shard%d holds %d documents of %s.%s (%v): the collection is not spread", i, n, sfDB, sfColl, err)
		}
	}

	// The router retries where mongos does: the probe, which has no driver retries, saw no
	// error from either fault.
	failed, wces := probe.failed()
	describe := func(ops []sfOp) string {
		var sample []string
		for i, op := range ops {
			if i < 10 {
				sample = append(sample, fmt.Sprintf("%s at +%v: %v", op.kind, op.start.Sub(loadStart).Round(time.Millisecond), op.err))
			}
		}
		return strings.Join(sample, "\n  ")
	}
	w.mu.Lock()
	t.Logf("%v of load: %d writes acknowledged, %d failed at the client (driver retries within %v); probe: %d operations (%d inserts acknowledged), %d failed, %d with a shard's writeConcernError; lost writes: %v",
		loadTime.Round(time.Millisecond), w.acks.Load(), failures, majOpTimeout, probe.count(), probeAcks, len(failed), len(wces), rep)
	if failures > 0 {
		t.Logf("failed writes (sample; context canceled ones were cut short by the end of the load): %s", strings.Join(w.failed, "; "))
	}
	w.mu.Unlock()
	if len(wces) > 0 {
		t.Logf("probe inserts with a shard's writeConcernError:\n  %s", describe(wces))
	}
	if len(failed) > 0 {
		t.Errorf("the router surfaced %d errors to a client without driver retries:\n  %s", len(failed), describe(failed))
	}
}

// sfCode is err's MongoDB code (0 when it has none).
func sfCode(err error) int32 {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		if we.WriteConcernError != nil {
			return int32(we.WriteConcernError.Code)
		}
		if len(we.WriteErrors) > 0 {
			return int32(we.WriteErrors[0].Code)
		}
	}
	return 0
}

// The config server down: the router keeps serving the namespaces it has cached (reads and
// writes go straight to the shards, which have their own filtering metadata), and a request
// that needs the catalog (a namespace flushed from the cache, a new database) fails with
// MongoDB's code within a bound (its maxTimeMS, else the config client's server selection
// timeout) instead of hanging. Once the config server is back, routing recovers by itself.
func TestShardedConfigServerDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	start := time.Now()
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{})
	t.Logf("%v up in %v", d.Topology, time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const db = "cfgdown"
	runAdmin(t, ctx, d.Client, bson.D{{Key: "enableSharding", Value: db}, {Key: "primaryShard", Value: "shard0"}})
	runAdmin(t, ctx, d.Client, bson.D{{Key: "shardCollection", Value: db + ".s"}, {Key: "key", Value: bson.D{{Key: "_id", Value: "hashed"}}}})
	sharded, unsharded := d.Client.Database(db).Collection("s"), d.Client.Database(db).Collection("u")
	exercise := func(what string, from int) error {
		for _, c := range []*mongo.Collection{sharded, unsharded} {
			octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
			var docs []any
			for i := from; i < from+10; i++ {
				docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: 0}})
			}
			_, err := c.InsertMany(octx, docs)
			if err == nil {
				_, err = c.UpdateOne(octx, bson.D{{Key: "_id", Value: from}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}})
			}
			var n int64
			if err == nil {
				n, err = c.CountDocuments(octx, bson.D{})
			}
			if err == nil && n < int64(from+10) {
				err = fmt.Errorf("count %d, want at least %d", n, from+10)
			}
			if err == nil {
				var doc bson.M
				err = c.FindOne(octx, bson.D{{Key: "_id", Value: from}}).Decode(&doc)
			}
			ocancel()
			if err != nil {
				return fmt.Errorf("%s on %s: %w", what, c.Name(), err)
			}
		}
		return nil
	}
	if err := exercise("before", 0); err != nil {
		t.Fatal(err)
	}

	cfg := d.Config.Nodes[0]
	if err := cfg.Kill(); err != nil {
		t.Fatal(err)
	}
	downAt := time.Now()
	// What the router has cached still works.
	if err := exercise("config server down", 10); err != nil {
		t.Errorf("a cached namespace with the config server down: %v", err)
	}
	t.Logf("cached namespaces served with the config server down (%v)", time.Since(downAt).Round(time.Millisecond))

	// What needs the catalog fails with MongoDB's codes, within its bound.
	refuses := func(what string, bound time.Duration, codes []int32, op func(context.Context) error) {
		t.Helper()
		octx, ocancel := context.WithTimeout(ctx, 90*time.Second)
		defer ocancel()
		t0 := time.Now()
		err := op(octx)
		took := time.Since(t0)
		code := sfCode(err)
		t.Logf("%s: code %d after %v: %v", what, code, took.Round(time.Millisecond), err)
		if err == nil || !slices.Contains(codes, code) {
			t.Errorf("%s with the config server down: %v (code %d), want one of the codes %v", what, err, code, codes)
		}
		if took > bound {
			t.Errorf("%s took %v with the config server down, want at most %v", what, took, bound)
		}
	}
	unreachable := []int32{133, 6} // FailedToSatisfyReadPreference, HostUnreachable
	refuses("insert into a new database", 45*time.Second, unreachable, func(c context.Context) error {
		_, err := d.Client.Database(db+"new").Collection("c").InsertOne(c, bson.D{{Key: "_id", Value: 1}})
		return err
	})
	runAdmin(t, ctx, d.Client, bson.D{{Key: "flushRouterConfig", Value: 1}})
	refuses("find after flushRouterConfig", 45*time.Second, unreachable, func(c context.Context) error {
		return d.Client.Database(db).RunCommand(c, bson.D{{Key: "find", Value: "s"}}).Err()
	})
	refuses("find after flushRouterConfig with maxTimeMS 2000", 10*time.Second, []int32{50}, func(c context.Context) error {
		return d.Client.Database(db).RunCommand(c, bson.D{{Key: "find", Value: "u"}, {Key: "maxTimeMS", Value: 2000}}).Err()
	})

	// Back up: routing recovers without a restart of the router.
	if err := cfg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	if _, err := d.Config.WaitForPrimary(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("config server primary %v after its restart", time.Since(upAt).Round(time.Millisecond))
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	var lastErr error
	tries := 0
	waitFor(t, rctx, "routing after the config server is back", func() bool {
		tries++
		t0 := time.Now()
		if lastErr = exercise("config server back", 10+10*tries); lastErr != nil {
			t.Logf("+%v: %v (after %v)", time.Since(upAt).Round(time.Millisecond), lastErr, time.Since(t0).Round(time.Millisecond))
		}
		return lastErr == nil
	})
	if tries > 1 {
		t.Logf("%d tries before routing recovered", tries)
	}
	t.Logf("cached and flushed namespaces routed %v after the restart", time.Since(upAt).Round(time.Millisecond))
	if _, err := d.Client.Database(db+"new").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Errorf("a new database after the config server is back: %v", err)
	}
	t.Logf("routing recovered %v after the config server restarted", time.Since(upAt).Round(time.Millisecond))
}
