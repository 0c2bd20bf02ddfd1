package coord

import (
	"math"
	"sort"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/repl/topology"
)

// ParseConfig decodes a replica-set config document (replSetInitiate, replSetReconfig,
// local.system.replset, a heartbeat's config) into the core's ReplSetConfig, applying
// MongoDB's defaults (priority 1, votes 1, chaining allowed, catch-up unbounded,
// writeConcernMajorityJournalDefault true). It does not Validate.
func ParseConfig(doc bsoncore.Document) (topology.ReplSetConfig, error) {
	cfg := topology.ReplSetConfig{Version: 1, Settings: topology.Settings{
		ChainingAllowed: true, CatchUpTimeout: -1, WriteConcernMajorityJournalDefault: true,
	}}
	bad := func(format string, args ...any) (topology.ReplSetConfig, error) {
		return topology.ReplSetConfig{}, mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, format, args...)
	}
	elems, err := doc.Elements()
	if err != nil {
		return bad("invalid replica set config document: %v", err)
	}
	haveMembers := false
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "_id":
			s, ok := v.StringValueOK()
			if !ok {
				return bad("_id field must be a string")
			}
			cfg.SetName = s
		case "version":
			n, ok := num(v)
			if !ok || n < 1 {
				return bad("version field value of %v is out of range", v)
			}
			cfg.Version = int64(n)
		case "term":
			n, ok := num(v)
			if !ok {
				return bad("term must be a number")
			}
			cfg.Term = int64(n)
		case "protocolVersion":
			if n, ok := num(v); !ok || n != 1 {
				return bad("Only protocolVersion 1 is supported")
			}
		case "writeConcernMajorityJournalDefault":
			b, ok := v.BooleanOK()
			if !ok {
				return bad("writeConcernMajorityJournalDefault must be a boolean")
			}
			cfg.Settings.WriteConcernMajorityJournalDefault = b
		case "members":
			arr, ok := v.ArrayOK()
			if !ok {
				return bad("members field must be an array")
			}
			haveMembers = true
			vals, _ := arr.Values()
			for i, mv := range vals {
				md, ok := mv.DocumentOK()
				if !ok {
					return bad("members.%d must be an object", i)
				}
				m, err := parseMember(i, md)
				if err != nil {
					return topology.ReplSetConfig{}, err
				}
				cfg.Members = append(cfg.Members, m)
			}
		case "settings":
			sd, ok := v.DocumentOK()
			if !ok {
				return bad("settings field must be an object")
			}
			if err := parseSettings(sd, &cfg.Settings); err != nil {
				return topology.ReplSetConfig{}, err
			}
		case "configsvr", "replicaSetId":
		default:
			return topology.ReplSetConfig{}, mongoerr.Newf(mongoerr.BadValue, "Unexpected field %s in replica set configuration", e.Key())
		}
	}
	if cfg.SetName == "" {
		return bad("Missing expected field \"_id\"")
	}
	if !haveMembers {
		return bad("Missing expected field \"members\"")
	}
	return cfg, nil
}

func parseMember(i int, md bsoncore.Document) (topology.MemberConfig, error) {
	m := topology.MemberConfig{ID: -1, Priority: 1, Votes: 1}
	bad := func(format string, args ...any) (topology.MemberConfig, error) {
		return m, mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "members.%d: "+format, append([]any{i}, args...)...)
	}
	elems, err := md.Elements()
	if err != nil {
		return bad("%v", err)
	}
	prioritySet := false
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "_id":
			n, ok := num(v)
			if !ok || n < 0 || n > 255 || n != math.Trunc(n) {
				return bad("_id field must be an integer between 0 and 255")
			}
			m.ID = int(n)
		case "host":
			s, ok := v.StringValueOK()
			if !ok || s == "" {
				return bad("host field must be a non-empty string")
			}
			m.Host = s
		case "priority":
			n, ok := num(v)
			if !ok {
				return bad("priority field must be a number")
			}
			m.Priority, prioritySet = n, true
		case "votes":
			n, ok := num(v)
			if !ok {
				return bad("votes field must be a number")
			}
			m.Votes = int(n)
		case "hidden":
			m.Hidden = truthy(v)
		case "arbiterOnly":
			m.ArbiterOnly = truthy(v)
		case "secondaryDelaySecs", "slaveDelay":
			n, ok := num(v)
			if !ok {
				return bad("secondaryDelaySecs field must be a number")
			}
			m.SecondaryDelaySecs = int(n)
		case "tags":
			td, ok := v.DocumentOK()
			if !ok {
				return bad("tags field must be an object")
			}
			tes, _ := td.Elements()
			m.Tags = map[string]string{}
			for _, te := range tes {
				s, ok := te.Value().StringValueOK()
				if !ok {
					return bad("tags.%s must be a string", te.Key())
				}
				m.Tags[te.Key()] = s
			}
		case "buildIndexes":
		default:
			return m, mongoerr.Newf(mongoerr.BadValue, "Unexpected field %s in replica set member configuration", e.Key())
		}
	}
	if m.ID < 0 {
		return bad("Missing expected field \"_id\"")
	}
	if m.Host == "" {
		return bad("Missing expected field \"host\"")
	}
	// Arbiters, non-voters and (by MongoDB's rules, when unset) hidden/delayed members get
	// priority 0 by default only for arbiters; others must say so explicitly.
	if m.ArbiterOnly && !prioritySet {
		m.Priority = 0
	}
	return m, nil
}

func parseSettings(sd bsoncore.Document, s *topology.Settings) error {
	elems, err := sd.Elements()
	if err != nil {
		return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "settings: %v", err)
	}
	ms := func(v bsoncore.Value, name string) (time.Duration, error) {
		n, ok := num(v)
		if !ok {
			return 0, mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "settings.%s must be a number", name)
		}
		return time.Duration(n * float64(time.Millisecond)), nil
	}
	for _, e := range elems {
		v := e.Value()
		var err error
		switch e.Key() {
		case "chainingAllowed":
			s.ChainingAllowed = truthy(v)
		case "heartbeatIntervalMillis":
			s.HeartbeatInterval, err = ms(v, e.Key())
		case "heartbeatTimeoutSecs":
			var d time.Duration
			d, err = ms(v, e.Key())
			s.HeartbeatTimeout = d * 1000
		case "electionTimeoutMillis":
			s.ElectionTimeout, err = ms(v, e.Key())
		case "catchUpTimeoutMillis":
			s.CatchUpTimeout, err = ms(v, e.Key())
			if s.CatchUpTimeout < 0 {
				s.CatchUpTimeout = -1
			}
		case "catchUpTakeoverDelayMillis":
			s.CatchUpTakeoverDelay, err = ms(v, e.Key())
			if s.CatchUpTakeoverDelay < 0 {
				s.CatchUpTakeoverDelay = -1
			}
		case "getLastErrorModes", "getLastErrorDefaults", "replicaSetId":
		default:
			return mongoerr.Newf(mongoerr.BadValue, "Unexpected field %s in replica set settings", e.Key())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ConfigDocument encodes cfg the way replSetGetConfig shows it.
func ConfigDocument(cfg topology.ReplSetConfig) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder().
		AppendString("_id", cfg.SetName).
		AppendInt32("version", int32(cfg.Version)).
		AppendInt64("term", cfg.Term).
		AppendInt64("protocolVersion", 1).
		AppendBoolean("writeConcernMajorityJournalDefault", cfg.Settings.WriteConcernMajorityJournalDefault)
	ab := bsoncore.NewArrayBuilder()
	for _, m := range cfg.Members {
		md := bsoncore.NewDocumentBuilder().
			AppendInt32("_id", int32(m.ID)).
			AppendString("host", m.Host).
			AppendBoolean("arbiterOnly", m.ArbiterOnly).
			AppendBoolean("buildIndexes", true).
			AppendBoolean("hidden", m.Hidden).
			AppendDouble("priority", m.Priority).
			AppendDocument("tags", tagsDoc(m.Tags)).
			AppendInt64("secondaryDelaySecs", int64(m.SecondaryDelaySecs)).
			AppendInt32("votes", int32(m.Votes)).Build()
		ab.AppendDocument(md)
	}
	b.AppendArray("members", ab.Build())
	cu := int64(-1)
	if cfg.Settings.CatchUpTimeout >= 0 {
		cu = cfg.Settings.CatchUpTimeout.Milliseconds()
	}
	cut := int64(30000)
	if d := cfg.Settings.CatchUpTakeoverDelay; d < 0 {
		cut = -1
	} else if d > 0 {
		cut = d.Milliseconds()
	}
	sb := bsoncore.NewDocumentBuilder().
		AppendBoolean("chainingAllowed", cfg.Settings.ChainingAllowed).
		AppendInt32("heartbeatIntervalMillis", int32(cfg.HeartbeatInterval().Milliseconds())).
		AppendInt32("heartbeatTimeoutSecs", int32(orDefault(cfg.Settings.HeartbeatTimeout, topology.DefaultHeartbeatTimeout).Seconds())).
		AppendInt32("electionTimeoutMillis", int32(cfg.ElectionTimeout().Milliseconds())).
		AppendInt32("catchUpTimeoutMillis", int32(cu)).
		AppendInt32("catchUpTakeoverDelayMillis", int32(cut)).
		AppendDocument("getLastErrorModes", bsoncore.NewDocumentBuilder().Build()).
		AppendDocument("getLastErrorDefaults", bsoncore.NewDocumentBuilder().AppendInt32("w", 1).AppendInt32("wtimeout", 0).Build())
	b.AppendDocument("settings", sb.Build())
	return b.Build()
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func tagsDoc(tags map[string]string) bsoncore.Document {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b := bsoncore.NewDocumentBuilder()
	for _, k := range keys {
		b.AppendString(k, tags[k])
	}
	return b.Build()
}

func num(v bsoncore.Value) (float64, bool) {
	switch v.Type {
	case bsoncore.TypeInt32:
		return float64(v.Int32()), true
	case bsoncore.TypeInt64:
		return float64(v.Int64()), true
	case bsoncore.TypeDouble:
		return v.Double(), true
	case bsoncore.TypeDecimal128:
		h, l, _ := v.Decimal128OK()
		f, err := strconv.ParseFloat(bson.NewDecimal128(h, l).String(), 64)
		return f, err == nil
	}
	return 0, false
}

func truthy(v bsoncore.Value) bool {
	switch v.Type {
	case bsoncore.TypeBoolean:
		return v.Boolean()
	case bsoncore.TypeNull, bsoncore.TypeUndefined, 0:
		return false
	}
	if n, ok := num(v); ok {
		return n != 0
	}
	return true
}

// appendOpTime appends {ts, t} as MongoDB's OpTime BSON.
func appendOpTime(b []byte, key string, op topology.OpTime) []byte {
	idx, b := bsoncore.AppendDocumentElementStart(b, key)
	b = bsoncore.AppendTimestampElement(b, "ts", op.TS.Secs, op.TS.Inc)
	b = bsoncore.AppendInt64Element(b, "t", op.Term)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// parseOpTime reads {ts, t}; a missing or malformed value is the null OpTime.
func parseOpTime(v bsoncore.Value) topology.OpTime {
	d, ok := v.DocumentOK()
	if !ok {
		return topology.OpTime{}
	}
	var op topology.OpTime
	if ts, err := d.LookupErr("ts"); err == nil {
		if t, i, ok := ts.TimestampOK(); ok {
			op.TS = topology.Timestamp{Secs: t, Inc: i}
		}
	}
	if t, err := d.LookupErr("t"); err == nil {
		if n, ok := num(t); ok {
			op.Term = int64(n)
		}
	}
	return op
}
