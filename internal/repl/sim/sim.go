package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"humongo/internal/optime"
	"humongo/internal/repl/topology"
)

// Options configure one simulated run.
type Options struct {
	Nodes int
	Seed  int64
	// FaultPhase is how long faults are injected; HealPhase how long the
	// healed cluster then runs before the liveness check.
	FaultPhase, HealPhase time.Duration
	// Knobs break the topology core on purpose (tests of the checker).
	Knobs topology.TestingKnobs
	// SkipVotePersist makes the node "forget" to persist durable state
	// (term and vote) before replying: a restart then loses the vote.
	SkipVotePersist bool
	// Priorities, if set, gives member priorities (len == Nodes).
	Priorities []float64
	// Arbiters lists member ids that are arbiters (vote, hold no data).
	Arbiters []int
	// TraceAll records every event (not just significant ones) — for -seed
	// replays.
	TraceAll bool
	// noVoteRecordCheck turns off the per-(node, term) vote check so tests
	// can show NoTwoPrimariesInSameTerm catches a broken vote rule too.
	noVoteRecordCheck bool
}

const (
	tickEvery     = 100 * time.Millisecond
	fetchIdle     = time.Second
	fetchTimeout  = 2 * time.Second
	fetchBatch    = 50
	writeEvery    = 400 * time.Millisecond
	traceKeep     = 80
	livenessGrace = 30 * time.Second
	noSource      = -1
	blacklistTime = 2 * time.Second
)

type payloadKind int

const (
	pHBReq payloadKind = iota
	pHBResp
	pVoteReq
	pVoteResp
	pFetchReq
	pFetchResp
	pUpdatePos
)

type fetchReq struct {
	LastIdx int
	Last    optime.OpTime
}

type fetchResp struct {
	ReqLastIdx int
	ReqLast    optime.OpTime
	Entries    []optime.OpTime
	Behind     bool
	Diverged   bool
	SourceLog  []optime.OpTime // only when Diverged
	Meta       topology.SyncSourceMetadata
}

type message struct {
	from, to  int
	deliverAt time.Duration
	seq       int64
	kind      payloadKind
	hbReq     topology.HeartbeatRequest
	hbResp    topology.HeartbeatResponse
	voteReq   topology.VoteRequest
	voteResp  topology.VoteResponse
	fetchReq  fetchReq
	fetchResp *fetchResp
	upPos     topology.UpdatePosition
}

type msgHeap []*message

func (h msgHeap) Len() int { return len(h) }
func (h msgHeap) Less(i, j int) bool {
	if h[i].deliverAt != h[j].deliverAt {
		return h[i].deliverAt < h[j].deliverAt
	}
	return h[i].seq < h[j].seq
}
func (h msgHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *msgHeap) Push(x any)   { *h = append(*h, x.(*message)) }
func (h *msgHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// node is one simulated replica-set member.
type node struct {
	id   int
	up   bool
	topo *topology.TopologyCoordinator
	// log is the oplog; entry i has OpTime log[i] (index i+1).
	log        []optime.OpTime
	durableLen int
	// durable is the persisted local.replset.election state.
	durable topology.DurableState

	fetchOutstanding bool
	fetchFrom        int
	fetchDeadline    time.Duration
	nextFetch        time.Duration
	posDirty         bool
	lastPosSent      time.Duration
	// commitSeen is the highest commit point observed this incarnation.
	commitSeen  optime.OpTime
	rbid        int
	incarnation int
}

func (n *node) last() optime.OpTime {
	if len(n.log) == 0 {
		return optime.OpTime{}
	}
	return n.log[len(n.log)-1]
}

type pendingWrite struct {
	node  int
	term  int64
	index int
	op    optime.OpTime
}

// Sim is one simulated replica set.
type Sim struct {
	opts  Options
	rng   *rand.Rand
	epoch time.Time
	now   time.Duration
	cfg   topology.ReplSetConfig
	nodes []*node
	queue msgHeap
	free  []*message
	seq   int64
	group []int // partition group per node; same group == connected
	loss  float64

	// Checker state.
	committed     []optime.OpTime // the majority-committed history
	primaryOfTerm map[int64]int
	votes         map[[2]int64]int // (node, term) -> candidate
	pending       []pendingWrite
	acked         []optime.OpTime
	err           error
	trace         []string
	traceAll      []string
	stats         Stats
}

// Stats summarise a run.
type Stats struct {
	Elections, Primaries, StepDowns, Rollbacks, Crashes, Partitions int
	Writes, Acked, Messages                                         int
	CatchUps, PriorityTakeovers, CatchUpTakeovers                   int
	// CommittedPriorTermTruncations counts rollbacks that truncated
	// older-term entries committed elsewhere that the node did not know
	// were committed (allowed; see rollback).
	CommittedPriorTermTruncations int
	MaxTerm                       int64
}

// New builds a simulation; call Run.
func New(opts Options) *Sim {
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	s := &Sim{opts: opts, rng: rand.New(rand.NewPCG(uint64(opts.Seed), 0x5eed)),
		epoch:         time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		primaryOfTerm: map[int64]int{}, votes: map[[2]int64]int{}}
	hosts := make([]string, opts.Nodes)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("n%d:27017", i)
	}
	s.cfg = topology.NewDefaultConfig("rs0", hosts...)
	// Bounded catch-up so a primary-elect whose target is unreachable
	// still becomes writable (MongoDB's default is infinite).
	s.cfg.Settings.CatchUpTimeout = 2 * time.Second
	for i, p := range opts.Priorities {
		s.cfg.Members[i].Priority = p
	}
	for _, id := range opts.Arbiters {
		s.cfg.Members[id].ArbiterOnly = true
		s.cfg.Members[id].Priority = 0
	}
	s.group = make([]int, opts.Nodes)
	for i := 0; i < opts.Nodes; i++ {
		n := &node{id: i, fetchFrom: noSource}
		s.nodes = append(s.nodes, n)
		s.start(n)
	}
	return s
}

func (s *Sim) at() time.Time { return s.epoch.Add(s.now) }

// start (re)creates a node's coordinator from its durable state.
func (s *Sim) start(n *node) {
	n.incarnation++
	n.log = n.log[:n.durableLen]
	last := n.last()
	cfg := s.cfg
	t, err := topology.New(topology.Options{SelfID: n.id, Config: &cfg, Durable: n.durable,
		LastApplied: last, LastDurable: last, Rand: rand.New(rand.NewPCG(s.rng.Uint64(), 0)), Knobs: s.opts.Knobs})
	if err != nil {
		s.fail("start node %d: %v", n.id, err)
		return
	}
	n.topo = t
	n.up = true
	n.fetchOutstanding = false
	n.nextFetch = s.now
	n.commitSeen = optime.OpTime{}
}

func (s *Sim) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("t=%v: %s", s.now, fmt.Sprintf(format, args...))
		s.note(-1, "VIOLATION: %v", s.err)
	}
}

// note records a significant event in the trace ring.
func (s *Sim) note(id int, format string, args ...any) {
	who := "--"
	if id >= 0 {
		who = fmt.Sprintf("n%d", id)
	}
	line := fmt.Sprintf("%9v %s %s", s.now, who, fmt.Sprintf(format, args...))
	if s.opts.TraceAll {
		s.traceAll = append(s.traceAll, line)
	}
	s.trace = append(s.trace, line)
	if len(s.trace) > 2*traceKeep {
		s.trace = append(s.trace[:0], s.trace[len(s.trace)-traceKeep:]...)
	}
}

// Trace returns the last significant events (all of them with TraceAll).
func (s *Sim) Trace() string {
	if s.opts.TraceAll {
		return strings.Join(s.traceAll, "\n")
	}
	t := s.trace
	if len(t) > traceKeep {
		t = t[len(t)-traceKeep:]
	}
	return strings.Join(t, "\n")
}

// Stats returns the run's counters.
func (s *Sim) Stats() Stats { return s.stats }

func (s *Sim) connected(a, b int) bool { return s.group[a] == s.group[b] }

// send queues a copy of m (from a free list: messages are the simulation's
// main allocation).
func (s *Sim) send(msg message) {
	s.stats.Messages++
	if !s.connected(msg.from, msg.to) || s.rng.Float64() < s.loss {
		return
	}
	var m *message
	if k := len(s.free); k > 0 {
		m = s.free[k-1]
		s.free = s.free[:k-1]
	} else {
		m = new(message)
	}
	*m = msg
	d := time.Duration(1+s.rng.IntN(20)) * time.Millisecond
	if s.rng.IntN(50) == 0 {
		d += time.Duration(s.rng.IntN(1500)) * time.Millisecond // reordering
	}
	s.seq++
	m.seq = s.seq
	m.deliverAt = s.now + d
	heap.Push(&s.queue, m)
}

// Run executes the schedule and returns the first invariant violation.
func (s *Sim) Run() error {
	faultEnd := s.opts.FaultPhase
	end := faultEnd + s.opts.HealPhase
	// Liveness is "eventually": a disruption late in the heal phase (a
	// failed priority takeover deposes the primary, then everyone waits an
	// election timeout) may legitimately leave no primary at `end`; the run
	// is extended up to livenessGrace for one to appear.
	hardEnd := end + livenessGrace
	nextTick := time.Duration(0)
	nextWrite := writeEvery
	healed := false
	for s.err == nil && s.now <= hardEnd {
		if s.now > end && s.now%time.Second == 0 && s.writablePrimary() != nil {
			break
		}
		if len(s.queue) > 0 && s.queue[0].deliverAt <= nextTick {
			m := heap.Pop(&s.queue).(*message)
			s.now = m.deliverAt
			s.deliver(m)
			*m = message{}
			s.free = append(s.free, m)
			continue
		}
		s.now = nextTick
		nextTick += tickEvery
		if s.now < faultEnd {
			s.nemesis()
		} else if !healed {
			healed = true
			s.heal()
		}
		for _, n := range s.nodes {
			if n.up {
				s.tickNode(n)
			}
		}
		if s.now >= nextWrite {
			nextWrite = s.now + writeEvery
			s.clientWrite()
		}
		if s.now%time.Second == 0 {
			s.checkBranches()
		}
	}
	if s.err == nil {
		s.checkLiveness()
	}
	return s.err
}

// --- faults -----------------------------------------------------------------

// faulty reports whether faults are still being injected.
func (s *Sim) faulty() bool { return s.now < s.opts.FaultPhase }

func (s *Sim) nemesis() {
	if s.rng.IntN(60) != 0 { // ~ every 6 s of virtual time
		return
	}
	switch r := s.rng.IntN(10); {
	case r < 3:
		s.stats.Partitions++
		for i := range s.group {
			s.group[i] = s.rng.IntN(2)
		}
		s.note(-1, "partition %v", s.group)
	case r < 5:
		// Isolate whoever is primary.
		for _, n := range s.nodes {
			if n.up && n.topo.State() == topology.StatePrimary {
				for i := range s.group {
					s.group[i] = 0
				}
				s.group[n.id] = 1
				s.stats.Partitions++
				s.note(n.id, "isolate primary")
				break
			}
		}
	case r < 6:
		for i := range s.group {
			s.group[i] = 0
		}
		s.note(-1, "heal partition")
	case r < 8:
		n := s.nodes[s.rng.IntN(len(s.nodes))]
		if n.up {
			s.crash(n)
		} else {
			s.restart(n)
		}
	case r < 9:
		for _, n := range s.nodes {
			if !n.up {
				s.restart(n)
			}
		}
	default:
		s.loss = []float64{0, 0.05, 0.2, 0.5}[s.rng.IntN(4)]
		s.note(-1, "loss=%v", s.loss)
	}
}

func (s *Sim) heal() {
	for i := range s.group {
		s.group[i] = 0
	}
	s.loss = 0
	for _, n := range s.nodes {
		if !n.up {
			s.restart(n)
		}
	}
	s.note(-1, "heal all")
}

func (s *Sim) crash(n *node) {
	s.stats.Crashes++
	n.up = false
	s.note(n.id, "crash (keeps %d/%d log entries, term %d, vote %+v)", n.durableLen, len(n.log), n.durable.Term, n.durable.LastVote)
}

func (s *Sim) restart(n *node) {
	s.start(n)
	s.note(n.id, "restart term=%d last=%v", n.topo.Term(), n.last())
}

// --- client -------------------------------------------------------------------

func (s *Sim) clientWrite() {
	var prim []*node
	for _, n := range s.nodes {
		if n.up && n.topo.IsWritablePrimary() {
			prim = append(prim, n)
		}
	}
	if len(prim) == 0 {
		return
	}
	n := prim[s.rng.IntN(len(prim))]
	op := s.appendLocal(n)
	s.stats.Writes++
	s.pending = append(s.pending, pendingWrite{node: n.id, term: op.Term, index: len(n.log), op: op})
}

// appendLocal writes one entry on a primary.
func (s *Sim) appendLocal(n *node) optime.OpTime {
	ts := optime.MakeTimestamp(uint32(s.now/time.Second)+1, 0)
	if l := n.last(); ts.Compare(l.TS) <= 0 {
		ts = optime.MakeTimestamp(l.TS.Secs(), l.TS.Inc()+1)
	}
	op := optime.OpTime{TS: ts, Term: n.topo.Term()}
	n.log = append(n.log, op)
	s.handle(n, n.topo.UpdateLastAppliedOpTime(s.at(), op))
	return op
}

// ackWrites acknowledges pending writes of primary n covered by its commit
// point (w:"majority" satisfied).
func (s *Sim) ackWrites(n *node, cp optime.OpTime) {
	keep := s.pending[:0]
	for _, w := range s.pending {
		switch {
		case w.node == n.id && w.term == n.topo.Term() && !cp.Less(w.op):
			if w.index <= len(n.log) && n.log[w.index-1] == w.op {
				s.acked = append(s.acked, w.op)
				s.stats.Acked++
			}
		case w.node == n.id && (w.term != n.topo.Term() || n.topo.State() != topology.StatePrimary):
			// Stepped down: the client gets an error, outcome unknown.
		default:
			keep = append(keep, w)
		}
	}
	s.pending = keep
}
