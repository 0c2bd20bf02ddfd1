package txncoord

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/failpoint"
	"humongo/internal/mongoerr"
)

// Fail points between the protocol's durable steps (MongoDB's names): a test kills the
// coordinator's primary there.
var (
	hangBeforeWritingParticipantList = failpoint.Register("hangBeforeWritingParticipantList")
	hangBeforeWritingDecision        = failpoint.Register("hangBeforeWritingDecision")
	hangBeforeDeletingCoordinatorDoc = failpoint.Register("hangBeforeDeletingCoordinatorDoc")
)

// SendFunc runs cmd against the admin database of shard's primary (an error for ok: 0, a
// *mongoerr.Error with the remote code when the shard answered).
type SendFunc func(ctx context.Context, shard string, cmd bsoncore.Document) (bsoncore.Document, error)

// Coordinator is one transaction's commit coordination.
type Coordinator struct {
	doc Doc
	// persisted: the participant list is durable (a resumed coordinator).
	persisted bool

	decided chan struct{} // closed once the decision is durable (or the coordinator stopped)
	done    chan struct{} // closed once the coordinator finished or stopped
	mu      sync.Mutex
	dec     *Decision
	err     error // why the coordinator stopped without a decision
}

func newCoordinator(doc Doc, persisted bool) *Coordinator {
	return &Coordinator{doc: doc, persisted: persisted, decided: make(chan struct{}), done: make(chan struct{})}
}

// Decision waits for the durable decision (or the coordinator's stop, or ctx).
func (c *Coordinator) Decision(ctx context.Context) (Decision, error) {
	select {
	case <-c.decided:
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dec == nil {
		return Decision{}, c.err
	}
	return *c.dec, nil
}

// Done waits until the coordinator finished (its document deleted) or stopped.
func (c *Coordinator) Done(ctx context.Context) error {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.dec != nil && c.err == nil {
			return nil
		}
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Coordinator) setDecision(d Decision) {
	c.mu.Lock()
	c.dec = &d
	c.mu.Unlock()
	close(c.decided)
}

// stop ends the coordinator with err when it stopped early (nil: it finished).
func (c *Coordinator) stop(err error) {
	c.mu.Lock()
	if err != nil {
		c.err = err
	}
	undecided := c.dec == nil
	c.mu.Unlock()
	if undecided {
		close(c.decided)
	}
	close(c.done)
}

// steppingDown is the error a coordinator interrupted by the term's end gives its waiters:
// the client (router) retries coordinateCommitTransaction on the new primary.
func steppingDown(cause error) error {
	e := mongoerr.Newf(mongoerr.InterruptedDueToReplStateChange, "Transaction coordinator stopped because the node is stepping down: %v", cause)
	e.Err = cause
	return e
}

// retryable reports whether a send's error is worth another try at the shard's (maybe new)
// primary: network errors and the retriable categories. The driver reports a connection
// closed by a killed primary as a CommandError of code 0 with the NetworkError label;
// ddl.RemoteError now passes it on as it is, but one wrapped in a mongoerr (code 0: no shard
// answered) is a network error too: taken as a vote to abort, it failed commits that a
// retry would have made (Location0 in the sharded list-append test).
func retryable(err error) bool {
	me, ok := mongoerr.As(err)
	if !ok || me.Code == mongoerr.OK || mongo.IsNetworkError(err) {
		return true // network, server selection: the driver found no answer
	}
	return mongoerr.IsRetriableError(me.Code) || mongoerr.IsNotPrimaryError(me.Code)
}

// executor is how a Service runs concurrent work and waits between retries. Production
// uses goroutines and timers (goExec); the simulation (sim_test.go) runs the same protocol
// code one call at a time, in an order its seeded random source picks, with virtual time.
type executor interface {
	// spawn runs a coordinator (Service.run) in the background.
	spawn(f func())
	// fanOut runs f(0) ... f(n-1), the per-participant sends, and returns when all returned.
	fanOut(n int, f func(i int))
	// backoff waits before try n+1 (ctx ends it early: false).
	backoff(ctx context.Context, n int) bool
}

// goExec is the production executor.
type goExec struct{}

func (goExec) spawn(f func()) { go f() }

func (goExec) fanOut(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

func (goExec) backoff(ctx context.Context, n int) bool {
	d := time.Duration(min(n+1, 10)) * 50 * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// testingKnobs break the protocol on purpose, for the simulation to prove its checker
// catches each break (all false in production).
type testingKnobs struct {
	noParticipantList bool // votes are collected before the participant list is durable (it never is)
	smallestTimestamp bool // commit at the smallest prepareTimestamp, not the largest
	sendBeforePersist bool // the decision goes to the participants before it is durable
	revoteOnResume    bool // a resumed coordinator ignores its durable decision and collects votes again
}

func (s *Service) executor() executor {
	if s.exec == nil {
		return goExec{}
	}
	return s.exec
}

// txnFields are the session fields every message to a participant carries.
func (c *Coordinator) command(name string, extra func(b *bsoncore.DocumentBuilder)) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder().AppendInt32(name, 1)
	if extra != nil {
		extra(b)
	}
	return b.AppendDocument("lsid", c.doc.Lsid).AppendInt64("txnNumber", c.doc.TxnNumber).AppendBoolean("autocommit", false).
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
}

// vote is one participant's answer to prepareTransaction.
type vote struct {
	shard   string
	prepare bson.Timestamp
	abort   *mongoerr.Error
}

// collectVotes sends prepareTransaction to every participant and decides: commit at the
// largest prepareTimestamp when all voted to commit, else abort with the first refusal (the
// others' sends are then cancelled).
func (s *Service) collectVotes(ctx context.Context, c *Coordinator) (Decision, error) {
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	d := Decision{Commit: true}
	first := true
	s.executor().fanOut(len(c.doc.Participants), func(i int) {
		v := s.prepareOne(vctx, c, c.doc.Participants[i])
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ctx.Err() != nil || !d.Commit:
		case v.abort != nil:
			d = Decision{AbortStatus: v.abort}
			cancel()
		case first || v.prepare.After(d.CommitTimestamp) != s.knobs.smallestTimestamp:
			d.CommitTimestamp = v.prepare
		}
		first = false
	})
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	return d, nil
}

func (s *Service) prepareOne(ctx context.Context, c *Coordinator, shard string) vote {
	cmd := c.command("prepareTransaction", nil)
	for n := 0; ; n++ {
		reply, err := s.Send(ctx, shard, cmd)
		if err == nil {
			t, i, ok := reply.Lookup("prepareTimestamp").TimestampOK()
			if !ok {
				return vote{shard: shard, abort: mongoerr.Newf(mongoerr.InternalError, "from shard %s :: prepareTransaction reply without a prepareTimestamp", shard)}
			}
			return vote{shard: shard, prepare: bson.Timestamp{T: t, I: i}}
		}
		if ctx.Err() != nil {
			return vote{shard: shard, abort: mongoerr.New(mongoerr.TransactionCoordinatorReachedAbortDecision, "another participant voted to abort")}
		}
		if retryable(err) {
			s.Log.Debug("Retrying prepareTransaction", "shard", shard, "error", err.Error())
			s.executor().backoff(ctx, n) // a cancelled ctx ends the loop above
			continue
		}
		code := mongoerr.CodeOf(err)
		msg := err.Error()
		if me, ok := mongoerr.As(err); ok {
			msg = me.Msg
		}
		return vote{shard: shard, abort: mongoerr.Newf(code, "from shard %s :: caused by :: %s", shard, msg)}
	}
}

// sendDecision delivers the decision to every participant, each until it acknowledges
// (retrying every error but those that acknowledge it, decisionAcknowledged).
func (s *Service) sendDecision(ctx context.Context, c *Coordinator, d Decision) error {
	var cmd bsoncore.Document
	if d.Commit {
		cmd = c.command("commitTransaction", func(b *bsoncore.DocumentBuilder) {
			b.AppendTimestamp("commitTimestamp", d.CommitTimestamp.T, d.CommitTimestamp.I)
		})
	} else {
		cmd = c.command("abortTransaction", nil)
	}
	s.executor().fanOut(len(c.doc.Participants), func(i int) {
		p := c.doc.Participants[i]
		for n := 0; ; n++ {
			_, err := s.Send(ctx, p, cmd)
			if err == nil || decisionAcknowledged(err, d.Commit) {
				return
			}
			if ctx.Err() != nil {
				return
			}
			s.Log.Warn("Retrying the transaction decision", "shard", p, "commit", d.Commit, "error", err.Error())
			if !s.executor().backoff(ctx, n) {
				return
			}
		}
	})
	return ctx.Err()
}

// decisionAcknowledged reports whether a participant's error to the decision still means
// it no longer holds the transaction prepared, so the decision needs no more delivery
// (MongoDB's sendDecisionToShard takes every VoteAbortError as an ack). NoSuchTransaction or
// TransactionTooOld (the session moved on to a newer transaction) answer a commit as well as
// an abort: a prepared transaction ends only by the decision, and a participant moves on only
// once it has ended, so it applied the decision already, e.g. from the coordinator's previous
// primary, killed after sending the commit and before deleting its document. A shard the
// cluster does not know acknowledges an abort only (it could not have prepared).
func decisionAcknowledged(err error, commit bool) bool {
	switch mongoerr.CodeOf(err) {
	case mongoerr.NoSuchTransaction, mongoerr.TransactionTooOld, mongoerr.ReadConcernMajorityNotEnabled,
		mongoerr.OperationNotSupportedInTransaction:
		return true
	case mongoerr.ShardNotFound:
		return !commit
	}
	return false
}

// retryStore runs a Store write until it succeeds or ctx ends (a write fails while the node
// is not primary; the step-down then cancels ctx).
func (s *Service) retryStore(ctx context.Context, what string, f func() error) error {
	for n := 0; ; n++ {
		err := f()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if mongoerr.Is(err, mongoerr.DuplicateKey) || mongoerr.Is(err, mongoerr.NoSuchTransaction) {
			return err
		}
		s.Log.Warn("Retrying a transaction coordinator write", "step", what, "error", err.Error())
		if !s.executor().backoff(ctx, n) {
			return ctx.Err()
		}
	}
}

// run drives c from its persisted step to the end (c.stop on every return).
func (s *Service) run(ctx context.Context, c *Coordinator) {
	err := s.drive(ctx, c)
	if err != nil && ctx.Err() != nil {
		err = steppingDown(err)
	}
	if err != nil {
		s.Log.Info("Transaction coordinator stopped", "txn", c.doc.key(), "error", err.Error())
	}
	s.forget(c)
	c.stop(err)
}

func (s *Service) drive(ctx context.Context, c *Coordinator) error {
	d := c.doc.Decision
	if s.knobs.revoteOnResume {
		d = nil
	}
	if d == nil {
		if !c.persisted && !s.knobs.noParticipantList {
			s.Stats.step(stepWritingParticipantList, 1)
			_ = hangBeforeWritingParticipantList.PauseWhileSet(ctx)
			err := s.retryStore(ctx, "writingParticipantList", func() error { return s.Store.WriteParticipants(ctx, &c.doc) })
			s.Stats.step(stepWritingParticipantList, -1)
			if err != nil {
				return err
			}
		}
		s.Stats.StartedTwoPhaseCommit.Add(1)
		s.Stats.step(stepWaitingForVotes, 1)
		dec, err := s.collectVotes(ctx, c)
		s.Stats.step(stepWaitingForVotes, -1)
		if err != nil {
			return err
		}
		if s.knobs.sendBeforePersist {
			if err := s.sendDecision(ctx, c, dec); err != nil {
				return err
			}
		}
		s.Stats.step(stepWritingDecision, 1)
		_ = hangBeforeWritingDecision.PauseWhileSet(ctx)
		if ctx.Err() != nil {
			s.Stats.step(stepWritingDecision, -1)
			return ctx.Err()
		}
		c.doc.Decision = &dec
		err = s.retryStore(ctx, "writingDecision", func() error { return s.Store.WriteDecision(ctx, &c.doc) })
		s.Stats.step(stepWritingDecision, -1)
		if err != nil {
			c.doc.Decision = nil
			return err
		}
		d = &dec
	}
	c.setDecision(*d)
	s.Stats.step(stepWaitingForDecisionAcks, 1)
	err := s.sendDecision(ctx, c, *d)
	s.Stats.step(stepWaitingForDecisionAcks, -1)
	if err != nil {
		return err
	}
	s.Stats.step(stepDeletingCoordinatorDoc, 1)
	defer s.Stats.step(stepDeletingCoordinatorDoc, -1)
	_ = hangBeforeDeletingCoordinatorDoc.PauseWhileSet(ctx)
	if err := s.retryStore(ctx, "deletingCoordinatorDoc", func() error { return s.Store.Delete(ctx, &c.doc) }); err != nil {
		return err
	}
	if d.Commit {
		s.Stats.SuccessfulTwoPhaseCommit.Add(1)
	} else {
		s.Stats.AbortedTwoPhaseCommit.Add(1)
	}
	return nil
}
