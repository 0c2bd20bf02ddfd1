package topology

import (
	"time"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

// ChooseSyncSource picks the member to fetch from (spec "Choosing a sync
// source candidate"): a requested replSetSyncFrom target once; the primary
// if chaining is disallowed (outside catch-up); otherwise the closest (lowest
// ping) member that is up, readable, not denylisted, strictly ahead of
// lastFetched and not more than maxSyncSourceLagSecs behind the primary (or
// the newest member). A first pass skips delayed and hidden members. Returns
// -1 when no member qualifies (the caller retries after 1 s).
func (t *TopologyCoordinator) ChooseSyncSource(now time.Time, lastFetched optime.OpTime) int {
	t.syncSource = -1
	if !t.haveConfig || t.state == StateArbiter || t.state == StateRemoved ||
		(t.state == StatePrimary && t.leaderMode != LeaderCatchingUp) {
		return -1
	}
	if f := t.forcedSource; f >= 0 {
		t.forcedSource = -1
		if t.member(f) != nil {
			t.syncSource = f
			return f
		}
	}
	catchingUp := t.state == StatePrimary
	if !t.cfg.Settings.ChainingAllowed && !catchingUp {
		if p := t.member(t.primaryID); p != nil && t.eligibleLocked(now, p, lastFetched, optime.OpTime{}) {
			t.syncSource = p.id
		}
		return t.syncSource
	}
	newest := optime.OpTime{}
	if p := t.member(t.primaryID); p != nil && p.up {
		newest = p.applied
	} else {
		for _, m := range t.members {
			if m.up && m.state.readable() {
				newest = optime.Max(newest, m.applied)
			}
		}
	}
	for pass := 0; pass < 2 && t.syncSource < 0; pass++ {
		var best *memberData
		for _, m := range t.members {
			mc := m.cfg
			if pass == 0 && (mc.Hidden || mc.SecondaryDelaySecs > 0) {
				continue
			}
			if !t.eligibleLocked(now, m, lastFetched, newest) {
				continue
			}
			if best == nil || m.ping < best.ping {
				best = m
			}
		}
		if best != nil {
			t.syncSource = best.id
		}
	}
	return t.syncSource
}

func (t *TopologyCoordinator) eligibleLocked(now time.Time, m *memberData, lastFetched, newest optime.OpTime) bool {
	mc := m.cfg
	if mc == nil || mc.ArbiterOnly || !m.up || !m.state.readable() || m.configVersion != t.cfg.Version {
		return false
	}
	if until, ok := t.blacklist[m.id]; ok {
		if now.Before(until) {
			return false
		}
		delete(t.blacklist, m.id)
	}
	if !lastFetched.Less(m.applied) {
		return false // not ahead of us
	}
	return lagSecs(m.applied, newest) <= MaxSyncSourceLag
}

// BlacklistSyncSource denylists a member as sync source until `until`
// (probe failed, source behind or too far ahead, fetcher errors).
func (t *TopologyCoordinator) BlacklistSyncSource(id int, until time.Time) {
	t.blacklist[id] = until
	if t.syncSource == id {
		t.syncSource = -1
	}
}

// ClearSyncSource forgets the current sync source (fetcher stopped).
func (t *TopologyCoordinator) ClearSyncSource() { t.syncSource = -1 }

// SetForcedSyncSource is replSetSyncFrom: use id for the next choice.
func (t *TopologyCoordinator) SetForcedSyncSource(id int) error {
	if t.member(id) == nil {
		return mongoerr.Newf(mongoerr.NodeNotFound, "Could not find member %d in replica set", id)
	}
	t.forcedSource = id
	return nil
}

// ShouldChangeSyncSource re-evaluates the current source after a fetcher
// batch (spec: metadata checks): change if it is gone, down, no longer
// readable, not the primary while chaining is off, or far behind another
// eligible member. It returns a reason or "".
func (t *TopologyCoordinator) ShouldChangeSyncSource(now time.Time) string {
	s := t.member(t.syncSource)
	switch {
	case t.syncSource < 0:
		return ""
	case s == nil:
		return "sync source removed from config"
	case !s.up:
		return "sync source is down"
	case !s.state.readable():
		return "sync source is not primary or secondary"
	case !t.cfg.Settings.ChainingAllowed && t.state != StatePrimary && t.primaryID >= 0 && s.id != t.primaryID:
		return "chaining disallowed and sync source is not the primary"
	}
	if until, ok := t.blacklist[s.id]; ok && now.Before(until) {
		return "sync source denylisted"
	}
	for _, m := range t.members {
		if m != s && m.up && m.state.readable() && lagSecs(s.applied, m.applied) > MaxSyncSourceLag {
			return "sync source lags another member by more than maxSyncSourceLagSecs"
		}
	}
	return ""
}
