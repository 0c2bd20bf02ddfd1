package topology

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

func codeOf(err error) mongoerr.Code {
	var me *mongoerr.Error
	if errors.As(err, &me) {
		return me.Code
	}
	return 0
}

func TestConfigValidate(t *testing.T) {
	base := func() ReplSetConfig { return NewDefaultConfig("rs0", "a:1", "b:1", "c:1") }
	cases := []struct {
		name   string
		mutate func(*ReplSetConfig)
		ok     bool
	}{
		{"default", func(*ReplSetConfig) {}, true},
		{"no set name", func(c *ReplSetConfig) { c.SetName = "" }, false},
		{"duplicate id", func(c *ReplSetConfig) { c.Members[1].ID = 0 }, false},
		{"duplicate host", func(c *ReplSetConfig) { c.Members[1].Host = "a:1" }, false},
		{"votes 2", func(c *ReplSetConfig) { c.Members[1].Votes = 2 }, false},
		{"non-voter with priority", func(c *ReplSetConfig) { c.Members[1].Votes = 0 }, false},
		{"non-voter priority 0", func(c *ReplSetConfig) { c.Members[1].Votes, c.Members[1].Priority = 0, 0 }, true},
		{"arbiter with priority", func(c *ReplSetConfig) { c.Members[2].ArbiterOnly = true }, false},
		{"arbiter", func(c *ReplSetConfig) { c.Members[2].ArbiterOnly, c.Members[2].Priority = true, 0 }, true},
		{"hidden with priority", func(c *ReplSetConfig) { c.Members[2].Hidden = true }, false},
		{"delayed with priority", func(c *ReplSetConfig) { c.Members[2].SecondaryDelaySecs = 3600 }, false},
		{"nobody electable", func(c *ReplSetConfig) {
			for i := range c.Members {
				c.Members[i].Priority = 0
			}
		}, false},
		{"8 voters", func(c *ReplSetConfig) {
			*c = NewDefaultConfig("rs0", "1:1", "2:1", "3:1", "4:1", "5:1", "6:1", "7:1", "8:1")
		}, false},
	}
	for _, c := range cases {
		cfg := base()
		c.mutate(&cfg)
		err := cfg.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && codeOf(err) != mongoerr.InvalidReplicaSetConfig {
			t.Errorf("%s: code %v, want InvalidReplicaSetConfig", c.name, codeOf(err))
		}
	}
}

func TestMajorities(t *testing.T) {
	c := NewDefaultConfig("rs0", "a", "b", "c")
	c.Members[2].ArbiterOnly, c.Members[2].Priority = true, 0
	if c.MajorityVoteCount() != 2 || c.WriteMajority() != 2 {
		t.Fatalf("PSA majorities %d/%d", c.MajorityVoteCount(), c.WriteMajority())
	}
	c = NewDefaultConfig("rs0", "a", "b", "c", "d", "e")
	c.Members[3].ArbiterOnly, c.Members[3].Priority = true, 0
	c.Members[4].ArbiterOnly, c.Members[4].Priority = true, 0
	if c.MajorityVoteCount() != 3 || c.WriteMajority() != 3 {
		t.Fatalf("PSSAA majorities %d/%d", c.MajorityVoteCount(), c.WriteMajority())
	}
}

func newTC(t *testing.T, self int, cfg ReplSetConfig) *TopologyCoordinator {
	t.Helper()
	tc, err := New(Options{SelfID: self, Config: &cfg, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func TestHeartbeatRequestErrors(t *testing.T) {
	now := time.Unix(100, 0)
	tc := newTC(t, 0, NewDefaultConfig("rs0", "a", "b", "c"))
	resp, _ := tc.ProcessHeartbeatRequest(now, HeartbeatRequest{SetName: "other", ConfigVersion: 1, SenderID: 1})
	if codeOf(resp.Err) != mongoerr.InconsistentReplicaSetNames {
		t.Fatalf("set name mismatch: %v", resp.Err)
	}
	resp, _ = tc.ProcessHeartbeatRequest(now, HeartbeatRequest{SetName: "rs0", ConfigVersion: 1, SenderID: 9})
	if codeOf(resp.Err) != mongoerr.NodeNotFound {
		t.Fatalf("unknown sender: %v", resp.Err)
	}
	// An older sender gets our config attached; a higher term is adopted
	// and must be persisted.
	resp, acts := tc.ProcessHeartbeatRequest(now, HeartbeatRequest{SetName: "rs0", ConfigVersion: 0, SenderID: 1, Term: 4})
	if resp.Err != nil || resp.Config == nil || resp.Term != 4 {
		t.Fatalf("resp %+v", resp)
	}
	if len(acts) == 0 || acts[0].Kind != ActPersistDurable || acts[0].Durable.Term != 4 {
		t.Fatalf("actions %v", acts)
	}
	tc2, _ := New(Options{SelfID: 0, Rand: rand.New(rand.NewPCG(1, 2))})
	if resp, _ := tc2.ProcessHeartbeatRequest(now, HeartbeatRequest{SetName: "rs0"}); codeOf(resp.Err) != mongoerr.NotYetInitialized {
		t.Fatalf("uninitialised: %v", resp.Err)
	}
}

func TestUpdatePositionErrorsAndCurrentTermRule(t *testing.T) {
	now := time.Unix(100, 0)
	tc := newTC(t, 0, NewDefaultConfig("rs0", "a", "b", "c"))
	tc.applied = optime.OpTime{TS: optime.MakeTimestamp(10, 0), Term: 1}
	tc.durable = tc.applied
	tc.term = 2
	acts, err := tc.StartElection(now, false, "test")
	if err != nil || len(acts) < 2 {
		t.Fatalf("StartElection: %v %v", acts, err)
	}
	tc.ProcessVoteResponse(now, VoteResponse{VoterID: 1, Term: 3, VoteGranted: true})
	if tc.State() != StatePrimary {
		t.Fatalf("state %v", tc.State())
	}
	// A majority holds an entry of term 1: the current-term rule forbids
	// committing it.
	old := optime.OpTime{TS: optime.MakeTimestamp(10, 0), Term: 1}
	if _, err := tc.ProcessUpdatePosition(now, UpdatePosition{SenderID: 1, Term: 3, Positions: []MemberPosition{{MemberID: 1, ConfigVersion: 1, Applied: old, Durable: old}}}); err != nil {
		t.Fatal(err)
	}
	if !tc.LastCommitted().IsNull() {
		t.Fatalf("committed a previous-term optime: %v", tc.LastCommitted())
	}
	if _, err := tc.ProcessUpdatePosition(now, UpdatePosition{SenderID: 1, Term: 3, Positions: []MemberPosition{{MemberID: 1, ConfigVersion: 9}}}); codeOf(err) != mongoerr.InvalidReplicaSetConfig {
		t.Fatalf("config mismatch: %v", err)
	}
	if _, err := tc.ProcessUpdatePosition(now, UpdatePosition{SenderID: 1, Term: 3, Positions: []MemberPosition{{MemberID: 7, ConfigVersion: 1}}}); codeOf(err) != mongoerr.NodeNotFound {
		t.Fatalf("unknown member: %v", err)
	}
	// Once a current-term entry is durable on a majority, it and everything
	// before it is committed.
	tc.CompleteDrain(now)
	noop := optime.OpTime{TS: optime.MakeTimestamp(11, 0), Term: 3}
	tc.UpdateLastAppliedOpTime(now, noop)
	tc.UpdateLastDurableOpTime(now, noop)
	acts, _ = tc.ProcessUpdatePosition(now, UpdatePosition{SenderID: 1, Term: 3, Positions: []MemberPosition{{MemberID: 1, ConfigVersion: 1, Applied: noop, Durable: noop}}})
	if tc.LastCommitted() != noop || len(acts) != 1 || acts[0].Kind != ActCommitPointAdvanced {
		t.Fatalf("commit point %v, actions %v", tc.LastCommitted(), acts)
	}
	// Higher term in replSetUpdatePosition metadata: step down.
	acts, _ = tc.ProcessUpdatePosition(now, UpdatePosition{SenderID: 2, Term: 5})
	if tc.State() != StateSecondary || len(acts) != 2 || acts[1].Kind != ActStepDown {
		t.Fatalf("after higher term: %v %v", tc.State(), acts)
	}
	if _, _, err := tc.StepDown(now, StepDownOpts{}); codeOf(err) != mongoerr.NotWritablePrimary {
		t.Fatalf("step down as secondary: %v", err)
	}
}

func TestInstallConfig(t *testing.T) {
	now := time.Unix(100, 0)
	cfg := NewDefaultConfig("rs0", "a", "b", "c")
	tc := newTC(t, 2, cfg)
	if _, err := tc.InstallConfig(now, cfg); codeOf(err) != mongoerr.NewReplicaSetConfigurationIncompatible {
		t.Fatalf("same version: %v", err)
	}
	next := NewDefaultConfig("rs0", "a", "b")
	next.Version = 2
	if _, err := tc.InstallConfig(now, next); err != nil {
		t.Fatal(err)
	}
	if tc.State() != StateRemoved {
		t.Fatalf("state %v, want REMOVED", tc.State())
	}
	other := NewDefaultConfig("rs1", "a", "b", "c")
	other.Version = 3
	if _, err := tc.InstallConfig(now, other); codeOf(err) != mongoerr.InconsistentReplicaSetNames {
		t.Fatalf("set name change: %v", err)
	}
}

// A voter added by reconfig gets a full election timeout to start answering before the
// primary's liveness check counts it as unreachable: adding the second member of a one-node
// set must not step the primary down at once.
func TestReconfigAddedVoterGetsElectionTimeout(t *testing.T) {
	now := time.Unix(100, 0)
	tc := newTC(t, 0, NewDefaultConfig("rs0", "a"))
	if _, err := tc.StartElection(now, false, "test"); err != nil {
		t.Fatal(err)
	}
	if tc.State() != StatePrimary {
		t.Fatalf("state %v, want PRIMARY", tc.State())
	}
	next := NewDefaultConfig("rs0", "a", "b")
	next.Version = 2
	if _, err := tc.InstallConfig(now, next); err != nil {
		t.Fatal(err)
	}
	if acts := tc.CheckLiveness(now.Add(time.Second)); len(acts) != 0 || tc.State() != StatePrimary {
		t.Fatalf("stepped down right after adding a voter: %v", acts)
	}
	// Never heard from within the election timeout: now it counts as down.
	later := now.Add(next.electionTimeout() + time.Second)
	if acts := tc.CheckLiveness(later); len(acts) == 0 || tc.State() == StatePrimary {
		t.Fatalf("still primary with the only other voter silent for an election timeout: %v", acts)
	}
}
