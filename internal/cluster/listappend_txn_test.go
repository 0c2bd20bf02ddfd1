package cluster

// Issue 11's transaction-isolation acceptance (spec/replication.md, "Transactions"): Elle's
// list-append workload (checker.CheckListAppend) run as multi-document transactions of 1–4
// micro-operations, each a read of a key's list or an append to it ($push to the document
// {_id: key, vals: [...]}), through the Go driver's Session.WithTransaction with read concern
// "snapshot" and write concern "majority", while the nemesis kills, pauses and partitions the
// primary (nemesis.go). Snapshot isolation allows no G0, G1a, G1b, G1c or G-single (G2, write
// skew, it allows, and is only logged); every committed append must be in the final lists
// (checker.CheckListAppendFinal), read-only transactions must have seen a snapshot (an anomaly
// through one would say otherwise), and the members must end up with the same data.
//
// A transaction's outcome is what the client learned: WithTransaction returned nil, committed;
// its last attempt's callback failed, aborted (WithTransaction retries only after a
// TransientTransactionError, which says that attempt did not commit, so no attempt committed);
// otherwise the commit's outcome is unknown. Every attempt appends the same values, so an
// unknown transaction is one transaction whichever attempt, if any, committed. A failed
// transaction's error must be one a fault or a conflict explains (laExpected): any other error,
// like an impossible write result, fails the test. HUMONGO_LISTAPPEND_CYCLES sets the number of
// fault cycles (default 5), HUMONGO_SEED the seed.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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
	laDB      = "elle"
	laColl    = "lists"
	laKeys    = 6
	laClients = 5
	// laTxnTimeout bounds one WithTransaction, retries and commit included: it is the
	// client's operation timeout (CSOT), the only bound the driver's commit honours (it
	// commits under a context without the caller's deadline).
	laTxnTimeout = 8 * time.Second
	// laPerPhase is how many transactions must commit before each fault and after it.
	laPerPhase = 25
)

// laHistory is the recorded history, shared by the clients.
type laHistory struct {
	mu   sync.Mutex
	txns []checker.Txn

	committed, aborted, unknown atomic.Int64
	errs                        []string // a sample of failures, for the log
	bugs                        []string // impossible results and unexpected errors: the test fails
}

func (h *laHistory) bug(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.bugs) < 20 {
		h.bugs = append(h.bugs, time.Now().UTC().Format("15:04:05.000 ")+err.Error())
	}
}

// laExpected reports whether a failed transaction's error is one a failover or a conflict
// explains: a timeout or network error, an error the driver labels as worth retrying the
// transaction or its commit, or a code a primary stepping down or a lost transaction
// answers with. Any other error (a refusal of what the workload asks) fails the test.
func laExpected(err error) bool {
	if mongo.IsTimeout(err) || mongo.IsNetworkError(err) || errors.Is(err, context.Canceled) {
		return true
	}
	var le mongo.LabeledError
	if errors.As(err, &le) && (le.HasErrorLabel("TransientTransactionError") || le.HasErrorLabel("UnknownTransactionCommitResult")) {
		return true
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, code := range []int{
			6, 7, 89, 9001, // HostUnreachable, HostNotFound, NetworkTimeout, SocketException
			91, 11600, 11602, 189, // ShutdownInProgress, InterruptedAtShutdown, InterruptedDueToReplStateChange, PrimarySteppedDown
			10107, 13435, 13436, // NotWritablePrimary, NotPrimaryNoSecondaryOk, NotPrimaryOrSecondary
			112, 251, 24, 50, 262, // WriteConflict, NoSuchTransaction, LockTimeout, MaxTimeMSExpired, ExceededTimeLimit
		} {
			if se.HasErrorCode(code) {
				return true
			}
		}
	}
	// The driver's server selection failure (no primary yet) has no exported type.
	return strings.Contains(err.Error(), "server selection error")
}

func (h *laHistory) add(t checker.Txn, err error) {
	switch t.Outcome {
	case checker.Committed:
		h.committed.Add(1)
	case checker.Aborted:
		h.aborted.Add(1)
	default:
		h.unknown.Add(1)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.txns = append(h.txns, t)
	if err != nil {
		// The first failures and the latest ones: a stall shows in the latter.
		if len(h.errs) == 12 {
			h.errs = append(h.errs[:6], h.errs[7:]...)
		}
		h.errs = append(h.errs, fmt.Sprintf("%s %v: %v", time.Now().UTC().Format("15:04:05.000"), t.Outcome, err))
	}
}

// laClient runs transactions of minOps..minOps+3 micro-operations until ctx ends. next hands
// out append values, unique across the history.
func laClient(ctx context.Context, cl *mongo.Client, coll *mongo.Collection, h *laHistory, client int, rng *rand.Rand, next *atomic.Int64, minOps int) {
	sess, err := cl.StartSession()
	if err != nil {
		h.add(checker.Txn{Process: client, Outcome: checker.Aborted}, fmt.Errorf("start session: %w", err))
		return
	}
	defer func() { sess.EndSession(context.Background()) }()
	topts := options.Transaction().SetReadConcern(readconcern.Snapshot()).SetWriteConcern(writeconcern.Majority())
	for ctx.Err() == nil {
		plan := make([]checker.Mop, minOps+rng.IntN(4))
		for i := range plan {
			key := fmt.Sprintf("k%d", rng.IntN(laKeys))
			if rng.IntN(2) == 0 {
				plan[i] = checker.Append(key, next.Add(1))
			} else {
				plan[i] = checker.Mop{Kind: checker.MopRead, Key: key} // List nil until read
			}
		}
		var done []checker.Mop // the last attempt's micro-operations as observed
		var cbErr error        // the last attempt's callback error
		_, err := sess.WithTransaction(ctx, func(tctx context.Context) (any, error) {
			done = append(done[:0:0], plan...)
			cbErr = laRun(tctx, coll, done)
			return nil, cbErr
		}, topts)
		t := checker.Txn{Process: client, Ops: done}
		switch {
		case err == nil:
			t.Outcome = checker.Committed
		case cbErr != nil:
			t.Outcome = checker.Aborted
		default:
			t.Outcome = checker.Unknown
		}
		if done == nil { // WithTransaction failed before the first attempt
			t.Ops, t.Outcome = plan, checker.Aborted
		}
		switch {
		case errors.Is(err, errBadWriteResult):
			h.bug(err)
		case err != nil && !laExpected(err):
			h.bug(err)
		}
		h.add(t, err)
		if err != nil {
			// After some errors (a network error on commit) the driver leaves the session
			// in its transaction, and every later StartTransaction would fail: go on in a
			// fresh session.
			sess.EndSession(context.Background())
			if sess, err = cl.StartSession(); err != nil {
				h.add(checker.Txn{Process: client, Outcome: checker.Aborted}, fmt.Errorf("start session: %w", err))
				return
			}
		}
	}
}

// laRun performs ops inside a transaction, filling in what each read returned.
func laRun(ctx context.Context, coll *mongo.Collection, ops []checker.Mop) error {
	for i, m := range ops {
		filter := bson.D{{Key: "_id", Value: m.Key}}
		switch m.Kind {
		case checker.MopAppend:
			res, err := coll.UpdateOne(ctx, filter, bson.D{{Key: "$push", Value: bson.D{{Key: "vals", Value: m.Value}}}})
			if err != nil {
				return err
			}
			if res.MatchedCount != 1 {
				return fmt.Errorf("%w: $push to %s matched %d", errBadWriteResult, m.Key, res.MatchedCount)
			}
		case checker.MopRead:
			var doc struct {
				Vals []int64 `bson:"vals"`
			}
			err := coll.FindOne(ctx, filter).Decode(&doc)
			if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
				return err
			}
			if doc.Vals == nil {
				doc.Vals = []int64{}
			}
			ops[i].List = doc.Vals
		}
	}
	return nil
}

// laReadFinal reads every key's list on the primary with read concern "majority".
func laReadFinal(ctx context.Context, coll *mongo.Collection) (map[string][]int64, error) {
	cur, err := coll.Find(ctx, bson.D{})
	if err != nil {
		return nil, err
	}
	var docs []struct {
		ID   string  `bson:"_id"`
		Vals []int64 `bson:"vals"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	final := make(map[string][]int64, len(docs))
	for _, d := range docs {
		final[d.ID] = d.Vals
	}
	return final, nil
}

// laSeedLists creates the lists k0..k(laKeys-1), empty, majority-committed, before the
// workload: appends are then plain updates (an upsert racing another would be a duplicate-key
// error, not what this is about).
func laSeedLists(ctx context.Context, cl *mongo.Client) error {
	setup := cl.Database(laDB).Collection(laColl, options.Collection().SetWriteConcern(writeconcern.Majority()))
	var docs []any
	for k := range laKeys {
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("k%d", k)}, {Key: "vals", Value: bson.A{}}})
	}
	if _, err := setup.InsertMany(ctx, docs); err != nil {
		return fmt.Errorf("create the lists: %w", err)
	}
	return nil
}

// laConnect is a workload client for uri: the client-side operation timeout bounds each
// transaction (laTxnTimeout); it is disconnected when the test ends. It is the harness's
// internal user when the harness runs with its keyfile: the localhost exception through a
// router depends on the config servers answering, and they are among the nemesis's victims.
func laConnect(t *testing.T, uri string) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(withInternalAuth(options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(10 * time.Second).SetConnectTimeout(5 * time.Second).
		SetHeartbeatInterval(500 * time.Millisecond).SetTimeout(laTxnTimeout)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = cl.Disconnect(dctx)
	})
	return cl
}

// laRunClients starts laClients clients, client c on clients[c%len(clients)], each running
// transactions of minOps..minOps+3 micro-operations, and returns the history and a stop that
// waits for them (idempotent; also run when the test ends). The history is logged if the test
// fails.
func laRunClients(t *testing.T, ctx context.Context, seed uint64, minOps int, clients ...*mongo.Client) (*laHistory, func()) {
	h := &laHistory{}
	t.Cleanup(func() {
		if t.Failed() {
			h.mu.Lock()
			defer h.mu.Unlock()
			t.Logf("%d transactions: %d committed, %d aborted, %d unknown; failures (sample): %s; unexpected: %s",
				len(h.txns), h.committed.Load(), h.aborted.Load(), h.unknown.Load(), strings.Join(h.errs, "; "), strings.Join(h.bugs, "; "))
		}
	})
	next := new(atomic.Int64)
	wctx, stopClients := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for c := range laClients {
		crng := rand.New(rand.NewPCG(seed, uint64(c+200)))
		cl := clients[c%len(clients)]
		coll := cl.Database(laDB).Collection(laColl)
		wg.Go(func() { laClient(wctx, cl, coll, h, c, crng, next, minOps) })
	}
	var once sync.Once
	stop := func() { once.Do(func() { stopClients(); wg.Wait() }) }
	t.Cleanup(stop)
	return h, stop
}

// waitCommits waits, within d, for n more transactions to commit.
func (h *laHistory) waitCommits(t *testing.T, ctx context.Context, what string, n int64, d time.Duration) {
	t.Helper()
	before := h.committed.Load()
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	waitFor(t, wctx, what, func() bool { return h.committed.Load() >= before+n })
}

func TestListAppendTransactions(t *testing.T) {
	ft, ctx := startFaultTest(t, "HUMONGO_LISTAPPEND_CYCLES", 5, 2, 90*time.Second)
	d, seed, rng, cycles, start := ft.d, ft.seed, ft.rng, ft.cycles, ft.start
	if err := laSeedLists(ctx, d.Client); err != nil {
		t.Fatal(err)
	}
	h, stop := laRunClients(t, ctx, seed, 1, laConnect(t, d.URI))

	for cycle, kind := range faultSchedule(rng, cycles) {
		h.waitCommits(t, ctx, "transactions before the fault", laPerPhase, time.Hour)
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		f, err := d.FailPrimary(ctx, kind, majElect)
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		// Heal at once (see TestMajorityWritesSurviveFailovers for why).
		if err := d.Heal(ctx, f, majRejoin); err != nil {
			t.Fatalf("cycle %d: heal: %v", cycle, err)
		}
		h.waitCommits(t, ctx, "transactions committing after the failover", laPerPhase, majElect)
		t.Logf("cycle %d: %v; transactions committing again %v after the fault", cycle, f, time.Since(f.At).Round(time.Millisecond))
	}
	stop()

	// Every member caught up holds the same lists; the primary's majority-committed lists
	// are the final state. A member that does not catch up fails the test, but the history is
	// still checked against the primary.
	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	target, err := d.WaitCaughtUp(cctx)
	ccancel()
	if err != nil {
		t.Errorf("members did not catch up: %v", err)
	} else if _, err := d.CompareDBHashes(ctx, laDB); err != nil {
		t.Errorf("members differ after catch-up to %v: %v", target, err)
	}
	final, err := laReadFinal(ctx, d.Client.Database(laDB).Collection(laColl, options.Collection().SetReadConcern(readconcern.Majority())))
	if err != nil {
		t.Fatalf("final read: %v", err)
	}
	laCheck(t, h, final, seed, fmt.Sprintf("%d cycles in %v", cycles, time.Since(start).Round(time.Millisecond)))
}

// laCheck checks the history h against the final lists: no unexpected error, no G0, G1a,
// G1b, G1c or G-single (G2 is counted), no lost committed append, and enough checked (reads,
// non-empty ones, read-only transactions, dependency edges). run describes the run for the log.
func laCheck(t *testing.T, h *laHistory, final map[string][]int64, seed uint64, run string) {
	t.Helper()
	h.mu.Lock()
	history, bugs := h.txns, h.bugs
	h.mu.Unlock()
	if len(bugs) > 0 {
		t.Errorf("errors no fault or conflict explains, or impossible write results (first %d): %s", len(bugs), strings.Join(bugs, "; "))
	}
	var readOnly, reads, nonEmptyReads int
	for _, tx := range history {
		if tx.Outcome != checker.Committed {
			continue
		}
		if tx.ReadOnly() {
			readOnly++
		}
		for _, m := range tx.Ops {
			if m.Kind == checker.MopRead {
				reads++
				if len(m.List) > 0 {
					nonEmptyReads++
				}
			}
		}
	}
	total := 0
	for _, l := range final {
		total += len(l)
	}
	t.Logf("%s: %d transactions (%d committed, %d of them read-only; %d aborted; %d unknown), %d committed reads (%d non-empty), %d elements in the final lists; failures (sample): %s",
		run, len(history), h.committed.Load(), readOnly, h.aborted.Load(), h.unknown.Load(),
		reads, nonEmptyReads, total, strings.Join(h.errs, "; "))

	rep := checker.CheckListAppendFinal(history, final)
	var bad []string
	g2 := 0
	for _, a := range rep.Anomalies {
		if a.Type == checker.G2 {
			g2++ // write skew: snapshot isolation allows it
			continue
		}
		if len(bad) < 20 {
			ro := ""
			for _, ti := range a.Txns {
				if ti < len(history) && history[ti].ReadOnly() {
					ro = " (involves read-only T" + fmt.Sprint(ti) + ")"
					break
				}
			}
			bad = append(bad, a.String()+ro)
		}
	}
	t.Logf("checker: %d transactions, %d dependency edges, %d G2 (allowed under snapshot isolation)", rep.Txns, rep.Edges, g2)
	if len(bad) > 0 {
		for _, ti := range anomalyTxns(rep) {
			if ti < len(history) {
				t.Logf("T%d (client %d, %v): %v", ti, history[ti].Process, history[ti].Outcome, history[ti].Ops)
			}
		}
		t.Fatalf("(seed %d) transaction anomalies:\n  %s", seed, strings.Join(bad, "\n  "))
	}
	// The run must have exercised what it checks.
	if reads == 0 || nonEmptyReads == 0 || readOnly == 0 || rep.Edges == 0 {
		t.Fatalf("too little was checked: %d reads (%d non-empty), %d read-only transactions, %d edges", reads, nonEmptyReads, readOnly, rep.Edges)
	}
}

// anomalyTxns lists the transactions the non-G2 anomalies name (at most 30), for the log.
func anomalyTxns(rep checker.ListAppendReport) []int {
	var out []int
	for _, a := range rep.Anomalies {
		if a.Type == checker.G2 {
			continue
		}
		for _, ti := range a.Txns {
			if len(out) < 30 && !slices.Contains(out, ti) {
				out = append(out, ti)
			}
		}
	}
	return out
}
