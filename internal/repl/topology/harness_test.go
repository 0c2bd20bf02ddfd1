package topology

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"humongo/internal/optime"
)

// harness is the datadriven test world: coordinators with ids 1..N, a
// virtual clock, and a FIFO network that can be partitioned. There is no
// oplog: "write" advances a primary's optimes and "replicate" copies
// optimes to secondaries, which report them with replSetUpdatePosition.
type harness struct {
	epoch time.Time
	now   time.Duration
	cfg   ReplSetConfig
	nodes map[int]*hnode
	ids   []int
	queue []hmsg
	group map[int]int
	out   *strings.Builder
	// verbose prints heartbeats too.
	verbose bool
}

type hnode struct {
	id      int
	up      bool
	t       *TopologyCoordinator
	durable DurableState
	applied optime.OpTime
	inc     uint32
}

type hmsg struct {
	from, to int
	payload  any
}

func newHarness() *harness {
	return &harness{epoch: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nodes: map[int]*hnode{}, group: map[int]int{}}
}

func (h *harness) at() time.Time { return h.epoch.Add(h.now) }

func (h *harness) printf(format string, args ...any) {
	fmt.Fprintf(h.out, format+"\n", args...)
}

func kv(args []string) (pos []string, m map[string]string) {
	m = map[string]string{}
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			m[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	return pos, m
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}

func ids(t *testing.T, s string) []int {
	var r []int
	for _, f := range strings.Split(s, ",") {
		if f != "" {
			r = append(r, atoi(t, f))
		}
	}
	return r
}

func (h *harness) run(t *testing.T, c ddCase) string {
	var b strings.Builder
	h.out = &b
	pos, m := kv(c.args)
	h.verbose = m["verbose"] == "true"
	switch c.cmd {
	case "add-nodes":
		h.addNodes(t, atoi(t, pos[0]), m)
	case "tick":
		n, step := 1, time.Second
		if v, ok := m["n"]; ok {
			n = atoi(t, v)
		}
		if v, ok := m["step"]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatal(err)
			}
			step = d
		}
		for i := 0; i < n; i++ {
			h.now += step
			for _, id := range h.ids {
				if nd := h.nodes[id]; nd.up {
					h.handle(nd, nd.t.Tick(h.at()))
				}
			}
			h.stabilize(true)
		}
	case "partition":
		h.group = map[int]int{}
		for g, part := range strings.Split(pos[0], "|") {
			for _, id := range ids(t, part) {
				h.group[id] = g
			}
		}
		h.printf("partition %s", pos[0])
	case "heal":
		h.group = map[int]int{}
		h.printf("healed")
	case "crash":
		for _, id := range ids(t, pos[0]) {
			h.nodes[id].up = false
			h.printf("n%d crashed (durable term=%d vote=%+v)", id, h.nodes[id].durable.Term, h.nodes[id].durable.LastVote)
		}
	case "restart":
		for _, id := range ids(t, pos[0]) {
			h.start(t, h.nodes[id])
			h.printf("n%d restarted term=%d", id, h.nodes[id].t.Term())
		}
	case "campaign":
		nd := h.nodes[atoi(t, pos[0])]
		acts, err := nd.t.StartElection(h.at(), m["dry"] != "false", "campaign")
		h.errOr(err)
		h.handle(nd, acts)
	case "step-up":
		nd := h.nodes[atoi(t, pos[0])]
		acts, err := nd.t.StepUp(h.at())
		h.errOr(err)
		h.handle(nd, acts)
	case "step-down":
		nd := h.nodes[atoi(t, pos[0])]
		acts, handoff, err := nd.t.StepDown(h.at(), StepDownOpts{Force: m["force"] == "true", WaitUntil: h.at(),
			FreezeFor: 10 * time.Second})
		h.errOr(err)
		if err == nil {
			h.printf("n%d: handoff=%d", nd.id, handoff)
		}
		h.handle(nd, acts)
	case "deliver":
		h.deliverRound(true)
	case "stabilize":
		h.stabilize(true)
	case "write":
		nd := h.nodes[atoi(t, m["node"])]
		n := 1
		if v, ok := m["n"]; ok {
			n = atoi(t, v)
		}
		for i := 0; i < n; i++ {
			if !nd.t.IsWritablePrimary() {
				h.printf("n%d: NotWritablePrimary", nd.id)
				break
			}
			h.appendOp(nd)
		}
		h.printf("n%d: applied=%v commit=%v", nd.id, nd.t.LastApplied(), nd.t.LastCommitted())
	case "replicate":
		// replicate from=1 to=2,3 [durable=false]: copy optimes and report
		// them to `from` with replSetUpdatePosition.
		src := h.nodes[atoi(t, m["from"])]
		for _, id := range ids(t, m["to"]) {
			nd := h.nodes[id]
			nd.applied = src.t.LastApplied()
			h.handle(nd, nd.t.UpdateLastAppliedOpTime(h.at(), nd.applied))
			if m["durable"] != "false" {
				h.handle(nd, nd.t.UpdateLastDurableOpTime(h.at(), nd.applied))
			}
			h.queue = append(h.queue, hmsg{from: id, to: src.id, payload: nd.t.PrepareUpdatePosition(h.at())})
		}
	case "durable":
		// durable 2,3: journal flush — durable optime = applied optime.
		for _, id := range ids(t, pos[0]) {
			nd := h.nodes[id]
			h.handle(nd, nd.t.UpdateLastDurableOpTime(h.at(), nd.t.LastApplied()))
			h.printf("n%d: durable=%v", id, nd.t.LastDurable())
		}
	case "report":
		// report from=3 to=2: send replSetUpdatePosition.
		nd := h.nodes[atoi(t, m["from"])]
		h.send(nd.id, atoi(t, m["to"]), nd.t.PrepareUpdatePosition(h.at()))
	case "ping":
		// ping 3 to=1 d=50ms: set n3's measured round trip to n1.
		nd := h.nodes[atoi(t, pos[0])]
		d, err := time.ParseDuration(m["d"])
		if err != nil {
			t.Fatal(err)
		}
		nd.t.member(atoi(t, m["to"])).ping = d
	case "reconfig":
		// reconfig node=1 priorities=1,1,3: replSetReconfig on one node; the
		// others learn the new version through heartbeats.
		nd := h.nodes[atoi(t, m["node"])]
		cfg := nd.t.Config()
		cfg.Members = slices.Clone(cfg.Members)
		cfg.Version++
		for i, p := range strings.Split(m["priorities"], ",") {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Members[i].Priority = f
		}
		acts, err := nd.t.InstallConfig(h.at(), cfg)
		h.errOr(err)
		h.handle(nd, acts)
		h.printf("n%d: config version %d", nd.id, nd.t.Config().Version)
	case "blacklist":
		// blacklist 3 member=2 d=10s
		nd := h.nodes[atoi(t, pos[0])]
		d, err := time.ParseDuration(m["d"])
		if err != nil {
			t.Fatal(err)
		}
		nd.t.BlacklistSyncSource(atoi(t, m["member"]), h.at().Add(d))
	case "sync-source":
		for _, id := range ids(t, pos[0]) {
			nd := h.nodes[id]
			h.printf("n%d: sync source -> %d", id, nd.t.ChooseSyncSource(h.at(), nd.t.LastApplied()))
		}
	case "vote-request":
		// vote-request to=2 from=1 term=3 dry=false applied=5:t1
		nd := h.nodes[atoi(t, m["to"])]
		req := VoteRequest{SetName: h.cfg.SetName, DryRun: m["dry"] == "true", Term: int64(atoi(t, m["term"])),
			CandidateID: atoi(t, m["from"]), ConfigVersion: h.cfg.Version, ConfigTerm: h.cfg.Term, LastApplied: parseOp(t, m["applied"])}
		if v, ok := m["setname"]; ok {
			req.SetName = v
		}
		if v, ok := m["version"]; ok {
			req.ConfigVersion = int64(atoi(t, v))
		}
		resp, acts := nd.t.ProcessVoteRequest(h.at(), req)
		h.printf("n%d: granted=%v term=%d reason=%q", nd.id, resp.VoteGranted, resp.Term, resp.Reason)
		h.handle(nd, acts)
	case "set-applied":
		// set-applied 2 op=5:t1 (recovery without the network).
		nd := h.nodes[atoi(t, pos[0])]
		// Restart the node with this oplog top (startup recovery).
		nd.applied = parseOp(t, m["op"])
		h.start(t, nd)
		h.printf("n%d: applied=%v term=%d", nd.id, nd.applied, nd.t.Term())
	case "status":
		h.status()
	default:
		t.Fatalf("%s: unknown command %q", c.pos, c.cmd)
	}
	return b.String()
}

// parseOp parses "secs:tTERM" or "secs.inc:tTERM".
func parseOp(t *testing.T, s string) optime.OpTime {
	if s == "" {
		return optime.OpTime{}
	}
	ts, term, ok := strings.Cut(s, ":t")
	if !ok {
		t.Fatalf("bad optime %q", s)
	}
	secs, inc, _ := strings.Cut(ts, ".")
	var i uint32
	if inc != "" {
		i = uint32(atoi(t, inc))
	}
	return optime.OpTime{Term: int64(atoi(t, term)), TS: optime.MakeTimestamp(uint32(atoi(t, secs)), i)}
}

func (h *harness) errOr(err error) {
	if err != nil {
		h.printf("error: %v", err)
	}
}

func (h *harness) addNodes(t *testing.T, n int, m map[string]string) {
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("n%d:27017", i+1)
	}
	h.cfg = NewDefaultConfig("rs0", hosts...)
	for i := range h.cfg.Members {
		h.cfg.Members[i].ID = i + 1
	}
	if v, ok := m["priorities"]; ok {
		for i, p := range strings.Split(v, ",") {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil {
				t.Fatal(err)
			}
			h.cfg.Members[i].Priority = f
		}
	}
	if v, ok := m["arbiter"]; ok {
		mc := h.cfg.Member(atoi(t, v))
		mc.ArbiterOnly, mc.Priority = true, 0
	}
	if m["chaining"] == "false" {
		h.cfg.Settings.ChainingAllowed = false
	}
	if v, ok := m["catchup"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		h.cfg.Settings.CatchUpTimeout = d
	}
	for i := 1; i <= n; i++ {
		nd := &hnode{id: i}
		h.nodes[i] = nd
		h.ids = append(h.ids, i)
		h.start(t, nd)
	}
	h.printf("%d nodes, majority %d", n, h.cfg.MajorityVoteCount())
}

func (h *harness) start(t *testing.T, nd *hnode) {
	cfg := h.cfg
	tc, err := New(Options{SelfID: nd.id, Config: &cfg, Durable: nd.durable, LastApplied: nd.applied,
		LastDurable: nd.applied, Rand: rand.New(rand.NewPCG(uint64(nd.id), 7))})
	if err != nil {
		t.Fatal(err)
	}
	nd.t, nd.up = tc, true
}

func (h *harness) appendOp(nd *hnode) {
	ts := optime.MakeTimestamp(uint32(h.now/time.Second), 0)
	if l := nd.t.LastApplied(); ts.Compare(l.TS) <= 0 {
		ts = optime.MakeTimestamp(l.TS.Secs(), l.TS.Inc()+1)
	}
	nd.applied = optime.OpTime{TS: ts, Term: nd.t.Term()}
	h.handle(nd, nd.t.UpdateLastAppliedOpTime(h.at(), nd.applied))
	h.handle(nd, nd.t.UpdateLastDurableOpTime(h.at(), nd.applied))
}

func (h *harness) send(from, to int, p any) {
	h.queue = append(h.queue, hmsg{from: from, to: to, payload: p})
}

// handle carries out actions; persistence is synchronous (before sends).
func (h *harness) handle(nd *hnode, acts []Action) {
	now := h.at()
	for _, a := range acts {
		if a.Kind != ActSendHeartbeat || h.verbose {
			h.printf("%v n%d: %v", h.now, nd.id, a)
		}
		switch a.Kind {
		case ActSendHeartbeat:
			h.send(nd.id, a.Target, nd.t.PrepareHeartbeatRequest(now, a.Target))
		case ActPersistDurable:
			nd.durable = a.Durable
		case ActStartElection:
			more, err := nd.t.StartElection(now, a.DryRun, a.Reason)
			h.errOr(err)
			h.handle(nd, more)
		case ActSendVoteRequests:
			for _, to := range a.Targets {
				h.send(nd.id, to, a.VoteRequest)
			}
		case ActEnterDrain:
			h.handle(nd, nd.t.CompleteDrain(now))
		case ActBecomePrimary:
			h.appendOp(nd) // the "new primary" no-op
		case ActReconfig:
			more, err := nd.t.InstallConfig(now, *a.Config)
			h.errOr(err)
			h.handle(nd, more)
		case ActChangeSyncSource:
			nd.t.ClearSyncSource()
		}
	}
}

func (h *harness) connected(a, b int) bool { return h.group[a] == h.group[b] }

// deliverRound delivers the messages queued now (not those they cause).
func (h *harness) deliverRound(print bool) {
	q := h.queue
	h.queue = nil
	now := h.at()
	for _, m := range q {
		to, from := h.nodes[m.to], h.nodes[m.from]
		if !to.up || !from.up || !h.connected(m.from, m.to) {
			if print && (h.verbose || !isHeartbeat(m.payload)) {
				h.printf("%v %d->%d dropped %s", h.now, m.from, m.to, describe(m.payload))
			}
			continue
		}
		if print && (h.verbose || !isHeartbeat(m.payload)) {
			h.printf("%v %d->%d %s", h.now, m.from, m.to, describe(m.payload))
		}
		switch p := m.payload.(type) {
		case HeartbeatRequest:
			resp, acts := to.t.ProcessHeartbeatRequest(now, p)
			h.handle(to, acts)
			h.send(to.id, from.id, resp)
		case HeartbeatResponse:
			h.handle(to, to.t.ProcessHeartbeatResponse(now, from.id, p))
		case VoteRequest:
			resp, acts := to.t.ProcessVoteRequest(now, p)
			h.handle(to, acts)
			h.send(to.id, from.id, resp)
		case VoteResponse:
			h.handle(to, to.t.ProcessVoteResponse(now, p))
		case UpdatePosition:
			acts, err := to.t.ProcessUpdatePosition(now, p)
			h.errOr(err)
			h.handle(to, acts)
		}
	}
}

func isHeartbeat(p any) bool {
	switch p.(type) {
	case HeartbeatRequest, HeartbeatResponse:
		return true
	}
	return false
}

func (h *harness) stabilize(print bool) {
	for i := 0; len(h.queue) > 0 && i < 100; i++ {
		h.deliverRound(print)
	}
}

func describe(p any) string {
	switch p := p.(type) {
	case HeartbeatRequest:
		return fmt.Sprintf("heartbeat term=%d", p.Term)
	case HeartbeatResponse:
		if p.Err != nil {
			return fmt.Sprintf("heartbeat-reply error=%q", p.Err)
		}
		return fmt.Sprintf("heartbeat-reply %v term=%d applied=%v commit=%v", p.State, p.Term, p.Applied, p.LastCommitted)
	case VoteRequest:
		return fmt.Sprintf("request-vote dry=%v term=%d applied=%v", p.DryRun, p.Term, p.LastApplied)
	case VoteResponse:
		return fmt.Sprintf("vote dry=%v term=%d granted=%v %s", p.DryRun, p.Term, p.VoteGranted, p.Reason)
	case UpdatePosition:
		var s []string
		for _, q := range p.Positions {
			s = append(s, fmt.Sprintf("%d:%v", q.MemberID, q.Durable))
		}
		return fmt.Sprintf("update-position term=%d %s", p.Term, strings.Join(s, " "))
	}
	return fmt.Sprintf("%T", p)
}

func (h *harness) status() {
	ids := slices.Clone(h.ids)
	slices.Sort(ids)
	for _, id := range ids {
		nd := h.nodes[id]
		if !nd.up {
			h.printf("n%d: down", id)
			continue
		}
		s := nd.t.Status(h.at())
		h.printf("n%d: %v/%v term=%d vote=%d@t%d primary=%d applied=%v commit=%v sync=%d cfg=v%d",
			id, s.State, s.LeaderMode, s.Term, s.LastVote.CandidateID, s.LastVote.Term, s.PrimaryID, s.Applied, s.LastCommitted, s.SyncSourceID, nd.t.Config().Version)
	}
}
