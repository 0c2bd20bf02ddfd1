package coord

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/topology"
)

// Initiate is replSetInitiate: install cfgDoc (nil: the default single-member config
// {_id: setName, members: [{_id: 0, host: self}]}), persist it, write the "initiating set"
// no-op and start heartbeating. The other members learn the config by heartbeat.
func (c *Coordinator) Initiate(ctx context.Context, cfgDoc bsoncore.Document) error {
	var cfg topology.ReplSetConfig
	if cfgDoc == nil {
		cfg = topology.NewDefaultConfig(c.opts.SetName, c.opts.Self)
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
	if err := cfg.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	if c.topo != nil {
		c.mu.Unlock()
		return mongoerr.New(mongoerr.AlreadyInitialized, "already initialized")
	}
	if err := c.installConfigLocked(time.Now(), cfg, true); err != nil {
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
	now := time.Now()
	c.handleLocked(now, c.topo.UpdateLastAppliedOpTime(now, op))
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

// Reconfig is replSetReconfig.
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
	old := c.topo.Config()
	if !force && !c.topo.IsWritablePrimary() {
		return mongoerr.Newf(mongoerr.NotWritablePrimary,
			"replSetReconfig should only be run on a writable PRIMARY. Current state %v;", c.topo.State())
	}
	if cfg.SetName != old.SetName {
		return mongoerr.Newf(mongoerr.NewReplicaSetConfigurationIncompatible,
			"New and old configurations differ in replica set name; old was %s, and new is %s", old.SetName, cfg.SetName)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if force {
		// MongoDB bumps a forced config's version by a random amount so two forced reconfigs
		// on different nodes are unlikely to collide; the term is -1 (unset).
		cfg.Version = max(cfg.Version, old.Version) + 10000 + rand.Int64N(90000)
		cfg.Term = old.Term
	} else {
		if cfg.Version <= old.Version {
			return mongoerr.Newf(mongoerr.NewReplicaSetConfigurationIncompatible,
				"New replica set configuration version must be greater than old, but %d is not greater than %d for replica set %s", cfg.Version, old.Version, cfg.SetName)
		}
		if changes := votingChanges(old, cfg); changes > 1 {
			return mongoerr.New(mongoerr.NewReplicaSetConfigurationIncompatible,
				"Non-force replica set reconfig can only add or remove at most 1 voting member.")
		}
		cfg.Term = c.topo.Term()
	}
	if _, ok := c.selfIDIn(cfg); !ok {
		return mongoerr.Newf(mongoerr.NodeNotFound,
			"No host described in new configuration with {version: %d, term: %d} for replica set %s maps to this node", cfg.Version, cfg.Term, cfg.SetName)
	}
	c.log.Info("replSetReconfig", logv2.ID(21352), "force", force, "newVersion", cfg.Version)
	return c.installConfigLocked(time.Now(), cfg, false)
}

// votingChanges counts voters added or removed between two configs (by host).
func votingChanges(a, b topology.ReplSetConfig) int {
	voters := func(c topology.ReplSetConfig) map[string]bool {
		m := map[string]bool{}
		for _, x := range c.Members {
			if x.Votes > 0 {
				m[x.Host] = true
			}
		}
		return m
	}
	va, vb := voters(a), voters(b)
	n := 0
	for h := range va {
		if !vb[h] {
			n++
		}
	}
	for h := range vb {
		if !va[h] {
			n++
		}
	}
	return n
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
	start := time.Now()
	deadline := start.Add(a.CatchUpSecs)
	for {
		c.mu.Lock()
		if c.topo == nil {
			c.mu.Unlock()
			return notInitialized()
		}
		now := time.Now()
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
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
		t.Stop()
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
	now := time.Now()
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
		if c.topo.Term() != term || !c.topo.ElectionInProgress() || !time.Now().Before(deadline) {
			c.mu.Unlock()
			return mongoerr.New(mongoerr.CommandFailed, "Election failed.")
		}
		ch := c.changed
		c.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
		t.Stop()
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
	return c.topo.Freeze(time.Now(), d)
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
	now := time.Now()
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
func (c *Coordinator) RBID() int32 { return c.rbid }

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
	LastWrite, MajorityOpTime topology.OpTime
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
	// W is the number of members; Majority overrides it.
	W        int
	Majority bool
	J        bool
	// WTimeout bounds the wait (0: forever, bounded by ctx).
	WTimeout time.Duration
}

// LastApplied is this node's applied optime (a client's last write on a primary is at or
// before it).
func (c *Coordinator) LastApplied() topology.OpTime {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return topology.OpTime{}
	}
	c.refreshAppliedLocked(time.Now())
	return c.topo.LastApplied()
}

// WaitForWriteConcern waits until op satisfies wc: w:N members have applied (durable with
// j) it, or w:"majority" and the commit point reached it. On wtimeout it returns
// WriteConcernFailed with errInfo {wtimeout: true}; a step-down while waiting returns
// PrimarySteppedDown.
func (c *Coordinator) WaitForWriteConcern(ctx context.Context, op topology.OpTime, wc WriteConcern) error {
	if !wc.Majority && wc.W <= 1 {
		if wc.J && c.opts.Engine != nil {
			return c.opts.Engine.WaitUntilDurable(ctx)
		}
		return nil
	}
	var timer <-chan time.Time
	if wc.WTimeout > 0 {
		t := time.NewTimer(wc.WTimeout)
		defer t.Stop()
		timer = t.C
	}
	c.mu.Lock()
	if c.topo != nil && !wc.Majority && wc.W > len(c.topo.Config().Members) {
		c.mu.Unlock()
		return mongoerr.New(mongoerr.UnsatisfiableWriteConcern, "Not enough data-bearing nodes")
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
		now := time.Now()
		c.refreshAppliedLocked(now)
		if c.topo.Term() != startTerm || c.topo.State() != topology.StatePrimary {
			c.mu.Unlock()
			return mongoerr.New(mongoerr.PrimarySteppedDown, "Primary stepped down while waiting for replication")
		}
		if c.satisfiedLocked(now, op, wc) {
			c.mu.Unlock()
			return nil
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

func (c *Coordinator) satisfiedLocked(now time.Time, op topology.OpTime, wc WriteConcern) bool {
	if wc.Majority {
		return !c.topo.LastCommitted().Less(op)
	}
	n := 0
	for _, m := range c.topo.Status(now).Members {
		have := m.Applied
		if wc.J {
			have = m.Durable
		}
		if (m.Self || m.Up) && !have.Less(op) {
			n++
		}
	}
	return n >= wc.W
}
