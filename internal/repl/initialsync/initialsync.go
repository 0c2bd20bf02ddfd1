// Package initialsync copies a sync source's data to a new, empty member (spec/replication.md:
// "Initial Sync", "Data clone phase", "Oplog application phase", "Idempotency concerns",
// "Finishing initial sync"). The node is in STARTUP2 while it runs (the caller's state).
//
// Before the first attempt the durable initial-sync flag is set (recovery.SetInitialSyncFlag,
// in local.replset.minvalid): a node that restarts while it is set has a partial copy, skips
// startup recovery and runs initial sync again (the coordinator enters STARTUP2 for it). The
// flag is cleared, with minValid = the optime the copy is consistent at, only after the last
// attempt succeeded and its data is journaled.
//
// One attempt:
//
//  1. drop every non-local collection and empty our oplog (leftovers of a failed attempt), and
//     record the source's rollback id (replSetGetRBID);
//  2. beginFetching = the source's newest oplog entry; write that entry into our oplog, so the
//     steady-state fetcher's first-batch check later finds it here;
//  3. clone: listDatabases, listCollections (with the source's UUIDs, which oplog entries
//     name), listIndexes → the indexes are created on the empty collection, then `find` all
//     documents. Every clone write is timestamped beginFetching: the oplog entries applied
//     next are newer, so they are never shadowed by a clone version (MVCC keeps the newest
//     timestamp, not the latest commit);
//  4. stop = the source's newest entry now; fetch [beginFetching, stop] with the oplog fetcher
//     and apply it with the batch applier in ModeInitialSync (DuplicateKey, missing documents
//     and collections tolerated: the clone may already reflect an entry or a later one fixes
//     it);
//  5. check the source's rollback id again (a rollback on the source during the copy means our
//     copy may hold rolled-back writes: retry).
//
// Simplifications (known, documented in the report): the oplog is fetched after the clone,
// not buffered while cloning, so a source oplog smaller than the clone's duration fails the
// attempt (TooStaleToSyncFromSource) instead of succeeding. Transactions
// (committed transactions need nothing special: config.transactions is cloned like any
// collection, and applyOps entries, partialTxn chains included, go through the batch
// applier; beginFetching is a visible entry of the source, and a primary commits a chain's
// entries together, so a chain is never cut by it: see repl/oplog txn_apply.go; the entries
// of transactions prepared before beginFetching are copied first, fetchPreparedEntries, and
// transactions still prepared at the end are rebuilt); views are cloned as system.views documents only if the
// source lists system.views as a collection.
package initialsync

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

	"humongo/internal/catalog"
	"humongo/internal/client"
	"humongo/internal/failpoint"
	"humongo/internal/index"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/fetcher"
	"humongo/internal/repl/oplog"
	"humongo/internal/repl/recovery"
	"humongo/internal/storage"
)

// hangBeforeCopyingDatabases holds an attempt after it chose its source, dropped our data and
// recorded beginFetching, before it clones anything (MongoDB's
// initialSyncHangBeforeCopyingDatabases): tests kill or restart a member mid-initial-sync.
var hangBeforeCopyingDatabases = failpoint.Register("initialSyncHangBeforeCopyingDatabases")

// failPointPoll is how often a held attempt looks whether its fail point was turned off (fail
// points have no "turned off" notification).
const failPointPoll = 50 * time.Millisecond

// Config configures a Syncer.
type Config struct {
	Engine  *storage.Engine
	Catalog *catalog.Catalog
	Colls   *index.Collections
	Writer  *oplog.Writer
	// Chooser picks the sync source (the coordinator, or fetcher.FixedSource).
	Chooser fetcher.SyncSourceChooser
	// MaxAttempts bounds failed attempts (MongoDB's numInitialSyncAttempts, default 10).
	MaxAttempts int
	// AwaitTime is the fetcher's getMore maxTimeMS.
	AwaitTime time.Duration
	// CloneBatch is how many cloned documents are inserted per storage unit (default 500).
	CloneBatch int
	// Dialer is the server's host Rewriter the clients to the sync source dial through (nil:
	// none).
	Dialer *client.Rewriter
	Log    *slog.Logger
}

// Syncer runs initial sync and reports its progress (replSetGetStatus.initialSyncStatus).
type Syncer struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex // guards the progress fields below
	st progress
}

type progress struct {
	start, attemptStart, end time.Time
	failedAttempts           int
	attempts                 []attempt
	source                   string
	beginFetching, stop      optime.OpTime
	dbsCloned, dbsTotal      int
	collsCloned, docsCloned  int64
	appliedOps               int64
}

type attempt struct {
	dur    time.Duration
	status string
	source string
}

// New returns a Syncer.
func New(cfg Config) *Syncer {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.CloneBatch <= 0 {
		cfg.CloneBatch = 500
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Syncer{cfg: cfg, log: cfg.Log.With(logv2.C("INITSYNC"))}
}

// Run performs initial sync, retrying failed attempts, and returns the optime the node's data
// is consistent at (its lastApplied); the caller then clears STARTUP2 and starts steady-state
// replication.
func (s *Syncer) Run(ctx context.Context) (optime.OpTime, error) {
	s.mu.Lock()
	s.st = progress{start: time.Now()}
	s.mu.Unlock()
	// Durable before any data is dropped: from here until the flag is cleared our data is
	// not a consistent copy of anything.
	if err := recovery.SetInitialSyncFlag(ctx, s.cfg.Engine, s.cfg.Catalog, s.cfg.Colls); err != nil {
		return optime.OpTime{}, err
	}
	var last error
	for n := 0; n < s.cfg.MaxAttempts; n++ {
		s.mu.Lock()
		s.st.attemptStart = time.Now()
		s.mu.Unlock()
		op, err := s.attempt(ctx)
		if err == nil {
			err = s.finish(ctx, op)
		}
		s.mu.Lock()
		a := attempt{dur: time.Since(s.st.attemptStart), status: "OK", source: s.st.source}
		if err != nil {
			a.status = err.Error()
			s.st.failedAttempts++
		}
		s.st.attempts = append(s.st.attempts, a)
		if err == nil {
			s.st.end = time.Now()
		}
		s.mu.Unlock()
		if err == nil {
			s.log.Info("Initial sync done", logv2.ID(21192), "lastApplied", op.String(), "attempts", n+1)
			return op, nil
		}
		if ctx.Err() != nil {
			return optime.OpTime{}, context.Cause(ctx)
		}
		last = err
		s.log.Warn("Initial sync attempt failed", logv2.ID(21200), "attempt", n+1, "error", err.Error())
		if src := s.source(); src != "" {
			s.cfg.Chooser.BlacklistSyncSource(src, time.Now().Add(10*time.Second))
		}
		t := time.NewTimer(time.Second)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return optime.OpTime{}, context.Cause(ctx)
		}
	}
	return optime.OpTime{}, mongoerr.Newf(mongoerr.InitialSyncFailure, "initial sync failed after %d attempts: %v", s.cfg.MaxAttempts, last)
}

// finish makes the copy durable, then clears the initial-sync flag with minValid = op (the
// copy is consistent at op).
func (s *Syncer) finish(ctx context.Context, op optime.OpTime) error {
	if err := s.cfg.Engine.WaitUntilDurable(ctx); err != nil {
		return err
	}
	return recovery.ClearInitialSyncFlag(ctx, s.cfg.Engine, s.cfg.Catalog, s.cfg.Colls, op)
}

// hangWhileOn holds the attempt while fp is enabled (tests turn it off, or kill the node).
func (s *Syncer) hangWhileOn(ctx context.Context, fp *failpoint.FailPoint) error {
	if _, on := fp.Evaluate(nil); !on {
		return nil
	}
	s.log.Info("Fail point enabled; blocking until it is disabled", logv2.ID(21179), "failPoint", fp.Name())
	for fp.Enabled() {
		t := time.NewTimer(failPointPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
	}
	return nil
}

func (s *Syncer) source() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.source
}

func (s *Syncer) attempt(ctx context.Context) (optime.OpTime, error) {
	host := ""
	for host == "" {
		host = s.cfg.Chooser.ChooseSyncSource(optime.OpTime{})
		if host != "" {
			break
		}
		t := time.NewTimer(time.Second)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return optime.OpTime{}, context.Cause(ctx)
		}
	}
	s.mu.Lock()
	s.st.source, s.st.dbsCloned, s.st.collsCloned, s.st.docsCloned, s.st.appliedOps = host, 0, 0, 0, 0
	s.mu.Unlock()
	cl, err := fetcher.Connect(s.cfg.Dialer, host)
	if err != nil {
		return optime.OpTime{}, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = cl.Disconnect(dctx)
		cancel()
	}()
	oplog.PreparedOf(s.cfg.Engine).DropAll() // a failed attempt's, rebuilt from nothing
	if err := s.dropUserData(ctx); err != nil {
		return optime.OpTime{}, fmt.Errorf("drop existing data: %w", err)
	}
	// A failed attempt may have left entries in our oplog: start it afresh.
	if err := s.cfg.Engine.TruncateOplogAfter(s.cfg.Writer.Ident(), 0); err != nil {
		return optime.OpTime{}, fmt.Errorf("empty the oplog: %w", err)
	}
	s.cfg.Writer.ResetLastWritten(optime.OpTime{})
	rbid, err := getRBID(ctx, cl)
	if err != nil {
		return optime.OpTime{}, err
	}
	beginRaw, begin, err := newestEntry(ctx, cl)
	if err != nil {
		return optime.OpTime{}, err
	}
	s.mu.Lock()
	s.st.beginFetching = begin
	s.mu.Unlock()
	if err := s.seedOplog(ctx, beginRaw); err != nil {
		return optime.OpTime{}, fmt.Errorf("seed oplog: %w", err)
	}
	oldestPrepare, err := s.fetchPreparedEntries(ctx, cl, begin.TS)
	if err != nil {
		return optime.OpTime{}, fmt.Errorf("fetch the entries of prepared transactions: %w", err)
	}
	// The clone's writes are timestamped below every later write: the entries after
	// beginFetching, and the commits of transactions prepared before it, whose commit
	// timestamps may be as old as their prepare timestamps.
	cloneTS := begin.TS
	if !oldestPrepare.IsNull() && oldestPrepare-1 < cloneTS {
		cloneTS = oldestPrepare - 1
	}
	if err := s.hangWhileOn(ctx, hangBeforeCopyingDatabases); err != nil {
		return optime.OpTime{}, err
	}
	if err := s.cloneAll(ctx, cl, cloneTS); err != nil {
		return optime.OpTime{}, fmt.Errorf("clone: %w", err)
	}
	_, stop, err := newestEntry(ctx, cl)
	if err != nil {
		return optime.OpTime{}, err
	}
	s.mu.Lock()
	s.st.stop = stop
	s.mu.Unlock()
	last := begin
	if stop.TS > begin.TS {
		if last, err = s.applyOplog(ctx, host, begin, stop); err != nil {
			return optime.OpTime{}, fmt.Errorf("oplog application: %w", err)
		}
	}
	if after, err := getRBID(ctx, cl); err != nil {
		return optime.OpTime{}, err
	} else if after != rbid {
		return optime.OpTime{}, mongoerr.Newf(mongoerr.InitialSyncFailure, "sync source %s rolled back during initial sync (rbid %d → %d)", host, rbid, after)
	}
	// Transactions still prepared at the end are rebuilt from their entries, now all in our
	// oplog (spec: initial sync "Finish": reconstruct prepared transactions).
	if _, err := s.cfg.Writer.Applier().ReconstructPrepared(ctx); err != nil {
		return optime.OpTime{}, fmt.Errorf("reconstruct prepared transactions: %w", err)
	}
	// Our data is consistent at last: make it the stable point recovery starts from.
	s.cfg.Engine.SetStableTimestamp(last.TS)
	return last, nil
}

// applyOplog fetches (begin, stop] and applies it in initial-sync mode.
func (s *Syncer) applyOplog(ctx context.Context, host string, begin, stop optime.OpTime) (optime.OpTime, error) {
	buf := fetcher.NewBuffer(0)
	f := fetcher.New(fetcher.Config{Chooser: fetcher.FixedSource{Host: host}, Buffer: buf, LastFetched: begin,
		AwaitTime: s.cfg.AwaitTime, StopAt: stop, Dialer: s.cfg.Dialer, Log: s.cfg.Log})
	a := applier.New(applier.Config{Engine: s.cfg.Engine, Catalog: s.cfg.Catalog, Colls: s.cfg.Colls,
		Writer: s.cfg.Writer, Mode: oplog.ModeInitialSync, LastApplied: begin, Log: s.cfg.Log}).
		WithApplier(s.cfg.Writer.Applier())
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ferr := make(chan error, 1)
	go func() { ferr <- f.Run(fctx) }()
	for a.LastApplied().TS < stop.TS {
		batch, err := buf.Next(ctx, applier.DefaultMaxOps, applier.DefaultMaxBytes, applier.IsolatedEntry)
		if err != nil {
			cancel()
			<-ferr
			return optime.OpTime{}, err
		}
		if _, err := a.ApplyBatch(ctx, batch); err != nil {
			cancel()
			<-ferr
			return optime.OpTime{}, err
		}
		s.mu.Lock()
		s.st.appliedOps += int64(len(batch))
		s.mu.Unlock()
	}
	cancel()
	if err := <-ferr; err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug("fetcher ended", "error", err.Error())
	}
	return a.LastApplied(), nil
}

// fetchPreparedEntries copies into our oplog the entries, older than beginFetching, of the
// transactions prepared on the source: the clone does not see their writes (reads ignore
// prepare conflicts), so their commit entries, fetched later, or the reconstruction at the
// end need them. MongoDB moves beginFetching back to the oldest active transaction's
// startOpTime instead; copying just those entries is the same for the applier, which reads
// a chain from our oplog, and fetches less.
//
// It returns the oldest prepare timestamp among them (null if none).
func (s *Syncer) fetchPreparedEntries(ctx context.Context, cl *mongo.Client, begin optime.Timestamp) (optime.Timestamp, error) {
	var oldest optime.Timestamp
	cur, err := cl.Database("config").Collection("transactions").Find(ctx, bson.D{{Key: "state", Value: oplog.TxnPrepared}})
	if err != nil {
		return 0, err
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	oplogColl := cl.Database("local").Collection("oplog.rs")
	for cur.Next(ctx) {
		d, ok := bsoncore.Document(cur.Current).Lookup("lastWriteOpTime").DocumentOK()
		if !ok {
			continue
		}
		sec, inc, ok := d.Lookup("ts").TimestampOK()
		if prep := optime.MakeTimestamp(sec, inc); ok && !prep.IsNull() && (oldest.IsNull() || prep < oldest) {
			oldest = prep
		}
		for ts := optime.MakeTimestamp(sec, inc); ok && !ts.IsNull() && ts <= begin; {
			var r bson.Raw
			err := oplogColl.FindOne(ctx, bson.D{{Key: "ts", Value: bson.Timestamp{T: ts.Secs(), I: ts.Inc()}}}).Decode(&r)
			if err != nil {
				return 0, fmt.Errorf("read the source's entry at %v: %w", ts, err)
			}
			raw := bsoncore.Document(append([]byte(nil), r...))
			if ts != begin {
				if err := s.seedOplog(ctx, raw); err != nil {
					return 0, err
				}
			}
			prev, _ := raw.Lookup("prevOpTime").DocumentOK()
			sec, inc, ok = prev.Lookup("ts").TimestampOK()
			ts = optime.MakeTimestamp(sec, inc)
		}
	}
	return oldest, cur.Err()
}

// seedOplog writes the source's beginFetching entry into our oplog.
func (s *Syncer) seedOplog(ctx context.Context, raw bsoncore.Document) error {
	ru := s.cfg.Engine.NewRecoveryUnit()
	defer ru.Close()
	return storage.WriteConflictRetry(ctx, "seedOplog", func() error {
		defer ru.AbandonSnapshot()
		w := ru.BeginUnitOfWork()
		defer w.End()
		if _, err := s.cfg.Writer.AppendEntry(ru, raw); err != nil {
			return err
		}
		return w.Commit()
	})
}

// dropUserData drops every collection outside `local`.
func (s *Syncer) dropUserData(ctx context.Context) error {
	ru := s.cfg.Engine.NewRecoveryUnit()
	defer ru.Close()
	for _, m := range s.cfg.Catalog.Latest().All() {
		if m.DB() == "local" || m.NS == oplog.PreImagesNS {
			continue // the node's own (the expired pre-image remover clears what is left)
		}
		ns, u := m.NS, m.UUID
		err := storage.WriteConflictRetry(ctx, "initialSyncDrop", func() error {
			defer ru.AbandonSnapshot()
			w := ru.BeginUnitOfWork()
			defer w.End()
			if err := s.cfg.Catalog.DropCollection(ru, ns); err != nil {
				return err
			}
			ru.OnCommit(func(optime.Timestamp) { s.cfg.Colls.Forget(u) })
			return w.Commit()
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func getRBID(ctx context.Context, cl *mongo.Client) (int64, error) {
	var r bson.Raw
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetRBID", Value: 1}}).Decode(&r); err != nil {
		return 0, fmt.Errorf("replSetGetRBID: %w", err)
	}
	v, ok := r.Lookup("rbid").AsInt64OK()
	if !ok {
		return 0, mongoerr.New(mongoerr.BadValue, "replSetGetRBID reply has no rbid")
	}
	return v, nil
}

// newestEntry reads the source's newest oplog entry.
func newestEntry(ctx context.Context, cl *mongo.Client) (bsoncore.Document, optime.OpTime, error) {
	var r bson.Raw
	err := cl.Database("local").Collection("oplog.rs").FindOne(ctx, bson.D{},
		options.FindOne().SetSort(bson.D{{Key: "$natural", Value: -1}})).Decode(&r)
	if err != nil {
		return nil, optime.OpTime{}, fmt.Errorf("read the sync source's newest oplog entry: %w", err)
	}
	raw := bsoncore.Document(append([]byte(nil), r...))
	ot, err := oplog.EntryOpTime(raw)
	return raw, ot, err
}
