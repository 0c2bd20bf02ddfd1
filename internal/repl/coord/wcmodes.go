package coord

// Custom write concern modes (w: "<mode>" from settings.getLastErrorModes) in
// WaitForWriteConcern: which members hold an optime is the coordinator's knowledge (its own
// optimes and the members' reported ones); whether they satisfy the mode's tag constraints is
// the topology core's pure WriteConcernMode.SatisfiedBy.

import (
	"time"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/topology"
)

// customMode reports whether wc names a custom mode (not w:N, not "majority").
func (wc WriteConcern) customMode() bool { return wc.Mode != "" && !wc.Majority }

// checkSatisfiableLocked is MongoDB's checkIfWriteConcernCanBeSatisfied, run before waiting:
// an unknown mode is UnknownReplWriteConcern, a mode that even every member together cannot
// satisfy, or a w:N above the number of members, is UnsatisfiableWriteConcern.
func (c *Coordinator) checkSatisfiableLocked(wc WriteConcern) error {
	if c.topo == nil {
		return nil
	}
	cfg := c.topo.Config()
	if wc.customMode() {
		mode, err := findMode(&cfg, wc.Mode)
		if err != nil {
			return err
		}
		if !cfg.Satisfiable(mode) {
			return mongoerr.Newf(mongoerr.UnsatisfiableWriteConcern, "Not enough nodes match write concern mode \"%s\"", wc.Mode)
		}
		return nil
	}
	if !wc.Majority && wc.W > len(cfg.Members) {
		return mongoerr.New(mongoerr.UnsatisfiableWriteConcern, "Not enough data-bearing nodes")
	}
	return nil
}

func findMode(cfg *topology.ReplSetConfig, name string) (topology.WriteConcernMode, error) {
	mode, ok := cfg.WriteConcernMode(name)
	if !ok {
		return mode, mongoerr.Newf(mongoerr.UnknownReplWriteConcern,
			"No write concern mode named '%s' found in replica set configuration", name)
	}
	return mode, nil
}

// modeSatisfiedLocked: the members that have applied op (made it durable, with j) satisfy
// the custom mode of wc in the current config. A reconfig while waiting may remove the mode:
// the wait then ends with UnknownReplWriteConcern.
func (c *Coordinator) modeSatisfiedLocked(now time.Time, op optime.OpTime, wc WriteConcern) (bool, error) {
	cfg := c.topo.Config()
	mode, err := findMode(&cfg, wc.Mode)
	if err != nil {
		return false, err
	}
	var holding []*topology.MemberConfig
	for _, m := range c.holdingLocked(now, op, wc.J) {
		if mc := cfg.Member(m); mc != nil {
			holding = append(holding, mc)
		}
	}
	return mode.SatisfiedBy(holding), nil
}

// holdingLocked returns the ids of the members (this one included) that are up and have
// applied op, or made it durable when durable is set. A delayed member holds op only once
// its applier released it (secondaryDelaySecs after op's wall time); like MongoDB, it still
// counts toward w:N, tag modes and the commit point once it does.
func (c *Coordinator) holdingLocked(now time.Time, op optime.OpTime, durable bool) []int {
	var ids []int
	for _, m := range c.topo.Status(now).Members {
		have := m.Applied
		if durable {
			have = m.Durable
		}
		if (m.Self || m.Up) && !have.Less(op) {
			ids = append(ids, m.ID)
		}
	}
	return ids
}
