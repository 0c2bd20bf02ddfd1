package topology

import (
	"math/rand/v2"
	"testing"
	"time"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

// Member lifecycle before steady state (spec "Initial Sync", "Startup Recovery", "Rollback";
// checklist "State machines": STARTUP → (STARTUP2) → SECONDARY, SECONDARY → ROLLBACK →
// SECONDARY, SECONDARY → RECOVERING).

func newLifecycleTC(t *testing.T, self int, cfg *ReplSetConfig, o Options) *TopologyCoordinator {
	t.Helper()
	o.SelfID, o.Config, o.Rand = self, cfg, rand.New(rand.NewPCG(3, 4))
	tc, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func op(secs uint32, term int64) optime.OpTime {
	return optime.OpTime{TS: optime.MakeTimestamp(secs, 0), Term: term}
}

// A member that needs initial sync goes from STARTUP to STARTUP2 with its first config,
// whether it gets it at construction or later by InstallConfig: it is never a SECONDARY (a
// readable sync source, a candidate) before CompleteInitialSync.
func TestNeedsInitialSyncEntersStartup2(t *testing.T) {
	now := time.Unix(100, 0)
	cfg := NewDefaultConfig("rs0", "a", "b", "c")
	for _, viaInstall := range []bool{false, true} {
		var tc *TopologyCoordinator
		if viaInstall {
			tc = newLifecycleTC(t, 2, nil, Options{NeedsInitialSync: true})
			if tc.State() != StateStartup {
				t.Fatalf("no config: state %v", tc.State())
			}
			if _, err := tc.InstallConfig(now, cfg); err != nil {
				t.Fatal(err)
			}
		} else {
			tc = newLifecycleTC(t, 2, &cfg, Options{NeedsInitialSync: true})
		}
		if tc.State() != StateStartup2 || !tc.NeedsInitialSync() {
			t.Fatalf("viaInstall=%v: state %v, needsInitialSync %v; want STARTUP2", viaInstall, tc.State(), tc.NeedsInitialSync())
		}
		if _, err := tc.StartElection(now, true, "test"); codeOf(err) != mongoerr.NotSecondary {
			t.Fatalf("election from STARTUP2: %v", err)
		}
		// A newer config (the set grows while we copy) keeps us in STARTUP2.
		next := NewDefaultConfig("rs0", "a", "b", "c", "d")
		next.Version = cfg.Version + 1
		if _, err := tc.InstallConfig(now, next); err != nil {
			t.Fatal(err)
		}
		if tc.State() != StateStartup2 {
			t.Fatalf("after a reconfig during initial sync: %v", tc.State())
		}
		if _, err := tc.CompleteInitialSync(now, op(50, 3)); err != nil {
			t.Fatal(err)
		}
		if tc.State() != StateSecondary || tc.NeedsInitialSync() || tc.LastApplied() != op(50, 3) || tc.LastDurable() != op(50, 3) {
			t.Fatalf("after initial sync: %v needs=%v applied %v durable %v", tc.State(), tc.NeedsInitialSync(), tc.LastApplied(), tc.LastDurable())
		}
		if _, err := tc.CompleteInitialSync(now, op(60, 3)); codeOf(err) != mongoerr.NotSecondary {
			t.Fatalf("second CompleteInitialSync: %v", err)
		}
	}
}

// A member with data (no initial sync needed) is SECONDARY at once, as before; a member that
// needs initial sync but whose config names nobody else with data (replSetInitiate of a
// one-member set, or a set whose other members are arbiters) has nobody to copy from.
func TestNoInitialSyncWithoutSource(t *testing.T) {
	cfg := NewDefaultConfig("rs0", "a", "b", "c")
	if tc := newLifecycleTC(t, 0, &cfg, Options{LastApplied: op(10, 1)}); tc.State() != StateSecondary {
		t.Fatalf("member with data: %v", tc.State())
	}
	// Entries written before the first election have term -1: a null minValid is still no
	// constraint.
	if tc := newLifecycleTC(t, 0, &cfg, Options{LastApplied: op(10, -1)}); tc.State() != StateSecondary {
		t.Fatalf("member with term -1 data and no minValid: %v", tc.State())
	}
	one := NewDefaultConfig("rs0", "a")
	if tc := newLifecycleTC(t, 0, &one, Options{NeedsInitialSync: true}); tc.State() != StateSecondary || tc.NeedsInitialSync() {
		t.Fatalf("one-member set: %v needs=%v", tc.State(), tc.NeedsInitialSync())
	}
	pa := NewDefaultConfig("rs0", "a", "b")
	pa.Members[1].ArbiterOnly, pa.Members[1].Priority = true, 0
	if tc := newLifecycleTC(t, 0, &pa, Options{NeedsInitialSync: true}); tc.State() != StateSecondary {
		t.Fatalf("data member with only an arbiter: %v", tc.State())
	}
	// An arbiter never syncs.
	if tc := newLifecycleTC(t, 1, &pa, Options{NeedsInitialSync: true}); tc.State() != StateArbiter {
		t.Fatalf("arbiter: %v", tc.State())
	}
}

// The multi-member initiator is in STARTUP2 until the caller sees its own first entry and
// moves it on with SetFollowerMode(SECONDARY), which ends the need for initial sync.
func TestLeaveStartup2WithOwnData(t *testing.T) {
	now := time.Unix(100, 0)
	cfg := NewDefaultConfig("rs0", "a", "b")
	tc := newLifecycleTC(t, 0, &cfg, Options{NeedsInitialSync: true})
	tc.UpdateLastAppliedOpTime(now, op(10, 0))
	if tc.State() != StateStartup2 {
		t.Fatalf("an optime alone ends STARTUP2: %v", tc.State())
	}
	if err := tc.SetFollowerMode(now, StateSecondary); err != nil {
		t.Fatal(err)
	}
	if tc.State() != StateSecondary || tc.NeedsInitialSync() {
		t.Fatalf("state %v needs=%v", tc.State(), tc.NeedsInitialSync())
	}
}

// minValid at startup: a member whose data is behind it is RECOVERING (not readable, not
// electable) and becomes SECONDARY once lastApplied reaches it.
func TestMinValidAtStartup(t *testing.T) {
	now := time.Unix(100, 0)
	cfg := NewDefaultConfig("rs0", "a", "b", "c")
	tc := newLifecycleTC(t, 1, &cfg, Options{LastApplied: op(10, 1), LastDurable: op(10, 1), MinValid: op(20, 2)})
	if tc.State() != StateRecovering || tc.MinValid() != op(20, 2) {
		t.Fatalf("behind minValid: %v minValid %v", tc.State(), tc.MinValid())
	}
	if _, err := tc.StartElection(now, true, "test"); codeOf(err) != mongoerr.NotSecondary {
		t.Fatalf("election while RECOVERING: %v", err)
	}
	// An optime of a later term but an earlier timestamp is still behind (term first).
	tc.UpdateLastAppliedOpTime(now, op(15, 1))
	if tc.State() != StateRecovering {
		t.Fatalf("at {15 t1}: %v", tc.State())
	}
	// Asking for SECONDARY does not skip the wait.
	if err := tc.SetFollowerMode(now, StateSecondary); err != nil || tc.State() != StateRecovering {
		t.Fatalf("SetFollowerMode(SECONDARY) behind minValid: %v %v", tc.State(), err)
	}
	tc.UpdateLastAppliedOpTime(now, op(20, 2))
	if tc.State() != StateSecondary {
		t.Fatalf("at minValid: %v", tc.State())
	}
	// Data at or past minValid at startup: SECONDARY at once.
	if tc := newLifecycleTC(t, 1, &cfg, Options{LastApplied: op(30, 2), MinValid: op(20, 2)}); tc.State() != StateSecondary {
		t.Fatalf("past minValid: %v", tc.State())
	}
}

// After rollback the caller resets the optimes to the common point and records minValid =
// the sync source's top: the member is RECOVERING until it applied that far.
func TestMinValidAfterRollback(t *testing.T) {
	now := time.Unix(100, 0)
	cfg := NewDefaultConfig("rs0", "a", "b", "c")
	tc := newLifecycleTC(t, 1, &cfg, Options{LastApplied: op(30, 1), LastDurable: op(30, 1)})
	if err := tc.SetFollowerMode(now, StateRollback); err != nil {
		t.Fatal(err)
	}
	tc.ResetOpTimesAfterRollback(op(20, 1))
	tc.SetMinValid(op(40, 2))
	if tc.State() != StateRollback {
		t.Fatalf("SetMinValid changed ROLLBACK: %v", tc.State())
	}
	if err := tc.SetFollowerMode(now, StateSecondary); err != nil {
		t.Fatal(err)
	}
	if tc.State() != StateRecovering {
		t.Fatalf("after rollback, behind minValid: %v", tc.State())
	}
	tc.UpdateLastAppliedOpTime(now, op(35, 2))
	if tc.State() != StateRecovering {
		t.Fatalf("at {35 t2}: %v", tc.State())
	}
	tc.UpdateLastAppliedOpTime(now, op(41, 2))
	if tc.State() != StateSecondary {
		t.Fatalf("past minValid: %v", tc.State())
	}
	// SetMinValid on a SECONDARY that is behind moves it to RECOVERING.
	tc.SetMinValid(op(50, 2))
	if tc.State() != StateRecovering {
		t.Fatalf("SetMinValid ahead of a SECONDARY: %v", tc.State())
	}
}

// Maintenance mode (a RECOVERING the caller asked for) is not ended by reaching minValid;
// leaving it while still behind minValid keeps the member RECOVERING.
func TestMinValidAndMaintenance(t *testing.T) {
	now := time.Unix(100, 0)
	cfg := NewDefaultConfig("rs0", "a", "b", "c")
	tc := newLifecycleTC(t, 1, &cfg, Options{LastApplied: op(10, 1), MinValid: op(20, 1)})
	if err := tc.SetFollowerMode(now, StateRecovering); err != nil { // maintenance on
		t.Fatal(err)
	}
	tc.UpdateLastAppliedOpTime(now, op(25, 1))
	if tc.State() != StateRecovering {
		t.Fatalf("maintenance mode ended by minValid: %v", tc.State())
	}
	if err := tc.SetFollowerMode(now, StateSecondary); err != nil || tc.State() != StateSecondary { // maintenance off
		t.Fatalf("maintenance off past minValid: %v %v", tc.State(), err)
	}

	tc = newLifecycleTC(t, 1, &cfg, Options{LastApplied: op(10, 1), MinValid: op(20, 1)})
	_ = tc.SetFollowerMode(now, StateRecovering)
	_ = tc.SetFollowerMode(now, StateSecondary)
	if tc.State() != StateRecovering {
		t.Fatalf("maintenance off behind minValid: %v", tc.State())
	}
	tc.UpdateLastAppliedOpTime(now, op(20, 1))
	if tc.State() != StateSecondary {
		t.Fatalf("minValid reached after maintenance: %v", tc.State())
	}
}
