package coord

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/topology"
)

// call sends cmd to host's admin database. A command error comes back as a *mongoerr.Error
// with the remote code.
func (c *Coordinator) call(ctx context.Context, host string, cmd bsoncore.Document, timeout time.Duration) (bsoncore.Document, error) {
	cl, err := c.peers.Get(host)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	raw, err := cl.Database("admin").RunCommand(ctx, bson.Raw(cmd)).Raw()
	if err != nil {
		var ce mongo.CommandError
		if errors.As(err, &ce) {
			return bsoncore.Document(raw), mongoerr.New(mongoerr.Code(ce.Code), ce.Message)
		}
		return nil, mongoerr.Newf(mongoerr.HostUnreachable, "%s: %v", host, err)
	}
	return bsoncore.Document(raw), nil
}

// --- heartbeats --------------------------------------------------------------------------

func (c *Coordinator) hbTimeout() time.Duration {
	cfg := c.topo.Config()
	return orDefault(cfg.Settings.HeartbeatTimeout, topology.DefaultHeartbeatTimeout)
}

func (c *Coordinator) sendHeartbeatLocked(now time.Time, target int) {
	cfg := c.topo.Config()
	m := cfg.Member(target)
	if m == nil || c.hbBusy[m.Host] {
		return
	}
	req := c.topo.PrepareHeartbeatRequest(now, target)
	cmd := bsoncore.NewDocumentBuilder().AppendString("replSetHeartbeat", req.SetName).
		AppendInt64("configVersion", req.ConfigVersion).AppendInt64("configTerm", req.ConfigTerm).
		AppendInt32("hbv", 1).AppendString("from", c.opts.Self).AppendInt32("fromId", int32(req.SenderID)).
		AppendInt64("term", req.Term).Build()
	host, timeout := m.Host, c.hbTimeout()
	c.hbBusy[host] = true
	c.goAsync(func(ctx context.Context) {
		reply, err := c.call(ctx, host, cmd, timeout)
		resp := decodeHeartbeatResponse(reply, err)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.hbBusy, host)
		if ctx.Err() != nil {
			return
		}
		now := c.clock.Now()
		c.handleLocked(now, c.topo.ProcessHeartbeatResponse(now, target, resp))
		c.wakeLocked()
		c.noteChangesLocked()
	})
}

func decodeHeartbeatResponse(reply bsoncore.Document, err error) topology.HeartbeatResponse {
	r := topology.HeartbeatResponse{PrimaryID: -1, SyncSourceID: -1}
	if err != nil {
		r.Err = err
		if reply != nil {
			r.Term = getInt(reply, "term")
		}
		return r
	}
	r.SetName, _ = lookup(reply, "set").StringValueOK()
	r.State = topology.MemberState(getInt(reply, "state"))
	r.Term = getInt(reply, "term")
	r.ConfigVersion = getInt(reply, "configVersion")
	r.ConfigTerm = getInt(reply, "configTerm")
	r.Applied = parseOpTime(lookup(reply, "opTime"))
	r.Durable = parseOpTime(lookup(reply, "durableOpTime"))
	r.CatchingUp = truthy(lookup(reply, "catchingUp"))
	if v := lookup(reply, "electionTime"); v.Type == bsoncore.TypeTimestamp {
		t, i := v.Timestamp()
		r.ElectionTime = optime.MakeTimestamp(t, i)
	}
	if rd, ok := lookup(reply, "$replData").DocumentOK(); ok {
		r.LastCommitted = parseOpTime(lookup(rd, "lastOpCommitted"))
		r.PrimaryID = int(getIntDefault(rd, "primaryIndex", -1))
		r.SyncSourceID = int(getIntDefault(rd, "syncSourceIndex", -1))
	}
	if cd, ok := lookup(reply, "config").DocumentOK(); ok {
		if cfg, err := ParseConfig(cd); err == nil {
			r.Config = &cfg
		}
	}
	return r
}

// HeartbeatArgs is a parsed replSetHeartbeat.
type HeartbeatArgs struct {
	topology.HeartbeatRequest
	From string
}

// ParseHeartbeat parses a replSetHeartbeat command.
func ParseHeartbeat(cmd bsoncore.Document) (HeartbeatArgs, error) {
	var a HeartbeatArgs
	s, ok := lookup(cmd, "replSetHeartbeat").StringValueOK()
	if !ok {
		return a, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'replSetHeartbeat' is the wrong type, expected type 'string'")
	}
	a.SetName = s
	a.ConfigVersion = getInt(cmd, "configVersion")
	a.ConfigTerm = getIntDefault(cmd, "configTerm", -1)
	a.SenderID = int(getIntDefault(cmd, "fromId", -1))
	a.Term = getInt(cmd, "term")
	a.From, _ = lookup(cmd, "from").StringValueOK()
	return a, nil
}

// ProcessHeartbeat answers replSetHeartbeat.
func (c *Coordinator) ProcessHeartbeat(args HeartbeatArgs) (bsoncore.Document, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if c.topo == nil {
		if args.SetName != c.opts.SetName {
			return nil, mongoerr.Newf(mongoerr.InconsistentReplicaSetNames,
				"Our set name of %s does not match name %s reported by remote node", c.opts.SetName, args.SetName)
		}
		// Someone has a config that includes us: fetch it with a heartbeat of our own.
		if args.From != "" && args.ConfigVersion > 0 {
			c.fetchConfigLocked(args.From)
		}
		return nil, mongoerr.New(mongoerr.NotYetInitialized, "no replset config has been received")
	}
	cfg := c.topo.Config()
	if args.SenderID < 0 && args.SetName == cfg.SetName {
		// An uninitialized node fetching our config (see fetchConfigLocked).
		b := bsoncore.NewDocumentBuilder().AppendString("set", cfg.SetName).
			AppendInt32("state", int32(c.topo.State())).AppendInt64("term", c.topo.Term()).
			AppendInt64("configVersion", cfg.Version).AppendInt64("configTerm", cfg.Term).
			AppendDocument("config", ConfigDocument(cfg))
		return b.Build(), nil
	}
	resp, acts := c.topo.ProcessHeartbeatRequest(now, args.HeartbeatRequest)
	if resp.Err == nil {
		c.hbRecv[args.SenderID] = now
	}
	// Persist (if the term moved) before answering.
	c.handleLocked(now, acts)
	c.noteChangesLocked()
	if resp.Err != nil {
		return nil, resp.Err
	}
	b := make([]byte, 0, 512)
	idx, b := bsoncore.AppendDocumentStart(b)
	b = bsoncore.AppendStringElement(b, "set", resp.SetName)
	b = bsoncore.AppendInt32Element(b, "state", int32(resp.State))
	b = bsoncore.AppendInt64Element(b, "term", resp.Term)
	b = bsoncore.AppendInt64Element(b, "configVersion", resp.ConfigVersion)
	b = bsoncore.AppendInt64Element(b, "configTerm", resp.ConfigTerm)
	b = appendOpTime(b, "opTime", resp.Applied)
	b = bsoncore.AppendDateTimeElement(b, "wallTime", now.UnixMilli())
	b = appendOpTime(b, "durableOpTime", resp.Durable)
	b = bsoncore.AppendDateTimeElement(b, "durableWallTime", now.UnixMilli())
	if resp.State == topology.StatePrimary {
		b = bsoncore.AppendTimestampElement(b, "electionTime", resp.ElectionTime.Secs(), resp.ElectionTime.Inc())
		b = bsoncore.AppendBooleanElement(b, "catchingUp", resp.CatchingUp)
	}
	if m := cfg.Member(resp.SyncSourceID); m != nil {
		b = bsoncore.AppendStringElement(b, "syncingTo", m.Host)
	}
	if resp.Config != nil {
		b = bsoncore.AppendDocumentElement(b, "config", ConfigDocument(*resp.Config))
	}
	rd := bsoncore.NewDocumentBuilder().AppendInt64("term", resp.Term).
		AppendDocument("lastOpCommitted", opTimeDoc(resp.LastCommitted)).
		AppendInt64("configVersion", resp.ConfigVersion).AppendInt64("configTerm", resp.ConfigTerm).
		AppendInt32("primaryIndex", int32(resp.PrimaryID)).AppendInt32("syncSourceIndex", int32(resp.SyncSourceID)).Build()
	b = bsoncore.AppendDocumentElement(b, "$replData", rd)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}

// fetchConfigLocked sends a heartbeat as an uninitialized member (fromId -1) to host, whose
// reply carries its config; installing it makes this node a member.
func (c *Coordinator) fetchConfigLocked(host string) {
	if c.fetchingConfig {
		return
	}
	c.fetchingConfig = true
	cmd := bsoncore.NewDocumentBuilder().AppendString("replSetHeartbeat", c.opts.SetName).
		AppendInt64("configVersion", -2).AppendInt32("hbv", 1).AppendString("from", c.opts.Self).
		AppendInt32("fromId", -1).AppendInt64("term", 0).Build()
	c.goAsync(func(ctx context.Context) {
		reply, err := c.call(ctx, host, cmd, 10*time.Second)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.fetchingConfig = false
		if err != nil || c.topo != nil {
			return
		}
		cd, ok := lookup(reply, "config").DocumentOK()
		if !ok {
			return
		}
		cfg, err := ParseConfig(cd)
		if err == nil {
			err = c.installConfigLocked(c.clock.Now(), cfg, true)
		}
		if err != nil {
			c.log.Warn("Cannot install the config received from a member", logv2.ID(21481), "from", host, "error", err.Error())
			return
		}
		c.log.Info("Installed the replica set config received by heartbeat", logv2.ID(21392), "from", host, "version", cfg.Version)
	})
}

// --- votes --------------------------------------------------------------------------------

func (c *Coordinator) sendVoteRequestsLocked(a topology.Action) {
	cfg := c.topo.Config()
	req := a.VoteRequest
	idx := -1
	for i, m := range cfg.Members {
		if m.ID == req.CandidateID {
			idx = i
		}
	}
	b := bsoncore.NewDocumentBuilder().AppendInt32("replSetRequestVotes", 1).
		AppendString("setName", req.SetName).AppendBoolean("dryRun", req.DryRun).
		AppendInt64("term", req.Term).AppendInt32("candidateIndex", int32(idx)).
		AppendInt64("configVersion", req.ConfigVersion).AppendInt64("configTerm", req.ConfigTerm).
		AppendDocument("lastAppliedOpTime", opTimeDoc(req.LastApplied))
	cmd := b.Build()
	timeout := cfg.ElectionTimeout()
	for _, target := range a.Targets {
		m := cfg.Member(target)
		if m == nil {
			continue
		}
		host, voter := m.Host, target
		c.goAsync(func(ctx context.Context) {
			reply, err := c.call(ctx, host, cmd, timeout)
			if err != nil {
				return // the election times out in the core
			}
			resp := topology.VoteResponse{VoterID: voter, Term: getInt(reply, "term"), DryRun: req.DryRun,
				VoteGranted: truthy(lookup(reply, "voteGranted"))}
			resp.Reason, _ = lookup(reply, "reason").StringValueOK()
			c.mu.Lock()
			defer c.mu.Unlock()
			now := c.clock.Now()
			c.handleLocked(now, c.topo.ProcessVoteResponse(now, resp))
			c.noteChangesLocked()
		})
	}
}

// ProcessRequestVotes answers replSetRequestVotes; a granted real vote is durable in
// local.replset.election before the reply leaves.
func (c *Coordinator) ProcessRequestVotes(cmd bsoncore.Document) (bsoncore.Document, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return nil, mongoerr.New(mongoerr.NotYetInitialized, "no replset config has been received")
	}
	cfg := c.topo.Config()
	req := topology.VoteRequest{DryRun: truthy(lookup(cmd, "dryRun")), Term: getInt(cmd, "term"),
		ConfigVersion: getInt(cmd, "configVersion"), ConfigTerm: getIntDefault(cmd, "configTerm", -1),
		LastApplied: parseOpTime(lookup(cmd, "lastAppliedOpTime")), CandidateID: -1}
	req.SetName, _ = lookup(cmd, "setName").StringValueOK()
	if req.SetName != cfg.SetName {
		return nil, mongoerr.Newf(mongoerr.InconsistentReplicaSetNames,
			"Our set name of %s does not match name %s reported by remote node", cfg.SetName, req.SetName)
	}
	if i := int(getIntDefault(cmd, "candidateIndex", -1)); i >= 0 && i < len(cfg.Members) {
		req.CandidateID = cfg.Members[i].ID
	}
	now := c.clock.Now()
	resp, acts := c.topo.ProcessVoteRequest(now, req)
	persist, seq, d := false, uint64(0), topology.DurableState{}
	for _, a := range acts {
		if a.Kind == topology.ActPersistDurable {
			persist, seq, d = true, c.notePersistLocked(a.Durable), a.Durable
		}
	}
	if persist {
		// The vote (or the new term) is durable before the reply leaves and before anything
		// else the call produced is sent; the journal wait happens without c.mu.
		c.mu.Unlock()
		err := c.writeDurable(seq, d)
		c.mu.Lock()
		if err != nil {
			return nil, err
		}
		now = c.clock.Now()
	}
	c.handleLocked(now, withoutPersist(acts))
	c.noteChangesLocked()
	c.log.Info("Voting", logv2.ID(5972100), "dryRun", req.DryRun, "term", req.Term, "candidate", req.CandidateID,
		"granted", resp.VoteGranted, "reason", resp.Reason)
	b := bsoncore.NewDocumentBuilder().AppendInt64("term", resp.Term).
		AppendBoolean("voteGranted", resp.VoteGranted).AppendString("reason", resp.Reason)
	return b.Build(), nil
}

func withoutPersist(acts []topology.Action) []topology.Action {
	out := acts[:0:0]
	for _, a := range acts {
		if a.Kind != topology.ActPersistDurable {
			out = append(out, a)
		}
	}
	return out
}

// --- replSetUpdatePosition ----------------------------------------------------------------

// maybeSendUpdatePositionLocked reports our (and relayed) optimes to the sync source, or to
// the primary while there is none, when they moved or every keep-alive interval.
func (c *Coordinator) maybeSendUpdatePositionLocked(now time.Time) {
	if c.topo.State() == topology.StatePrimary || c.hbBusy["\x00up"] {
		return
	}
	target := c.topo.SyncSource()
	if target < 0 {
		target = c.topo.PrimaryID()
	}
	cfg := c.topo.Config()
	m := cfg.Member(target)
	if m == nil {
		return
	}
	mine := optime.Max(c.topo.LastApplied(), c.topo.LastDurable())
	if mine == c.upSentOp && now.Sub(c.upSentAt) < cfg.KeepAliveInterval() {
		return
	}
	c.upSentAt, c.upSentOp = now, mine
	up := c.topo.PrepareUpdatePosition(now)
	b := make([]byte, 0, 256)
	idx, b := bsoncore.AppendDocumentStart(b)
	b = bsoncore.AppendInt32Element(b, "replSetUpdatePosition", 1)
	ai, b := bsoncore.AppendArrayElementStart(b, "optimes")
	for i, p := range up.Positions {
		pi, b2 := bsoncore.AppendDocumentElementStart(b, itoa(int64(i)))
		b2 = appendOpTime(b2, "durableOpTime", p.Durable)
		b2 = bsoncore.AppendDateTimeElement(b2, "durableWallTime", now.UnixMilli())
		b2 = appendOpTime(b2, "appliedOpTime", p.Applied)
		b2 = bsoncore.AppendDateTimeElement(b2, "appliedWallTime", now.UnixMilli())
		b2 = bsoncore.AppendInt32Element(b2, "memberId", int32(p.MemberID))
		b2 = bsoncore.AppendInt64Element(b2, "cfgver", p.ConfigVersion)
		b, _ = bsoncore.AppendDocumentEnd(b2, pi)
	}
	b, _ = bsoncore.AppendArrayEnd(b, ai)
	rd := bsoncore.NewDocumentBuilder().AppendInt64("term", up.Term).
		AppendDocument("lastOpCommitted", opTimeDoc(c.topo.LastCommitted())).
		AppendInt64("configVersion", cfg.Version).AppendInt32("primaryIndex", int32(c.topo.PrimaryID())).
		AppendInt32("syncSourceIndex", int32(c.topo.SyncSource())).Build()
	b = bsoncore.AppendDocumentElement(b, "$replData", rd)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	host := m.Host
	c.hbBusy["\x00up"] = true
	c.goAsync(func(ctx context.Context) {
		_, err := c.call(ctx, host, b, cfg.ElectionTimeout())
		c.mu.Lock()
		delete(c.hbBusy, "\x00up")
		if err != nil {
			c.upSentOp = optime.OpTime{} // resend on the next tick
		} else {
			c.kickFeedback() // progress made while this one was in flight goes out now
		}
		c.mu.Unlock()
	})
}

// ProcessUpdatePosition handles replSetUpdatePosition.
func (c *Coordinator) ProcessUpdatePosition(cmd bsoncore.Document) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return mongoerr.New(mongoerr.NotYetInitialized, "no replset config has been received")
	}
	arr, ok := lookup(cmd, "optimes").ArrayOK()
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'replSetUpdatePosition.optimes' is missing or not an array")
	}
	up := topology.UpdatePosition{SenderID: -1}
	if rd, ok := lookup(cmd, "$replData").DocumentOK(); ok {
		up.Term = getInt(rd, "term")
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return mongoerr.New(mongoerr.TypeMismatch, "replSetUpdatePosition.optimes elements must be objects")
		}
		p := topology.MemberPosition{MemberID: int(getInt(d, "memberId")), ConfigVersion: getInt(d, "cfgver"),
			Applied: parseOpTime(lookup(d, "appliedOpTime")), Durable: parseOpTime(lookup(d, "durableOpTime"))}
		if up.SenderID < 0 {
			up.SenderID = p.MemberID
		}
		up.Positions = append(up.Positions, p)
	}
	now := c.clock.Now()
	acts, err := c.topo.ProcessUpdatePosition(now, up)
	c.handleLocked(now, acts)
	c.wakeLocked()
	c.noteChangesLocked()
	return err
}

// --- small BSON helpers -------------------------------------------------------------------

func lookup(d bsoncore.Document, key string) bsoncore.Value {
	v, err := d.LookupErr(key)
	if err != nil {
		return bsoncore.Value{}
	}
	return v
}

func getInt(d bsoncore.Document, key string) int64 { return getIntDefault(d, key, 0) }

func getIntDefault(d bsoncore.Document, key string, def int64) int64 {
	if n, ok := num(lookup(d, key)); ok {
		return int64(n)
	}
	return def
}

func opTimeDoc(op optime.OpTime) bsoncore.Document {
	return op.Document()
}
