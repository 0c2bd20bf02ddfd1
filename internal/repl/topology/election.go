package topology

import (
	"fmt"
	"time"

	"humongo/internal/mongoerr"
)

// StartElection begins a dry-run (dryRun=true) or real election. A dry run
// asks for votes for term+1 without changing the term, so a node that cannot
// win never bumps the term and never deposes a healthy primary. A real
// election increments the term and votes for itself; the returned
// ActPersistDurable must complete before the vote requests are sent.
// replSetStepUp and election handoff call this with dryRun=false.
func (t *TopologyCoordinator) StartElection(now time.Time, dryRun bool, reason string) ([]Action, error) {
	self := t.self()
	switch {
	case !t.haveConfig || self == nil:
		return nil, mongoerr.New(mongoerr.NotYetInitialized, "no replica set config")
	case !self.electable():
		return nil, mongoerr.New(mongoerr.NotSecondary, "this node is not electable")
	case t.state != StateSecondary:
		return nil, mongoerr.Newf(mongoerr.NotSecondary, "cannot stand for election in state %v", t.state)
	}
	t.resetElectionTimerLocked(now)
	t.clearTakeoversLocked()
	e := &electionState{dryRun: dryRun, granted: map[int]bool{t.selfID: true}, denied: map[int]bool{},
		deadline: now.Add(t.cfg.electionTimeout()), reason: reason}
	var acts []Action
	if dryRun {
		e.term = t.term + 1
	} else {
		t.term++
		t.primaryID = -1
		t.lastVote = LastVote{Term: t.term, CandidateID: t.selfID}
		e.term = t.term
		acts = append(acts, t.persistAction())
	}
	t.election = e
	req := VoteRequest{SetName: t.cfg.SetName, DryRun: dryRun, Term: e.term, CandidateID: t.selfID,
		ConfigVersion: t.cfg.Version, ConfigTerm: t.cfg.Term, LastApplied: t.applied}
	var targets []int
	for _, m := range t.members {
		if mc := m.cfg; mc.Votes > 0 {
			targets = append(targets, m.id)
		}
	}
	acts = append(acts, Action{Kind: ActSendVoteRequests, DryRun: dryRun, VoteRequest: req, Targets: targets, Reason: reason})
	// A single voter wins on its own vote.
	return append(acts, t.tallyLocked(now)...), nil
}

// ElectionInProgress reports whether this node is a candidate.
func (t *TopologyCoordinator) ElectionInProgress() bool { return t.election != nil }

// ProcessVoteRequest answers replSetRequestVotes (spec "Voter
// Perspective"). For a real election from a higher term, the voter first
// adopts the term. If the vote is granted in a real election, lastVote
// changes and the returned actions contain ActPersistDurable: the caller
// must persist BEFORE sending the response.
func (t *TopologyCoordinator) ProcessVoteRequest(now time.Time, req VoteRequest) (VoteResponse, []Action) {
	var acts []Action
	if !req.DryRun {
		acts = t.updateTermLocked(now, req.Term)
	}
	resp := VoteResponse{VoterID: t.selfID, Term: t.term, DryRun: req.DryRun}
	reject := func(format string, args ...any) (VoteResponse, []Action) {
		resp.Reason = fmt.Sprintf(format, args...)
		return resp, acts
	}
	switch {
	case !t.haveConfig:
		return reject("no config")
	case req.Term < t.term:
		return reject("candidate's term (%d) is lower than mine (%d)", req.Term, t.term)
	case req.ConfigVersion != t.cfg.Version || req.ConfigTerm != t.cfg.Term:
		return reject("candidate's config version (%d) differs from mine (%d)", req.ConfigVersion, t.cfg.Version)
	case req.SetName != t.cfg.SetName:
		return reject("candidate's set name (%s) differs from mine (%s)", req.SetName, t.cfg.SetName)
	case req.LastApplied.Less(t.applied) && !t.knobs.IgnoreLogFreshness:
		return reject("candidate's data is staler than mine (candidate's last applied OpTime: %v, my last applied OpTime: %v)", req.LastApplied, t.applied)
	case !req.DryRun && t.lastVote.Term == req.Term && req.Term > 0 && !t.knobs.VoteTwicePerTerm:
		return reject("already voted for another candidate (%d) this term (%d)", t.lastVote.CandidateID, t.lastVote.Term)
	}
	if t.state == StateArbiter {
		if p := t.member(t.primaryID); p != nil && p.up {
			pc, cc := p.cfg, t.cfg.Member(req.CandidateID)
			if cc != nil && pc.Priority >= cc.Priority {
				return reject("can see a healthy primary (%d) of equal or greater priority", p.id)
			}
		}
	}
	resp.VoteGranted = true
	if !req.DryRun {
		t.lastVote = LastVote{Term: req.Term, CandidateID: req.CandidateID}
		acts = append(acts, t.persistAction())
		// Granting a vote means a new primary is likely; give it time.
		t.resetElectionTimerLocked(now)
	}
	return resp, acts
}

// ProcessVoteResponse counts a vote. A won dry run immediately starts the
// real election (persist + vote requests); a won real election makes this
// node primary-elect (ActPrimaryElected, heartbeats to all, maybe
// ActEnterDrain right away if there is nothing to catch up on).
func (t *TopologyCoordinator) ProcessVoteResponse(now time.Time, resp VoteResponse) []Action {
	acts := t.updateTermLocked(now, resp.Term)
	e := t.election
	if e == nil || resp.DryRun != e.dryRun || (!e.dryRun && resp.Term != e.term) {
		return acts
	}
	if m := t.member(resp.VoterID); m != nil {
		m.lastUpdate = now
	}
	if mc := t.cfg.Member(resp.VoterID); mc == nil || mc.Votes == 0 {
		return acts
	}
	if resp.VoteGranted {
		e.granted[resp.VoterID] = true
	} else {
		e.denied[resp.VoterID] = true
	}
	return append(acts, t.tallyLocked(now)...)
}

func (t *TopologyCoordinator) tallyLocked(now time.Time) []Action {
	e := t.election
	need := t.cfg.MajorityVoteCount()
	switch {
	case len(e.granted) >= need && e.dryRun:
		t.election = nil
		acts, err := t.StartElection(now, false, e.reason)
		if err != nil {
			return nil
		}
		return acts
	case len(e.granted) >= need:
		t.election = nil
		return t.becomePrimaryElectLocked(now)
	case len(e.denied) > t.cfg.TotalVotes()-need:
		t.election = nil
	}
	return nil
}

// becomePrimaryElectLocked: spec "Transitioning to PRIMARY". Clear the sync
// source, announce by heartbeats, catch up to the newest applied optime
// seen, then drain.
func (t *TopologyCoordinator) becomePrimaryElectLocked(now time.Time) []Action {
	t.state = StatePrimary
	t.leaderMode = LeaderCatchingUp
	t.primaryID = t.selfID
	t.syncSource = -1
	t.electionTime = now
	t.priorityTakeoverAt, t.catchUpTakeoverAt = time.Time{}, time.Time{}
	// Liveness baseline: the voters that just elected us count as heard.
	t.catchUpTarget = t.applied
	for _, m := range t.members {
		if m.up && t.catchUpTarget.Less(m.applied) {
			t.catchUpTarget = m.applied
		}
	}
	acts := []Action{}
	for _, m := range t.members {
		m.nextHeartbeat = now.Add(t.cfg.heartbeatInterval())
		acts = append(acts, Action{Kind: ActSendHeartbeat, Target: m.id})
	}
	cu := t.cfg.Settings.CatchUpTimeout
	a := Action{Kind: ActPrimaryElected, CatchUpTarget: t.catchUpTarget}
	t.catchUpDeadline = time.Time{}
	if cu > 0 {
		t.catchUpDeadline = now.Add(cu)
		a.CatchUpDeadline = t.catchUpDeadline
	}
	acts = append(acts, a)
	if cu == 0 || !t.applied.Less(t.catchUpTarget) {
		acts = append(acts, t.endCatchUpLocked("already caught up")...)
	}
	return acts
}

// EndCatchUp ends primary catch-up early (e.g. the fetcher found the target
// on a divergent branch). Catch-up is best effort: the node stays primary.
func (t *TopologyCoordinator) EndCatchUp(now time.Time, reason string) []Action {
	if t.state != StatePrimary || t.leaderMode != LeaderCatchingUp {
		return nil
	}
	return t.endCatchUpLocked(reason)
}

func (t *TopologyCoordinator) endCatchUpLocked(reason string) []Action {
	t.leaderMode = LeaderDraining
	t.syncSource = -1
	return []Action{{Kind: ActEnterDrain, Reason: reason}}
}

// CompleteDrain is called once the applier drained its buffer: the node
// becomes writable. The caller must write the "new primary" no-op first so
// the commit point can move into this term (and carry older entries with
// it).
func (t *TopologyCoordinator) CompleteDrain(now time.Time) []Action {
	if t.state != StatePrimary || t.leaderMode != LeaderDraining {
		return nil
	}
	t.leaderMode = LeaderWritable
	return []Action{{Kind: ActBecomePrimary}}
}

// StepDownOpts parameterise replSetStepDown.
type StepDownOpts struct {
	// Force steps down without the catch-up conditions once now >= WaitUntil.
	Force     bool
	WaitUntil time.Time
	// FreezeFor prevents re-election of this node (stepDownSecs).
	FreezeFor time.Duration
	// DisableHandoff turns off election handoff (enableElectionHandoff).
	DisableHandoff bool
}

// StepDown is the conditional step-down (spec "Step Down / Conditional"):
// it succeeds if Force and now >= WaitUntil, or if lastApplied is
// majority-replicated and some caught-up secondary is electable. On failure
// it returns ExceededTimeLimit and the caller retries until its deadline.
// On success, handoff is the member to send replSetStepUp to (or -1).
func (t *TopologyCoordinator) StepDown(now time.Time, opts StepDownOpts) (acts []Action, handoff int, err error) {
	if t.state != StatePrimary {
		return nil, -1, mongoerr.New(mongoerr.NotWritablePrimary, "not primary so can't step down")
	}
	handoff = -1
	caught, best := 1, (*MemberConfig)(nil)
	if s := t.self(); s.Votes == 0 {
		caught = 0
	}
	for _, m := range t.members {
		mc := m.cfg
		if !m.up || mc.ArbiterOnly || m.applied.Less(t.applied) {
			continue
		}
		if mc.Votes > 0 {
			caught++
		}
		if mc.electable() && (best == nil || mc.Priority > best.Priority) {
			best = mc
		}
	}
	ok := caught >= t.cfg.WriteMajority() && best != nil
	if !ok && !(opts.Force && !now.Before(opts.WaitUntil)) {
		return nil, -1, mongoerr.New(mongoerr.ExceededTimeLimit, "No electable secondaries caught up as of the step-down deadline")
	}
	if best != nil && !opts.Force && !opts.DisableHandoff {
		handoff = best.ID
	}
	t.frozenUntil = now.Add(opts.FreezeFor)
	return t.stepDownLocked(now, "replSetStepDown"), handoff, nil
}

// StepUp is replSetStepUp / election handoff: a real election without the
// dry run.
func (t *TopologyCoordinator) StepUp(now time.Time) ([]Action, error) {
	return t.StartElection(now, false, "step-up request")
}
