package migration

import (
	"context"
	"sync"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
)

// Registry is a shard's ActiveMigrationsRegistry (active_migrations_registry.cpp): at most
// one outgoing migration (donate) and, when none goes out, one incoming (receive).
type Registry struct {
	mu      sync.Mutex
	donate  *activeDonate
	receive *activeReceive
	locked  bool // the step-up recovery runs: no migration may start
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

// RegisterDonate registers an outgoing migration: an identical running one is joined, any
// other migration (in or out) is a ConflictingOperationInProgress.
func (r *Registry) RegisterDonate(req MoveRangeRequest) (*ScopedDonate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
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
