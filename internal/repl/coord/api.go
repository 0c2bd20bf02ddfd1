package coord

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/topology"
)

// Initiate is replSetInitiate: install cfgDoc (nil: the default single-member config
// {_id: setName, members: [{_id: 0, host: self}]}), persist it, write the "initiating set"
// no-op and start heartbeating. The other members learn the config by heartbeat.
func (c *Coordinator) Initiate(ctx context.Context, cfgDoc bsoncore.Document) error {
	var cfg topology.ReplSetConfig
	if cfgDoc == nil {
		cfg = topology.NewDefaultConfig(c.opts.SetName, c.opts.Self)
		// replSetInitiate without a config marks a config server's set as one.
		cfg.ConfigSvr = c.opts.ConfigServer
	} else {
		var err error
		if cfg, err = ParseConfig(cfgDoc); err != nil {
			return err
		}
	}
	if cfg.SetName != c.opts.SetName {
		return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig,
			"Attempting to initiate a replica set with name %s, but command line reports %s; rejecting", cfg.SetName, c.opts.SetName)
	}
	if err := ValidateConfig(cfg); err != nil {
		return err
	}
	if err := ValidateClusterRole(cfg, c.opts.ConfigServer); err != nil {
		return err
	}
	c.mu.Lock()
	if c.topo != nil {
		c.mu.Unlock()
		return mongoerr.New(mongoerr.AlreadyInitialized, "already initialized")
	}
	if err := c.installConfigLocked(c.clock.Now(), cfg, true); err != nil {
		c.mu.Unlock()
		return err
	}
	term := c.topo.Term()
	c.mu.Unlock()
	c.log.Info("replSetInitiate config object with N members parses ok", logv2.ID(21357), "set", cfg.SetName, "members", len(cfg.Members))
	op, err := c.appendNoop(ctx, term, "initiating set")
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.handleLocked(now, c.topo.UpdateLastAppliedOpTime(now, op))
	// The initiator of a multi-member set waits in STARTUP2 (its oplog was empty when the
	// config arrived, like a new member's); the entry it just wrote is the set's first data,
	// so it has no initial sync to do and is a SECONDARY now, as in MongoDB's
	// _finishReplSetInitiate. Leaving that to the data-replication watcher would make the
	// single-voter election below fail for a state that is about to change.
	if c.topo.State() == topology.StateStartup2 {
		if err := c.topo.SetFollowerMode(now, topology.StateSecondary); err != nil {
			return err
		}
	}
	// A set whose only voter is this node elects it at once instead of waiting out the
	// election timeout, as MongoDB does after initiating a one-node set.
	if self := cfg.Member(c.topo.SelfID()); self != nil && self.Votes > 0 && cfg.TotalVotes() == 1 {
		if acts, err := c.topo.StartElection(now, false, "single-node replica set"); err == nil {
			c.handleLocked(now, acts)
		}
	}
	c.noteChangesLocked()
	return nil
}

// Config returns the installed config document, or NotYetInitialized.
func (c *Coordinator) Config() (bsoncore.Document, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return nil, notInitialized()
	}
	return ConfigDocument(c.topo.Config()), nil
}

func notInitialized() error {
	return mongoerr.New(mongoerr.NotYetInitialized, "no replset config has been received")
}

// reconfigState is the safe-reconfig bookkeeping of replSetReconfig (spec "Safe
// Reconfig"; MongoDB's config and oplog commitment). Guarded by Coordinator.mu.
type reconfigState struct {
	// busy: a replSetReconfig is between its first check and its "Reconfig set" no-op; a
	// second one fails with ConfigurationInProgress.
	busy bool
	// commitOp is the optime of the "Reconfig set" no-op written right after this node
	// installed config version commitVersion by a non-force reconfig, in term commitOp.Term.
	// The commit point counts only members that report the current config version, so once
	// it reaches commitOp a majority has the config (config commitment) and every entry
	// committed under the previous config (all older than the no-op) is committed under this
	// one (oplog commitment).
	commitOp      optime.OpTime
	commitVersion int64
	// forcedVersion is the version of the last config this node installed with force; a safe
	// reconfig from a forced config skips the commitment check, as in MongoDB.
	forcedVersion int64
}

// reconfigCommitWait bounds how long a safe reconfig waits for the current config to be
// committed when the command has no maxTimeMS. MongoDB fails at once; waiting a little lets
// back-to-back reconfigs (rs.add twice) succeed on a healthy set, and a set that cannot
// commit still gets CurrentConfigNotCommittedYet.
const reconfigCommitWait = 10 * time.Second

// Reconfig is replSetReconfig. Without force (spec "Safe Reconfig", MongoDB 4.4+): only a
// writable primary reconfigures; the current config must be committed first (see
// reconfigState; CurrentConfigNotCommittedYet otherwise); the new config gets the current
// term, must have a greater version and may add or remove at most one voter (CheckReconfig);
// this node must be electable in it. After installing it the primary writes a "Reconfig set"
// no-op, whose majority commit commits the new config. With force any member installs the
// config at once with its version raised by a random large amount.
func (c *Coordinator) Reconfig(ctx context.Context, doc bsoncore.Document, force bool) error {
	cfg, err := ParseConfig(doc)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return notInitialized()
	}
	if c.rcfg.busy {
		return mongoerr.New(mongoerr.ConfigurationInProgress,
			"Cannot run replSetReconfig because the node is currently updating its configuration")
	}
	if force {
		return c.forceReconfigLocked(cfg)
	}
	if err := c.checkReconfigPrimaryLocked(); err != nil {
		return err
	}
	c.rcfg.busy = true
	defer func() { c.rcfg.busy = false }()
	if err := c.waitConfigCommittedLocked(ctx); err != nil {
		return err
	}
	if err := c.checkReconfigPrimaryLocked(); err != nil {
		return err
	}
	old := c.topo.Config()
	term := c.topo.Term()
	cfg.Term = term
	if err := ValidateClusterRole(cfg, c.opts.ConfigServer); err != nil {
		me, _ := mongoerr.As(err)
		return mongoerr.New(mongoerr.NewReplicaSetConfigurationIncompatible, me.Msg)
	}
	if err := CheckReconfig(old, cfg, false); err != nil {
		return err
	}
	id, ok := c.selfIDIn(cfg)
	if !ok {
		return mongoerr.Newf(mongoerr.NodeNotFound,
			"No host described in new configuration with {version: %d, term: %d} for replica set %s maps to this node", cfg.Version, cfg.Term, cfg.SetName)
	}
	if m := cfg.Member(id); m.Priority <= 0 || m.Votes == 0 || m.ArbiterOnly {
		return mongoerr.Newf(mongoerr.NodeNotElectable,
			"This node, %s, with _id %d is not electable under the new configuration with {version: %d, term: %d} for replica set %s",
			m.Host, m.ID, cfg.Version, cfg.Term, cfg.SetName)
	}
	c.log.Info("replSetReconfig", logv2.ID(21352), "force", false, "newVersion", cfg.Version, "term", term)
	if err := c.installConfigLocked(c.clock.Now(), cfg, false); err != nil {
		return err
	}
	// Until the no-op is written the new config cannot be proven committed: an unreachable
	// commitment optime of this term blocks the next safe reconfig rather than let it pass
	// on a commit point that predates the config.
	c.rcfg.commitVersion = cfg.Version
	c.rcfg.commitOp = optime.OpTime{TS: optime.MakeTimestamp(math.MaxUint32, math.MaxUint32), Term: term}
	c.mu.Unlock()
	op, err := c.appendNoop(ctx, term, "Reconfig set")
	c.mu.Lock()
	if err != nil {
		return fmt.Errorf("write the reconfig no-op: %w", err)
	}
	now := c.clock.Now()
	c.handleLocked(now, c.topo.UpdateLastAppliedOpTime(now, op))
	if c.rcfg.commitVersion == cfg.Version {
		c.rcfg.commitOp = op
	}
	c.noteChangesLocked()
	return nil
}

// forceReconfigLocked installs cfg on any member (replSetReconfig with force: true).
func (c *Coordinator) forceReconfigLocked(cfg topology.ReplSetConfig) error {
	old := c.topo.Config()
	// MongoDB bumps a forced config's version by a random amount so two forced reconfigs on
	// different nodes are unlikely to collide. The term stays the old config's: heartbeats
	// and votes compare config terms, and every member must adopt this config.
	cfg.Version = max(cfg.Version, old.Version) + 10000 + rand.Int64N(90000)
	cfg.Term = old.Term
	if err := ValidateClusterRole(cfg, c.opts.ConfigServer); err != nil {
		me, _ := mongoerr.As(err)
		return mongoerr.New(mongoerr.NewReplicaSetConfigurationIncompatible, me.Msg)
	}
	if err := CheckReconfig(old, cfg, true); err != nil {
		return err
	}
	if _, ok := c.selfIDIn(cfg); !ok {
		return mongoerr.Newf(mongoerr.NodeNotFound,
			"No host described in new configuration with {version: %d, term: %d} for replica set %s maps to this node", cfg.Version, cfg.Term, cfg.SetName)
	}
	c.log.Info("replSetReconfig", logv2.ID(21352), "force", true, "newVersion", cfg.Version)
	if err := c.installConfigLocked(c.clock.Now(), cfg, false); err != nil {
		return err
	}
	c.rcfg.forcedVersion = cfg.Version
	return nil
}

func (c *Coordinator) checkReconfigPrimaryLocked() error {
	if !c.topo.IsWritablePrimary() {
		return mongoerr.Newf(mongoerr.NotWritablePrimary,
			"replSetReconfig should only be run on a writable PRIMARY. Current state %v;", c.topo.State())
	}
	return nil
}

// configCommittedLocked reports whether the current config is committed (nil) or why not.
func (c *Coordinator) configCommittedLocked() error {
	cfg := c.topo.Config()
	if c.rcfg.forcedVersion == cfg.Version {
		return nil
	}
	term, lc := c.topo.Term(), c.topo.LastCommitted()
	// A primary whose commit point is in its own term has had its "new primary" no-op
	// committed by a majority of the current config: the config and every entry committed
	// before it are majority committed under it.
	if lc.Term != term {
		return mongoerr.New(mongoerr.CurrentConfigNotCommittedYet,
			"Last committed OpTime in previous config is not committed in current config")
	}
	if c.rcfg.commitVersion == cfg.Version && c.rcfg.commitOp.Term == term && lc.Less(c.rcfg.commitOp) {
		return mongoerr.Newf(mongoerr.CurrentConfigNotCommittedYet,
			"Cannot run replSetReconfig because the current config: {version: %d, term: %d} is not majority committed.", cfg.Version, cfg.Term)
	}
	return nil
}

// waitConfigCommittedLocked waits (releasing c.mu) until the current config is committed,
// until ctx's deadline, or reconfigCommitWait when ctx has none.
func (c *Coordinator) waitConfigCommittedLocked(ctx context.Context) error {
	deadline := c.clock.Now().Add(reconfigCommitWait)
	if d, ok := ctx.Deadline(); ok {
		deadline = d
	}
	for {
		c.refreshAppliedLocked(c.clock.Now())
		err := c.configCommittedLocked()
		if err == nil || !c.clock.Now().Before(deadline) {
			return err
		}
		c.maybeFollowJournalLocked()
		ch := c.progress
		c.mu.Unlock()
		c.waitSignal(ctx, ch, deadline)
		c.mu.Lock()
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return context.Cause(ctx)
		}
		if c.topo == nil {
			return notInitialized()
		}
	}
}

// waitSignal blocks until ch is closed, deadline passes or ctx ends, and reports whether it
// was ctx that ended the wait. Callers hold no lock: ch is a coordinator broadcast channel
// (c.progress, c.changed) read under c.mu before releasing it, so no signal is missed.
func (c *Coordinator) waitSignal(ctx context.Context, ch <-chan struct{}, deadline time.Time) (ctxDone bool) {
	select {
	case <-ch:
	case <-c.clock.After(deadline.Sub(c.clock.Now())):
	case <-ctx.Done():
		return true
	}
	return false
}

// StepDownArgs are replSetStepDown's arguments.
type StepDownArgs struct {
	StepDownSecs time.Duration
	CatchUpSecs  time.Duration
	Force        bool
}

// StepDown is replSetStepDown: wait up to CatchUpSecs for an electable secondary to catch up
// (or step down anyway with Force), stay unelectable for StepDownSecs, and hand off the
// election to the best caught-up secondary (replSetStepUp).
func (c *Coordinator) StepDown(ctx context.Context, a StepDownArgs) error {
	start := c.clock.Now()
	deadline := start.Add(a.CatchUpSecs)
	for {
		c.mu.Lock()
		if c.topo == nil {
			c.mu.Unlock()
			return notInitialized()
		}
		now := c.clock.Now()
		acts, handoff, err := c.topo.StepDown(now, topology.StepDownOpts{Force: a.Force, WaitUntil: deadline, FreezeFor: a.StepDownSecs})
		if err == nil {
			c.handleLocked(now, acts)
			c.noteChangesLocked()
			cfg := c.topo.Config()
			if m := cfg.Member(handoff); m != nil {
				host := m.Host
				c.goAsync(func(ctx context.Context) {
					cmd := bsoncore.NewDocumentBuilder().AppendInt32("replSetStepUp", 1).AppendBoolean("skipDryRun", true).Build()
					if _, err := c.call(ctx, host, cmd, 10*time.Second); err != nil {
						c.log.Info("Election handoff failed", logv2.ID(21347), "target", host, "error", err.Error())
					}
				})
			}
			c.mu.Unlock()
			return nil
		}
		if !mongoerr.Is(err, mongoerr.ExceededTimeLimit) || !now.Before(deadline) {
			c.mu.Unlock()
			return err
		}
		ch := c.progress
		c.mu.Unlock()
		if c.waitSignal(ctx, ch, deadline) {
			return context.Cause(ctx)
		}
	}
}

// StepUp is replSetStepUp: stand for election now (no dry run) and wait up to the election
// timeout for the outcome.
func (c *Coordinator) StepUp(ctx context.Context) error {
	c.mu.Lock()
	if c.topo == nil {
		c.mu.Unlock()
		return notInitialized()
	}
	now := c.clock.Now()
	acts, err := c.topo.StepUp(now)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.handleLocked(now, acts)
	c.noteChangesLocked()
	term := c.topo.Term()
	cfg := c.topo.Config()
	deadline := now.Add(cfg.ElectionTimeout())
	for {
		if c.topo.State() == topology.StatePrimary && c.topo.Term() == term {
			c.mu.Unlock()
			return nil
		}
		if c.topo.Term() != term || !c.topo.ElectionInProgress() || !c.clock.Now().Before(deadline) {
			c.mu.Unlock()
			return mongoerr.New(mongoerr.CommandFailed, "Election failed.")
		}
		ch := c.changed
		c.mu.Unlock()
		if c.waitSignal(ctx, ch, deadline) {
			return context.Cause(ctx)
		}
		c.mu.Lock()
	}
}

// Freeze is replSetFreeze.
func (c *Coordinator) Freeze(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return notInitialized()
	}
	return c.topo.Freeze(c.clock.Now(), d)
}

// Maintenance is replSetMaintenance: RECOVERING while any maintenance request is on.
func (c *Coordinator) Maintenance(on bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return notInitialized()
	}
	if c.topo.State() == topology.StatePrimary {
		return mongoerr.New(mongoerr.NotSecondary, "primaries can't modify maintenance mode")
	}
	now := c.clock.Now()
	if on {
		if err := c.topo.SetFollowerMode(now, topology.StateRecovering); err != nil {
			return err
		}
		c.maintenance++
	} else {
		if c.maintenance == 0 {
			return mongoerr.New(mongoerr.OperationFailed, "already out of maintenance mode")
		}
		c.maintenance--
		if c.maintenance == 0 {
			if err := c.topo.SetFollowerMode(now, topology.StateSecondary); err != nil {
				return err
			}
		}
	}
	c.noteChangesLocked()
	return nil
}

// SyncFrom is replSetSyncFrom; it returns the previous sync source host ("" if none).
func (c *Coordinator) SyncFrom(host string) (prev string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return "", notInitialized()
	}
	cfg := c.topo.Config()
	if m := cfg.Member(c.topo.SyncSource()); m != nil {
		prev = m.Host
	}
	for _, m := range cfg.Members {
		if sameHost(m.Host, host) {
			return prev, c.topo.SetForcedSyncSource(m.ID)
		}
	}
	return prev, mongoerr.Newf(mongoerr.NodeNotFound, "Could not find member \"%s\" in replica set", host)
}

// RBID is the rollback id (replSetGetRBID).
func (c *Coordinator) RBID() int32 { return c.rbid.Load() }

// Progress returns a channel closed the next time this node's optimes or the commit point
// move (a batch applied on a secondary, a write on the primary): for watchers of replicated
// data that must not poll.
func (c *Coordinator) Progress() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.progress
}

// TopologyVersion is hello's topologyVersion.counter; Changed is closed when it next moves.
func (c *Coordinator) TopologyVersion() (counter int64, changed <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tv.Load(), c.changed
}

// IsWritablePrimary reports whether user writes may be accepted.
func (c *Coordinator) IsWritablePrimary() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topo != nil && c.topo.IsWritablePrimary()
}

// CheckCanAcceptWrites fails with NotWritablePrimary unless this node is a writable primary;
// the local database is always writable.
func (c *Coordinator) CheckCanAcceptWrites(db string) error {
	if db == "local" || c.IsWritablePrimary() {
		return nil
	}
	return mongoerr.New(mongoerr.NotWritablePrimary, "not primary")
}

// CheckCanServeReads: a primary serves every read; a secondary only with secondaryOk;
// any other state fails with NotPrimaryOrSecondary.
func (c *Coordinator) CheckCanServeReads(db string, secondaryOk bool) error {
	if db == "local" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := topology.StateStartup
	if c.topo != nil {
		st = c.topo.State()
	}
	switch {
	case st == topology.StatePrimary:
		return nil
	case !secondaryOk:
		return mongoerr.New(mongoerr.NotPrimaryNoSecondaryOk, "not primary and secondaryOk=false")
	case st == topology.StateSecondary:
		return nil
	}
	return mongoerr.New(mongoerr.NotPrimaryOrSecondary, "node is not in primary or recovering state")
}

// HelloInfo is what hello reports about the replica set.
type HelloInfo struct {
	Initialized               bool
	SetName                   string
	SetVersion                int64
	Hosts, Passives, Arbiters []string
	Primary, Me               string
	IsWritablePrimary         bool
	Secondary                 bool
	ArbiterOnly, Hidden       bool
	Tags                      map[string]string
	ElectionID                bson.ObjectID
	LastWrite, MajorityOpTime optime.OpTime
	TopologyVersion           int64
}

// Hello snapshots the fields hello needs.
func (c *Coordinator) Hello() HelloInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := HelloInfo{SetName: c.opts.SetName, Me: c.opts.Self, TopologyVersion: c.tv.Load()}
	if c.topo == nil {
		return h
	}
	cfg := c.topo.Config()
	h.Initialized, h.SetName, h.SetVersion = true, cfg.SetName, cfg.Version
	for _, m := range cfg.Members {
		switch {
		case m.ArbiterOnly:
			h.Arbiters = append(h.Arbiters, m.Host)
		case m.Hidden:
		case m.Priority == 0:
			h.Passives = append(h.Passives, m.Host)
		default:
			h.Hosts = append(h.Hosts, m.Host)
		}
		if m.ID == c.topo.SelfID() {
			h.Me, h.ArbiterOnly, h.Hidden, h.Tags = m.Host, m.ArbiterOnly, m.Hidden, m.Tags
		}
	}
	if p := cfg.Member(c.topo.PrimaryID()); p != nil {
		h.Primary = p.Host
	}
	h.IsWritablePrimary = c.topo.IsWritablePrimary()
	h.Secondary = c.topo.State() == topology.StateSecondary
	if c.topo.State() == topology.StatePrimary {
		h.ElectionID = electionID(c.topo.Term())
	}
	h.LastWrite, h.MajorityOpTime = c.topo.LastApplied(), c.topo.LastCommitted()
	return h
}

// electionID is MongoDB's OID::fromTerm: 0x7fffffff then the term, big-endian, so drivers
// order primaries by (setVersion, electionId).
func electionID(term int64) bson.ObjectID {
	var id bson.ObjectID
	binary.BigEndian.PutUint32(id[0:4], 0x7fffffff)
	binary.BigEndian.PutUint64(id[4:12], uint64(term))
	return id
}

// WriteConcern is a parsed writeConcern for WaitForWriteConcern.
type WriteConcern struct {
	// W is the number of members; Majority or Mode overrides it.
	W        int
	Majority bool
	J        bool
	// WTimeout bounds the wait (0: forever, bounded by ctx).
	WTimeout time.Duration
	// Mode is a custom mode of settings.getLastErrorModes (wcmodes.go).
	Mode string
}

// LastApplied is this node's applied optime (a client's last write on a primary is at or
// before it).
func (c *Coordinator) LastApplied() optime.OpTime {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return optime.OpTime{}
	}
	c.refreshAppliedLocked(c.clock.Now())
	return c.topo.LastApplied()
}

// WaitForWriteConcern waits until op satisfies wc: w:N members have applied (durable with
// j) it, or w:"majority" and the commit point reached it, or the members that applied it
// satisfy custom mode wc.Mode (unknown: UnknownReplWriteConcern; unsatisfiable even by all
// members: UnsatisfiableWriteConcern, both before waiting). On wtimeout it returns
// WriteConcernFailed with errInfo {wtimeout: true}; a step-down while waiting returns
// PrimarySteppedDown.
func (c *Coordinator) WaitForWriteConcern(ctx context.Context, op optime.OpTime, wc WriteConcern) error {
	if !wc.Majority && !wc.customMode() && wc.W <= 1 {
		if wc.J && c.opts.Engine != nil {
			return c.opts.Engine.WaitUntilDurable(ctx)
		}
		return nil
	}
	var timer <-chan time.Time
	if wc.WTimeout > 0 {
		timer = c.clock.After(wc.WTimeout)
	}
	c.mu.Lock()
	if err := c.checkSatisfiableLocked(wc); err != nil {
		c.mu.Unlock()
		return err
	}
	startTerm := int64(-1)
	if c.topo != nil {
		startTerm = c.topo.Term()
	}
	c.mu.Unlock()
	for {
		c.mu.Lock()
		if c.topo == nil {
			c.mu.Unlock()
			return notInitialized()
		}
		now := c.clock.Now()
		c.refreshAppliedLocked(now)
		if c.topo.Term() != startTerm || c.topo.State() != topology.StatePrimary {
			c.mu.Unlock()
			return mongoerr.New(mongoerr.PrimarySteppedDown, "Primary stepped down while waiting for replication")
		}
		if ok, err := c.satisfiedLocked(now, op, wc); ok || err != nil {
			c.mu.Unlock()
			return err
		}
		ch := c.progress
		c.maybeFollowJournalLocked()
		c.mu.Unlock()
		select {
		case <-ch:
		case <-timer:
			e := mongoerr.New(mongoerr.WriteConcernFailed, "waiting for replication timed out")
			e.Info = bsoncore.NewDocumentBuilder().AppendDocument("errInfo",
				bsoncore.NewDocumentBuilder().AppendBoolean("wtimeout", true).Build()).Build()
			return e
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (c *Coordinator) satisfiedLocked(now time.Time, op optime.OpTime, wc WriteConcern) (bool, error) {
	switch {
	case wc.Majority:
		return !c.topo.LastCommitted().Less(op), nil
	case wc.customMode():
		return c.modeSatisfiedLocked(now, op, wc)
	}
	return len(c.holdingLocked(now, op, wc.J)) >= wc.W, nil
}
