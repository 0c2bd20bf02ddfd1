package coord

// Integration of data replication (internal/repl/fetcher, applier, initialsync) with the
// coordinator's lifecycle (spec: "Life as a Secondary", "Initial Sync", "Startup Recovery",
// "Rollback"). Owned by the replication-data engineer; kept in this one file so the
// coordinator's own files stay untouched except for the initialSyncStatus line in Status and
// the consistency markers (loadConsistencyMarkers) that installFirstConfigLocked hands to the
// TopologyCoordinator.
//
// A watcher goroutine follows the member state (it wakes on every topology change):
//   - a member that needs initial sync (an empty oplog, or the durable initial-sync flag of
//     an initial sync a restart interrupted) is put in STARTUP2 by the TopologyCoordinator
//     when its first config is installed (installFirstConfigLocked), so it is never a
//     SECONDARY without the set's data; the watcher runs initial sync from a sync source the
//     TopologyCoordinator chooses and completes it (SECONDARY). A member in STARTUP2 that
//     finds data of its own and no flag (the initiator of a multi-member set, which writes
//     "initiating set" right after installing its config) leaves STARTUP2 at once;
//   - a SECONDARY runs steady-state replication (fetcher + applier), and so does a member
//     RECOVERING because its data is behind minValid (after rollback, or at startup when a
//     rollback or batch was interrupted): the TopologyCoordinator makes it SECONDARY once
//     lastApplied reaches minValid. Any other state (elected, ROLLBACK, maintenance mode,
//     removed) stops it.
// The applier reports each batch once it is journaled (SetMyLastAppliedOpTime moves
// lastApplied and lastDurable together), and replSetUpdatePosition carries both to the sync
// source.
//
// Rollback (spec: "Rollback", internal/repl/rollback): when the fetcher finds that our oplog
// diverged from the sync source's, it reports it (OnRollbackRequired) and stops; the watcher
// stops steady-state replication, moves the member to ROLLBACK (reads now fail with
// NotPrimaryOrSecondary, writes with NotWritablePrimary; running writes and all cursors are
// killed, so members tailing our oplog refetch and see the divergence too), runs rollback.Run
// against that source, resets lastApplied and lastDurable to the common point and returns to
// SECONDARY — RECOVERING until it has applied up to minValid, the source's top when rollback
// read it — which restarts steady-state replication from the common point, from that source
// first. The rollback id is persisted in local.system.rollback.id (loaded when data
// replication starts) and incremented by every rollback before it modifies data.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/failpoint"
	"humongo/internal/index"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/fetcher"
	"humongo/internal/repl/initialsync"
	"humongo/internal/repl/oplog"
	"humongo/internal/repl/recovery"
	"humongo/internal/repl/rollback"
	"humongo/internal/repl/topology"
	"humongo/internal/storage"
)

// RollbackIDNS holds the rollback id document {_id: "rollbackId", rollbackId: n}.
const RollbackIDNS = "local.system.rollback.id"

// rollbackRetryDelay is how long the sync source of a rollback attempt that failed (without
// modifying data) is not chosen again.
const rollbackRetryDelay = time.Second

// rollbackHangAfterTransitionToRollback keeps a member in ROLLBACK before it modifies anything.
var rollbackHangAfterTransitionToRollback = failpoint.Register("rollbackHangAfterTransitionToRollback")

// DataReplication is what the fetcher, applier and initial sync need from the node.
type DataReplication struct {
	Engine  *storage.Engine
	Catalog *catalog.Catalog
	Colls   *index.Collections
	Writer  *oplog.Writer
	// AwaitTime overrides the fetcher's getMore maxTimeMS (default: heartbeatIntervalMillis).
	AwaitTime time.Duration
	// Fatal handles an oplog entry that cannot be applied and an unrecoverable rollback
	// (default: log and exit).
	Fatal func(error)
	// RollbackDir is where rollback data files go (<dbpath>/rollback); "" writes none.
	RollbackDir string
	// OnRollback is called after a rollback changed the data, before the member returns to
	// SECONDARY (in-memory state derived from data, e.g. the retryable-write session cache,
	// must be dropped). May be nil.
	OnRollback func()
	// OnBatch receives the entries of each batch steady-state replication applied, once
	// their writes are committed (applier.Config.OnBatch). May be nil.
	OnBatch func([]*oplog.Entry)
	// KillCursors kills every open cursor; rollback calls it on entering ROLLBACK and again
	// before leaving it, so no member tailing our oplog reads across its truncation (its
	// getMore fails, and its next find sees the divergence) and no reader sees data change
	// under its cursor. May be nil.
	KillCursors func()
}

// dataRepl is the watcher's state; only the watcher goroutine touches it. The initial
// syncer is published in c.dataSyncer (under c.mu) for replSetGetStatus.
type dataRepl struct {
	d       DataReplication
	running *applier.Replication
	// initialSyncFailed: initial sync gave up after its attempts; the member stays in
	// STARTUP2 until it is restarted (MongoDB shuts down).
	initialSyncFailed bool
	// rollback receives the sync source whose oplog ours diverged from (the fetcher's
	// OnRollbackRequired, which must not block: Stop waits for the fetcher).
	rollback chan string
}

// StartDataReplication starts the watcher that runs initial sync and steady-state
// replication according to the member state. Call it once, after Start; it stops with Close.
func (c *Coordinator) StartDataReplication(d DataReplication) {
	dr := &dataRepl{d: d, rollback: make(chan string, 1)}
	if err := c.loadRBID(c.ctx); err != nil {
		c.log.Error("Cannot load or persist the rollback id", logv2.ID(21810), "error", err.Error())
	}
	c.mu.Lock()
	// From now on the watcher finishes drain mode (drainLocked); a drain begun before this
	// point had nothing to apply and finishes on its own.
	c.dataReplStarted = true
	c.mu.Unlock()
	c.goAsync(func(ctx context.Context) {
		defer func() {
			if dr.running != nil {
				dr.running.Stop()
			}
		}()
		for {
			c.mu.Lock()
			ch, progress := c.changed, c.progress
			st, have := topology.StateStartup, c.topo != nil
			mode, term := topology.LeaderNone, int64(0)
			if have {
				st, mode, term = c.topo.State(), c.topo.LeaderMode(), c.topo.Term()
			}
			// RECOVERING replicates unless it is maintenance mode: it is then waiting for
			// lastApplied to reach minValid. A primary-elect keeps replicating while it
			// catches up (spec "Transitioning to PRIMARY"), then drains.
			catchingUp := st == topology.StatePrimary && mode == topology.LeaderCatchingUp
			draining := st == topology.StatePrimary && mode == topology.LeaderDraining
			replicate := st == topology.StateSecondary || (st == topology.StateRecovering && c.maintenance == 0) || catchingUp
			c.mu.Unlock()
			var retry <-chan time.Time
			again := false
			switch {
			case !have:
			case draining:
				again = c.drainDataRepl(ctx, dr, term)
			default:
				again = c.followStateDataRepl(ctx, dr, st, replicate)
			}
			if again {
				retry = c.clock.After(time.Second)
			}
			// In STARTUP2 progress matters too: the initiator's first entry (its optimes
			// move) ends STARTUP2 without waiting for the retry.
			var moved <-chan struct{}
			if st == topology.StateStartup2 {
				moved = progress
			}
			select {
			case <-ch:
			case <-c.dataKick:
			case <-moved:
			case <-retry:
			case host := <-dr.rollback:
				c.runRollback(ctx, dr, host)
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				return
			}
		}
	})
}

// followStateDataRepl starts or stops replication for state st (replicate: steady-state
// replication should run); it returns true when it should be called again in a second even if
// nothing changes.
func (c *Coordinator) followStateDataRepl(ctx context.Context, dr *dataRepl, st topology.MemberState, replicate bool) (retry bool) {
	switch {
	case st == topology.StateStartup2:
		if dr.running != nil {
			dr.running.Stop()
			dr.running = nil
		}
		return c.followStartup2(ctx, dr)
	case replicate && dr.running == nil:
		r, err := applier.Start(ctx, applier.Deps{Engine: dr.d.Engine, Catalog: dr.d.Catalog, Colls: dr.d.Colls,
			Writer: dr.d.Writer, Chooser: syncSourceChooser{c}, OnApplied: c.SetMyLastAppliedOpTime, OnBatch: dr.d.OnBatch,
			AwaitTime: c.fetcherAwaitTime(dr), Fatal: dr.d.Fatal, Log: c.opts.Logger, Dialer: c.opts.Dialer,
			SecondaryDelay: c.secondaryDelay, // delay.go
			OnRollbackRequired: func(host string, _ optime.OpTime) {
				select {
				case dr.rollback <- host:
				default: // one request is enough: the fetcher has stopped
				}
			}})
		if err != nil {
			c.log.Error("Cannot start replication", logv2.ID(21801), "error", err.Error())
			return true
		}
		dr.running = r
		c.SetMyLastAppliedOpTime(r.LastApplied())
	case !replicate && dr.running != nil:
		// Stop lets the batch in progress finish, so a new primary's data is whole batches.
		dr.running.Stop()
		dr.running = nil
	}
	return false
}

// drainDataRepl is drain mode with data replication: the applier applies what the fetcher
// buffered and finishes its batch, which is then journaled and reported (lastApplied), before
// completeDrain writes the "new primary" entry and makes the node writable. It returns true
// when it should be tried again (the no-op could not be written).
func (c *Coordinator) drainDataRepl(ctx context.Context, dr *dataRepl, term int64) (retry bool) {
	if dr.running != nil {
		err := dr.running.Drain(ctx)
		dr.running = nil
		if err != nil {
			return false // shutting down
		}
	}
	return !c.completeDrain(ctx, term)
}

// followStartup2: a member in STARTUP2 runs initial sync if it has no data of its own (an
// empty oplog) or only an unfinished initial sync's copy (the flag); a member with an oplog
// and no flag has data (the initiator of a multi-member set) and leaves STARTUP2.
func (c *Coordinator) followStartup2(ctx context.Context, dr *dataRepl) (retry bool) {
	if dr.initialSyncFailed {
		return false
	}
	m, err := recovery.LoadMarkers(dr.d.Engine, dr.d.Catalog, dr.d.Colls)
	if err != nil {
		c.log.Error("Cannot read the consistency markers", logv2.ID(21800), "error", err.Error())
		return true
	}
	top, err := applier.TopOfOplog(dr.d.Engine, dr.d.Writer.Ident())
	if err != nil {
		c.log.Error("Cannot read the top of the oplog", logv2.ID(21800), "error", err.Error())
		return true
	}
	if !m.InitialSyncFlag && !top.TS.IsNull() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.topo.State() != topology.StateStartup2 {
			return false
		}
		now := c.clock.Now()
		c.handleLocked(now, c.topo.UpdateLastAppliedOpTime(now, top))
		if err := c.topo.SetFollowerMode(now, topology.StateSecondary); err != nil {
			c.log.Error("Cannot leave STARTUP2", logv2.ID(21803), "error", err.Error())
			return true
		}
		c.log.Info("The member has data of its own; no initial sync needed", logv2.ID(21804),
			"topOfOplog", top.String(), "state", c.topo.State().String())
		c.noteChangesLocked()
		return false
	}
	if !m.InitialSyncFlag {
		// An empty member needs initial sync, but only from a member that is ahead of it: the
		// initiator of a multi-member set is in STARTUP2 with an empty oplog until it writes
		// its first entry, and must not wait for a copy of nothing (it has no source: nobody
		// else has data yet).
		if (syncSourceChooser{c}).ChooseSyncSource(optime.OpTime{}) == "" {
			return true
		}
		if top, err = applier.TopOfOplog(dr.d.Engine, dr.d.Writer.Ident()); err != nil || !top.TS.IsNull() {
			return true // it wrote its first entry meanwhile: leave STARTUP2 next time
		}
	}
	c.runInitialSync(ctx, dr)
	return false // the return to SECONDARY wakes the watcher again
}

func (c *Coordinator) fetcherAwaitTime(dr *dataRepl) time.Duration {
	if dr.d.AwaitTime > 0 {
		return dr.d.AwaitTime
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.topo.Config()
	return cfg.HeartbeatInterval()
}

// runInitialSync: STARTUP2 → initial sync → SECONDARY (spec: "Initial Sync"). The syncer sets
// the durable initial-sync flag before it drops anything and clears it when it succeeded.
func (c *Coordinator) runInitialSync(ctx context.Context, dr *dataRepl) {
	s := initialsync.New(initialsync.Config{Engine: dr.d.Engine, Catalog: dr.d.Catalog, Colls: dr.d.Colls,
		Writer: dr.d.Writer, Chooser: syncSourceChooser{c}, AwaitTime: c.fetcherAwaitTime(dr), Dialer: c.opts.Dialer,
		Log: c.opts.Logger})
	c.mu.Lock()
	c.dataSyncer = s
	err := c.topo.SetFollowerMode(c.clock.Now(), topology.StateStartup2)
	c.noteChangesLocked()
	c.mu.Unlock()
	if err != nil {
		return
	}
	c.log.Info("Starting initial sync", logv2.ID(21164))
	op, err := s.Run(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			dr.initialSyncFailed = true
		}
		c.log.Error("Initial sync failed", logv2.ID(21202), "error", err.Error())
		return // stays in STARTUP2; the operator restarts the node (MongoDB shuts down)
	}
	now := c.clock.Now()
	acts, err := c.topo.CompleteInitialSync(now, op)
	if err != nil {
		c.log.Error("Cannot leave STARTUP2 after initial sync", logv2.ID(21803), "error", err.Error())
	}
	c.handleLocked(now, acts)
	c.noteChangesLocked()
	c.wakeLocked()
}

// runRollback: SECONDARY → ROLLBACK → rollback.Run → SECONDARY (spec: "Rollback"). An
// unrecoverable failure (no common point, one before the stable timestamp or the commit point,
// a failure while modifying data) ends the process, as MongoDB's fassert does; any other
// failure left the data untouched, and the member returns to SECONDARY, whose fetcher finds
// the divergence again and asks for another attempt.
func (c *Coordinator) runRollback(ctx context.Context, dr *dataRepl, host string) {
	if dr.running != nil {
		dr.running.Stop()
		dr.running = nil
	}
	c.mu.Lock()
	// A primary-elect never rolls back: the member it was catching up from is on another
	// branch, so catch-up ends here (it is best effort) and the node drains what it has.
	if c.topo != nil && c.topo.State() == topology.StatePrimary {
		now := c.clock.Now()
		c.handleLocked(now, c.topo.EndCatchUp(now, "the sync source's oplog diverged from ours"))
		c.mu.Unlock()
		return
	}
	// A member RECOVERING towards minValid replicates, so its fetcher can find a divergence
	// too (its source rolled back, or was replaced by one on another branch).
	if c.topo == nil || !(c.topo.State() == topology.StateSecondary ||
		(c.topo.State() == topology.StateRecovering && c.maintenance == 0)) {
		c.mu.Unlock()
		return
	}
	if err := c.topo.SetFollowerMode(c.clock.Now(), topology.StateRollback); err != nil {
		c.mu.Unlock()
		c.log.Warn("Cannot transition to ROLLBACK", logv2.ID(21811), "error", err.Error())
		return
	}
	commit := c.topo.LastCommitted()
	c.noteChangesLocked()
	c.mu.Unlock()
	c.log.Info("Transition to ROLLBACK", logv2.ID(21593), "syncSource", host)
	// Every user operation holding a lock goes, readers too (MongoDB's
	// _killAllUserOperations): rollback takes the global lock in X, which a reader holding
	// an intent lock would keep waiting. One holding none (waitForFailPoint, a command
	// still parsing) would only wait for the rollback's lock, and is left alone.
	if c.opts.KillLockHolders != nil {
		c.opts.KillLockHolders(mongoerr.New(mongoerr.InterruptedDueToReplStateChange,
			"operation was interrupted because a replica set state change occurred (rollback)"))
	}
	if c.opts.KillWrites != nil {
		c.opts.KillWrites(mongoerr.New(mongoerr.InterruptedDueToReplStateChange,
			"operation was interrupted because a replica set state change occurred (rollback)"))
	}
	if dr.d.KillCursors != nil {
		dr.d.KillCursors()
	}
	// Tests hold the member in ROLLBACK here to observe it (MongoDB's fail point of the same
	// name). The fail point has no "turned off" signal, so this polls while it is on.
	for {
		if _, on := rollbackHangAfterTransitionToRollback.Evaluate(nil); !on {
			break
		}
		select {
		case <-c.clock.After(50 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}

	res, err := c.rollbackFrom(ctx, dr, host, commit)
	switch {
	case err == nil:
		c.log.Info("Rollback complete", logv2.ID(21606), "commonPoint", res.CommonPoint.String(), "rbid", res.RBID)
		if dr.d.OnRollback != nil {
			dr.d.OnRollback()
		}
	case rollback.IsUnrecoverable(err) && ctx.Err() == nil:
		c.fatal(dr, err)
		return
	default:
		c.log.Warn("Rollback failed; it will be attempted again", logv2.ID(21594), "syncSource", host, "error", err.Error())
	}
	if dr.d.KillCursors != nil {
		dr.d.KillCursors() // cursors opened while we were in ROLLBACK (the local database is readable)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.topo.Config()
	for _, m := range cfg.Members {
		switch {
		case !sameHost(m.Host, host):
		case err == nil:
			// Fetch next from the member we rolled back against: its oplog is known to
			// continue ours from the common point. Another member may still be on the branch
			// we left (it chained from us before we rolled back), and syncing from it would
			// fetch that branch again.
			_ = c.topo.SetForcedSyncSource(m.ID)
		default:
			// Not straight back to the source that just failed us: the next attempt comes
			// after a pause, or from another member.
			c.topo.BlacklistSyncSource(m.ID, c.clock.Now().Add(rollbackRetryDelay))
		}
	}
	if err == nil {
		c.topo.ResetOpTimesAfterRollback(res.CommonPoint)
		if !res.MinValid.TS.IsNull() {
			// Persisted by rollback.Run; the member is RECOVERING until it applied that far.
			c.topo.SetMinValid(res.MinValid)
		}
	}
	if err := c.topo.SetFollowerMode(c.clock.Now(), topology.StateSecondary); err != nil {
		c.log.Error("Cannot leave ROLLBACK", logv2.ID(21812), "error", err.Error())
	} else if st := c.topo.State(); st != topology.StateSecondary {
		c.log.Info("Data is behind minValid after rollback; staying RECOVERING until it is applied",
			logv2.ID(21605), "state", st.String(), "minValid", res.MinValid.String(), "lastApplied", res.CommonPoint.String())
	}
	c.noteChangesLocked()
	c.wakeLocked()
}

// rollbackFrom runs rollback.Run against host with the internal client.
func (c *Coordinator) rollbackFrom(ctx context.Context, dr *dataRepl, host string, commit optime.OpTime) (rollback.Result, error) {
	cl, err := fetcher.Connect(c.opts.Dialer, host)
	if err != nil {
		return rollback.Result{}, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = cl.Disconnect(dctx)
		cancel()
	}()
	return rollback.Run(ctx, rollback.Config{
		Local: &rollback.Node{Engine: dr.d.Engine, Catalog: dr.d.Catalog, Colls: dr.d.Colls, Writer: dr.d.Writer,
			Locks: c.opts.Locks, Log: c.opts.Logger, KillLockHolders: c.opts.KillLockHolders, LockHolders: c.opts.LockHolders},
		Remote:        rollback.ClientRemote{Client: cl},
		CommitPoint:   commit,
		IncrementRBID: c.incrementRBID,
		Dir:           dr.d.RollbackDir,
		Log:           c.opts.Logger,
	})
}

// fatal ends the process on a failure that leaves this member unable to continue safely.
func (c *Coordinator) fatal(dr *dataRepl, err error) {
	if dr.d.Fatal != nil {
		dr.d.Fatal(err)
		return
	}
	c.log.Error("Unrecoverable rollback error; shutting down", logv2.ID(40507), "error", err.Error())
	os.Exit(14)
}

// loadRBID reads the persisted rollback id, or persists the current one when there is none
// (the first start of this data directory), so replSetGetRBID only changes by a rollback.
func (c *Coordinator) loadRBID(ctx context.Context) error {
	doc, err := c.opts.Store.Load(ctx, RollbackIDNS)
	if err != nil {
		return err
	}
	if doc != nil {
		v, err := doc.LookupErr("rollbackId")
		if err != nil {
			return mongoerr.Newf(mongoerr.NoSuchKey, "%s has no rollbackId: %v", RollbackIDNS, doc)
		}
		n, ok := v.AsInt64OK()
		if !ok {
			return mongoerr.Newf(mongoerr.TypeMismatch, "%s: rollbackId is not a number: %v", RollbackIDNS, doc)
		}
		c.rbid.Store(int32(n))
		return nil
	}
	return c.saveRBID(ctx, c.rbid.Load())
}

// incrementRBID persists rbid+1 durably, then publishes it.
func (c *Coordinator) incrementRBID(ctx context.Context) (int32, error) {
	n := c.rbid.Load() + 1
	if err := c.saveRBID(ctx, n); err != nil {
		return 0, err
	}
	c.rbid.Store(n)
	return n, nil
}

func (c *Coordinator) saveRBID(ctx context.Context, n int32) error {
	if c.opts.Store == nil {
		return errors.New("no store for the rollback id")
	}
	doc := bsoncore.NewDocumentBuilder().AppendString("_id", "rollbackId").AppendInt32("rollbackId", n).Build()
	return c.opts.Store.Save(ctx, RollbackIDNS, doc, true)
}

// SetMyLastAppliedOpTime records an applied and journaled batch (the applier's OnApplied
// reports only durable batches): lastApplied and lastDurable move together, so the next
// replSetUpdatePosition carries both.
func (c *Coordinator) SetMyLastAppliedOpTime(o optime.OpTime) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A primary-elect still applies (catch-up, drain): its lastApplied moves, and reaching
	// the catch-up target ends catch-up. A writable primary's lastApplied follows its own
	// writes (refreshAppliedLocked).
	if c.topo == nil || c.topo.IsWritablePrimary() {
		return
	}
	now := c.clock.Now()
	op := o
	c.handleLocked(now, c.topo.UpdateLastAppliedOpTime(now, op))
	c.handleLocked(now, c.topo.UpdateLastDurableOpTime(now, op))
	// Reaching minValid ends RECOVERING: hello and topologyVersion must say so.
	c.noteChangesLocked()
	c.wakeLocked()
}

// loadConsistencyMarkers reads minValid and the initial-sync flag through the Store (the
// config is installed at startup before data replication has its storage handles).
func (c *Coordinator) loadConsistencyMarkers() (recovery.Markers, error) {
	if c.opts.Store == nil {
		return recovery.Markers{}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	doc, err := c.opts.Store.Load(ctx, recovery.MinValidNS)
	if err != nil {
		return recovery.Markers{}, fmt.Errorf("read %s: %w", recovery.MinValidNS, err)
	}
	return recovery.ParseMarkers(doc)
}

// SecondaryReadTimestamp is the timestamp reads on a non-primary should use
// (storage.ReadProvided): lastApplied, so they never see half of an applied batch. ok is
// false on a primary or when nothing was applied.
func (c *Coordinator) SecondaryReadTimestamp() (ts optime.Timestamp, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A primary-elect reads like a secondary until it is writable: its applier may still be
	// in a batch.
	if c.topo == nil || c.topo.IsWritablePrimary() {
		return 0, false
	}
	a := c.topo.LastApplied()
	if a.IsNull() {
		return 0, false
	}
	return a.TS, true
}

// initialSyncStatusLocked is replSetGetStatus's initialSyncStatus (nil when this node never
// ran initial sync).
func (c *Coordinator) initialSyncStatusLocked() bsoncore.Document {
	if c.dataSyncer == nil {
		return nil
	}
	return c.dataSyncer.Status()
}

// syncSourceChooser adapts the TopologyCoordinator's sync source choice to the fetcher.
type syncSourceChooser struct{ c *Coordinator }

func (s syncSourceChooser) ChooseSyncSource(lastFetched optime.OpTime) string {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return ""
	}
	id := c.topo.ChooseSyncSource(c.clock.Now(), lastFetched)
	cfg := c.topo.Config()
	if m := cfg.Member(id); m != nil {
		c.log.Info("Chose sync source", logv2.ID(21799), "syncSource", m.Host)
		return m.Host
	}
	return ""
}

func (s syncSourceChooser) BlacklistSyncSource(host string, until time.Time) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return
	}
	cfg := c.topo.Config()
	for _, m := range cfg.Members {
		if sameHost(m.Host, host) {
			c.topo.BlacklistSyncSource(m.ID, until)
		}
	}
}

func (s syncSourceChooser) ShouldChangeSyncSource(string) string {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return "no config"
	}
	return c.topo.ShouldChangeSyncSource(c.clock.Now())
}
