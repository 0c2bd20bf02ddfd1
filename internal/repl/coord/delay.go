package coord

// Delayed secondaries (member option secondaryDelaySecs; MongoDB's OplogBatcher
// secondaryDelayBoundary). A delayed member fetches and buffers the oplog as promptly as any
// other, but its applier only takes an entry once the entry's wall time is
// secondaryDelaySecs in the past (fetcher.Buffer.SetDelay), so its data, lastApplied and
// lastDurable lag the primary by about that much. Other rules of delayed members live
// elsewhere: priority 0 is required (topology Validate), others choose it as sync source
// only when no other member qualifies (topology ChooseSyncSource's first pass), and it still
// votes.
//
// Write concern: as in MongoDB, a delayed member counts toward w:N, tag modes and the
// majority commit point once it has applied (or made durable) an optime: a voting delayed
// member can thus hold w:"majority" writes back by up to its delay when other members are
// unavailable (MongoDB's documentation warns about exactly this).

import (
	"time"

	"humongo/internal/repl/topology"
)

// secondaryDelay is the applier's fetcher.DelaySource: this member's secondaryDelaySecs in
// the current config, and the channel closed at the next topology change (a reconfig that
// changes the delay is one).
func (c *Coordinator) secondaryDelay() (time.Duration, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return selfDelayLocked(c.topo), c.changed
}

func selfDelayLocked(t *topology.TopologyCoordinator) time.Duration {
	if t == nil {
		return 0
	}
	cfg := t.Config()
	if m := cfg.Member(t.SelfID()); m != nil && m.SecondaryDelaySecs > 0 {
		return time.Duration(m.SecondaryDelaySecs) * time.Second
	}
	return 0
}
