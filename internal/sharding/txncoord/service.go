package txncoord

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/primaryonly"
)

// Service is a shard node's TransactionCoordinatorService: the coordinators of its current
// term as primary. StepUp starts a term (resuming every persisted coordinator), StepDown
// ends it (interrupting them); Coordinate and Recover serve coordinateCommitTransaction.
type Service struct {
	Store Store
	Send  SendFunc
	Log   *slog.Logger
	// ReturnImmediately is coordinateCommitTransactionReturnImmediatelyAfterPersistingDecision
	// (nil: true): false makes Coordinate wait for the participants' acknowledgements too.
	ReturnImmediately func() bool

	Stats Stats

	exec  executor // nil: goroutines and timers
	knobs testingKnobs

	// node is the replication coordinator Watch follows (nil: StepUp and StepDown are
	// called directly, as in the simulations).
	node Node

	mu     sync.Mutex
	coords map[string]*Coordinator
	ctx    context.Context // the term's; nil while not primary
	cancel context.CancelFunc
	term   int64         // the node's term the running one is (with node)
	change chan struct{} // closed and replaced at every step-up and step-down
	wg     sync.WaitGroup
	closed bool
}

// NewService returns a stopped service.
func NewService(store Store, send SendFunc, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{Store: store, Send: send, Log: log, coords: map[string]*Coordinator{}, change: make(chan struct{})}
}

// StepUp starts a term: every stored coordinator resumes at its persisted step (MongoDB's
// TransactionCoordinatorService::onStepUp). It fails, leaving the service stopped, when the
// documents cannot be read; the caller retries.
func (s *Service) StepUp(ctx context.Context) error { return s.stepUp(ctx, 0) }

// stepUp starts the service's term for the node's term.
func (s *Service) stepUp(ctx context.Context, term int64) error {
	s.StepDown()
	docs, err := s.Store.List(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return mongoerr.New(mongoerr.ShutdownInProgress, "the server is shutting down")
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.term = term
	for _, d := range docs {
		c := newCoordinator(*d, true)
		s.coords[d.key()] = c
		s.Stats.Created.Add(1)
		s.start(c)
		s.Log.Info("Resuming a transaction coordinator", "txn", d.key(), "participants", d.Participants, "decided", d.Decision != nil)
	}
	s.noteChangeLocked()
	return nil
}

// start runs c in a goroutine of the term (s.mu held).
func (s *Service) start(c *Coordinator) {
	s.wg.Add(1)
	ctx := s.ctx
	s.executor().spawn(func() {
		defer s.wg.Done()
		s.run(ctx, c)
	})
}

// StepDown ends the term: its coordinators are interrupted (their waiters get
// InterruptedDueToReplStateChange) and forgotten; their documents stay for the next primary.
func (s *Service) StepDown() {
	s.interrupt()
	s.wg.Wait()
}

// interrupt ends the term without waiting for its coordinators to return.
func (s *Service) interrupt() {
	s.mu.Lock()
	cancel := s.cancel
	if cancel != nil {
		s.ctx, s.cancel = nil, nil
		s.noteChangeLocked()
	}
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Close stops the service for good.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.StepDown()
}

func (s *Service) forget(c *Coordinator) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.coords[c.doc.key()] == c {
		delete(s.coords, c.doc.key())
	}
}

// noteChangeLocked wakes the waiters of waitRunning (s.mu held).
func (s *Service) noteChangeLocked() {
	close(s.change)
	s.change = make(chan struct{})
}

// waitRunning waits (bounded by ctx) for the term of the node's current term to run: a
// coordinateCommitTransaction that arrives during the step-up's recovery waits for it, as
// MongoDB's joins the previous round. A term of the service that is not the node's (the
// node stepped down and was elected again, and the service has not followed yet) is not
// running: it lacks the coordinators the other primaries of the terms between persisted,
// and a recovering commit would take their prepared participant for an orphan.
func (s *Service) waitRunning(ctx context.Context, wait time.Duration) (context.Context, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		s.mu.Lock()
		change, tctx, term, closed := s.change, s.ctx, s.term, s.closed
		s.mu.Unlock()
		if closed {
			return nil, mongoerr.New(mongoerr.ShutdownInProgress, "the server is shutting down")
		}
		if tctx != nil && (s.node == nil || s.node.Term() == term) {
			return tctx, nil
		}
		select {
		case <-change:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, mongoerr.New(mongoerr.NotWritablePrimary, "Transaction coordinator service is not running on this node: it is not primary")
		}
	}
}

// Admit decides, when no coordinator of the transaction runs, whether to create one: a
// transaction this shard's participant already committed or aborted was coordinated before
// (the request is a retry): done reports that, with its outcome as err.
type Admit func(ctx context.Context) (done bool, err error)

// Coordinate is coordinateCommit: it joins the running coordinator of (lsid, txnNumber) or,
// when admit lets it (nil: always), creates one with participants, and waits for its
// decision (and, unless ReturnImmediately, for its end). A transaction coordinated before
// must not be coordinated again: its participants would refuse to prepare it and the new
// coordinator would decide abort for a committed transaction.
func (s *Service) Coordinate(ctx context.Context, lsid bsoncore.Document, txnNumber int64, participants []string, admit Admit) (Decision, error) {
	if _, err := s.waitRunning(ctx, 10*time.Second); err != nil {
		return Decision{}, err
	}
	c, done, err := s.join(ctx, lsid, txnNumber, participants, admit)
	if c == nil {
		return done, err
	}
	return s.await(ctx, c)
}

// join returns the running or new coordinator of (lsid, txnNumber), or (nil and the
// outcome) when admit found the transaction coordinated before.
func (s *Service) join(ctx context.Context, lsid bsoncore.Document, txnNumber int64, participants []string, admit Admit) (*Coordinator, Decision, error) {
	doc := Doc{Lsid: append(bsoncore.Document(nil), lsid...), TxnNumber: txnNumber, Participants: append([]string(nil), participants...)}
	s.mu.Lock()
	c := s.coords[doc.key()]
	s.mu.Unlock()
	if c != nil {
		return c, Decision{}, nil
	}
	if admit != nil {
		done, err := admit(ctx)
		if done {
			if err != nil {
				return nil, Decision{}, err
			}
			return nil, Decision{Commit: true}, nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return nil, Decision{}, mongoerr.New(mongoerr.NotWritablePrimary, "Transaction coordinator service is not running on this node: it is not primary")
	}
	c = s.coords[doc.key()]
	if c == nil {
		c = newCoordinator(doc, false)
		s.coords[doc.key()] = c
		s.Stats.Created.Add(1)
		s.start(c)
	}
	return c, Decision{}, nil
}

// Recover is recoverCommit: it joins the running coordinator of (lsid, txnNumber), if any
// (found false: none runs on this node).
func (s *Service) Recover(ctx context.Context, lsid bsoncore.Document, txnNumber int64) (d Decision, found bool, err error) {
	if _, err := s.waitRunning(ctx, 10*time.Second); err != nil {
		return Decision{}, false, err
	}
	c := s.lookup(lsid, txnNumber)
	if c == nil {
		return Decision{}, false, nil
	}
	d, err = s.await(ctx, c)
	return d, true, err
}

// lookup returns the running coordinator of (lsid, txnNumber), if any.
func (s *Service) lookup(lsid bsoncore.Document, txnNumber int64) *Coordinator {
	doc := Doc{Lsid: lsid, TxnNumber: txnNumber}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.coords[doc.key()]
}

func (s *Service) await(ctx context.Context, c *Coordinator) (Decision, error) {
	d, err := c.Decision(ctx)
	if err != nil {
		return Decision{}, err
	}
	if s.ReturnImmediately != nil && !s.ReturnImmediately() {
		if err := c.Done(ctx); err != nil {
			return Decision{}, err
		}
	}
	return d, nil
}

// Node is what Watch needs of the replication coordinator (coord.Coordinator's shape).
type Node = primaryonly.Node

// Watch steps the service up once per term in which node is a writable primary (retrying
// while the documents cannot be read) and down when it is not; stop ends it and the term.
func (s *Service) Watch(node Node) (stop func()) {
	s.node = node
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		primaryonly.FollowTerms(ctx, node, time.Second, s.Log, "TransactionCoordinatorService", primaryonly.TermHooks{
			StepUp:   s.stepUp,
			StepDown: s.StepDown,
		})
	}()
	return func() {
		cancel()
		<-done
		s.StepDown()
	}
}

// Stats are serverStatus.twoPhaseCommitCoordinator's counters.
type Stats struct {
	Created                  atomic.Int64
	StartedTwoPhaseCommit    atomic.Int64
	AbortedTwoPhaseCommit    atomic.Int64
	SuccessfulTwoPhaseCommit atomic.Int64
	inSteps                  [numSteps]atomic.Int64
}

const (
	stepWritingParticipantList = iota
	stepWaitingForVotes
	stepWritingDecision
	stepWaitingForDecisionAcks
	stepDeletingCoordinatorDoc
	numSteps
)

var stepNames = [numSteps]string{"writingParticipantList", "waitingForVotes", "writingDecision", "waitingForDecisionAcks", "deletingCoordinatorDoc"}

func (st *Stats) step(i int, d int64) { st.inSteps[i].Add(d) }

// AppendServerStatus appends the twoPhaseCommitCoordinator section (MongoDB's
// ServerTransactionCoordinatorsMetrics names).
func (s *Service) AppendServerStatus(b []byte) []byte {
	steps := bsoncore.NewDocumentBuilder()
	for i, n := range stepNames {
		steps.AppendInt64(n, s.Stats.inSteps[i].Load())
	}
	return bsoncore.AppendDocumentElement(b, "twoPhaseCommitCoordinator", bsoncore.NewDocumentBuilder().
		AppendInt64("totalCreated", s.Stats.Created.Load()).
		AppendInt64("totalStartedTwoPhaseCommit", s.Stats.StartedTwoPhaseCommit.Load()).
		AppendInt64("totalAbortedTwoPhaseCommit", s.Stats.AbortedTwoPhaseCommit.Load()).
		AppendInt64("totalCommittedTwoPhaseCommit", s.Stats.SuccessfulTwoPhaseCommit.Load()).
		AppendDocument("currentInSteps", steps.Build()).Build())
}
