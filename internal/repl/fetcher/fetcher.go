// Package fetcher is a secondary's OplogFetcher and OplogBuffer (spec/replication.md:
// "Life as a Secondary", "Oplog Fetching", "Sync Source Selection"; BackgroundSync's loop).
//
// Fetcher.Run is the BackgroundSync loop: ask the coordinator for a sync source, open a
// tailable awaitData `find` on the source's local.oplog.rs with {ts: {$gte: lastFetched.ts}}
// through the Go driver, check the first batch, then long-poll with getMore (maxTimeMS ≈ the
// heartbeat interval) and push every batch into the Buffer for the applier. Errors restart
// the find from lastFetched up to Retries times (a batch that arrives resets the count);
// then the source is denylisted and another is chosen.
//
// First-batch checks (spec: "Oplog Fetching"): the find must return our last fetched entry
// first. An empty first batch means the source is behind us (InvalidSyncSource); a first
// entry other than ours means either the source no longer has our entry because its oplog
// rolled over (TooStaleToSyncFromSource: its oldest entry is newer than our newest) or our
// oplog diverged from it (OplogStartMissing: rollback required). In both cases the source is
// denylisted; rollback itself is left to the owner (OnRollbackRequired), and when the owner
// set that hook Run returns after calling it instead: the owner rolls back and starts a new
// fetcher, which may then sync from the same source again. An empty first batch is normally
// a source that is behind us, except when the source's newest entry is in a newer term than
// ours: then our newer entries are on a branch the set abandoned (spec, Rollback: "last
// fetched OpTime greater than the sync source's last applied, but in a lower term"), which is
// OplogStartMissing as well.
//
// The fail point stopReplProducer (MongoDB's) parks the fetcher while it is on: a batch that
// arrives is dropped before it reaches the buffer and no new find is sent, so a test can keep
// a secondary from replicating while heartbeats go on (how rollback tests make a primary's
// w:1 writes diverge).
//
// Invariants: entries are pushed in strictly increasing ts order, each batch continues the
// previous one (the first entry of every find is the last entry already pushed and is
// dropped), and lastFetched only moves forward after a successful push.
package fetcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/client"
	"humongo/internal/failpoint"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
)

// SyncSourceChooser is what the fetcher needs from the ReplicationCoordinator (topology's
// ChooseSyncSource and BlacklistSyncSource behind the coordinator's mutex).
type SyncSourceChooser interface {
	// ChooseSyncSource returns the host to fetch from given our newest fetched optime, or
	// "" when no member qualifies.
	ChooseSyncSource(lastFetched optime.OpTime) string
	// BlacklistSyncSource keeps host from being chosen until `until`.
	BlacklistSyncSource(host string, until time.Time)
}

// SyncSourceChecker is optionally implemented by a chooser: after every batch the fetcher
// asks whether to abandon the current source (spec: metadata checks before each getMore).
type SyncSourceChecker interface {
	ShouldChangeSyncSource(host string) string
}

// FixedSource always chooses Host (tests, initial sync from a given member).
type FixedSource struct{ Host string }

// ChooseSyncSource returns s.Host.
func (s FixedSource) ChooseSyncSource(optime.OpTime) string { return s.Host }

// BlacklistSyncSource does nothing: there is no other choice.
func (FixedSource) BlacklistSyncSource(string, time.Time) {}

// Config configures a Fetcher.
type Config struct {
	Chooser SyncSourceChooser
	Buffer  *Buffer
	// LastFetched is the newest entry already in our oplog (or buffered): the first
	// find starts there and checks that the source has it.
	LastFetched optime.OpTime
	// AwaitTime is the getMore maxTimeMS (default 2 s, the heartbeat interval).
	AwaitTime time.Duration
	// Retries is how many times a failed fetch restarts against the same source (default 3).
	Retries int
	// BlacklistFor is how long a failing source is denylisted (default 10 s).
	BlacklistFor time.Duration
	// NoSourceWait is the wait before choosing again when no source qualifies (default 1 s).
	NoSourceWait time.Duration
	// Clients returns the driver client for host; default: a directConnection client per
	// host owned by the fetcher (closed by Run's return).
	Clients func(host string) (*mongo.Client, error)
	// Dialer is the server's host Rewriter the default clients dial through (nil: none).
	Dialer *client.Rewriter
	// OnRollbackRequired is called when our oplog diverged from the source's (may be nil);
	// when set, Run returns right after calling it (the owner rolls back and starts a new
	// fetcher) instead of denylisting the source and choosing another.
	OnRollbackRequired func(host string, lastFetched optime.OpTime)
	// StopAt, when non-zero, makes Run return nil once an entry at or after it was pushed
	// (initial sync's stop timestamp).
	StopAt optime.OpTime
	// RBID reads host's rollback id; default: replSetGetRBID through Clients. Each find reads
	// it before it starts and again after its first batch passed the checks.
	RBID func(ctx context.Context, host string) (int64, error)
	Log  *slog.Logger
}

// Fetcher pulls the sync source's oplog into a Buffer.
type Fetcher struct {
	cfg Config
	log *slog.Logger

	mu          sync.Mutex
	lastFetched optime.OpTime // guarded by mu
	source      string        // guarded by mu; current sync source host ("" when none)
	lastErr     error         // guarded by mu; why fetching from the last source ended
	clients     *client.Pool  // closed when Run returns
}

// New returns a fetcher; Run starts it.
func New(cfg Config) *Fetcher {
	if cfg.AwaitTime <= 0 {
		cfg.AwaitTime = 2 * time.Second
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 3
	}
	if cfg.BlacklistFor <= 0 {
		cfg.BlacklistFor = 10 * time.Second
	}
	if cfg.NoSourceWait <= 0 {
		cfg.NoSourceWait = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Fetcher{cfg: cfg, log: cfg.Log.With(logv2.C(logv2.Replication)), lastFetched: cfg.LastFetched,
		clients: client.NewPool(clientOptions(cfg.Dialer))}
}

// LastFetched is the optime of the newest entry pushed into the buffer.
func (f *Fetcher) LastFetched() optime.OpTime {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastFetched
}

// Source is the current sync source ("" when none).
func (f *Fetcher) Source() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.source
}

// LastError is the error that ended fetching from the previous sync source (nil if none).
func (f *Fetcher) LastError() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

// Errors that end one source's fetching (the loop chooses another).
var (
	errStopReached = errors.New("fetcher: stop optime reached")
	// errProducerStopped: the stopReplProducer fail point is on; the batch was dropped.
	errProducerStopped = errors.New("fetcher: stopReplProducer fail point is on")
)

// stopReplProducer is MongoDB's fail point of that name (see the package comment).
var stopReplProducer = failpoint.Register("stopReplProducer")

// producerStopped evaluates stopReplProducer (each evaluation that fires counts for
// waitForFailPoint).
func producerStopped() bool {
	_, on := stopReplProducer.Evaluate(nil)
	return on
}

// waitWhileProducerStopped parks the fetcher while stopReplProducer is on. The fail point
// has no "turned off" signal, so this polls, like MongoDB's pauseWhileSet; it only runs
// while a test has the fail point on.
func waitWhileProducerStopped(ctx context.Context) error {
	for producerStopped() {
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// Run is the BackgroundSync loop; it returns when ctx ends (with ctx's cause), nil once
// Config.StopAt was fetched, or the OplogStartMissing error after calling
// Config.OnRollbackRequired.
func (f *Fetcher) Run(ctx context.Context) error {
	defer f.clients.Close()
	for {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if err := waitWhileProducerStopped(ctx); err != nil {
			return err
		}
		host := f.cfg.Chooser.ChooseSyncSource(f.LastFetched())
		if host == "" {
			if err := sleepCtx(ctx, f.cfg.NoSourceWait); err != nil {
				return err
			}
			continue
		}
		f.setSource(host)
		err := f.fetchFrom(ctx, host)
		f.mu.Lock()
		f.source, f.lastErr = "", err
		f.mu.Unlock()
		switch {
		case errors.Is(err, errStopReached):
			return nil
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case errors.Is(err, errProducerStopped):
			continue // not the source's fault: no denylisting
		case mongoerr.Is(err, mongoerr.OplogStartMissing):
			f.log.Warn("Our oplog diverged from the sync source's; rollback required", logv2.ID(21098),
				"syncSource", host, "lastFetched", f.LastFetched().String(), "error", err.Error())
			if f.cfg.OnRollbackRequired != nil {
				f.cfg.OnRollbackRequired(host, f.LastFetched())
				return err
			}
		default:
			f.log.Info("Oplog fetcher stopped fetching from sync source", logv2.ID(21085),
				"syncSource", host, "error", errString(err))
		}
		f.cfg.Chooser.BlacklistSyncSource(host, time.Now().Add(f.cfg.BlacklistFor))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (f *Fetcher) setSource(h string) {
	f.mu.Lock()
	f.source = h
	f.mu.Unlock()
}

// fetchFrom fetches from host until a fatal condition or Retries consecutive failures.
func (f *Fetcher) fetchFrom(ctx context.Context, host string) error {
	failures := 0
	for {
		progressed, err := f.fetchOnce(ctx, host)
		if err == nil || errors.Is(err, errStopReached) || errors.Is(err, errProducerStopped) || ctx.Err() != nil {
			return err
		}
		switch {
		case mongoerr.Is(err, mongoerr.OplogStartMissing), mongoerr.Is(err, mongoerr.TooStaleToSyncFromSource),
			mongoerr.Is(err, mongoerr.InvalidSyncSource), mongoerr.Is(err, mongoerr.OplogOutOfOrder):
			return err // retrying the same source cannot help
		}
		if progressed {
			failures = 0
		}
		if hasCode(err, mongoerr.MaxTimeMSExpired) {
			// An awaitData getMore whose wait ran out is an empty batch, not a failure
			// (some servers report it as an error); start a new find from lastFetched.
			continue
		}
		failures++
		if failures > f.cfg.Retries {
			return fmt.Errorf("fetcher: %d consecutive failures: %w", failures, err)
		}
		// A source the topology has given up on (it stopped answering heartbeats: a killed
		// old primary) is not worth the retries: until this node syncs from the new primary,
		// that primary cannot commit w:"majority" writes.
		if r := f.shouldChange(host); r != "" {
			return mongoerr.Newf(mongoerr.InvalidSyncSource, "changing sync source after %v: %s", err, r)
		}
		f.log.Info("Restarting oplog fetcher", logv2.ID(23437), "syncSource", host, "attempt", failures, "error", err.Error())
	}
}

// hasCode reports whether err carries code, as a local error or a remote command error.
func hasCode(err error, code mongoerr.Code) bool {
	if mongoerr.Is(err, code) {
		return true
	}
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(int(code))
}

func tsValue(o optime.OpTime) bson.Timestamp {
	return bson.Timestamp{T: o.TS.Secs(), I: o.TS.Inc()}
}

// fetchOnce runs one find and its getMores. progressed reports whether any batch was pushed.
func (f *Fetcher) fetchOnce(ctx context.Context, host string) (progressed bool, err error) {
	cl, err := f.client(host)
	if err != nil {
		return false, err
	}
	// The source's rollback id before the find: if it changed by the time the first batch
	// was checked, the source rolled back in between and the check proved nothing (spec:
	// metadata checks).
	rbid, err := f.rbid(ctx, host)
	if err != nil {
		return false, err
	}
	last := f.LastFetched()
	coll := cl.Database("local").Collection("oplog.rs")
	opts := options.Find().SetCursorType(options.TailableAwait).SetMaxAwaitTime(f.cfg.AwaitTime)
	cur, err := coll.Find(ctx, bson.D{{Key: "ts", Value: bson.D{{Key: "$gte", Value: tsValue(last)}}}}, opts)
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = cur.Close(cctx)
		cancel()
	}()
	first := true
	var batch []bsoncore.Document
	for {
		more := cur.TryNext(ctx)
		if producerStopped() {
			return progressed, errProducerStopped
		}
		if !more {
			if err := cur.Err(); err != nil {
				return progressed, err
			}
			if first {
				return false, f.emptyFirstBatch(ctx, coll, host, last)
			}
			if cur.ID() == 0 {
				return progressed, mongoerr.Newf(mongoerr.CursorNotFound, "oplog cursor on %s was closed", host)
			}
			if r := f.shouldChange(host); r != "" {
				return progressed, mongoerr.Newf(mongoerr.InvalidSyncSource, "changing sync source: %s", r)
			}
			continue // an empty awaitData batch: ask again
		}
		// Copy the batch: the cursor's documents are only valid until the next call.
		batch = batch[:0]
		batch = append(batch, bsoncore.Document(append([]byte(nil), cur.Current...)))
		for cur.RemainingBatchLength() > 0 && cur.TryNext(ctx) {
			batch = append(batch, bsoncore.Document(append([]byte(nil), cur.Current...)))
		}
		if err := cur.Err(); err != nil {
			return progressed, err
		}
		if first {
			first = false
			if batch, err = f.checkFirstBatch(ctx, coll, host, last, batch); err != nil {
				return false, err
			}
			after, err := f.rbid(ctx, host)
			if err != nil {
				return false, err
			}
			if after != rbid {
				return false, mongoerr.Newf(mongoerr.InvalidSyncSource,
					"sync source %s rolled back while we checked its oplog (rollback id %d → %d)", host, rbid, after)
			}
		}
		if len(batch) == 0 {
			continue
		}
		if err := f.push(ctx, batch); err != nil {
			return progressed, err
		}
		progressed = true
		if !f.cfg.StopAt.TS.IsNull() && f.LastFetched().TS >= f.cfg.StopAt.TS {
			return true, errStopReached
		}
		if r := f.shouldChange(host); r != "" {
			return progressed, mongoerr.Newf(mongoerr.InvalidSyncSource, "changing sync source: %s", r)
		}
		batch = make([]bsoncore.Document, 0, len(batch)) // the buffer owns the old slice
	}
}

// rbid reads host's rollback id (Config.RBID, or replSetGetRBID).
func (f *Fetcher) rbid(ctx context.Context, host string) (int64, error) {
	if f.cfg.RBID != nil {
		return f.cfg.RBID(ctx, host)
	}
	cl, err := f.client(host)
	if err != nil {
		return 0, err
	}
	var r bson.Raw
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetRBID", Value: 1}}).Decode(&r); err != nil {
		return 0, fmt.Errorf("replSetGetRBID on %s: %w", host, err)
	}
	n, ok := r.Lookup("rbid").AsInt64OK()
	if !ok {
		return 0, mongoerr.Newf(mongoerr.BadValue, "replSetGetRBID reply from %s has no rbid", host)
	}
	return n, nil
}

func (f *Fetcher) shouldChange(host string) string {
	if c, ok := f.cfg.Chooser.(SyncSourceChecker); ok {
		return c.ShouldChangeSyncSource(host)
	}
	return ""
}

// checkFirstBatch verifies that the find's first entry is our last fetched entry and drops
// it (we already have it). With a null last fetched optime (an empty oplog, initial sync
// from the very beginning) any first entry is accepted.
func (f *Fetcher) checkFirstBatch(ctx context.Context, coll *mongo.Collection, host string, last optime.OpTime, batch []bsoncore.Document) ([]bsoncore.Document, error) {
	if last.TS.IsNull() {
		return batch, nil
	}
	ot, err := oplog.EntryOpTime(batch[0])
	if err != nil {
		return nil, err
	}
	if ot.TS == last.TS && (ot.Term == last.Term || last.Term == optime.UninitializedTerm) {
		return batch[1:], nil
	}
	// Our entry is missing on the source: too stale (its oplog starts after our last
	// entry), or diverged (it has entries around ours but not ours).
	var oldest bson.Raw
	err = coll.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "$natural", Value: 1}})).Decode(&oldest)
	if err == nil {
		if o, err := oplog.EntryOpTime(bsoncore.Document(oldest)); err == nil && o.TS > last.TS {
			return nil, mongoerr.Newf(mongoerr.TooStaleToSyncFromSource,
				"our last fetched optime %v is older than the oldest entry %v in the oplog of sync source %s", last, o, host)
		}
	}
	return nil, mongoerr.Newf(mongoerr.OplogStartMissing,
		"our last fetched optime %v is not in sync source %s's oplog (its first entry at or after it is %v): our oplog diverged",
		last, host, ot)
}

// emptyFirstBatch explains a find that returned nothing at or after our last fetched entry:
// normally the source is behind us (InvalidSyncSource); but if its newest entry is in a newer
// term than ours, our newer entries are on a branch the set abandoned and we must roll back
// (OplogStartMissing).
func (f *Fetcher) emptyFirstBatch(ctx context.Context, coll *mongo.Collection, host string, last optime.OpTime) error {
	var newest bson.Raw
	err := coll.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "$natural", Value: -1}})).Decode(&newest)
	if err == nil && last.Term != optime.UninitializedTerm {
		if o, err := oplog.EntryOpTime(bsoncore.Document(newest)); err == nil && o.Term > last.Term {
			return mongoerr.Newf(mongoerr.OplogStartMissing,
				"our last fetched optime %v is newer than sync source %s's newest entry %v, which is in a newer term: our oplog diverged",
				last, host, o)
		}
	}
	return mongoerr.Newf(mongoerr.InvalidSyncSource,
		"sync source %s's oplog has no entry at or after our last fetched %v: it is behind us", host, last)
}

// push validates order and hands the batch to the buffer.
func (f *Fetcher) push(ctx context.Context, batch []bsoncore.Document) error {
	prev := f.LastFetched()
	lastOT := prev
	for _, d := range batch {
		ot, err := oplog.EntryOpTime(d)
		if err != nil {
			return err
		}
		if ot.TS <= lastOT.TS {
			return mongoerr.Newf(mongoerr.OplogOutOfOrder, "out of order oplog entry %v after %v", ot, lastOT)
		}
		lastOT = ot
	}
	if err := f.cfg.Buffer.Push(ctx, batch); err != nil {
		return err
	}
	f.mu.Lock()
	f.lastFetched = lastOT
	f.mu.Unlock()
	return nil
}

func (f *Fetcher) client(host string) (*mongo.Client, error) {
	if f.cfg.Clients != nil {
		return f.cfg.Clients(host)
	}
	return f.clients.Get(host)
}

// clientOptions are the fetcher's internal client's. Server monitoring polls instead of
// streaming: a direct connection to one member gains nothing from streamed topology changes,
// and it keeps a monitor stream off the member's exhaust path. Server selection on a dead
// member only waits out its timeout: it is short so a fetcher notices a lost source within a
// few seconds (a live one is selected at once).
func clientOptions(d *client.Rewriter) client.Options {
	return client.Options{AppName: "humongod-fetcher", Dialer: d, ServerSelectionTimeout: 3 * time.Second,
		PollMonitoring: true}
}

// Connect returns a directConnection client for a member (the internal client), dialed
// through d, with the fetcher's options.
func Connect(d *client.Rewriter, host string) (*mongo.Client, error) {
	return client.Connect(host, clientOptions(d))
}

// sleepCtx waits d or until ctx ends (the spec's "wait 1 second and choose again").
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
