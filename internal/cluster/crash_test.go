package cluster

// The kill -9 acceptance test of issue 4 (spec/execution.md, "Journaling" and "Startup
// Recovery"): concurrent j:true writers against a real humongod, SIGKILL at random instants,
// restart on the same dbpath, and then every acknowledged write must be there and validate
// must find the collection consistent.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
)

const (
	crashWriters  = 8
	crashCounters = 4
	// crashBudget bounds the whole test, so a wedged restart or read cannot hang the package
	// run (the package's tests must finish within 90 s under -race).
	crashBudget = 75 * time.Second
	// crashOpTimeout bounds one write: long enough for a j:true group commit on a loaded
	// 2-core machine, short enough that a writer notices a dead server quickly.
	crashOpTimeout = 5 * time.Second
)

// crashWorkload is the writers' shared model of what they were told (versionedDocs) and of
// how their writes failed.
type crashWorkload struct {
	versionedDocs

	mu        sync.Mutex
	serverErr []string // errors carrying a server error code: never expected here
	unknown   atomic.Int64
}

func (w *crashWorkload) noteError(op string, err error) {
	w.unknown.Add(1)
	var se mongo.ServerError
	// A cleared connection pool ("another operation failed with: <network error>") is the
	// driver's echo of the kill on another connection, not an answer from the server.
	var pool driver.RetryablePoolError
	if errors.As(err, &se) && !mongo.IsNetworkError(err) && !mongo.IsTimeout(err) && !errors.Is(err, context.Canceled) &&
		!errors.As(err, &pool) {
		w.mu.Lock()
		if len(w.serverErr) < 20 {
			w.serverErr = append(w.serverErr, fmt.Sprintf("%s: %v", op, err))
		}
		w.mu.Unlock()
	}
}

// run is one writer's loop until ctx ends: 50% inserts, 25% $inc on a random counter, 25%
// replacements of the writer's own document, each with w:1, j:true.
func (w *crashWorkload) run(ctx context.Context, coll *mongo.Collection, writer int, rng *rand.Rand) (acked int) {
	pad := strings.Repeat("x", 64+rng.IntN(192))
	for ctx.Err() == nil {
		opCtx, cancel := context.WithTimeout(ctx, crashOpTimeout)
		op, err := w.write(opCtx, coll, writer, rng, pad)
		cancel()
		if errors.Is(err, errBadWriteResult) {
			w.recordBug(err)
		}
		if err != nil {
			w.noteError(op, err)
		} else {
			acked++
		}
	}
	return acked
}

func (w *crashWorkload) recordBug(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.serverErr) < 20 {
		w.serverErr = append(w.serverErr, err.Error())
	}
}

// crashConnect is a client for one incarnation of the server. Retryable writes are off so
// that every operation reaches the server at most once, which the upper-bound checks assume
// (a standalone does not support them anyway).
func crashConnect(t *testing.T, uri string) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(withInternalAuth(options.Client().ApplyURI(uri).SetRetryWrites(false).
		SetServerSelectionTimeout(10 * time.Second).SetConnectTimeout(5 * time.Second).
		SetHeartbeatInterval(500 * time.Millisecond)))
	if err != nil {
		t.Fatalf("connect %s: %v", uri, err)
	}
	t.Cleanup(func() { crashDisconnect(cl) })
	return cl
}

// crashDisconnect is bounded: against a killed server the driver can wait for its dead
// connections (a second call, from the test's cleanup, returns at once).
func crashDisconnect(cl *mongo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = cl.Disconnect(ctx)
}

func crashCollection(cl *mongo.Client) *mongo.Collection {
	j := true
	return cl.Database("crash").Collection("docs",
		options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 1, Journal: &j}))
}

func envInt(t *testing.T, name string, def int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v
}

func TestKillNineUnderLoad(t *testing.T) {
	iterations := int64(10)
	if testing.Short() {
		iterations = 3
	}
	iterations = envInt(t, "HUMONGO_KILL_ITERATIONS", iterations)
	seed := envInt(t, "HUMONGO_SEED", time.Now().UnixNano())
	t.Logf("seed %d, %d iterations (reproduce the kill points with HUMONGO_SEED=%d)", seed, iterations, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	ctx, cancel := context.WithTimeout(context.Background(), crashBudget)
	defer cancel()
	n, _ := StartStandalone(t, Options{})
	cl := crashConnect(t, n.URI())
	coll := crashCollection(cl)

	// The index on v is rewritten by every $inc and replacement, so validate also checks
	// index entries against records after each crash.
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "v", Value: 1}}}); err != nil {
		t.Fatalf("createIndex: %v", err)
	}
	w := &crashWorkload{versionedDocs: newVersionedDocs(crashWriters, crashCounters)}
	if err := w.seed(ctx, coll); err != nil {
		t.Fatal(err)
	}

	for it := range iterations {
		runFor := 100*time.Millisecond + time.Duration(rng.IntN(701))*time.Millisecond
		wctx, stopWriters := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var acked atomic.Int64
		for k := range crashWriters {
			wrng := rand.New(rand.NewPCG(uint64(seed), uint64(it*crashWriters+int64(k)+1)))
			wg.Go(func() { acked.Add(int64(w.run(wctx, coll, k, wrng))) })
		}
		select {
		case <-time.After(runFor):
		case <-ctx.Done():
		}
		killAt := time.Now()
		killErr := n.Kill()
		// Every writer stops before the state is judged: acknowledgements that arrived before
		// the kill are all recorded once Wait returns.
		stopWriters()
		wg.Wait()
		stopped := time.Since(killAt)
		crashDisconnect(cl)
		if killErr != nil {
			t.Fatalf("iteration %d: kill: %v", it, killErr)
		}
		if ctx.Err() != nil {
			t.Fatalf("iteration %d: time budget of %v exhausted", it, crashBudget)
		}
		if st := n.ExitState(); st == nil || st.Success() {
			t.Fatalf("iteration %d: process state after kill: %v", it, st)
		}

		restartStart := time.Now()
		disconnected := restartStart.Sub(killAt) - stopped
		if err := n.Restart(ctx); err != nil {
			t.Fatalf("iteration %d: restart: %v", it, err)
		}
		startedAfter := time.Since(restartStart)
		if err := n.WaitReady(ctx); err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		restartTook := time.Since(restartStart)
		if restartTook > 5*time.Second {
			t.Logf("iteration %d: slow restart (%v, started after %v) at %v; log tail:\n%s", it, restartTook, startedAfter, time.Now().UTC(), strings.Join(n.Tail(40), "\n"))
		}
		cl = crashConnect(t, n.URI())
		coll = crashCollection(cl)

		final, err := readVersions(ctx, coll)
		if err != nil {
			t.Fatalf("iteration %d: read back: %v", it, err)
		}
		rep := w.lost.Check(final)
		acks, _ := w.lost.Acked()
		summary := "writes lost (below)"
		if rep.OK() {
			summary = rep.String()
		}
		t.Logf("iteration %d: killed after %v; %d writes acknowledged this round (%d in all), %d outcomes unknown in all; writers stopped %v, old client closed %v, restart %v; %d documents; %s",
			it, runFor, acked.Load(), acks, w.unknown.Load(), stopped.Round(time.Millisecond), disconnected.Round(time.Millisecond),
			restartTook.Round(time.Millisecond), len(final), summary)
		if !rep.OK() {
			t.Errorf("iteration %d (seed %d): acknowledged j:true writes lost after kill -9: %v", it, seed, rep)
		}
		if ph := w.phantoms(final); len(ph) > 0 {
			t.Errorf("iteration %d: documents or versions no client wrote:\n  %s", it, strings.Join(ph, "\n  "))
		}
		if err := crashValidate(ctx, coll, int64(len(final))); err != nil {
			t.Errorf("iteration %d: %v", it, err)
		}
		w.mu.Lock()
		serverErr := w.serverErr
		w.mu.Unlock()
		if len(serverErr) > 0 {
			t.Errorf("iteration %d: writes failed with server errors (expected only network errors from the kill):\n  %s", it, strings.Join(serverErr, "\n  "))
		}
		if t.Failed() {
			return
		}
	}
}

// crashValidate runs validate {full: true} and checks it is valid and counts the documents
// that find returned.
func crashValidate(ctx context.Context, coll *mongo.Collection, docs int64) error {
	var res struct {
		Valid    bool     `bson:"valid"`
		NRecords int64    `bson:"nrecords"`
		Errors   []string `bson:"errors"`
		Warnings []string `bson:"warnings"`
	}
	raw, err := coll.Database().RunCommand(ctx, bson.D{{Key: "validate", Value: coll.Name()}, {Key: "full", Value: true}}).Raw()
	if err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	if err := bson.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("validate reply %v: %w", raw, err)
	}
	if !res.Valid || len(res.Errors) > 0 {
		return fmt.Errorf("validate after restart: valid=%v errors=%q warnings=%q", res.Valid, res.Errors, res.Warnings)
	}
	if res.NRecords != docs {
		return fmt.Errorf("validate counted %d records, find returned %d documents", res.NRecords, docs)
	}
	return nil
}
