package coord

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/optime"
	"humongo/internal/repl/topology"
)

// Status builds replSetGetStatus's reply (without ok).
func (c *Coordinator) Status() (bsoncore.Document, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return nil, notInitialized()
	}
	now := c.clock.Now()
	c.refreshAppliedLocked(now)
	st := c.topo.Status(now)
	cfg := c.topo.Config()
	b := make([]byte, 0, 2048)
	idx, b := bsoncore.AppendDocumentStart(b)
	b = bsoncore.AppendStringElement(b, "set", cfg.SetName)
	b = bsoncore.AppendDateTimeElement(b, "date", now.UnixMilli())
	b = bsoncore.AppendInt32Element(b, "myState", int32(st.State))
	b = bsoncore.AppendInt64Element(b, "term", st.Term)
	if m := cfg.Member(st.SyncSourceID); m != nil {
		b = bsoncore.AppendStringElement(b, "syncSourceHost", m.Host)
	} else {
		b = bsoncore.AppendStringElement(b, "syncSourceHost", "")
	}
	b = bsoncore.AppendInt32Element(b, "syncSourceId", int32(st.SyncSourceID))
	b = bsoncore.AppendInt64Element(b, "heartbeatIntervalMillis", cfg.HeartbeatInterval().Milliseconds())
	b = bsoncore.AppendInt32Element(b, "majorityVoteCount", int32(cfg.MajorityVoteCount()))
	b = bsoncore.AppendInt32Element(b, "writeMajorityCount", int32(cfg.WriteMajority()))
	b = bsoncore.AppendInt32Element(b, "votingMembersCount", int32(cfg.TotalVotes()))
	wv := 0
	for _, m := range cfg.Members {
		if m.Votes > 0 && !m.ArbiterOnly {
			wv++
		}
	}
	b = bsoncore.AppendInt32Element(b, "writableVotingMembersCount", int32(wv))
	oi, b := bsoncore.AppendDocumentElementStart(b, "optimes")
	b = appendOpTime(b, "lastCommittedOpTime", st.LastCommitted)
	b = bsoncore.AppendDateTimeElement(b, "lastCommittedWallTime", wallOf(st.LastCommitted))
	b = appendOpTime(b, "readConcernMajorityOpTime", st.LastCommitted)
	b = appendOpTime(b, "appliedOpTime", st.Applied)
	b = appendOpTime(b, "durableOpTime", st.Durable)
	b = bsoncore.AppendDateTimeElement(b, "lastAppliedWallTime", wallOf(st.Applied))
	b = bsoncore.AppendDateTimeElement(b, "lastDurableWallTime", wallOf(st.Durable))
	b, _ = bsoncore.AppendDocumentEnd(b, oi)
	ai, b := bsoncore.AppendArrayElementStart(b, "members")
	for i, m := range st.Members {
		mc := cfg.Member(m.ID)
		if mc == nil {
			continue
		}
		mi, b2 := bsoncore.AppendDocumentElementStart(b, itoa(int64(i)))
		b2 = bsoncore.AppendInt32Element(b2, "_id", int32(m.ID))
		b2 = bsoncore.AppendStringElement(b2, "name", mc.Host)
		health := 0.0
		if m.Self || m.Up {
			health = 1
		}
		state := m.State
		if !m.Self && !m.Up && m.LastHeartbeat.IsZero() {
			state = topology.StateUnknown
		}
		b2 = bsoncore.AppendDoubleElement(b2, "health", health)
		b2 = bsoncore.AppendInt32Element(b2, "state", int32(state))
		b2 = bsoncore.AppendStringElement(b2, "stateStr", stateStr(state))
		b2 = bsoncore.AppendInt64Element(b2, "uptime", int64(now.Sub(c.start).Seconds()))
		b2 = appendOpTime(b2, "optime", m.Applied)
		b2 = appendOpTime(b2, "optimeDurable", m.Durable)
		b2 = bsoncore.AppendDateTimeElement(b2, "optimeDate", wallOf(m.Applied))
		b2 = bsoncore.AppendDateTimeElement(b2, "optimeDurableDate", wallOf(m.Durable))
		if !m.Self {
			b2 = bsoncore.AppendDateTimeElement(b2, "lastHeartbeat", m.LastHeartbeat.UnixMilli())
			b2 = bsoncore.AppendDateTimeElement(b2, "lastHeartbeatRecv", c.hbRecv[m.ID].UnixMilli())
			b2 = bsoncore.AppendInt64Element(b2, "pingMs", m.Ping.Milliseconds())
		}
		src := ""
		if sm := cfg.Member(m.SyncSourceID); sm != nil {
			src = sm.Host
		}
		b2 = bsoncore.AppendStringElement(b2, "syncSourceHost", src)
		b2 = bsoncore.AppendInt32Element(b2, "syncSourceId", int32(m.SyncSourceID))
		b2 = bsoncore.AppendStringElement(b2, "infoMessage", "")
		if state == topology.StatePrimary && m.Self {
			et := c.electionTS
			b2 = bsoncore.AppendTimestampElement(b2, "electionTime", uint32(et.Unix()), 1)
			b2 = bsoncore.AppendDateTimeElement(b2, "electionDate", et.UnixMilli())
		}
		b2 = bsoncore.AppendInt64Element(b2, "configVersion", cfg.Version)
		b2 = bsoncore.AppendInt64Element(b2, "configTerm", cfg.Term)
		if m.Self {
			b2 = bsoncore.AppendBooleanElement(b2, "self", true)
			b2 = bsoncore.AppendStringElement(b2, "lastHeartbeatMessage", "")
		}
		b, _ = bsoncore.AppendDocumentEnd(b2, mi)
	}
	b, _ = bsoncore.AppendArrayEnd(b, ai)
	if is := c.initialSyncStatusLocked(); is != nil { // secondary.go
		b = bsoncore.AppendDocumentElement(b, "initialSyncStatus", is)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}

func wallOf(op optime.OpTime) int64 { return int64(op.TS.Secs()) * 1000 }

func stateStr(s topology.MemberState) string {
	if s == topology.StateUnknown {
		return "(not reachable/healthy)"
	}
	return s.String()
}
