// Package primaryonly runs primary-only services (spec: sharding.md "Cluster DDL
// operations", "Resiliency to elections, crashes and errors"; MongoDB's PrimaryOnlyService,
// docs/primary_only_service.md): long operations that must survive failover, such as DDL
// coordinators and the two-phase commit coordinator.
//
// A service owns a replicated collection of state documents, one per running operation
// (an instance). Each time the node becomes a writable primary in a new term the service
// rebuilds: it reads every state document and starts an instance per document, which
// resumes at the phase the document records. New requests wait while it rebuilds (so a
// request never races a resumed instance for the same id). When the node steps down, the
// service interrupts its instances (their context ends) and waits for them; the documents
// stay, for the next primary. An instance deletes its document when it is done.
//
// Phases (RunPhases) make an instance resumable: each phase is idempotent and is
// checkpointed in the state document, majority committed, before it runs; a resumed
// instance skips the phases before the checkpointed one and redoes that one.
//
// The service is independent of replication and storage: the node's state comes through
// Node, the documents through Config's functions (the shard's own commands, majority).
//
// FollowTerms (terms.go) is the step-up/step-down machinery under the service. The
// node-wide services whose state is not one instance per document follow the node's terms
// with it directly: the migration coordinators' recovery (config.migrationCoordinators,
// decided and finished at each step-up, as MongoDB's
// resumeMigrationCoordinationsOnStepUp, not a PrimaryOnlyService in MongoDB either), the
// range deleter (an executor per term over config.rangeDeletions, MongoDB's
// RangeDeleterService) and the transaction coordinators (internal/sharding/txncoord, which
// keep their own instance map so that a deterministic simulation can drive them without
// goroutines).
package primaryonly

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// Node is what a service needs of the replication coordinator: topology changes, the
// writable-primary state and the term.
type Node interface {
	TopologyVersion() (counter int64, changed <-chan struct{})
	IsWritablePrimary() bool
	Term() int64
}

// Instance is one operation of a service, built from its state document.
type Instance interface {
	// Run drives the operation from its persisted state to its end and deletes its state
	// document when done. ctx ends when the node steps down or the service stops: Run
	// then returns (its document stays for the next primary to resume).
	Run(ctx context.Context) error
	// CheckJoin decides whether a new request for the same id (as the state document it
	// would have written) may join this instance: nil, or the error to answer it with
	// (MongoDB: ConflictingOperationInProgress when the options differ).
	CheckJoin(doc bsoncore.Document) error
}

// Reacquirer is an Instance that holds node-local resources across a failover (MongoDB's
// DDL locks): a resumed instance reacquires them at the rebuild, before the service admits
// new requests, so that a new operation cannot overtake one that was already running.
type Reacquirer interface {
	Reacquire() error
}

// Config is a service's description.
type Config struct {
	// Name names the service in logs and errors (MongoDB's service names, e.g.
	// "ShardingDDLCoordinator").
	Name string
	Node Node
	// Load reads every state document (at step-up, with the rebuild's context).
	Load func(ctx context.Context) ([]bsoncore.Document, error)
	// Insert persists a new instance's state document, majority committed.
	Insert func(ctx context.Context, doc bsoncore.Document) error
	// ID is the instance id of a state document (its _id in a canonical form).
	ID func(doc bsoncore.Document) (string, error)
	// New builds the instance of a state document.
	New func(doc bsoncore.Document) (Instance, error)
	Log *slog.Logger
	// RetryDelay spaces rebuild attempts after a failed Load (default 1 s).
	RetryDelay time.Duration
}

type state int

const (
	stateIdle       state = iota // not a writable primary (or stopped)
	stateRebuilding              // primary: reading the state documents
	stateRunning                 // primary: instances running, new ones accepted
)

// Service runs a Config's instances on the writable primary.
type Service struct {
	cfg Config

	mu        sync.Mutex
	state     state
	term      int64
	termCtx   context.Context
	cancel    context.CancelFunc
	instances map[string]*entry
	wg        *sync.WaitGroup // the current term's instances
	changed   chan struct{}   // closed when state changes
	createMu  sync.Mutex      // serializes creations (persist, then start)

	stop context.CancelFunc
	done chan struct{}
}

type entry struct {
	id   string
	inst Instance
	done chan struct{}
	err  error
}

// Handle is a caller's view of an instance.
type Handle struct{ e *entry }

// Instance returns the instance (for service-specific state).
func (h *Handle) Instance() Instance { return h.e.inst }

// Wait waits until the instance's Run returns (or ctx ends) and returns Run's error; an
// instance interrupted by a step-down answers InterruptedDueToReplStateChange.
func (h *Handle) Wait(ctx context.Context) error {
	select {
	case <-h.e.done:
		return h.e.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Done is closed when the instance's Run has returned.
func (h *Handle) Done() <-chan struct{} { return h.e.done }

// Start starts cfg's service: it follows the node's state until Stop.
func Start(cfg Config) *Service {
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{cfg: cfg, changed: make(chan struct{}), instances: map[string]*entry{}, stop: cancel, done: make(chan struct{})}
	go s.watch(ctx)
	return s
}

// Stop interrupts every instance, waits for them and ends the service.
func (s *Service) Stop() {
	s.stop()
	<-s.done
}

// errStepDown is the error of instances interrupted by a step-down and of requests that
// waited for a rebuild that did not finish.
func (s *Service) errStepDown() error {
	return mongoerr.Newf(mongoerr.InterruptedDueToReplStateChange,
		"%s instance interrupted because the node is no longer primary", s.cfg.Name)
}

func (s *Service) errNotPrimary() error {
	return mongoerr.Newf(mongoerr.NotWritablePrimary, "%s: not primary", s.cfg.Name)
}

// watch follows the node: a new term as writable primary rebuilds, anything else
// interrupts.
func (s *Service) watch(ctx context.Context) {
	defer close(s.done)
	defer s.stepDown()
	FollowTerms(ctx, s.cfg.Node, s.cfg.RetryDelay, s.cfg.Log, s.cfg.Name, TermHooks{
		StepUp: func(ctx context.Context, term int64) error {
			if err := s.stepUp(ctx, term); err != nil {
				s.stepDown()
				return err
			}
			return nil
		},
		StepDown: s.stepDown,
	})
}

// setStateLocked changes the state and wakes the requests waiting on it.
func (s *Service) setStateLocked(st state) {
	s.state = st
	close(s.changed)
	s.changed = make(chan struct{})
}

// stepUp rebuilds the instances of term from their state documents.
func (s *Service) stepUp(ctx context.Context, term int64) error {
	s.mu.Lock()
	s.term = term
	s.termCtx, s.cancel = context.WithCancel(ctx)
	s.wg = &sync.WaitGroup{}
	tctx := s.termCtx
	s.setStateLocked(stateRebuilding)
	s.mu.Unlock()

	docs, err := s.cfg.Load(tctx)
	if err != nil {
		return fmt.Errorf("read the state documents: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if tctx.Err() != nil {
		return tctx.Err()
	}
	for _, doc := range docs {
		id, err := s.cfg.ID(doc)
		if err != nil {
			return err
		}
		inst, err := s.cfg.New(doc)
		if err != nil {
			return fmt.Errorf("resume %s instance %s: %w", s.cfg.Name, id, err)
		}
		if r, ok := inst.(Reacquirer); ok {
			if err := r.Reacquire(); err != nil {
				return fmt.Errorf("resume %s instance %s: %w", s.cfg.Name, id, err)
			}
		}
		s.startLocked(id, inst)
	}
	s.cfg.Log.Info("Rebuilt the primary-only service", "service", s.cfg.Name, "term", term, "instances", len(docs))
	s.setStateLocked(stateRunning)
	return nil
}

// stepDown interrupts the term's instances and waits for them to return.
func (s *Service) stepDown() {
	s.mu.Lock()
	if s.state == stateIdle && s.cancel == nil {
		s.mu.Unlock()
		return
	}
	cancel, wg := s.cancel, s.wg
	s.cancel, s.wg = nil, nil
	s.setStateLocked(stateIdle)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if wg != nil {
		wg.Wait()
	}
	s.mu.Lock()
	clear(s.instances)
	s.mu.Unlock()
}

// startLocked runs inst in the current term (s.mu held).
func (s *Service) startLocked(id string, inst Instance) *entry {
	e := &entry{id: id, inst: inst, done: make(chan struct{})}
	s.instances[id] = e
	ctx, wg := s.termCtx, s.wg
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := inst.Run(ctx)
		if err != nil && ctx.Err() != nil {
			err = s.errStepDown()
		}
		s.mu.Lock()
		if s.instances[id] == e {
			delete(s.instances, id)
		}
		e.err = err
		close(e.done)
		s.mu.Unlock()
	}()
	return e
}

// GetOrCreate returns the instance for doc's id: the running one when it accepts doc
// (Instance.CheckJoin), or a new one after doc is persisted. It waits while the service
// rebuilds after a step-up (or is about to); on a node that is not a writable primary it
// answers NotWritablePrimary.
func (s *Service) GetOrCreate(ctx context.Context, doc bsoncore.Document) (*Handle, error) {
	id, err := s.cfg.ID(doc)
	if err != nil {
		return nil, err
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	for {
		s.mu.Lock()
		switch {
		case s.state == stateIdle && !s.cfg.Node.IsWritablePrimary():
			s.mu.Unlock()
			return nil, s.errNotPrimary()
		case !s.runningLocked():
			// Rebuilding, or primary and about to rebuild (in a new term, perhaps: the node
			// was elected again and the old term's instances are about to be interrupted).
			ch := s.changed
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		if e, ok := s.instances[id]; ok {
			s.mu.Unlock()
			if err := e.inst.CheckJoin(doc); err != nil {
				return nil, err
			}
			return &Handle{e}, nil
		}
		term, tctx := s.term, s.termCtx
		s.mu.Unlock()

		// Persist first: an instance runs only with its document durable, so whatever it
		// does is resumed by the next primary.
		ictx, stop := context.WithCancel(ctx)
		unhook := context.AfterFunc(tctx, stop)
		err := s.cfg.Insert(ictx, doc)
		unhook()
		stop()
		request, adopted := doc, false
		if mongoerr.Is(err, mongoerr.DuplicateKey) && tctx.Err() == nil {
			// A document without an instance in a running term: an earlier request's insert
			// that was written but whose majority wait failed (the client gave up). Adopt it
			// as it is stored, or it would block its id until the next step-up.
			doc, err = s.stored(ctx, id)
			adopted = true
		}
		if err != nil {
			if tctx.Err() != nil {
				return nil, s.errStepDown()
			}
			return nil, err
		}
		inst, err := s.cfg.New(doc)
		if err != nil {
			return nil, err
		}
		if adopted {
			if err := inst.CheckJoin(request); err != nil {
				// The adopted instance runs regardless; this request conflicts with it.
				s.mu.Lock()
				if s.state == stateRunning && s.term == term {
					if _, ok := s.instances[id]; !ok {
						s.startLocked(id, inst)
					}
				}
				s.mu.Unlock()
				return nil, err
			}
		}
		s.mu.Lock()
		if s.state != stateRunning || s.term != term {
			// Stepped down (and maybe up again) while persisting: the document is there,
			// the new term's rebuild runs (or ran) it; join that one if it exists.
			e, ok := s.instances[id]
			s.mu.Unlock()
			if ok {
				return &Handle{e}, nil
			}
			return nil, s.errStepDown()
		}
		e := s.startLocked(id, inst)
		s.mu.Unlock()
		return &Handle{e}, nil
	}
}

// stored reads id's state document (NoSuchKey when it is gone).
func (s *Service) stored(ctx context.Context, id string) (bsoncore.Document, error) {
	docs, err := s.cfg.Load(ctx)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if did, err := s.cfg.ID(d); err == nil && did == id {
			return d, nil
		}
	}
	return nil, mongoerr.Newf(mongoerr.NoSuchKey, "%s: the state document of %s is gone", s.cfg.Name, id)
}

// runningLocked reports whether the service runs the node's current term (s.mu held).
func (s *Service) runningLocked() bool {
	return s.state == stateRunning && s.term == s.cfg.Node.Term()
}

// Lookup returns the running instance of id.
func (s *Service) Lookup(id string) (*Handle, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.instances[id]
	if !ok {
		return nil, false
	}
	return &Handle{e}, true
}

// Len is the number of running instances.
func (s *Service) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.instances)
}

// WaitRunning waits until the service accepts new instances (rebuilt after a step-up) or
// ctx ends; not primary: NotWritablePrimary.
func (s *Service) WaitRunning(ctx context.Context) error {
	for {
		s.mu.Lock()
		st, running, ch := s.state, s.runningLocked(), s.changed
		s.mu.Unlock()
		switch {
		case running:
			return nil
		case st == stateIdle && !s.cfg.Node.IsWritablePrimary():
			return s.errNotPrimary()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
