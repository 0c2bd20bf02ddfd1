package sim

import (
	"time"

	"humongo/internal/optime"
	"humongo/internal/repl/topology"
)

// tickNode runs the node's periodic work: coordinator timers, journal
// flush, oplog fetching and position reporting.
func (s *Sim) tickNode(n *node) {
	now := s.at()
	s.handle(n, n.topo.Tick(now))
	if !n.up {
		return
	}
	// Journal flush (every tick, 100 ms): the log prefix becomes durable.
	if n.durableLen < len(n.log) {
		n.durableLen = len(n.log)
		s.handle(n, n.topo.UpdateLastDurableOpTime(now, n.last()))
		n.posDirty = true
	}
	s.maybeFetch(n)
	s.maybeReportPosition(n)
	s.checkNode(n)
}

func (s *Sim) maybeFetch(n *node) {
	t := n.topo
	fetching := t.State() == topology.StateSecondary ||
		(t.State() == topology.StatePrimary && t.LeaderMode() == topology.LeaderCatchingUp)
	if !fetching {
		n.fetchOutstanding = false
		return
	}
	if n.fetchOutstanding && s.now < n.fetchDeadline {
		return
	}
	if n.fetchOutstanding { // lost request or response: treat as fetcher error
		n.fetchOutstanding = false
		t.ClearSyncSource()
	}
	if s.now < n.nextFetch {
		return
	}
	src := t.SyncSource()
	if src < 0 {
		src = t.ChooseSyncSource(s.at(), n.last())
		if src < 0 {
			n.nextFetch = s.now + time.Second
			return
		}
		s.trc(n.id, "sync source -> n%d", src)
	}
	n.fetchOutstanding = true
	n.fetchFrom = src
	n.fetchDeadline = s.now + fetchTimeout
	s.send(message{from: n.id, to: src, kind: pFetchReq, fetchReq: fetchReq{LastIdx: len(n.log), Last: n.last()}})
}

func (s *Sim) maybeReportPosition(n *node) {
	t := n.topo
	src := t.SyncSource()
	if t.State() == topology.StatePrimary || src < 0 {
		return
	}
	if !n.posDirty && s.now-n.lastPosSent < s.cfg.KeepAliveInterval() {
		return
	}
	n.posDirty = false
	n.lastPosSent = s.now
	s.send(message{from: n.id, to: src, kind: pUpdatePos, upPos: t.PrepareUpdatePosition(s.at())})
}

// trc records a routine event only when every event is traced.
func (s *Sim) trc(id int, format string, args ...any) {
	if s.opts.TraceAll {
		s.note(id, format, args...)
	}
}

func (s *Sim) deliver(m *message) {
	n := s.nodes[m.to]
	if !n.up || !s.connected(m.from, m.to) {
		return
	}
	now := s.at()
	t := n.topo
	switch m.kind {
	case pHBReq:
		resp, acts := t.ProcessHeartbeatRequest(now, m.hbReq)
		s.handle(n, acts)
		s.send(message{from: n.id, to: m.from, kind: pHBResp, hbResp: resp})
	case pHBResp:
		s.handle(n, t.ProcessHeartbeatResponse(now, m.from, m.hbResp))
	case pVoteReq:
		resp, acts := t.ProcessVoteRequest(now, m.voteReq)
		s.handle(n, acts) // persists before the reply is sent
		if resp.VoteGranted {
			s.trc(n.id, "grant vote to n%d term %d dry=%v", m.from, m.voteReq.Term, m.voteReq.DryRun)
		}
		s.send(message{from: n.id, to: m.from, kind: pVoteResp, voteResp: resp})
		if resp.VoteGranted && !m.voteReq.DryRun && s.faulty() && s.rng.IntN(8) == 0 {
			// kill -9 a voter right after it voted: its vote must survive.
			s.crash(n)
		}
	case pVoteResp:
		s.handle(n, t.ProcessVoteResponse(now, m.voteResp))
	case pFetchReq:
		s.serveFetch(n, m)
	case pFetchResp:
		s.onFetchResp(n, m)
	case pUpdatePos:
		acts, err := t.ProcessUpdatePosition(now, m.upPos)
		s.handle(n, acts)
		if err == nil && t.State() != topology.StatePrimary {
			n.posDirty = true // forward up the tree
		}
	}
	if n.up {
		s.checkNode(n)
	}
}

// serveFetch answers an oplog fetcher find/getMore: entries after the
// requester's last fetched entry if it is in our log, else "behind" (our
// oplog is not ahead of theirs) or "diverged" (rollback needed).
func (s *Sim) serveFetch(n *node, m *message) {
	r := m.fetchReq
	t := n.topo
	resp := &fetchResp{ReqLastIdx: r.LastIdx, ReqLast: r.Last, Meta: topology.SyncSourceMetadata{
		SourceID: n.id, Term: t.Term(), ConfigVersion: s.cfg.Version, LastCommitted: t.LastCommitted(),
		Applied: n.last(), PrimaryID: t.PrimaryID()}}
	switch {
	case r.LastIdx == 0 || (r.LastIdx <= len(n.log) && n.log[r.LastIdx-1] == r.Last):
		end := min(len(n.log), r.LastIdx+fetchBatch)
		resp.Entries = append([]optime.OpTime(nil), n.log[r.LastIdx:end]...)
	case !r.Last.Less(n.last()):
		resp.Behind = true
	default:
		resp.Diverged = true
		resp.SourceLog = append([]optime.OpTime(nil), n.log...)
	}
	s.send(message{from: n.id, to: m.from, kind: pFetchResp, fetchResp: resp})
}

func (s *Sim) onFetchResp(n *node, m *message) {
	r := m.fetchResp
	t := n.topo
	now := s.at()
	if !n.fetchOutstanding || n.fetchFrom != m.from || r.ReqLastIdx != len(n.log) || r.ReqLast != n.last() {
		return // stale response
	}
	n.fetchOutstanding = false
	switch {
	case r.Behind:
		t.BlacklistSyncSource(m.from, now.Add(blacklistTime))
		n.nextFetch = s.now
		return
	case r.Diverged:
		if t.State() == topology.StatePrimary {
			// A primary-elect never rolls back: catch-up is best effort.
			s.handle(n, t.EndCatchUp(now, "catch-up target is on another branch"))
			return
		}
		s.rollback(n, m.from, r.SourceLog)
	default:
		if len(r.Entries) > 0 {
			n.log = append(n.log, r.Entries...)
			s.handle(n, t.UpdateLastAppliedOpTime(now, n.last()))
			n.posDirty = true
			n.nextFetch = s.now
		} else {
			n.nextFetch = s.now + fetchIdle
		}
	}
	if !n.up {
		return
	}
	// Our log is now a prefix of the source's: its metadata applies.
	s.handle(n, t.ProcessSyncSourceMetadata(now, r.Meta))
	if why := t.ShouldChangeSyncSource(now); why != "" {
		s.trc(n.id, "change sync source: %s", why)
		t.ClearSyncSource()
	}
}

// rollback truncates n's log to the common point with the sync source's log
// (recover-to-stable + truncate after the common point, in miniature).
func (s *Sim) rollback(n *node, from int, src []optime.OpTime) {
	t := n.topo
	if err := t.SetFollowerMode(s.at(), topology.StateRollback); err != nil {
		return
	}
	common := 0
	for common < len(n.log) && common < len(src) && n.log[common] == src[common] {
		common++
	}
	// NeverRollbackCommitted, in the two forms MongoDB guarantees:
	//  1. a node never rolls back an entry at or before its own commit point
	//     (MongoDB fasserts if the common point is behind the stable
	//     timestamp): majority reads on this node never see rolled-back data;
	//  2. RaftMongo.tla's form: the node's last entry is not committed in the
	//     current (highest) term.
	// An older-term entry that is committed only because a later-term
	// primary committed an entry after it, and that this node does not know
	// is committed, may be truncated here when the node follows a deposed
	// primary's branch; it survives on a majority and in every later primary
	// (leader completeness), and the node fetches it again.
	cp := t.LastCommitted()
	for i := common; i < len(n.log); i++ {
		if !cp.Less(n.log[i]) {
			s.fail("NeverRollbackCommitted: n%d rolls back #%d %v within its commit point %v (sync source n%d)", n.id, i+1, n.log[i], cp, from)
		}
	}
	if l := len(n.log); l > common && l <= len(s.committed) && n.log[l-1] == s.committed[l-1] && n.log[l-1].Term == s.maxTerm() {
		s.fail("NeverRollbackCommitted: n%d rolls back #%d %v, committed in the current term (sync source n%d)", n.id, l, n.log[l-1], from)
	}
	for i := common; i < len(n.log) && i < len(s.committed); i++ {
		if n.log[i] == s.committed[i] {
			s.stats.CommittedPriorTermTruncations++
			break
		}
	}
	s.stats.Rollbacks++
	s.note(n.id, "rollback from %v to common point #%d %v (source n%d)", n.last(), common, opAt(n.log, common), from)
	n.log = n.log[:common]
	n.durableLen = min(n.durableLen, common)
	n.rbid++
	t.ResetOpTimesAfterRollback(n.last())
	_ = t.SetFollowerMode(s.at(), topology.StateSecondary)
	n.nextFetch = s.now
}

func opAt(log []optime.OpTime, n int) optime.OpTime {
	if n == 0 {
		return optime.OpTime{}
	}
	return log[n-1]
}

// handle carries out a coordinator's actions, in order. Persistence is
// synchronous, so anything sent afterwards (vote replies, vote requests) is
// sent only once the state it depends on is durable.
func (s *Sim) handle(n *node, acts []topology.Action) {
	now := s.at()
	t := n.topo
	for _, a := range acts {
		if !n.up {
			return
		}
		switch a.Kind {
		case topology.ActSendHeartbeat:
			s.send(message{from: n.id, to: a.Target, kind: pHBReq, hbReq: t.PrepareHeartbeatRequest(now, a.Target)})
		case topology.ActPersistDurable:
			s.persist(n, a.Durable)
		case topology.ActStartElection:
			s.stats.Elections++
			switch a.Reason {
			case "priority takeover":
				s.stats.PriorityTakeovers++
			case "catch-up takeover":
				s.stats.CatchUpTakeovers++
			}
			s.trc(n.id, "start election dry=%v (%s)", a.DryRun, a.Reason)
			more, err := t.StartElection(now, a.DryRun, a.Reason)
			if err == nil {
				s.handle(n, more)
			}
		case topology.ActSendVoteRequests:
			if !a.DryRun {
				s.note(n.id, "runs for term %d last=%v (%s)", a.VoteRequest.Term, n.last(), a.Reason)
			}
			for _, to := range a.Targets {
				s.send(message{from: n.id, to: to, kind: pVoteReq, voteReq: a.VoteRequest})
			}
		case topology.ActStepDown:
			s.stats.StepDowns++
			s.note(n.id, "step down in term %d: %s", t.Term(), a.Reason)
			n.fetchOutstanding = false
		case topology.ActPrimaryElected:
			if n.last().Less(a.CatchUpTarget) {
				s.stats.CatchUps++
				s.note(n.id, "catch-up from %v to %v", n.last(), a.CatchUpTarget)
			}
			s.onElected(n)
		case topology.ActEnterDrain:
			// The simulated applier has no buffer: draining is instant.
			s.handle(n, t.CompleteDrain(now))
		case topology.ActBecomePrimary:
			op := s.appendLocal(n) // the "new primary" no-op
			s.note(n.id, "writable primary term %d, no-op %v", t.Term(), op)
		case topology.ActReconfig:
			more, err := t.InstallConfig(now, *a.Config)
			if err == nil {
				s.handle(n, more)
			}
		case topology.ActChangeSyncSource:
			n.fetchOutstanding = false
			t.ClearSyncSource()
		case topology.ActCommitPointAdvanced:
			if t.State() == topology.StatePrimary {
				s.onPrimaryCommit(n, a.CommitPoint)
			}
		}
	}
}

func (s *Sim) persist(n *node, d topology.DurableState) {
	if d.LastVote.Term > 0 {
		key := [2]int64{int64(n.id), d.LastVote.Term}
		if c, ok := s.votes[key]; ok && c != d.LastVote.CandidateID && !s.opts.noVoteRecordCheck {
			s.fail("n%d voted for n%d and n%d in term %d", n.id, c, d.LastVote.CandidateID, d.LastVote.Term)
		}
		s.votes[key] = d.LastVote.CandidateID
	}
	if s.opts.SkipVotePersist {
		return
	}
	n.durable = d
}

func (s *Sim) onElected(n *node) {
	term := n.topo.Term()
	s.stats.Primaries++
	s.stats.MaxTerm = max(s.stats.MaxTerm, term)
	s.note(n.id, "elected primary term %d last=%v", term, n.last())
	if p, ok := s.primaryOfTerm[term]; ok && p != n.id {
		s.fail("NoTwoPrimariesInSameTerm: n%d and n%d both primary in term %d", p, n.id, term)
		return
	}
	s.primaryOfTerm[term] = n.id
	// Leader completeness: every majority-committed entry is in our log.
	if len(n.log) < len(s.committed) {
		s.fail("leader completeness: n%d elected in term %d with %d entries, %d are committed (last committed %v)", n.id, term, len(n.log), len(s.committed), s.committed[len(s.committed)-1])
		return
	}
	for i, op := range s.committed {
		if n.log[i] != op {
			s.fail("leader completeness: n%d elected in term %d has %v at #%d, committed %v", n.id, term, n.log[i], i+1, op)
			return
		}
	}
	n.nextFetch = s.now
}

// onPrimaryCommit extends the committed history with the primary's log up
// to its commit point, checking that it agrees with what was committed
// before.
func (s *Sim) onPrimaryCommit(n *node, cp optime.OpTime) {
	k := 0
	for k < len(n.log) && !cp.Less(n.log[k]) {
		k++
	}
	if k == 0 || n.log[k-1] != cp {
		s.fail("primary n%d commit point %v is not in its log", n.id, cp)
		return
	}
	for i := 0; i < k && i < len(s.committed); i++ {
		if n.log[i] != s.committed[i] {
			s.fail("committed histories differ at #%d: n%d has %v, committed %v", i+1, n.id, n.log[i], s.committed[i])
			return
		}
	}
	if k > len(s.committed) {
		s.committed = append(s.committed, n.log[len(s.committed):k]...)
	}
	s.ackWrites(n, cp)
}

// checkNode: the commit point is monotonic within an incarnation.
func (s *Sim) checkNode(n *node) {
	cp := n.topo.LastCommitted()
	if cp.Less(n.commitSeen) {
		s.fail("commit point of n%d went back from %v to %v", n.id, n.commitSeen, cp)
	}
	n.commitSeen = cp
	if n.topo.State() == topology.StatePrimary {
		if p := s.primaryOfTerm[n.topo.Term()]; p != n.id {
			s.fail("n%d is primary in term %d but n%d was elected", n.id, n.topo.Term(), p)
		}
	}
}

// checkBranches: the entries of each node's log at or before its commit
// point are majority-committed (a commit point is only adopted on its own
// branch of history).
func (s *Sim) checkBranches() {
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		cp := n.topo.LastCommitted()
		k := 0
		for k < len(n.log) && !cp.Less(n.log[k]) {
			k++
		}
		if k > len(s.committed) {
			s.fail("n%d commit point %v covers %d entries, only %d committed", n.id, cp, k, len(s.committed))
			return
		}
		for i := 0; i < k; i++ {
			if n.log[i] != s.committed[i] {
				s.fail("n%d commit point %v covers uncommitted entry #%d %v (committed %v)", n.id, cp, i+1, n.log[i], s.committed[i])
				return
			}
		}
	}
}

func (s *Sim) maxTerm() int64 {
	var m int64
	for _, n := range s.nodes {
		if n.topo != nil {
			m = max(m, n.topo.Term())
		}
	}
	return m
}

// writablePrimary returns the writable primary of the highest term, if it
// is in the highest term any node knows.
func (s *Sim) writablePrimary() *node {
	var prim *node
	var maxTerm int64
	for _, n := range s.nodes {
		maxTerm = max(maxTerm, n.topo.Term())
		if n.up && n.topo.IsWritablePrimary() && (prim == nil || n.topo.Term() > prim.topo.Term()) {
			prim = n
		}
	}
	if prim == nil || prim.topo.Term() != maxTerm {
		return nil
	}
	return prim
}

// checkLiveness runs after the heal phase: a writable primary in the
// highest term exists (within livenessGrace) and holds every acknowledged
// write.
func (s *Sim) checkLiveness() {
	prim := s.writablePrimary()
	if prim == nil {
		s.fail("liveness: no writable primary in the highest term %v after healing", s.opts.HealPhase+livenessGrace)
		return
	}
	in := map[optime.OpTime]bool{}
	for _, op := range prim.log {
		in[op] = true
	}
	for _, op := range s.acked {
		if !in[op] {
			s.fail("acknowledged w:majority write %v missing from final primary n%d", op, prim.id)
			return
		}
	}
}
