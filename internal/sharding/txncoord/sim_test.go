package txncoord

// A deterministic simulation of the two-phase commit coordinator (ARCHITECTURE.md testing
// tier 3; spec: sharding.md "Two-phase Commit Protocol"; checklist section 10). Shards,
// their transaction participants and their config.transaction_coordinators are modelled in
// memory and driven by one seeded random source, one event at a time (the event count is
// the virtual clock). The coordinators are the real code: each shard runs a real Service
// (StepUp resumes the stored coordinators, Coordinate's join creates or joins one) whose
// executor runs a coordinator's drive synchronously, its per-participant sends in a random
// order and its backoffs in virtual time; Send and Store are the simulated network and
// storage. The router picks the first participant as the coordinator, as mongos does.
//
// Faults, at every Send and Store call (before and after its effect) and between events:
// the crash of any shard (its unprepared transactions are lost, its prepared and decided
// ones and its coordinator documents are durable; its coordinators are interrupted and the
// next step-up resumes them), lost requests and lost replies, participants that vote abort
// (a write conflict, a transaction lost in a crash), routers that abort a transaction before
// committing it, retry coordinateCommitTransaction, and other routers that recover the
// outcome with the recoveryToken.
//
// Invariants, checked after every event:
//   - a transaction committed anywhere is prepared or committed on every participant, and
//     every commit is at the same commitTimestamp, the largest prepareTimestamp;
//   - a participant commits only once the commit decision is durable on the coordinator;
//   - the routers' answers (commit or abort) are the transaction's outcome;
//
// and at the end, once every shard is up and every coordinator ran to completion: no
// coordinator document is left, no participant is left prepared, and every transaction is
// committed everywhere or nowhere.
//
// The testing knobs (testingKnobs) break the protocol to show the checker catches each part.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/simtest"
)

const (
	simShards  = 4
	simEvents  = 250
	simMaxTxns = 12
	// simMaxSteps bounds one seed's sends, writes and backoffs: a protocol that never
	// finishes (a participant refusing a decision forever) is a violation, not a hang.
	simMaxSteps = 20000
)

type simPState int

const (
	pNone       simPState = iota // never started, or lost in a crash before it prepared
	pInProgress                  // volatile
	pPrepared                    // durable, at prepareTS
	pCommitted                   // durable, at commitTS
	pAborted
)

var simPStateNames = [...]string{"none", "inProgress", "prepared", "committed", "aborted"}

type simPTxn struct {
	state               simPState
	prepareTS, commitTS bson.Timestamp
}

type simNode struct {
	name string
	up   bool
	// Durable: the participant's prepared and finished transactions, the coordinator documents.
	txns map[int64]*simPTxn
	docs map[int64]Doc
	svc  *Service
	// queue holds the coordinators the service spawned and the simulation has not run yet.
	queue []func()
}

type simTxn struct {
	num   int64
	parts []string
	// requested: the router sent coordinateCommitTransaction; aborted by the router instead.
	requested, routerAborted bool
	coord                    *Coordinator // the coordinator the router waits for
	answered                 bool
	commit                   bool // the router's answer, once answered
}

type simStats struct {
	txns, committed, aborted, crashes, resumed, interrupted, lost, answers, recovered int
	// crashAt counts the crashes of a coordinator's node while it was in each step.
	crashAt [numSteps]int
}

type simWorld struct {
	t     testing.TB
	rng   *rand.Rand
	knobs testingKnobs
	nodes map[string]*simNode
	names []string
	txns  []*simTxn
	lsid  bsoncore.Document
	ctx   context.Context
	clock uint32 // virtual time: every step ticks it; prepareTimestamps come from it
	steps int
	calm  bool // no more faults (the end of a run)
	err   error
	trace []string
	stats simStats
}

var errNet = errors.New("sim: network error")

func newTxnSim(t testing.TB, seed uint64, knobs testingKnobs) *simWorld {
	w := &simWorld{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), knobs: knobs, nodes: map[string]*simNode{},
		ctx: context.Background()}
	w.lsid = bsoncore.NewDocumentBuilder().AppendBinary("id", 4, make([]byte, 16)).Build()
	for i := range simShards {
		n := &simNode{name: fmt.Sprintf("s%d", i), up: true, txns: map[int64]*simPTxn{}, docs: map[int64]Doc{}}
		n.svc = NewService(simStore{w, n}, w.sender(n), slog.New(slog.DiscardHandler))
		n.svc.exec = simExec{w, n}
		n.svc.knobs = knobs
		w.nodes[n.name] = n
		w.names = append(w.names, n.name)
		if err := n.svc.StepUp(w.ctx); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *simWorld) logf(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("t=%d ", w.clock)+fmt.Sprintf(format, args...))
	if len(w.trace) > 40 {
		w.trace = w.trace[1:]
	}
}

func (w *simWorld) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format, args...)
		w.logf("VIOLATION: %v", w.err)
	}
}

func (n *simNode) running() bool {
	n.svc.mu.Lock()
	defer n.svc.mu.Unlock()
	return n.svc.ctx != nil
}

func (n *simNode) txn(num int64) *simPTxn {
	p := n.txns[num]
	if p == nil {
		p = &simPTxn{}
		n.txns[num] = p
	}
	return p
}

// crash takes n down: its in-progress transactions are lost, its coordinators interrupted
// (the simulation waits for them at the top level, see settle).
func (w *simWorld) crash(n *simNode) {
	if !n.up {
		return
	}
	w.stats.crashes++
	w.logf("crash %s", n.name)
	n.up = false
	for _, p := range n.txns {
		if p.state == pInProgress {
			p.state = pNone
		}
	}
	if n.running() {
		w.stats.interrupted += coordCount(n.svc)
	}
	for i := range numSteps {
		if n.svc.Stats.inSteps[i].Load() > 0 {
			w.stats.crashAt[i]++
		}
	}
	n.svc.interrupt()
}

// step is one tick of virtual time: between two of the protocol's calls anything else may
// happen (faults, other routers). It returns false once the run must stop.
func (w *simWorld) step() bool {
	w.clock++
	w.steps++
	if w.steps > simMaxSteps {
		w.fail("no progress after %d steps (a coordinator retries forever)", simMaxSteps)
	}
	w.check()
	if w.err != nil {
		return false
	}
	if w.calm {
		return true
	}
	switch x := w.rng.IntN(100); {
	case x < 3:
		w.crash(w.nodes[w.names[w.rng.IntN(len(w.names))]])
	case x < 9:
		w.restartOne()
	case x < 12:
		w.routerCommit()
	case x < 13:
		w.routerRecover()
	}
	return true
}

// restartOne brings a down shard back (its step-up comes at the top level).
func (w *simWorld) restartOne() {
	for _, i := range w.rng.Perm(len(w.names)) {
		if n := w.nodes[w.names[i]]; !n.up {
			n.up = true
			w.logf("restart %s", n.name)
			return
		}
	}
}

// coordCount is the number of coordinators a service holds in memory.
func coordCount(s *Service) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.coords)
}

// simExec runs a node's coordinators one at a time, in the simulation's order.
type simExec struct {
	w *simWorld
	n *simNode
}

func (e simExec) spawn(f func()) { e.n.queue = append(e.n.queue, f) }

func (e simExec) fanOut(n int, f func(i int)) {
	for _, i := range e.w.rng.Perm(n) {
		f(i)
	}
}

func (e simExec) backoff(ctx context.Context, _ int) bool {
	if ctx.Err() != nil {
		return false
	}
	if !e.w.step() {
		e.w.crash(e.n)
	}
	return ctx.Err() == nil
}

// enter is the fault point before a node's call: false (with the error to return) when
// the call does not happen.
func (w *simWorld) enter(ctx context.Context, n *simNode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !w.step() {
		w.crash(n)
	}
	if !w.calm && w.rng.IntN(100) < 3 {
		w.crash(n)
	}
	return ctx.Err()
}

// leave is the fault point after a call's effect: the caller may crash before it sees the
// reply.
func (w *simWorld) leave(ctx context.Context, n *simNode) error {
	if !w.calm && w.rng.IntN(100) < 3 {
		w.crash(n)
	}
	return ctx.Err()
}

func (w *simWorld) sender(from *simNode) SendFunc {
	return func(ctx context.Context, shard string, cmd bsoncore.Document) (bsoncore.Document, error) {
		if err := w.enter(ctx, from); err != nil {
			return nil, err
		}
		to := w.nodes[shard]
		name := cmd.Index(0).Key()
		num, _ := cmd.Lookup("txnNumber").AsInt64OK()
		if !to.up {
			w.logf("%s -> %s %s(%d): shard down", from.name, shard, name, num)
			return nil, errNet
		}
		if !w.calm && w.rng.IntN(100) < 5 {
			w.stats.lost++
			w.logf("%s -> %s %s(%d): request lost", from.name, shard, name, num)
			return nil, errNet
		}
		reply, err := w.participant(to, name, num, cmd)
		w.logf("%s -> %s %s(%d): %v", from.name, shard, name, num, err)
		if err := w.leave(ctx, from); err != nil {
			return nil, err
		}
		if !w.calm && w.rng.IntN(100) < 5 {
			w.stats.lost++
			w.logf("%s -> %s reply lost", from.name, shard)
			return nil, errNet
		}
		return reply, err
	}
}

// participant is shard n's transaction participant answering the coordinator.
func (w *simWorld) participant(n *simNode, name string, num int64, cmd bsoncore.Document) (bsoncore.Document, error) {
	p := n.txn(num)
	ok := bsoncore.NewDocumentBuilder().AppendInt32("ok", 1)
	committed := mongoerr.Newf(mongoerr.TransactionCommitted, "Transaction %d has been committed.", num)
	noSuch := mongoerr.Newf(mongoerr.NoSuchTransaction, "Transaction with txnNumber %d has been aborted.", num)
	switch name {
	case "prepareTransaction":
		switch p.state {
		case pInProgress:
			if !w.calm && w.rng.IntN(100) < 8 {
				p.state = pAborted
				return nil, mongoerr.NewWriteConflict()
			}
			w.clock++
			p.state, p.prepareTS = pPrepared, bson.Timestamp{T: w.clock, I: 1}
			fallthrough
		case pPrepared:
			return ok.AppendTimestamp("prepareTimestamp", p.prepareTS.T, p.prepareTS.I).Build(), nil
		case pCommitted:
			return nil, committed
		}
		return nil, noSuch
	case "commitTransaction":
		t, i, _ := cmd.Lookup("commitTimestamp").TimestampOK()
		ts := bson.Timestamp{T: t, I: i}
		switch p.state {
		case pPrepared:
			coord := w.nodes[w.txns[num-1].parts[0]]
			if d, ok := coord.docs[num]; !ok || d.Decision == nil || !d.Decision.Commit || d.Decision.CommitTimestamp != ts {
				w.fail("txn %d: %s commits at %v without that commit decision durable on its coordinator %s", num, n.name, ts, coord.name)
			}
			p.state, p.commitTS = pCommitted, ts
			return ok.Build(), nil
		case pCommitted:
			if p.commitTS != ts {
				w.fail("txn %d: %s committed at %v, asked again at %v", num, n.name, p.commitTS, ts)
			}
			return ok.Build(), nil
		case pInProgress:
			return nil, mongoerr.New(mongoerr.InvalidOptions, "commitTransaction with a commitTimestamp on a transaction that is not prepared")
		}
		return nil, noSuch
	case "abortTransaction":
		switch p.state {
		case pInProgress, pPrepared:
			p.state = pAborted
			return ok.Build(), nil
		case pCommitted:
			return nil, committed
		}
		return nil, noSuch
	}
	return nil, mongoerr.Newf(mongoerr.CommandNotFound, "no such command: '%s'", name)
}

// simStore is a node's config.transaction_coordinators, durable across its crashes.
type simStore struct {
	w *simWorld
	n *simNode
}

func (s simStore) WriteParticipants(ctx context.Context, d *Doc) error {
	if err := s.w.enter(ctx, s.n); err != nil {
		return err
	}
	if old, ok := s.n.docs[d.TxnNumber]; ok && old.Decision != nil {
		return mongoerr.New(mongoerr.DuplicateKey, "E11000 duplicate key error collection: config.transaction_coordinators")
	}
	c := *d
	c.Decision = nil
	s.n.docs[d.TxnNumber] = c
	s.w.logf("%s persists the participants of txn %d", s.n.name, d.TxnNumber)
	return s.w.leave(ctx, s.n)
}

func (s simStore) WriteDecision(ctx context.Context, d *Doc) error {
	if err := s.w.enter(ctx, s.n); err != nil {
		return err
	}
	if _, ok := s.n.docs[d.TxnNumber]; !ok {
		return mongoerr.New(mongoerr.NoSuchTransaction, "the coordinator document is gone")
	}
	dec := *d.Decision
	c := *d
	c.Decision = &dec
	s.n.docs[d.TxnNumber] = c
	s.w.logf("%s persists the decision of txn %d: commit %v at %v", s.n.name, d.TxnNumber, dec.Commit, dec.CommitTimestamp)
	return s.w.leave(ctx, s.n)
}

func (s simStore) Delete(ctx context.Context, d *Doc) error {
	if err := s.w.enter(ctx, s.n); err != nil {
		return err
	}
	delete(s.n.docs, d.TxnNumber)
	s.w.logf("%s deletes the coordinator document of txn %d", s.n.name, d.TxnNumber)
	return s.w.leave(ctx, s.n)
}

func (s simStore) List(context.Context) ([]*Doc, error) {
	nums := make([]int64, 0, len(s.n.docs))
	for num := range s.n.docs {
		nums = append(nums, num)
	}
	slices.Sort(nums)
	var out []*Doc
	for _, num := range nums {
		d := s.n.docs[num]
		if d.Decision != nil {
			dec := *d.Decision
			d.Decision = &dec
		}
		out = append(out, &d)
	}
	return out, nil
}

// begin starts a transaction on 2–4 shards that are up (a statement to a down shard fails
// and the router aborts; no such transaction starts here).
func (w *simWorld) begin() {
	if len(w.txns) >= simMaxTxns {
		return
	}
	var up []string
	for _, i := range w.rng.Perm(len(w.names)) {
		if w.nodes[w.names[i]].up {
			up = append(up, w.names[i])
		}
	}
	if len(up) < 2 {
		return
	}
	k := 2 + w.rng.IntN(min(len(up), 4)-1)
	tx := &simTxn{num: int64(len(w.txns) + 1), parts: up[:k]}
	w.txns = append(w.txns, tx)
	for _, s := range tx.parts {
		w.nodes[s].txn(tx.num).state = pInProgress
	}
	w.stats.txns++
	w.logf("begin txn %d on %v", tx.num, tx.parts)
}

// routerCommit is a router sending (or resending) coordinateCommitTransaction for a
// transaction it has no answer for, or reading the answer of the coordinator it waits for.
func (w *simWorld) routerCommit() {
	var open []*simTxn
	for _, tx := range w.txns {
		if !tx.answered && !tx.routerAborted {
			open = append(open, tx)
		}
	}
	if len(open) == 0 {
		return
	}
	tx := open[w.rng.IntN(len(open))]
	if c := tx.coord; c != nil {
		select {
		case <-c.decided:
		default:
			return // still deciding
		}
		d, err := c.Decision(w.ctx)
		tx.coord = nil
		if err != nil {
			w.logf("router: txn %d's coordinator stopped: %v", tx.num, err)
			return // it retries
		}
		w.answer(tx, d.Commit)
		return
	}
	n := w.nodes[tx.parts[0]]
	if !n.up || !n.running() {
		return // NotWritablePrimary or no answer: it retries
	}
	tx.requested = true
	admit := func(context.Context) (bool, error) {
		switch n.txn(tx.num).state {
		case pCommitted:
			return true, nil
		case pAborted, pNone:
			return true, mongoerr.New(mongoerr.NoSuchTransaction, "Transaction was aborted")
		}
		return false, nil
	}
	c, d, err := n.svc.join(w.ctx, w.lsid, tx.num, tx.parts, admit)
	switch {
	case c != nil:
		tx.coord = c
		w.logf("router: coordinateCommitTransaction(%d) on %s", tx.num, n.name)
	case err != nil && mongoerr.Is(err, mongoerr.NoSuchTransaction):
		w.answer(tx, false)
	case err == nil:
		w.answer(tx, d.Commit)
	}
}

func (w *simWorld) answer(tx *simTxn, commit bool) {
	w.logf("router: txn %d answered commit=%v", tx.num, commit)
	if tx.answered && tx.commit != commit {
		w.fail("txn %d answered commit=%v, then commit=%v", tx.num, tx.commit, commit)
	}
	tx.answered, tx.commit = true, commit
	w.stats.answers++
	w.checkTxn(tx)
}

// routerRecover is another router retrying the commit with the transaction's recoveryToken
// (coordinateCommitTransaction without participants on the coordinator's shard): it joins
// the running coordinator (Service.Recover), or else the shard's own participant decides,
// as recoverDecisionFromLocalParticipantOrAbortLocalParticipant does: committed is commit,
// in progress is aborted now, prepared without a coordinator is an error (retried).
func (w *simWorld) routerRecover() {
	var open []*simTxn
	for _, tx := range w.txns {
		if tx.requested && !tx.answered {
			open = append(open, tx)
		}
	}
	if len(open) == 0 {
		return
	}
	tx := open[w.rng.IntN(len(open))]
	n := w.nodes[tx.parts[0]]
	if !n.up || !n.running() {
		return
	}
	if c := n.svc.lookup(w.lsid, tx.num); c != nil {
		if tx.coord == nil {
			tx.coord = c
		}
		w.logf("router: recover txn %d joins its coordinator on %s", tx.num, n.name)
		return
	}
	w.stats.recovered++
	switch p := n.txn(tx.num); p.state {
	case pCommitted:
		w.answer(tx, true)
	case pPrepared:
		w.logf("router: recover txn %d: prepared on %s without a coordinator", tx.num, n.name)
	default:
		if p.state == pInProgress {
			p.state = pAborted
		}
		w.answer(tx, false)
	}
}

// routerAbort is a router giving up a transaction before it asked for the commit.
func (w *simWorld) routerAbort() {
	var open []*simTxn
	for _, tx := range w.txns {
		if !tx.requested && !tx.routerAborted {
			open = append(open, tx)
		}
	}
	if len(open) == 0 {
		return
	}
	tx := open[w.rng.IntN(len(open))]
	tx.routerAborted = true
	for _, s := range tx.parts {
		if n := w.nodes[s]; n.up && n.txn(tx.num).state == pInProgress {
			n.txn(tx.num).state = pAborted
		}
	}
	w.logf("router aborts txn %d", tx.num)
}

// runOne runs a coordinator a node's service spawned, to its end or its interruption.
func (w *simWorld) runOne() {
	var ready []*simNode
	for _, name := range w.names {
		if n := w.nodes[name]; len(n.queue) > 0 {
			ready = append(ready, n)
		}
	}
	if len(ready) == 0 {
		return
	}
	n := ready[w.rng.IntN(len(ready))]
	f := n.queue[0]
	n.queue = n.queue[1:]
	f()
}

// settle brings every service in line with its node at the top level: a crashed node's
// interrupted coordinators return, and an up node that is not running steps up, resuming
// its stored coordinators.
func (w *simWorld) settle() {
	for _, name := range w.names {
		n := w.nodes[name]
		if n.running() {
			continue
		}
		for len(n.queue) > 0 {
			f := n.queue[0]
			n.queue = n.queue[1:]
			f() // interrupted: returns at its first call
		}
		n.svc.StepDown()
		if n.up {
			w.stats.resumed += len(n.docs)
			if err := n.svc.StepUp(w.ctx); err != nil {
				w.t.Fatal(err)
			}
			w.logf("%s steps up, resuming %d coordinators", n.name, len(n.docs))
		}
	}
}

// checkTxn checks one transaction's participants.
func (w *simWorld) checkTxn(tx *simTxn) {
	var states []string
	committed, notPrepared := false, false
	var maxPrepare bson.Timestamp
	var commitTS []bson.Timestamp
	for _, s := range tx.parts {
		p := w.nodes[s].txn(tx.num)
		states = append(states, s+":"+simPStateNames[p.state])
		switch p.state {
		case pCommitted:
			committed = true
			commitTS = append(commitTS, p.commitTS)
		case pPrepared:
		default:
			notPrepared = true
		}
		if p.prepareTS.After(maxPrepare) {
			maxPrepare = p.prepareTS
		}
	}
	switch {
	case committed && notPrepared:
		w.fail("txn %d committed on some participants, not prepared on others: %v", tx.num, states)
	case committed && tx.answered && !tx.commit:
		w.fail("txn %d: the router answered abort, a participant committed: %v", tx.num, states)
	case tx.answered && tx.commit && notPrepared:
		w.fail("txn %d: the router answered commit, a participant did not: %v", tx.num, states)
	}
	for _, ts := range commitTS {
		if ts != maxPrepare {
			w.fail("txn %d committed at %v, not at the largest prepareTimestamp %v: %v", tx.num, ts, maxPrepare, states)
		}
	}
}

func (w *simWorld) check() {
	for _, tx := range w.txns {
		w.checkTxn(tx)
	}
}

// quiesce ends the run: no more faults, every shard up, every router gets its answer and
// every coordinator runs to its end.
func (w *simWorld) quiesce() {
	w.calm = true
	for _, name := range w.names {
		w.nodes[name].up = true
	}
	for round := 0; w.err == nil; round++ {
		if round > 200 {
			w.fail("the coordinators did not drain")
			return
		}
		w.settle()
		busy := false
		for _, name := range w.names {
			n := w.nodes[name]
			for len(n.queue) > 0 {
				busy = true
				f := n.queue[0]
				n.queue = n.queue[1:]
				f()
			}
		}
		for _, tx := range w.txns {
			if tx.requested && !tx.answered {
				busy = true
				for range 3 {
					w.routerCommit()
				}
			}
		}
		if !busy {
			break
		}
	}
	if w.err != nil {
		return
	}
	for _, name := range w.names {
		n := w.nodes[name]
		if len(n.docs) > 0 {
			w.fail("%s keeps %d coordinator documents", n.name, len(n.docs))
		}
		for num, p := range n.txns {
			if p.state == pPrepared {
				w.fail("txn %d is left prepared on %s", num, n.name)
			}
		}
	}
	// Unprepared transactions time out on their participants.
	for _, tx := range w.txns {
		committed, other := 0, 0
		for _, s := range tx.parts {
			p := w.nodes[s].txn(tx.num)
			if p.state == pCommitted {
				committed++
			} else {
				other++
			}
		}
		if committed > 0 && other > 0 {
			w.fail("txn %d committed on %d participants, not on %d", tx.num, committed, other)
		}
		if committed > 0 {
			w.stats.committed++
		} else {
			w.stats.aborted++
		}
		w.checkTxn(tx)
	}
}

// run plays one seed and returns the first invariant violation.
func (w *simWorld) run(events int) error {
	for range events {
		if w.err != nil {
			break
		}
		switch x := w.rng.IntN(100); {
		case x < 15:
			w.begin()
		case x < 35:
			w.routerCommit()
		case x < 38:
			w.routerAbort()
		case x < 42:
			w.routerRecover()
		case x < 80:
			w.runOne()
		case x < 84:
			w.crash(w.nodes[w.names[w.rng.IntN(len(w.names))]])
		default:
			w.restartOne()
		}
		w.settle()
		w.check()
	}
	if w.err == nil {
		w.quiesce()
	}
	// Stop the services (a violation may leave coordinators interrupted mid-way).
	for _, name := range w.names {
		n := w.nodes[name]
		n.svc.interrupt()
		for len(n.queue) > 0 {
			f := n.queue[0]
			n.queue = n.queue[1:]
			f()
		}
		n.svc.Close()
	}
	return w.err
}

func (w *simWorld) traceText() string { return strings.Join(w.trace, "\n") }

// TestTxnCoordinatorSimulation runs the protocol under faults for many seeds; every seed
// must keep every invariant.
func TestTxnCoordinatorSimulation(t *testing.T) {
	var total simStats
	from, to := simtest.SeedRange(t, 1000)
	for seed := from; seed < to; seed++ {
		w := newTxnSim(t, seed, testingKnobs{})
		if err := w.run(simEvents); err != nil {
			t.Fatalf("seed %d (HUMONGO_SEED=%d to replay): %v\ntrace:\n%s", seed, seed, err, w.traceText())
		}
		total.txns += w.stats.txns
		total.committed += w.stats.committed
		total.aborted += w.stats.aborted
		total.crashes += w.stats.crashes
		total.resumed += w.stats.resumed
		total.interrupted += w.stats.interrupted
		total.lost += w.stats.lost
		total.answers += w.stats.answers
		total.recovered += w.stats.recovered
		for i, n := range w.stats.crashAt {
			total.crashAt[i] += n
		}
	}
	t.Logf("seeds %d..%d: %+v", from, to-1, total)
	if to-from < 100 {
		return
	}
	// The runs must exercise the protocol, or passing proves nothing.
	if total.committed < 100 || total.aborted < 100 || total.resumed < 100 || total.interrupted < 100 || total.lost < 100 || total.recovered < 100 {
		t.Fatalf("the simulation did not exercise the protocol: %+v", total)
	}
	for i, n := range total.crashAt {
		if n < 50 {
			t.Fatalf("only %d crashes of a coordinator in step %s: %+v", n, stepNames[i], total)
		}
	}
}

// TestTxnCoordinatorSimulationCatchesBrokenProtocols: each knob breaks one part of the
// protocol; the checker must notice within the seeds.
func TestTxnCoordinatorSimulationCatchesBrokenProtocols(t *testing.T) {
	for name, k := range map[string]testingKnobs{
		"votes before the participant list is durable": {noParticipantList: true},
		"commit at the smallest prepareTimestamp":      {smallestTimestamp: true},
		"decision sent before it is durable":           {sendBeforePersist: true},
		"resumed coordinator collects votes again":     {revoteOnResume: true},
	} {
		caught := false
		for seed := range uint64(1000) {
			w := newTxnSim(t, seed, k)
			if err := w.run(simEvents); err != nil {
				caught = true
				t.Logf("%s: caught at seed %d: %v\ntrace:\n%s", name, seed, err, w.traceText())
				break
			}
		}
		if !caught {
			t.Errorf("%s: no seed violated an invariant", name)
		}
	}
}
