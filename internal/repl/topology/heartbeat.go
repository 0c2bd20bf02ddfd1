package topology

import (
	"time"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

// Tick advances the coordinator's timers: heartbeats due, members whose
// heartbeats timed out, the primary's liveness check, catch-up timeout,
// an election whose vote requests timed out, the election timeout and the
// priority / catch-up takeover timers. Call it often (every few hundred ms of
// clock time at most); it returns what to do.
func (t *TopologyCoordinator) Tick(now time.Time) []Action {
	if !t.haveConfig || t.state == StateRemoved {
		return nil
	}
	if t.electionDeadline.IsZero() {
		t.resetElectionTimerLocked(now)
	}
	var acts []Action
	hbTimeout := t.cfg.heartbeatTimeout()
	for _, m := range t.members {
		if !now.Before(m.nextHeartbeat) {
			m.nextHeartbeat = now.Add(t.cfg.heartbeatInterval())
			acts = append(acts, Action{Kind: ActSendHeartbeat, Target: m.id})
		}
		if m.up && now.Sub(m.lastHeartbeatRecv) > hbTimeout {
			acts = append(acts, t.markDownLocked(m)...)
		}
	}
	acts = append(acts, t.CheckLiveness(now)...)
	if t.state == StatePrimary && t.leaderMode == LeaderCatchingUp && !t.catchUpDeadline.IsZero() && !now.Before(t.catchUpDeadline) {
		acts = append(acts, t.endCatchUpLocked("catch-up timed out")...)
	}
	if e := t.election; e != nil && !now.Before(e.deadline) {
		t.election = nil // lost by timeout; the election timer retries
	}
	acts = append(acts, t.CheckElectionTimeout(now)...)
	acts = append(acts, t.checkTakeoversLocked(now)...)
	return acts
}

// markDownLocked records that member m stopped answering heartbeats: it is
// DOWN, no longer our primary, and no longer a usable sync source.
func (t *TopologyCoordinator) markDownLocked(m *memberData) []Action {
	m.up = false
	m.state = StateDown
	if t.primaryID == m.id {
		t.primaryID = -1
	}
	if t.syncSource == m.id {
		return []Action{{Kind: ActChangeSyncSource, Reason: "sync source is down"}}
	}
	return nil
}

// CheckLiveness steps a primary down when fewer than a majority of voters
// (itself included) have been heard from within electionTimeout — directly
// or relayed through replSetUpdatePosition along the sync-source tree.
func (t *TopologyCoordinator) CheckLiveness(now time.Time) []Action {
	if t.state != StatePrimary {
		return nil
	}
	et := t.cfg.electionTimeout()
	votes := 0
	if s := t.self(); s != nil && s.Votes > 0 {
		votes++
	}
	for _, m := range t.members {
		if mc := m.cfg; mc != nil && mc.Votes > 0 && !m.lastUpdate.IsZero() && now.Sub(m.lastUpdate) < et {
			votes++
		}
	}
	if votes < t.cfg.MajorityVoteCount() {
		return t.stepDownLocked(now, "can't see a majority of the set")
	}
	return nil
}

// PrepareHeartbeatRequest builds the heartbeat to send to target and notes
// the send time for ping measurement.
func (t *TopologyCoordinator) PrepareHeartbeatRequest(now time.Time, target int) HeartbeatRequest {
	if m := t.member(target); m != nil {
		m.hbSentAt = now
	}
	return HeartbeatRequest{SetName: t.cfg.SetName, ConfigVersion: t.cfg.Version, ConfigTerm: t.cfg.Term,
		SenderID: t.selfID, Term: t.term}
}

// ProcessHeartbeatRequest answers replSetHeartbeat. The actions carry a term
// update (persist, perhaps step down) and, when the sender has a newer
// config, a heartbeat back to fetch it.
func (t *TopologyCoordinator) ProcessHeartbeatRequest(now time.Time, req HeartbeatRequest) (HeartbeatResponse, []Action) {
	resp := HeartbeatResponse{SetName: t.cfg.SetName, Term: t.term, PrimaryID: -1, SyncSourceID: -1}
	if !t.haveConfig {
		resp.Err = mongoerr.New(mongoerr.NotYetInitialized, "no replset config has been received")
		return resp, nil
	}
	if req.SetName != t.cfg.SetName {
		resp.Err = mongoerr.Newf(mongoerr.InconsistentReplicaSetNames, "Our set name of %s does not match name %s reported by remote node", t.cfg.SetName, req.SetName)
		return resp, nil
	}
	var acts []Action
	m := t.member(req.SenderID)
	if m == nil && req.ConfigVersion <= t.cfg.Version {
		resp.Err = mongoerr.Newf(mongoerr.NodeNotFound, "member %d is not in our config (version %d)", req.SenderID, t.cfg.Version)
		return resp, nil
	}
	acts = append(acts, t.updateTermLocked(now, req.Term)...)
	if m != nil {
		m.lastUpdate = now
	}
	if req.ConfigVersion > t.cfg.Version && m != nil {
		// Fetch the newer config with a heartbeat of our own now.
		m.nextHeartbeat = now
		acts = append(acts, Action{Kind: ActSendHeartbeat, Target: m.id})
	}
	resp = t.heartbeatResponseLocked()
	if req.ConfigVersion < t.cfg.Version {
		c := t.cfg
		resp.Config = &c
	}
	return resp, acts
}

func (t *TopologyCoordinator) heartbeatResponseLocked() HeartbeatResponse {
	r := HeartbeatResponse{SetName: t.cfg.SetName, State: t.state, Term: t.term,
		ConfigVersion: t.cfg.Version, ConfigTerm: t.cfg.Term, Applied: t.applied, Durable: t.durable,
		LastCommitted: t.lastCommitted, PrimaryID: t.primaryID, SyncSourceID: t.syncSource}
	if t.state == StatePrimary {
		// The new primary has not written in its term until the "new
		// primary" no-op: catch-up takeover looks at this.
		r.CatchingUp = t.leaderMode == LeaderCatchingUp || t.leaderMode == LeaderDraining
		r.ElectionTime = optime.MakeTimestamp(uint32(t.electionTime.Unix()), 0)
	}
	return r
}

// ProcessHeartbeatResponse handles the reply from member `from`: its
// ReplSetMetadata (term, commit point), liveness, optimes, primary
// discovery (which postpones the election timeout) and what to do next:
// nothing, step down, reconfig, or schedule a priority / catch-up takeover.
func (t *TopologyCoordinator) ProcessHeartbeatResponse(now time.Time, from int, resp HeartbeatResponse) []Action {
	m := t.member(from)
	if m == nil || !t.haveConfig {
		return nil
	}
	if !m.hbSentAt.IsZero() {
		m.ping = now.Sub(m.hbSentAt)
	}
	var acts []Action
	acts = append(acts, t.updateTermLocked(now, resp.Term)...)
	if resp.Err != nil {
		// MongoDB retries a failed heartbeat at once, up to maxHeartbeatRetries
		// times, and then marks the member down without waiting out
		// heartbeatTimeoutSecs: a refused connection (a killed process) is
		// news now, and waiting would delay the election behind it.
		m.hbFailures++
		if m.hbFailures <= maxHeartbeatRetries {
			m.nextHeartbeat = now
		} else if m.up {
			acts = append(acts, t.markDownLocked(m)...)
		}
		return acts
	}
	m.hbFailures = 0
	if resp.ConfigVersion > t.cfg.Version && resp.Config != nil {
		return append(acts, Action{Kind: ActReconfig, Config: resp.Config})
	}
	m.lastHeartbeatRecv = now
	m.lastUpdate = now
	m.up, m.everUp = true, true
	m.state = resp.State
	m.term = resp.Term
	m.configVersion = resp.ConfigVersion
	m.applied = resp.Applied
	m.durable = resp.Durable
	m.syncSource = resp.SyncSourceID
	m.catchingUp = resp.CatchingUp
	if resp.ConfigVersion != t.cfg.Version {
		// Different config: ignore the rest of the metadata until configs
		// agree (spec: ReplSetMetadata).
		return acts
	}
	if resp.State == StatePrimary && resp.Term == t.term {
		if t.state != StatePrimary {
			if t.primaryID != from {
				t.clearTakeoversLocked()
			}
			t.primaryID = from
			t.resetElectionTimerLocked(now)
		}
	} else if t.primaryID == from {
		t.primaryID = -1
		t.clearTakeoversLocked()
	}
	switch {
	case t.state == StatePrimary:
		if t.leaderMode == LeaderCatchingUp && t.catchUpTarget.Less(resp.Applied) {
			t.catchUpTarget = resp.Applied
		}
		acts = append(acts, t.updateCommitPointLocked()...)
	default:
		acts = append(acts, t.advanceCommitPointLocked(resp.LastCommitted, false)...)
	}
	if t.primaryID == from {
		t.scheduleTakeoversLocked(now, m)
	}
	return acts
}

// --- takeovers ---------------------------------------------------------------

func (t *TopologyCoordinator) canStandLocked(now time.Time) bool {
	s := t.self()
	return t.haveConfig && s != nil && s.electable() && t.state == StateSecondary &&
		t.election == nil && !now.Before(t.frozenUntil)
}

// freshForPriorityTakeover: within 2 s of the newest applied optime known.
func (t *TopologyCoordinator) freshForPriorityTakeover(primary *memberData) bool {
	newest := primary.applied
	for _, m := range t.members {
		if m.up {
			newest = optime.Max(newest, m.applied)
		}
	}
	return t.applied.Term >= newest.Term && lagSecs(t.applied, newest) <= priorityTakeoverFreshness
}

func (t *TopologyCoordinator) scheduleTakeoversLocked(now time.Time, primary *memberData) {
	if !t.canStandLocked(now) {
		return
	}
	self, pc := t.self(), t.cfg.Member(primary.id)
	if pc != nil && self.Priority > pc.Priority && t.priorityTakeoverAt.IsZero() && t.freshForPriorityTakeover(primary) {
		rank := t.cfg.priorityRank(self.Priority)
		et := t.cfg.electionTimeout()
		off := time.Duration(t.rng.Int64N(int64(float64(et)*electionOffsetFraction) + 1))
		t.priorityTakeoverAt = now.Add(et*time.Duration(rank+1) + off)
	}
	if d := t.cfg.catchUpTakeoverDelay(); d > 0 && primary.catchingUp && primary.applied.Less(t.applied) && t.catchUpTakeoverAt.IsZero() {
		t.catchUpTakeoverAt = now.Add(d)
	}
}

func (t *TopologyCoordinator) checkTakeoversLocked(now time.Time) []Action {
	var acts []Action
	p := t.member(t.primaryID)
	if !t.priorityTakeoverAt.IsZero() && !now.Before(t.priorityTakeoverAt) {
		t.priorityTakeoverAt = time.Time{}
		if p != nil && t.canStandLocked(now) && t.self().Priority > p.cfg.Priority && t.freshForPriorityTakeover(p) {
			acts = append(acts, Action{Kind: ActStartElection, DryRun: true, Reason: "priority takeover"})
		}
	}
	if !t.catchUpTakeoverAt.IsZero() && !now.Before(t.catchUpTakeoverAt) {
		t.catchUpTakeoverAt = time.Time{}
		if p != nil && t.canStandLocked(now) && p.catchingUp && p.applied.Less(t.applied) {
			acts = append(acts, Action{Kind: ActStartElection, DryRun: true, Reason: "catch-up takeover"})
		}
	}
	return acts
}

// CheckElectionTimeout returns ActStartElection (dry run) when no primary
// has been heard from within the (randomised) election timeout and this node
// may stand; the timer is then re-armed so a lost election is retried.
func (t *TopologyCoordinator) CheckElectionTimeout(now time.Time) []Action {
	if t.electionDeadline.IsZero() || now.Before(t.electionDeadline) {
		return nil
	}
	t.resetElectionTimerLocked(now)
	if p := t.member(t.primaryID); !t.canStandLocked(now) || p != nil && p.up {
		return nil
	}
	return []Action{{Kind: ActStartElection, DryRun: true, Reason: "election timeout"}}
}
