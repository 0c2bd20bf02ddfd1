package applier

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/catalog"
	"humongo/internal/client"
	"humongo/internal/index"
	"humongo/internal/logv2"
	"humongo/internal/optime"
	"humongo/internal/repl/fetcher"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// Deps is what steady-state replication needs from the node (the coordinator supplies
// Chooser and OnApplied).
type Deps struct {
	Engine  *storage.Engine
	Catalog *catalog.Catalog
	Colls   *index.Collections
	Writer  *oplog.Writer
	Chooser fetcher.SyncSourceChooser
	// OnApplied receives lastApplied after each batch (may be nil).
	OnApplied func(optime.OpTime)
	// OnBatch receives each applied batch's entries (Config.OnBatch; may be nil).
	OnBatch func([]*oplog.Entry)
	// AwaitTime is the fetcher's getMore maxTimeMS (default 2 s: the heartbeat interval).
	AwaitTime time.Duration
	// BufferBytes bounds the oplog buffer (default 256 MiB).
	BufferBytes int
	Writers     int
	// Clients overrides the fetcher's driver clients (may be nil).
	Clients func(host string) (*mongo.Client, error)
	// Dialer is the server's host Rewriter (nil: none).
	Dialer *client.Rewriter
	// OnRollbackRequired is called when our oplog diverged from the sync source's.
	OnRollbackRequired func(host string, lastFetched optime.OpTime)
	Fatal              func(error)
	Log                *slog.Logger
	// SecondaryDelay is this member's secondaryDelaySecs (nil: none): the buffer holds each
	// entry back until its wall time is that far in the past (fetcher.Buffer.SetDelay).
	SecondaryDelay fetcher.DelaySource
}

// Replication is a running BackgroundSync (fetcher) + OplogApplier pair: a SECONDARY's
// steady-state replication. Start it on entering SECONDARY, Stop it on leaving.
type Replication struct {
	// stopFetcher and stopApplier end the two goroutines separately: Drain stops fetching
	// first and lets the applier empty the buffer.
	stopFetcher, stopApplier context.CancelFunc
	fetcherDone, applierDone chan struct{}
	fetcher                  *fetcher.Fetcher
	applier                  *Applier
	buf                      *fetcher.Buffer
}

// Start repairs an interrupted batch (oplogTruncateAfterPoint set: truncate the oplog after
// it), reads the top of our oplog as lastFetched = lastApplied, and starts the fetcher and
// the applier goroutines, which run until Stop or ctx's end.
func Start(ctx context.Context, d Deps) (*Replication, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	top, err := RecoverTruncatePoint(ctx, d.Engine, d.Catalog, d.Colls, d.Writer)
	if err != nil {
		return nil, err
	}
	buf := fetcher.NewBuffer(d.BufferBytes)
	if d.SecondaryDelay != nil {
		buf.SetDelay(d.SecondaryDelay, nil)
	}
	f := fetcher.New(fetcher.Config{Chooser: d.Chooser, Buffer: buf, LastFetched: top, AwaitTime: d.AwaitTime,
		Clients: d.Clients, Dialer: d.Dialer, OnRollbackRequired: d.OnRollbackRequired, Log: d.Log})
	a := New(Config{Engine: d.Engine, Catalog: d.Catalog, Colls: d.Colls, Writer: d.Writer, Writers: d.Writers,
		Mode: oplog.ModeSecondary, LastApplied: top, OnApplied: d.OnApplied, OnBatch: d.OnBatch, Fatal: d.Fatal, Log: d.Log}).
		WithApplier(d.Writer.Applier())
	fctx, stopFetcher := context.WithCancel(ctx)
	actx, stopApplier := context.WithCancel(ctx)
	r := &Replication{stopFetcher: stopFetcher, stopApplier: stopApplier,
		fetcherDone: make(chan struct{}), applierDone: make(chan struct{}), fetcher: f, applier: a, buf: buf}
	go func() {
		defer close(r.fetcherDone)
		_ = f.Run(fctx)
	}()
	go func() {
		defer close(r.applierDone)
		_ = a.Run(actx, buf)
	}()
	d.Log.Info("Started steady-state replication", logv2.C(logv2.Replication), "lastApplied", top.String())
	return r, nil
}

// Stop stops fetching, lets the batch in progress finish, and waits for both goroutines.
// Buffered entries that were not applied are dropped; the next Start refetches them.
func (r *Replication) Stop() {
	r.stopFetcher()
	r.stopApplier()
	<-r.fetcherDone
	<-r.applierDone
	r.buf.Clear()
}

// Drain is the primary-elect's drain mode (spec "Transitioning to PRIMARY"): it stops
// fetching, waits until the applier has taken every buffered entry, lets it finish that batch
// and waits until the batch is journaled, reported (Deps.OnApplied) and visible to oplog
// readers. Only then may the node write its "new primary" entry and accept writes: an entry
// of the old term applied after them would sit behind them in the oplog, and a user write
// could run beside a batch still being applied. If ctx ends first, Drain stops without
// waiting for the buffer (dropping what it holds, as Stop does) and returns ctx's cause.
// Replication is stopped when Drain returns.
func (r *Replication) Drain(ctx context.Context) error {
	r.stopFetcher()
	<-r.fetcherDone
	err := r.buf.WaitEmpty(ctx)
	r.Stop()
	return err
}

// LastApplied is the newest applied optime (reads on a secondary use its timestamp).
func (r *Replication) LastApplied() optime.OpTime { return r.applier.LastApplied() }

// LastFetched is the newest fetched optime.
func (r *Replication) LastFetched() optime.OpTime { return r.fetcher.LastFetched() }

// SyncSource is the host being fetched from ("" when none).
func (r *Replication) SyncSource() string { return r.fetcher.Source() }

// Applier is the batch applier (tests wait on it).
func (r *Replication) Applier() *Applier { return r.applier }

// RecoverTruncatePoint: if a batch was interrupted (the truncate point is set), remove the
// oplog entries after the point so lastApplied is the last complete batch (the data writes of
// the interrupted batch are re-applied idempotently when refetched); then clear it. It
// returns the top of the oplog.
func RecoverTruncatePoint(ctx context.Context, e *storage.Engine, cat *catalog.Catalog, colls *index.Collections, w *oplog.Writer) (optime.OpTime, error) {
	tp, err := OplogTruncateAfterPoint(e, cat, colls)
	if err != nil {
		return optime.OpTime{}, err
	}
	if !tp.IsNull() {
		if err := e.TruncateOplogAfter(w.Ident(), tp); err != nil {
			return optime.OpTime{}, fmt.Errorf("truncate oplog after %v: %w", tp, err)
		}
		if err := (localDoc{e: e, cat: cat, colls: colls, ns: TruncateAfterPointNS}).Save(ctx, truncatePointDoc(0)); err != nil {
			return optime.OpTime{}, err
		}
	}
	return TopOfOplog(e, w.Ident())
}
