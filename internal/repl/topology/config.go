package topology

import (
	"time"

	"humongo/internal/mongoerr"
)

// Defaults from the spec (checklist "Constants").
const (
	DefaultElectionTimeout    = 10 * time.Second
	DefaultHeartbeatInterval  = 2 * time.Second
	DefaultHeartbeatTimeout   = 10 * time.Second
	DefaultCatchUpTakeover    = 30 * time.Second
	MaxSyncSourceLag          = 30 * time.Second
	MaxMembers                = 50
	MaxVotingMembers          = 7
	DefaultBlacklistDuration  = 10 * time.Second
	priorityTakeoverFreshness = 2 * time.Second
	// electionOffsetFraction bounds the random election-timeout offset
	// (MongoDB's electionTimeoutOffsetLimitFraction), which desynchronises
	// candidates so split votes are rare.
	electionOffsetFraction = 0.15
	// maxHeartbeatRetries is how many failed heartbeats in a row are retried
	// at once before the member is marked down (MongoDB's kMaxHeartbeatRetries).
	maxHeartbeatRetries = 2
)

// MemberConfig is one entry of ReplSetConfig.members.
type MemberConfig struct {
	ID                 int
	Host               string
	Priority           float64
	Votes              int
	Hidden             bool
	ArbiterOnly        bool
	SecondaryDelaySecs int
	Tags               map[string]string
}

// electable reports whether the member may ever stand for election.
func (m *MemberConfig) electable() bool {
	return m.Priority > 0 && !m.ArbiterOnly && m.Votes > 0
}

// Settings is ReplSetConfig.settings. Zero durations mean "default".
type Settings struct {
	ElectionTimeout   time.Duration // electionTimeoutMillis, default 10 s
	HeartbeatInterval time.Duration // heartbeatIntervalMillis, default 2 s
	HeartbeatTimeout  time.Duration // heartbeatTimeoutSecs, default 10 s
	// ChainingAllowed lets secondaries sync from other secondaries. The zero
	// value of the Go struct is false; NewDefaultConfig sets it true, as
	// MongoDB does.
	ChainingAllowed bool
	// CatchUpTimeout bounds primary catch-up; negative means infinite
	// (MongoDB's default -1), zero means no catch-up.
	CatchUpTimeout time.Duration
	// CatchUpTakeoverDelay is catchUpTakeoverDelayMillis (default 30 s);
	// negative disables catch-up takeover.
	CatchUpTakeoverDelay time.Duration
	// WriteConcernMajorityJournalDefault: the commit point follows durable
	// optimes when true (default), applied optimes when false.
	WriteConcernMajorityJournalDefault bool
	// GetLastErrorModes are the custom write concern modes (w: "<name>"),
	// evaluated by WriteConcernMode.SatisfiedBy (wcmodes.go).
	GetLastErrorModes []WriteConcernMode
}

// ReplSetConfig is the replica-set configuration (local.system.replset).
type ReplSetConfig struct {
	SetName  string
	Version  int64
	Term     int64
	Members  []MemberConfig
	Settings Settings
	// ConfigSvr is the config's `configsvr: true`: the set is a sharded cluster's config
	// server replica set (its members run with --configsvr).
	ConfigSvr bool
}

// NewDefaultConfig returns a config of n members with ids 0..n-1, priority 1,
// one vote each and MongoDB's default settings.
func NewDefaultConfig(setName string, hosts ...string) ReplSetConfig {
	c := ReplSetConfig{SetName: setName, Version: 1, Settings: Settings{
		ChainingAllowed:                    true,
		CatchUpTimeout:                     -1,
		WriteConcernMajorityJournalDefault: true,
	}}
	for i, h := range hosts {
		c.Members = append(c.Members, MemberConfig{ID: i, Host: h, Priority: 1, Votes: 1})
	}
	return c
}

func (c *ReplSetConfig) electionTimeout() time.Duration {
	if c.Settings.ElectionTimeout > 0 {
		return c.Settings.ElectionTimeout
	}
	return DefaultElectionTimeout
}

func (c *ReplSetConfig) heartbeatInterval() time.Duration {
	if c.Settings.HeartbeatInterval > 0 {
		return c.Settings.HeartbeatInterval
	}
	return DefaultHeartbeatInterval
}

func (c *ReplSetConfig) heartbeatTimeout() time.Duration {
	if c.Settings.HeartbeatTimeout > 0 {
		return c.Settings.HeartbeatTimeout
	}
	return DefaultHeartbeatTimeout
}

func (c *ReplSetConfig) catchUpTakeoverDelay() time.Duration {
	if c.Settings.CatchUpTakeoverDelay != 0 {
		return c.Settings.CatchUpTakeoverDelay
	}
	return DefaultCatchUpTakeover
}

// ElectionTimeout is the configured election timeout.
func (c *ReplSetConfig) ElectionTimeout() time.Duration { return c.electionTimeout() }

// HeartbeatInterval is the configured heartbeat interval.
func (c *ReplSetConfig) HeartbeatInterval() time.Duration { return c.heartbeatInterval() }

// KeepAliveInterval is how often replSetUpdatePosition is re-sent without
// progress: electionTimeout / 2.
func (c *ReplSetConfig) KeepAliveInterval() time.Duration { return c.electionTimeout() / 2 }

// Member returns the member with the given id.
func (c *ReplSetConfig) Member(id int) *MemberConfig {
	for i := range c.Members {
		if c.Members[i].ID == id {
			return &c.Members[i]
		}
	}
	return nil
}

// TotalVotes is the number of voting members.
func (c *ReplSetConfig) TotalVotes() int {
	n := 0
	for i := range c.Members {
		if c.Members[i].Votes > 0 {
			n++
		}
	}
	return n
}

// MajorityVoteCount is the number of votes needed to win an election.
func (c *ReplSetConfig) MajorityVoteCount() int { return c.TotalVotes()/2 + 1 }

// WriteMajority is the number of data-bearing voters that must hold an
// optime for it to be majority committed: the vote majority, capped by the
// number of data-bearing voters (arbiters hold no data).
func (c *ReplSetConfig) WriteMajority() int {
	data := 0
	for i := range c.Members {
		if c.Members[i].Votes > 0 && !c.Members[i].ArbiterOnly {
			data++
		}
	}
	return min(c.MajorityVoteCount(), data)
}

// priorityRank counts members with strictly higher priority than p; the
// priority-takeover delay is electionTimeout * (rank + 1).
func (c *ReplSetConfig) priorityRank(p float64) int {
	r := 0
	for i := range c.Members {
		if c.Members[i].Priority > p {
			r++
		}
	}
	return r
}

// Validate checks the config the way replSetInitiate/replSetReconfig do.
func (c *ReplSetConfig) Validate() error {
	if c.SetName == "" {
		return mongoerr.New(mongoerr.InvalidReplicaSetConfig, "replica set configuration must have a non-empty _id")
	}
	if len(c.Members) == 0 || len(c.Members) > MaxMembers {
		return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "replica set configuration must have between 1 and %d members", MaxMembers)
	}
	ids := map[int]bool{}
	hosts := map[string]bool{}
	voters, electable := 0, 0
	for i := range c.Members {
		m := &c.Members[i]
		if ids[m.ID] {
			return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "Found two member configurations with same _id field, members.%d._id == %d", i, m.ID)
		}
		ids[m.ID] = true
		if hosts[m.Host] {
			return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "Found two member configurations with same host field, members.%d.host == %s", i, m.Host)
		}
		hosts[m.Host] = true
		if m.Votes != 0 && m.Votes != 1 {
			return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "members.%d.votes must be 0 or 1", i)
		}
		if m.Priority < 0 || m.Priority > 1000 {
			return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "members.%d.priority must be between 0 and 1000", i)
		}
		if m.Votes == 0 && m.Priority != 0 {
			return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "priority must be 0 when non-voting (votes:0); members.%d", i)
		}
		if m.ArbiterOnly && m.Priority != 0 {
			return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "priority must be 0 for arbiters; members.%d", i)
		}
		if m.Hidden && m.Priority != 0 {
			return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "priority must be 0 when hidden=true; members.%d", i)
		}
		if m.SecondaryDelaySecs > 0 && m.Priority != 0 {
			return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "priority must be 0 when secondaryDelaySecs is used; members.%d", i)
		}
		if m.Votes > 0 {
			voters++
		}
		if m.electable() {
			electable++
		}
	}
	if voters > MaxVotingMembers {
		return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "Replica set configuration contains %d voting members, but must be at least 1 and no more than %d", voters, MaxVotingMembers)
	}
	if voters == 0 || electable == 0 {
		return mongoerr.New(mongoerr.InvalidReplicaSetConfig, "Replica set configuration must contain at least one voting, electable member")
	}
	return nil
}
