package topology

import (
	"math/rand/v2"
	"slices"
	"time"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
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
	LastApplied, LastDurable optime.OpTime
	// NeedsInitialSync says the node has no data of its own to vouch for: an
	// empty oplog, or the durable initial-sync flag of an initial sync that
	// never finished (spec "Startup Recovery"). With its first config it
	// enters STARTUP2 rather than SECONDARY, and only CompleteInitialSync or
	// SetFollowerMode(SECONDARY) moves it on, so it is never seen as a
	// readable, electable SECONDARY before it has the set's data. A config
	// that names no other data-bearing member leaves nobody to copy from (the
	// node initiating a one-member set, which writes the first oplog entry
	// itself): the node then starts as SECONDARY.
	NeedsInitialSync bool
	// MinValid is the persisted minValid (local.replset.minvalid): the data
	// is consistent only once lastApplied reaches it. Until then the node is
	// RECOVERING, not SECONDARY (see SetMinValid).
	MinValid optime.OpTime
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
	applied       optime.OpTime
	durable       optime.OpTime
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

	applied optime.OpTime
	durable optime.OpTime
	// lastCommitted is the majority commit point as known here; monotonic.
	lastCommitted optime.OpTime

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

	catchUpTarget   optime.OpTime
	catchUpDeadline time.Time
	electionTime    time.Time

	// needsInitialSync: see Options.NeedsInitialSync; cleared when the node
	// leaves STARTUP2 (or gets a config with nobody to copy from).
	needsInitialSync bool
	// minValid is the optime the data must reach before the node may be
	// SECONDARY (rollback sets it to the sync source's top; an interrupted
	// batch or rollback leaves it persisted across a restart).
	minValid optime.OpTime
	// awaitingMinValid: the node is RECOVERING only because applied <
	// minValid, so reaching minValid makes it SECONDARY. A RECOVERING asked
	// for by the caller (maintenance mode) clears it: only the caller ends
	// that one.
	awaitingMinValid bool
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

		needsInitialSync: opts.NeedsInitialSync,
		minValid:         opts.MinValid,
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
		// A node with data goes straight to SECONDARY (RECOVERING while
		// behind minValid); one that needs initial sync to STARTUP2 (spec
		// "Initial Sync": STARTUP is only the time before a config).
		if t.needsInitialSync && hasOtherDataBearingMember(cfg, t.selfID) {
			t.state = StateStartup2
		} else {
			t.needsInitialSync = false
			t.becomeFollowerLocked()
		}
	}
	if t.primaryID >= 0 && cfg.Member(t.primaryID) == nil {
		t.primaryID = -1
	}
	if t.syncSource >= 0 && cfg.Member(t.syncSource) == nil {
		t.syncSource = -1
	}
}

// hasOtherDataBearingMember reports whether cfg names a member other than
// self that holds data (an initial sync source candidate).
func hasOtherDataBearingMember(cfg ReplSetConfig, self int) bool {
	for _, m := range cfg.Members {
		if m.ID != self && !m.ArbiterOnly {
			return true
		}
	}
	return false
}

// becomeFollowerLocked makes the node SECONDARY, or RECOVERING while its
// applied optime is behind minValid (MongoDB's tryToGoLiveAsASecondary
// refuses SECONDARY until lastApplied >= minValid).
func (t *TopologyCoordinator) becomeFollowerLocked() {
	// A null minValid is no constraint (entries written before the first
	// election have term -1, below it).
	if !t.minValid.IsNull() && t.applied.Less(t.minValid) {
		t.state = StateRecovering
		t.awaitingMinValid = true
		return
	}
	t.state = StateSecondary
	t.awaitingMinValid = false
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
func (t *TopologyCoordinator) LastCommitted() optime.OpTime { return t.lastCommitted }

// LastApplied is this node's applied optime.
func (t *TopologyCoordinator) LastApplied() optime.OpTime { return t.applied }

// LastDurable is this node's durable optime.
func (t *TopologyCoordinator) LastDurable() optime.OpTime { return t.durable }

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
	t.catchUpTarget = optime.OpTime{}
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

// SetFollowerMode moves a non-primary between SECONDARY, RECOVERING,
// ROLLBACK and STARTUP2 (the caller's rollback, maintenance mode and initial
// sync). SECONDARY is granted only to consistent data: a node whose applied
// optime is behind minValid becomes RECOVERING instead, and SECONDARY as soon
// as UpdateLastAppliedOpTime reaches minValid. Leaving STARTUP2 ends the need
// for initial sync (the caller found data, or finished copying it).
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
	if s != StateStartup2 {
		t.needsInitialSync = false
	}
	if s == StateSecondary {
		t.becomeFollowerLocked()
		if t.state != StateSecondary {
			t.election = nil
		}
		return nil
	}
	t.state = s
	t.awaitingMinValid = false
	return nil
}

// CompleteInitialSync ends STARTUP2 after a successful initial sync: the
// copied data is applied and journaled up to op, which becomes lastApplied
// and lastDurable (whatever the node had before was dropped), and the node
// becomes SECONDARY (RECOVERING if op is behind minValid).
func (t *TopologyCoordinator) CompleteInitialSync(now time.Time, op optime.OpTime) ([]Action, error) {
	if t.state != StateStartup2 {
		return nil, mongoerr.Newf(mongoerr.NotSecondary, "cannot complete initial sync in state %v", t.state)
	}
	t.applied, t.durable = op, op
	t.needsInitialSync = false
	t.becomeFollowerLocked()
	return t.updateCommitPointLocked(), nil
}

// NeedsInitialSync reports whether the node is waiting in STARTUP2 for an
// initial sync (Options.NeedsInitialSync, until it leaves STARTUP2).
func (t *TopologyCoordinator) NeedsInitialSync() bool { return t.needsInitialSync }

// SetMinValid records minValid (rollback: the sync source's top of oplog,
// which our data must reach before it is consistent again). A SECONDARY
// behind it becomes RECOVERING.
func (t *TopologyCoordinator) SetMinValid(op optime.OpTime) {
	t.minValid = op
	if t.state == StateSecondary {
		t.becomeFollowerLocked()
		if t.state != StateSecondary {
			t.election = nil
		}
	}
}

// MinValid is the recorded minValid.
func (t *TopologyCoordinator) MinValid() optime.OpTime { return t.minValid }

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
func (t *TopologyCoordinator) UpdateLastAppliedOpTime(now time.Time, op optime.OpTime) []Action {
	if op.Less(t.applied) {
		return nil
	}
	t.applied = op
	if t.awaitingMinValid && t.state == StateRecovering && !t.applied.Less(t.minValid) {
		// Consistent again: MongoDB's tryToGoLiveAsASecondary.
		t.state = StateSecondary
		t.awaitingMinValid = false
	}
	var acts []Action
	if t.state == StatePrimary && t.leaderMode == LeaderCatchingUp && !t.applied.Less(t.catchUpTarget) {
		acts = append(acts, t.endCatchUpLocked("caught up")...)
	}
	return append(acts, t.updateCommitPointLocked()...)
}

// UpdateLastDurableOpTime records this node's durable (journaled) optime.
func (t *TopologyCoordinator) UpdateLastDurableOpTime(now time.Time, op optime.OpTime) []Action {
	if op.Less(t.durable) {
		return nil
	}
	t.durable = op
	return t.updateCommitPointLocked()
}

// ResetOpTimesAfterRollback sets applied and durable to the common point
// (they move backwards; the commit point does not).
func (t *TopologyCoordinator) ResetOpTimesAfterRollback(op optime.OpTime) {
	t.applied, t.durable = op, op
}
