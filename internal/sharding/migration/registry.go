package migration

import (
	"context"
	"sync"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
)

// Registry is a shard's ActiveMigrationsRegistry (active_migrations_registry.cpp): at most
// one outgoing migration (donate) and, when none goes out, one incoming (receive); and per
// collection at most one split or merge, never beside an outgoing migration of the same
// collection (each waits for the other: both change the chunks the other works on).
type Registry struct {
	mu         sync.Mutex
	donate     *activeDonate
	receive    *activeReceive
	locked     bool            // the step-up recovery runs: no migration may start
	splitMerge map[string]bool // collections with a split or merge running
	changed    chan struct{}   // closed (and replaced) when donate or splitMerge changes
}

// waitLocked waits, with r.mu held, until ready holds, releasing the lock while it sleeps.
func (r *Registry) waitLocked(ctx context.Context, ready func() bool) error {
	for !ready() {
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
			r.mu.Lock()
		case <-ctx.Done():
			r.mu.Lock()
			return mongoerr.Newf(mongoerr.Interrupted, "waiting for a concurrent chunk operation: %v", context.Cause(ctx))
		}
	}
	return nil
}

// notifyLocked wakes the waiters of waitLocked; r.mu is held.
func (r *Registry) notifyLocked() {
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// RegisterSplitOrMerge registers a split or merge of ns's chunks
// (registerSplitOrMergeChunk): it waits while ns is migrating out or another split or merge
// of it runs; release unregisters it.
func (r *Registry) RegisterSplitOrMerge(ctx context.Context, ns string) (release func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.waitLocked(ctx, func() bool {
		return !(r.donate != nil && r.donate.req.NS == ns) && !r.splitMerge[ns]
	}); err != nil {
		return nil, err
	}
	if r.splitMerge == nil {
		r.splitMerge = map[string]bool{}
	}
	r.splitMerge[ns] = true
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.splitMerge, ns)
		r.notifyLocked()
	}, nil
}

var errLocked = mongoerr.New(mongoerr.ConflictingOperationInProgress,
	"Unable to start new balancer operation because the ActiveMigrationsRegistry of this shard is temporarily locked")

// Lock blocks new migrations while the step-up recovery runs (ActiveMigrationsRegistry::lock).
// It fails when one runs already: its own start resolves the unfinished coordinators.
func (r *Registry) Lock() (unlock func(), ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.donate != nil || r.receive != nil || r.locked {
		return nil, false
	}
	r.locked = true
	return func() {
		r.mu.Lock()
		r.locked = false
		r.mu.Unlock()
	}, true
}

type activeDonate struct {
	req  MoveRangeRequest
	id   catalog.UUID // the migration's id, set before done closes
	done chan struct{}
	err  error
}

type activeReceive struct {
	ns, from string
	rng      string
}

func (a *activeDonate) conflict() error {
	return mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
		"Unable to start new balancer operation because this shard is currently donating range '%s' for namespace %s to shard %s",
		a.req.rangeText(), a.req.NS, a.req.ToShard)
}

func (a *activeReceive) conflict() error {
	return mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
		"Unable to start new balancer operation because this shard is currently receiving chunk %s for namespace %s from %s",
		a.rng, a.ns, a.from)
}

// ScopedDonate is a registered donation: the caller that registered it runs it and calls
// Complete; one that joined it waits with Wait.
type ScopedDonate struct {
	r       *Registry
	a       *activeDonate
	execute bool
}

// ShouldExecute reports whether the holder runs the migration (false: it joined one).
func (s *ScopedDonate) ShouldExecute() bool { return s.execute }

// Complete records the outcome, unregisters the donation and wakes the joined callers.
func (s *ScopedDonate) Complete(err error) {
	if !s.execute {
		return
	}
	s.r.mu.Lock()
	if s.r.donate == s.a {
		s.r.donate = nil
		s.r.notifyLocked()
	}
	s.r.mu.Unlock()
	s.a.err = err
	close(s.a.done)
}

// Wait waits for the joined donation's outcome.
func (s *ScopedDonate) Wait(ctx context.Context) error {
	select {
	case <-s.a.done:
		return s.a.err
	case <-ctx.Done():
		return mongoerr.Newf(mongoerr.Interrupted, "waiting for the migration of %s: %v", s.a.req.NS, context.Cause(ctx))
	}
}

// RegisterDonate registers an outgoing migration: it waits for a split or merge of the
// collection to finish; then an identical running migration is joined, any other migration
// (in or out) is a ConflictingOperationInProgress.
func (r *Registry) RegisterDonate(ctx context.Context, req MoveRangeRequest) (*ScopedDonate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.waitLocked(ctx, func() bool { return !r.splitMerge[req.NS] }); err != nil {
		return nil, err
	}
	if r.receive != nil {
		return nil, r.receive.conflict()
	}
	if r.locked {
		return nil, errLocked
	}
	if r.donate != nil {
		if r.donate.req.Same(req) {
			return &ScopedDonate{r: r, a: r.donate}, nil
		}
		return nil, r.donate.conflict()
	}
	r.donate = &activeDonate{req: req, done: make(chan struct{})}
	return &ScopedDonate{r: r, a: r.donate, execute: true}, nil
}

// RegisterReceive registers an incoming migration of [min, max) (rangeText) of ns from
// shard from; release unregisters it.
func (r *Registry) RegisterReceive(ns, rangeText, from string) (release func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.receive != nil {
		return nil, r.receive.conflict()
	}
	if r.donate != nil {
		return nil, r.donate.conflict()
	}
	if r.locked {
		return nil, errLocked
	}
	a := &activeReceive{ns: ns, from: from, rng: rangeText}
	r.receive = a
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.receive == a {
			r.receive = nil
		}
	}, nil
}

// ActiveDonateNS returns the namespace of the running outgoing migration ("" when none).
func (r *Registry) ActiveDonateNS() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.donate != nil {
		return r.donate.req.NS
	}
	return ""
}
