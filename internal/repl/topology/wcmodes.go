package topology

// Custom write concern modes (settings.getLastErrorModes; MongoDB's ReplSetTagConfig,
// ReplSetTagPattern and ReplSetTagMatch). A mode {multiDC: {dc: 2}} is satisfied by an
// optime once the members holding it carry at least 2 DISTINCT values of tag "dc": two
// members tagged {dc: "east"} count once. The functions here are pure: the coordinator
// decides which members hold an optime (applied, or durable with j) and asks.

import "humongo/internal/mongoerr"

// TagConstraint is one {tagKey: minCount} of a mode.
type TagConstraint struct {
	Key string
	// MinCount is the number of distinct values of Key the holding members must carry (> 0,
	// checked when the config is parsed).
	MinCount int
}

// WriteConcernMode is one entry of settings.getLastErrorModes, in the order the config
// document lists them (kept so replSetGetConfig shows what was given).
type WriteConcernMode struct {
	Name        string
	Constraints []TagConstraint
}

// WriteConcernMode returns the custom mode called name.
func (c *ReplSetConfig) WriteConcernMode(name string) (WriteConcernMode, bool) {
	for _, m := range c.Settings.GetLastErrorModes {
		if m.Name == name {
			return m, true
		}
	}
	return WriteConcernMode{}, false
}

// CheckWriteConcernModeTags fails with NoSuchKey when a mode names a tag key that no member
// carries (MongoDB's ReplSetTagConfig::addTagCountConstraintToPattern, which runs when the
// config is parsed). A mode asking for more distinct values than exist is NOT an error here:
// MongoDB 7.0 accepts such a config and fails each write using the mode with
// UnsatisfiableWriteConcern (see Satisfiable).
func (c *ReplSetConfig) CheckWriteConcernModeTags() error {
	keys := map[string]bool{}
	for i := range c.Members {
		for k := range c.Members[i].Tags {
			keys[k] = true
		}
	}
	for _, m := range c.Settings.GetLastErrorModes {
		for _, tc := range m.Constraints {
			if !keys[tc.Key] {
				return mongoerr.Newf(mongoerr.NoSuchKey, "No replica set tag key %s in config", tc.Key)
			}
		}
	}
	return nil
}

// SatisfiedBy reports whether the members in holding (the members that hold an optime)
// satisfy mode: for every constraint, their tags carry at least MinCount distinct values of
// the constraint's key.
//
// As in MongoDB's matcher, which is only consulted as tags are fed to it, at least one
// holding member must carry some tag: a mode without constraints is satisfied by the first
// tagged member, never by untagged ones.
func (mode WriteConcernMode) SatisfiedBy(holding []*MemberConfig) bool {
	tagged := false
	for _, m := range holding {
		if len(m.Tags) > 0 {
			tagged = true
			break
		}
	}
	if !tagged {
		return false
	}
	for _, tc := range mode.Constraints {
		values := map[string]struct{}{}
		for _, m := range holding {
			if v, ok := m.Tags[tc.Key]; ok {
				values[v] = struct{}{}
			}
		}
		if len(values) < tc.MinCount {
			return false
		}
	}
	return true
}

// Satisfiable reports whether mode could ever be satisfied in c: whether every member
// together satisfies it (MongoDB's checkIfWriteConcernCanBeSatisfied).
func (c *ReplSetConfig) Satisfiable(mode WriteConcernMode) bool {
	all := make([]*MemberConfig, len(c.Members))
	for i := range c.Members {
		all[i] = &c.Members[i]
	}
	return mode.SatisfiedBy(all)
}
