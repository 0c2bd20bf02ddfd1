package topology

import (
	"math/rand/v2"
	"slices"
	"time"

	"humongo/internal/mongoerr"
)

// LeaderMode is the sub-state of a PRIMARY (MongoDB's _leaderMode).
type LeaderMode int

const (
	LeaderNone       LeaderMode = iota // not primary
	LeaderCatchingUp                   // won; replicating what the old primary had
	LeaderDraining                     // catch-up over; applier draining its buffer
	LeaderWritable                     // accepts writes
)

func (m LeaderMode) String() string {
	return [...]string{"none", "catchup", "drain", "writable"}[m]
}

// TestingKnobs deliberately break protocol rules so tests can prove the
// simulation's invariant checker catches the resulting violations. They must
// never be set outside tests.
type TestingKnobs struct {
	// VoteTwicePerTerm ignores lastVote: the node may vote for two
	// candidates in one term (breaks NoTwoPrimariesInSameTerm).
	VoteTwicePerTerm bool
	// IgnoreLogFreshness grants votes to candidates with staler logs
	// (breaks leader completeness).
	IgnoreLogFreshness bool
	// CommitPreviousTermEntries drops the current-term rule for the commit
	// point (Raft figure 8; breaks NeverRollbackCommitted).
	CommitPreviousTermEntries bool
}

// Options configures a new TopologyCoordinator.
type Options struct {
	SelfID int
	// Config may be nil: the node then stays in STARTUP until
	// InstallConfig.
	Config *ReplSetConfig
	// Durable is what was read back from local.replset.election at startup.
	Durable DurableState
	// Applied/Durable optimes recovered from the oplog at startup.
	LastApplied, LastDurable OpTime
	// Rand supplies the election-timeout offsets; required, and the only
	// source of randomness.
	Rand  *rand.Rand
	Knobs TestingKnobs
}

// memberData is this node's view of another member (MongoDB MemberData).
type memberData struct {
	id int
	// cfg points into TopologyCoordinator.cfg.Members (refreshed by
	// installConfig).
	cfg           *MemberConfig
	up            bool
	everUp        bool
	state         MemberState
	term          int64
	configVersion int64
	applied       OpTime
	durable       OpTime
	syncSource    int
	catchingUp    bool
	// lastHeartbeatRecv is when the last heartbeat response arrived; it
	// drives up/down (health).
	lastHeartbeatRecv time.Time
	// lastUpdate is the last liveness signal of any kind (heartbeat either
	// direction, replSetUpdatePosition, even relayed, vote response); a
	// primary needs a majority of these within electionTimeout.
	lastUpdate    time.Time
	hbSentAt      time.Time
	nextHeartbeat time.Time
	// hbFailures counts heartbeats in a row that failed; past
	// maxHeartbeatRetries the member is marked down.
	hbFailures int
	ping       time.Duration
}

type electionState struct {
	dryRun   bool
	term     int64 // the term in the vote requests
	granted  map[int]bool
	denied   map[int]bool
	deadline time.Time
	reason   string
}

// TopologyCoordinator is one node's replication decision state. It is not
// safe for concurrent use: the owner serialises calls (MongoDB guards it with
// the ReplicationCoordinator mutex).
type TopologyCoordinator struct {
	selfID     int
	cfg        ReplSetConfig
	haveConfig bool
	rng        *rand.Rand
	knobs      TestingKnobs

	state      MemberState
	leaderMode LeaderMode

	// term and lastVote are durable; every change yields ActPersistDurable.
	term     int64
	lastVote LastVote

	applied OpTime
	durable OpTime
	// lastCommitted is the majority commit point as known here; monotonic.
	lastCommitted OpTime

	members []*memberData // config order, excluding self

	primaryID    int // -1 if unknown; only ever a primary of the current term
	syncSource   int // -1 if none
	forcedSource int // replSetSyncFrom, used once; -1 if none
	blacklist    map[int]time.Time

	electionDeadline   time.Time // zero until the first Tick
	priorityTakeoverAt time.Time
	catchUpTakeoverAt  time.Time
	election           *electionState
	// frozenUntil: no elections before this (replSetFreeze, post step-down).
	frozenUntil time.Time

	catchUpTarget   OpTime
	catchUpDeadline time.Time
	electionTime    time.Time
}

// New returns a coordinator for node opts.SelfID.
func New(opts Options) (*TopologyCoordinator, error) {
	if opts.Rand == nil {
		return nil, mongoerr.New(mongoerr.BadValue, "topology: Options.Rand is required")
	}
	t := &TopologyCoordinator{
		selfID:       opts.SelfID,
		rng:          opts.Rand,
		knobs:        opts.Knobs,
		state:        StateStartup,
		term:         opts.Durable.Term,
		lastVote:     opts.Durable.LastVote,
		applied:      opts.LastApplied,
		durable:      opts.LastDurable,
		primaryID:    -1,
		syncSource:   -1,
		forcedSource: -1,
		blacklist:    map[int]time.Time{},
	}
	// The term can be behind the newest oplog entry's term if the node
	// observed a term it never persisted; the oplog is authoritative too.
	t.term = max(t.term, opts.LastApplied.Term, t.lastVote.Term)
	if opts.Config != nil {
		if err := opts.Config.Validate(); err != nil {
			return nil, err
		}
		t.installConfig(time.Time{}, *opts.Config)
	}
	return t, nil
}

// InstallConfig adopts a new config (replSetInitiate, replSetReconfig or a
// newer config learned by heartbeat). A primary removed from the config, or
// made unelectable, steps down.
func (t *TopologyCoordinator) InstallConfig(now time.Time, cfg ReplSetConfig) ([]Action, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if t.haveConfig && cfg.SetName != t.cfg.SetName {
		return nil, mongoerr.Newf(mongoerr.InconsistentReplicaSetNames, "new config set name %q does not match %q", cfg.SetName, t.cfg.SetName)
	}
	if t.haveConfig && cfg.Version <= t.cfg.Version && cfg.Term <= t.cfg.Term {
		return nil, mongoerr.Newf(mongoerr.NewReplicaSetConfigurationIncompatible, "new config version %d is not newer than %d", cfg.Version, t.cfg.Version)
	}
	wasPrimary := t.state == StatePrimary
	t.installConfig(now, cfg)
	var acts []Action
	if self := cfg.Member(t.selfID); wasPrimary && (self == nil || !self.electable()) {
		acts = append(acts, t.stepDownLocked(now, "removed or made unelectable by reconfig")...)
	}
	if self := cfg.Member(t.selfID); self == nil {
		t.state = StateRemoved
	}
	return acts, nil
}

// A member new to the config counts as heard from at now: a primary's
// liveness check must give it a full election timeout to start answering,
// or adding a voter a majority needs would step the primary down at once
// (MongoDB resets member timeouts when it installs a config).
func (t *TopologyCoordinator) installConfig(now time.Time, cfg ReplSetConfig) {
	old := map[int]*memberData{}
	for _, m := range t.members {
		old[m.id] = m
	}
	// Own the member slice: configs travel in heartbeat responses and
	// memberData points into it.
	cfg.Members = slices.Clone(cfg.Members)
	t.cfg = cfg
	t.haveConfig = true
	t.members = t.members[:0]
	for i := range cfg.Members {
		id := cfg.Members[i].ID
		if id == t.selfID {
			continue
		}
		md := old[id]
		if md == nil {
			md = &memberData{id: id, state: StateUnknown, syncSource: -1, lastUpdate: now}
		}
		md.cfg = &t.cfg.Members[i]
		t.members = append(t.members, md)
	}
	self := cfg.Member(t.selfID)
	switch {
	case self == nil:
		t.state = StateRemoved
	case self.ArbiterOnly:
		t.state = StateArbiter
	case t.state == StateStartup || t.state == StateRemoved:
		// Nodes start with data (no initial sync in this core), so they
		// go straight to SECONDARY once they have a config.
		t.state = StateSecondary
	}
	if t.primaryID >= 0 && cfg.Member(t.primaryID) == nil {
		t.primaryID = -1
	}
	if t.syncSource >= 0 && cfg.Member(t.syncSource) == nil {
		t.syncSource = -1
	}
}

func (t *TopologyCoordinator) member(id int) *memberData {
	for _, m := range t.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

func (t *TopologyCoordinator) self() *MemberConfig { return t.cfg.Member(t.selfID) }

// --- accessors ---------------------------------------------------------

// SelfID is this node's member id.
func (t *TopologyCoordinator) SelfID() int { return t.selfID }

// State is the member state.
func (t *TopologyCoordinator) State() MemberState { return t.state }

// Term is the current term.
func (t *TopologyCoordinator) Term() int64 { return t.term }

// LastVote is the last (durable) vote.
func (t *TopologyCoordinator) LastVote() LastVote { return t.lastVote }

// DurableState is what must survive restarts.
func (t *TopologyCoordinator) DurableState() DurableState {
	return DurableState{Term: t.term, LastVote: t.lastVote}
}

// LeaderMode is the primary sub-state.
func (t *TopologyCoordinator) LeaderMode() LeaderMode { return t.leaderMode }

// IsWritablePrimary reports whether writes may be accepted: PRIMARY, past
// catch-up and drain, and not stepping down.
func (t *TopologyCoordinator) IsWritablePrimary() bool {
	return t.state == StatePrimary && t.leaderMode == LeaderWritable
}

// LastCommitted is the commit point.
func (t *TopologyCoordinator) LastCommitted() OpTime { return t.lastCommitted }

// LastApplied is this node's applied optime.
func (t *TopologyCoordinator) LastApplied() OpTime { return t.applied }

// LastDurable is this node's durable optime.
func (t *TopologyCoordinator) LastDurable() OpTime { return t.durable }

// SyncSource is the current sync source id or -1.
func (t *TopologyCoordinator) SyncSource() int { return t.syncSource }

// PrimaryID is the primary known in the current term or -1.
func (t *TopologyCoordinator) PrimaryID() int { return t.primaryID }

// Config returns the installed config.
func (t *TopologyCoordinator) Config() ReplSetConfig { return t.cfg }

// Status snapshots the coordinator.
func (t *TopologyCoordinator) Status(now time.Time) Status {
	s := Status{SelfID: t.selfID, State: t.state, Term: t.term, LastVote: t.lastVote,
		PrimaryID: t.primaryID, SyncSourceID: t.syncSource, Applied: t.applied,
		Durable: t.durable, LastCommitted: t.lastCommitted, Writable: t.IsWritablePrimary(),
		LeaderMode: t.leaderMode}
	s.Members = append(s.Members, MemberStatus{ID: t.selfID, Self: true, Up: true, State: t.state,
		Term: t.term, Applied: t.applied, Durable: t.durable, SyncSourceID: t.syncSource})
	for _, m := range t.members {
		s.Members = append(s.Members, MemberStatus{ID: m.id, Up: m.up, State: m.state, Term: m.term,
			Applied: m.applied, Durable: m.durable, LastHeartbeat: m.lastHeartbeatRecv, Ping: m.ping,
			SyncSourceID: m.syncSource})
	}
	slices.SortFunc(s.Members, func(a, b MemberStatus) int { return a.ID - b.ID })
	return s
}

// --- term and state helpers -----------------------------------------------

func (t *TopologyCoordinator) persistAction() Action {
	return Action{Kind: ActPersistDurable, Durable: t.DurableState()}
}

// updateTermLocked adopts a higher term seen in any message. A primary
// steps down; a candidate's election (for a lower term) is abandoned.
func (t *TopologyCoordinator) updateTermLocked(now time.Time, term int64) []Action {
	if term <= t.term {
		return nil
	}
	t.term = term
	t.primaryID = -1
	t.election = nil
	t.clearTakeoversLocked()
	acts := []Action{t.persistAction()}
	if t.state == StatePrimary {
		acts = append(acts, t.stepDownLocked(now, "saw a higher term")...)
	}
	return acts
}

func (t *TopologyCoordinator) stepDownLocked(now time.Time, reason string) []Action {
	if t.state != StatePrimary {
		return nil
	}
	t.state = StateSecondary
	t.leaderMode = LeaderNone
	if t.primaryID == t.selfID {
		t.primaryID = -1
	}
	t.catchUpTarget = OpTime{}
	t.clearTakeoversLocked()
	t.resetElectionTimerLocked(now)
	return []Action{{Kind: ActStepDown, Reason: reason}}
}

// resetElectionTimerLocked pushes the election timeout out by
// electionTimeout plus a random offset in [0, 15%).
func (t *TopologyCoordinator) resetElectionTimerLocked(now time.Time) {
	et := t.cfg.electionTimeout()
	limit := int64(float64(et) * electionOffsetFraction)
	var off time.Duration
	if limit > 0 {
		off = time.Duration(t.rng.Int64N(limit))
	}
	t.electionDeadline = now.Add(et + off)
}

// clearTakeoversLocked cancels pending priority / catch-up takeovers (the
// primary changed, or we stood or stepped down). Hearing from the primary
// again must not reschedule them, or heartbeats would postpone them forever.
func (t *TopologyCoordinator) clearTakeoversLocked() {
	t.priorityTakeoverAt = time.Time{}
	t.catchUpTakeoverAt = time.Time{}
}

// SetFollowerMode moves a non-primary between SECONDARY, RECOVERING and
// ROLLBACK (the caller's rollback and maintenance mode).
func (t *TopologyCoordinator) SetFollowerMode(now time.Time, s MemberState) error {
	if t.state == StatePrimary || t.state == StateArbiter || t.state == StateRemoved {
		return mongoerr.Newf(mongoerr.NotSecondary, "cannot change follower mode to %v in state %v", s, t.state)
	}
	switch s {
	case StateSecondary, StateRecovering, StateRollback, StateStartup2:
	default:
		return mongoerr.Newf(mongoerr.BadValue, "%v is not a follower mode", s)
	}
	if s != StateSecondary {
		t.election = nil
	}
	t.state = s
	return nil
}

// Freeze prevents this node from standing for election until now+d
// (replSetFreeze); d == 0 unfreezes.
func (t *TopologyCoordinator) Freeze(now time.Time, d time.Duration) error {
	if t.state == StatePrimary {
		return mongoerr.New(mongoerr.NotSecondary, "cannot freeze node when primary or running for election. state: Primary")
	}
	t.frozenUntil = now.Add(d)
	return nil
}

// --- optimes ---------------------------------------------------------------

// UpdateLastAppliedOpTime records this node's applied optime. On a
// primary-elect it may end catch-up; with writeConcernMajorityJournalDefault
// false it may advance the commit point.
func (t *TopologyCoordinator) UpdateLastAppliedOpTime(now time.Time, op OpTime) []Action {
	if op.Less(t.applied) {
		return nil
	}
	t.applied = op
	var acts []Action
	if t.state == StatePrimary && t.leaderMode == LeaderCatchingUp && !t.applied.Less(t.catchUpTarget) {
		acts = append(acts, t.endCatchUpLocked("caught up")...)
	}
	return append(acts, t.updateCommitPointLocked()...)
}

// UpdateLastDurableOpTime records this node's durable (journaled) optime.
func (t *TopologyCoordinator) UpdateLastDurableOpTime(now time.Time, op OpTime) []Action {
	if op.Less(t.durable) {
		return nil
	}
	t.durable = op
	return t.updateCommitPointLocked()
}

// ResetOpTimesAfterRollback sets applied and durable to the common point
// (they move backwards; the commit point does not).
func (t *TopologyCoordinator) ResetOpTimesAfterRollback(op OpTime) {
	t.applied, t.durable = op, op
}
