package primaryonly

import (
	"context"
	"log/slog"
	"time"
)

// TermHooks are what a node-wide service does as its node's terms as primary come and go
// (MongoDB's ReplicaSetAwareService onStepUpComplete and onStepDown).
type TermHooks struct {
	// StepUp starts a term: the node is a writable primary in term. An error (but ctx's end)
	// is retried after the retry delay while the node stays primary.
	StepUp func(ctx context.Context, term int64) error
	// StepDown ends the term StepUp started (nil: nothing to end).
	StepDown func()
}

// FollowTerms runs h as node's state changes until ctx ends: StepUp once per term in which
// node is a writable primary (a new term without a step-down in between ends the old one
// first), StepDown when it stops being one and, for a running term, when ctx ends. Service
// rebuilds with it; the migration coordinators' recovery, the range deleter and the
// transaction coordinators follow the node's terms with it too.
func FollowTerms(ctx context.Context, node Node, retryDelay time.Duration, log *slog.Logger, name string, h TermHooks) {
	active := int64(-1) // the term StepUp started, -1 when none
	stepDown := func() {
		if active != -1 && h.StepDown != nil {
			h.StepDown()
		}
		active = -1
	}
	defer stepDown()
	for {
		_, changed := node.TopologyVersion()
		var retry <-chan time.Time
		primary, term := node.IsWritablePrimary(), node.Term()
		switch {
		case primary && term != active:
			stepDown()
			if err := h.StepUp(ctx, term); err != nil {
				if ctx.Err() != nil {
					return
				}
				log.Warn("Failed to start a primary term; retrying", "service", name, "term", term, "error", err.Error())
				retry = time.After(retryDelay)
			} else {
				active = term
			}
		case !primary && active != -1:
			stepDown()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-retry:
		}
	}
}
