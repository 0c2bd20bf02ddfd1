package topology

import (
	"slices"
	"time"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

// updateCommitPointLocked recomputes the commit point on a primary (spec
// "Commit Point Propagation"): the newest optime durable (or applied, when
// writeConcernMajorityJournalDefault is false) on WriteMajority
// data-bearing voters, adopted only if it belongs to the current term (the
// Raft current-term rule: entries of older terms become committed only
// behind an entry of this term, which is why a new primary writes a no-op)
// and only if it moves forward.
func (t *TopologyCoordinator) updateCommitPointLocked() []Action {
	if t.state != StatePrimary {
		return nil
	}
	journal := t.cfg.Settings.WriteConcernMajorityJournalDefault
	pick := func(applied, durable optime.OpTime) optime.OpTime {
		if journal {
			return durable
		}
		return applied
	}
	var ops []optime.OpTime
	if s := t.self(); s != nil && s.Votes > 0 && !s.ArbiterOnly {
		ops = append(ops, pick(t.applied, t.durable))
	}
	for _, m := range t.members {
		mc := m.cfg
		if mc.Votes == 0 || mc.ArbiterOnly || m.configVersion != t.cfg.Version {
			continue
		}
		ops = append(ops, pick(m.applied, m.durable))
	}
	need := t.cfg.WriteMajority()
	if len(ops) < need {
		return nil
	}
	slices.SortFunc(ops, func(a, b optime.OpTime) int { return b.Compare(a) })
	cand := ops[need-1]
	if cand.Term != t.term && !t.knobs.CommitPreviousTermEntries {
		return nil
	}
	if !t.lastCommitted.Less(cand) {
		return nil
	}
	t.lastCommitted = cand
	return []Action{{Kind: ActCommitPointAdvanced, CommitPoint: cand}}
}

// advanceCommitPointLocked adopts a commit point learned from another node.
// From a heartbeat it is adopted only if it is in the same term as our
// lastApplied (then our log is a prefix of that term's primary's log, so we
// are on the commit point's branch). From the sync source, our log is a
// prefix of the source's, so min(commit point, lastApplied) is safe.
func (t *TopologyCoordinator) advanceCommitPointLocked(c optime.OpTime, fromSyncSource bool) []Action {
	if t.state == StatePrimary || t.state == StateRollback || t.state == StateArbiter {
		return nil
	}
	if fromSyncSource {
		c = optime.Min(c, t.applied)
	} else if c.Term != t.applied.Term {
		return nil
	}
	if !t.lastCommitted.Less(c) {
		return nil
	}
	t.lastCommitted = c
	return []Action{{Kind: ActCommitPointAdvanced, CommitPoint: c}}
}

// ProcessUpdatePosition handles replSetUpdatePosition: adopt the sender's
// term, record each member's applied/durable optimes and liveness (this is
// how a primary hears from members that reach it only through the
// sync-source tree), and advance the commit point on a primary. Entries with
// another config version fail the command.
func (t *TopologyCoordinator) ProcessUpdatePosition(now time.Time, up UpdatePosition) ([]Action, error) {
	acts := t.updateTermLocked(now, up.Term)
	if s := t.member(up.SenderID); s != nil {
		s.lastUpdate = now
	}
	for _, p := range up.Positions {
		if p.ConfigVersion != t.cfg.Version {
			return acts, mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "Received replSetUpdatePosition for node with memberId %d whose config version of %d doesn't match our config version of %d", p.MemberID, p.ConfigVersion, t.cfg.Version)
		}
		if p.MemberID == t.selfID {
			continue
		}
		m := t.member(p.MemberID)
		if m == nil {
			return acts, mongoerr.Newf(mongoerr.NodeNotFound, "Received replSetUpdatePosition for node with memberId %d which doesn't exist in our config", p.MemberID)
		}
		m.lastUpdate = now
		m.configVersion = p.ConfigVersion
		m.applied = optime.Max(m.applied, p.Applied)
		m.durable = optime.Max(m.durable, p.Durable)
	}
	return append(acts, t.updateCommitPointLocked()...), nil
}

// PrepareUpdatePosition builds the replSetUpdatePosition to send to the
// sync source: our own optimes plus those of every member heard from within
// electionTimeout (relaying liveness up the tree).
func (t *TopologyCoordinator) PrepareUpdatePosition(now time.Time) UpdatePosition {
	up := UpdatePosition{SenderID: t.selfID, Term: t.term}
	up.Positions = append(up.Positions, MemberPosition{MemberID: t.selfID, ConfigVersion: t.cfg.Version,
		Applied: t.applied, Durable: t.durable})
	et := t.cfg.electionTimeout()
	for _, m := range t.members {
		if m.lastUpdate.IsZero() || now.Sub(m.lastUpdate) >= et || m.applied.IsNull() {
			continue
		}
		up.Positions = append(up.Positions, MemberPosition{MemberID: m.id, ConfigVersion: t.cfg.Version,
			Applied: m.applied, Durable: m.durable})
	}
	return up
}

// ProcessSyncSourceMetadata handles the metadata of an oplog fetcher batch
// from the sync source. The caller must call it only after the batch was
// checked to continue our log (first entry == our last fetched), so our log
// is a prefix of the source's and the sync-source commit-point rule applies.
func (t *TopologyCoordinator) ProcessSyncSourceMetadata(now time.Time, md SyncSourceMetadata) []Action {
	acts := t.updateTermLocked(now, md.Term)
	if md.ConfigVersion != t.cfg.Version {
		return acts
	}
	if m := t.member(md.SourceID); m != nil {
		m.lastUpdate = now
		m.applied = optime.Max(m.applied, md.Applied)
	}
	if md.PrimaryID >= 0 && md.Term == t.term && t.state != StatePrimary {
		if t.primaryID < 0 && md.PrimaryID != t.selfID {
			t.primaryID = md.PrimaryID
		}
		t.resetElectionTimerLocked(now)
	}
	return append(acts, t.advanceCommitPointLocked(md.LastCommitted, true)...)
}
