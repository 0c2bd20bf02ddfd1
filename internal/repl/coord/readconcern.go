package coord

import (
	"context"

	"humongo/internal/optime"
)

// Read-concern support (spec/replication.md "Read Concern"): the committed snapshot and the
// wait of afterClusterTime / atClusterTime reads.

// MajorityCommitted is the commit point (lastCommittedOpTime); null before the first one.
func (c *Coordinator) MajorityCommitted() optime.OpTime {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return optime.OpTime{}
	}
	return c.topo.LastCommitted()
}

// WaitUntilTimestamp waits until this node's lastApplied (with majority: its commit point)
// reaches ts, or ctx ends (maxTimeMS). It wakes on every optime or commit-point change the
// coordinator signals and re-checks at least once per tick, because a primary's lastApplied
// follows its newest visible oplog entry, which the coordinator samples on its tick.
func (c *Coordinator) WaitUntilTimestamp(ctx context.Context, ts optime.Timestamp, majority bool) error {
	t := c.clock.NewTicker(c.opts.TickInterval)
	defer t.Stop()
	for {
		c.mu.Lock()
		if c.topo == nil {
			c.mu.Unlock()
			return notInitialized()
		}
		c.refreshAppliedLocked(c.clock.Now())
		have := c.topo.LastApplied()
		if majority {
			have = optime.Min(c.topo.LastCommitted(), have)
		}
		if have.TS.Compare(ts) >= 0 {
			c.mu.Unlock()
			return nil
		}
		ch := c.progress
		c.mu.Unlock()
		select {
		case <-ch:
		case <-t.C():
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
