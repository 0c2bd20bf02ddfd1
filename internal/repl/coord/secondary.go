package coord

// Integration of data replication (internal/repl/fetcher, applier, initialsync) with the
// coordinator's lifecycle (spec: "Life as a Secondary", "Initial Sync"). Owned by the
// replication-data engineer; kept in this one file so the coordinator's own files stay
// untouched except for the initialSyncStatus line in Status.
//
// A watcher goroutine follows the member state (it wakes on every topology change):
//   - a member whose oplog is empty when it first becomes SECONDARY goes to STARTUP2, runs
//     initial sync from a sync source the TopologyCoordinator chooses, then returns to
//     SECONDARY;
//   - a SECONDARY runs steady-state replication (fetcher + applier); leaving SECONDARY
//     (elected, ROLLBACK, RECOVERING, removed) stops it.
// The applier reports each batch once it is journaled (SetMyLastAppliedOpTime moves
// lastApplied and lastDurable together), and replSetUpdatePosition carries both to the sync
// source.

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/logv2"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/initialsync"
	"humongo/internal/repl/oplog"
	"humongo/internal/repl/topology"
	"humongo/internal/storage"
)

// DataReplication is what the fetcher, applier and initial sync need from the node.
type DataReplication struct {
	Engine  *storage.Engine
	Catalog *catalog.Catalog
	Colls   *index.Collections
	Writer  *oplog.Writer
	// AwaitTime overrides the fetcher's getMore maxTimeMS (default: heartbeatIntervalMillis).
	AwaitTime time.Duration
	// Fatal handles an oplog entry that cannot be applied (default: log and exit).
	Fatal func(error)
}

// dataRepl is the watcher's state; only the watcher goroutine touches it. The initial
// syncer is published in c.dataSyncer (under c.mu) for replSetGetStatus.
type dataRepl struct {
	d       DataReplication
	running *applier.Replication
}

// StartDataReplication starts the watcher that runs initial sync and steady-state
// replication according to the member state. Call it once, after Start; it stops with Close.
func (c *Coordinator) StartDataReplication(d DataReplication) {
	dr := &dataRepl{d: d}
	c.goAsync(func(ctx context.Context) {
		defer func() {
			if dr.running != nil {
				dr.running.Stop()
			}
		}()
		for {
			c.mu.Lock()
			ch := c.changed
			st, have := topology.StateStartup, c.topo != nil
			if have {
				st = c.topo.State()
			}
			c.mu.Unlock()
			var retry <-chan time.Time
			if have && c.followStateDataRepl(ctx, dr, st) {
				t := time.NewTimer(time.Second)
				retry = t.C
				defer t.Stop()
			}
			select {
			case <-ch:
			case <-retry:
			case <-ctx.Done():
				return
			}
		}
	})
}

// followStateDataRepl starts or stops replication for state st; it returns true when it
// should be called again in a second even if nothing changes.
func (c *Coordinator) followStateDataRepl(ctx context.Context, dr *dataRepl, st topology.MemberState) (retry bool) {
	switch {
	case st == topology.StateSecondary && dr.running == nil:
		top, err := applier.TopOfOplog(dr.d.Engine, dr.d.Writer.Ident())
		if err != nil {
			c.log.Error("Cannot read the top of the oplog", logv2.ID(21800), "error", err.Error())
			return true
		}
		if top.TS.IsNull() {
			// An empty member needs initial sync, but only from a member that is ahead of
			// it: the node that ran replSetInitiate is SECONDARY for a moment before it
			// writes its first entry, and must not wait for a copy of nothing.
			if (syncSourceChooser{c}).ChooseSyncSource(oplog.OpTime{}) == "" {
				return true
			}
			if top, err = applier.TopOfOplog(dr.d.Engine, dr.d.Writer.Ident()); err != nil || !top.TS.IsNull() {
				return true // it wrote its first entry meanwhile: start steady state next time
			}
			c.runInitialSync(ctx, dr)
			return false // the return to SECONDARY wakes the watcher again
		}
		r, err := applier.Start(ctx, applier.Deps{Engine: dr.d.Engine, Catalog: dr.d.Catalog, Colls: dr.d.Colls,
			Writer: dr.d.Writer, Chooser: syncSourceChooser{c}, OnApplied: c.SetMyLastAppliedOpTime,
			AwaitTime: c.fetcherAwaitTime(dr), Fatal: dr.d.Fatal, Log: c.opts.Logger})
		if err != nil {
			c.log.Error("Cannot start replication", logv2.ID(21801), "error", err.Error())
			return true
		}
		dr.running = r
		c.SetMyLastAppliedOpTime(r.LastApplied())
	case st != topology.StateSecondary && dr.running != nil:
		// Stop lets the batch in progress finish, so a new primary's data is whole batches.
		dr.running.Stop()
		dr.running = nil
	}
	return false
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

// runInitialSync: STARTUP2 → initial sync → SECONDARY (spec: "Initial Sync").
func (c *Coordinator) runInitialSync(ctx context.Context, dr *dataRepl) {
	s := initialsync.New(initialsync.Config{Engine: dr.d.Engine, Catalog: dr.d.Catalog, Colls: dr.d.Colls,
		Writer: dr.d.Writer, Chooser: syncSourceChooser{c}, AwaitTime: c.fetcherAwaitTime(dr), Log: c.opts.Logger})
	c.mu.Lock()
	c.dataSyncer = s
	err := c.topo.SetFollowerMode(time.Now(), topology.StateStartup2)
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
		c.log.Error("Initial sync failed", logv2.ID(21202), "error", err.Error())
		return // stays in STARTUP2; the operator restarts the node (MongoDB shuts down)
	}
	now := time.Now()
	c.handleLocked(now, c.topo.UpdateLastAppliedOpTime(now, toTopologyOpTime(op)))
	if err := c.topo.SetFollowerMode(now, topology.StateSecondary); err != nil {
		c.log.Error("Cannot leave STARTUP2 after initial sync", logv2.ID(21803), "error", err.Error())
	}
	c.noteChangesLocked()
}

func toTopologyOpTime(o oplog.OpTime) topology.OpTime {
	return topology.OpTime{TS: topology.Timestamp{Secs: o.TS.Secs(), Inc: o.TS.Inc()}, Term: o.Term}
}

// SetMyLastAppliedOpTime records an applied and journaled batch (the applier's OnApplied
// reports only durable batches): lastApplied and lastDurable move together, so the next
// replSetUpdatePosition carries both.
func (c *Coordinator) SetMyLastAppliedOpTime(o oplog.OpTime) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil || c.topo.State() == topology.StatePrimary {
		return
	}
	now := time.Now()
	op := toTopologyOpTime(o)
	c.handleLocked(now, c.topo.UpdateLastAppliedOpTime(now, op))
	c.handleLocked(now, c.topo.UpdateLastDurableOpTime(now, op))
	c.wakeLocked()
}

// SecondaryReadTimestamp is the timestamp reads on a non-primary should use
// (storage.ReadProvided): lastApplied, so they never see half of an applied batch. ok is
// false on a primary or when nothing was applied.
func (c *Coordinator) SecondaryReadTimestamp() (ts storage.Timestamp, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil || c.topo.State() == topology.StatePrimary {
		return 0, false
	}
	a := c.topo.LastApplied()
	if a.IsNull() {
		return 0, false
	}
	return storage.MakeTimestamp(a.TS.Secs, a.TS.Inc), true
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

func (s syncSourceChooser) ChooseSyncSource(lastFetched oplog.OpTime) string {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return ""
	}
	id := c.topo.ChooseSyncSource(time.Now(), toTopologyOpTime(lastFetched))
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
	return c.topo.ShouldChangeSyncSource(time.Now())
}
