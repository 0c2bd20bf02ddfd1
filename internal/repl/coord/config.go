package coord

import (
	"math"
	"sort"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
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
		case "configsvr":
			b, ok := v.BooleanOK()
			if !ok {
				return bad("configsvr field must be a boolean")
			}
			cfg.ConfigSvr = b
		case "replicaSetId":
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
	// Modes may come before members in the document, so their tag keys are checked last.
	if err := cfg.CheckWriteConcernModeTags(); err != nil {
		return topology.ReplSetConfig{}, err
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
	prioritySet, buildIndexes := false, true
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
			buildIndexes = truthy(v)
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
	// Only arbiters get priority 0 by default; hidden, delayed and non-voting members must
	// say so explicitly. An arbiter's explicit priority 1 also becomes 0 (MongoDB's
	// MemberConfig does this because old shells' rs.addArb sent priority 1); any other
	// non-zero arbiter priority is rejected by ValidateConfig.
	if m.ArbiterOnly && (!prioritySet || m.Priority == 1) {
		m.Priority = 0
	}
	if !buildIndexes && m.Priority != 0 {
		return bad("priority must be 0 when buildIndexes=false")
	}
	return m, nil
}

// maxSecondaryDelaySecs is MongoDB's kMaxSecondaryDelay (366 days).
const maxSecondaryDelaySecs = 3600 * 24 * 366

// ValidateConfig checks cfg as replSetInitiate and replSetReconfig do: MongoDB's member
// rules that the core's Validate does not spell with MongoDB's messages (arbiters must vote,
// have priority 0 and no tags; secondaryDelaySecs in range), then the core's Validate
// (ids, hosts, votes, priorities of non-voting, hidden and delayed members, voter counts).
// Errors are InvalidReplicaSetConfig; replSetReconfig reports them as
// NewReplicaSetConfigurationIncompatible, as MongoDB does.
func ValidateConfig(cfg topology.ReplSetConfig) error {
	for i := range cfg.Members {
		m := &cfg.Members[i]
		if m.SecondaryDelaySecs < 0 || m.SecondaryDelaySecs > maxSecondaryDelaySecs {
			return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "secondaryDelaySecs field value of %d is out of range", m.SecondaryDelaySecs)
		}
		if !m.ArbiterOnly {
			continue
		}
		if m.Votes == 0 {
			return mongoerr.New(mongoerr.InvalidReplicaSetConfig, "Arbiter must vote (cannot have 0 votes)")
		}
		if len(m.Tags) > 0 {
			return mongoerr.New(mongoerr.InvalidReplicaSetConfig, "Cannot set tags on arbiters.")
		}
		if m.Priority != 0 {
			return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig,
				"Member %s is an arbiter but has priority %v. Arbiter priority must be 0.", m.Host, m.Priority)
		}
	}
	return cfg.Validate()
}

// ValidateClusterRole checks cfg against this node's sharded-cluster role as MongoDB's
// ReplSetConfig::validate does: a `configsvr: true` config allows no arbiter and no delayed
// member, and needs a node started with --configsvr and writeConcernMajorityJournalDefault;
// a node started with --configsvr needs `configsvr: true`.
func ValidateClusterRole(cfg topology.ReplSetConfig, configServer bool) error {
	bad := func(msg string) error { return mongoerr.New(mongoerr.InvalidReplicaSetConfig, msg) }
	if !cfg.ConfigSvr {
		if configServer {
			return bad("Nodes started with the --configsvr flag must have configsvr:true in their config")
		}
		return nil
	}
	for _, m := range cfg.Members {
		if m.ArbiterOnly {
			return bad("Arbiters are not allowed in replica set configurations being used for config servers")
		}
	}
	for _, m := range cfg.Members {
		if m.SecondaryDelaySecs != 0 {
			return bad("Members in replica set configurations being used for config servers cannot have a non-zero secondaryDelaySecs")
		}
	}
	if !configServer {
		return bad("Nodes being used for config servers must be started with the --configsvr flag")
	}
	if !cfg.Settings.WriteConcernMajorityJournalDefault {
		return bad("writeConcernMajorityJournalDefault must be true in replica set configurations being used for config servers")
	}
	return nil
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
		case "getLastErrorModes":
			s.GetLastErrorModes, err = parseWriteConcernModes(v)
		case "getLastErrorDefaults", "replicaSetId":
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
	if cfg.ConfigSvr {
		b.AppendBoolean("configsvr", true)
	}
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
		AppendDocument("getLastErrorModes", writeConcernModesDoc(cfg.Settings.GetLastErrorModes)).
		AppendDocument("getLastErrorDefaults", bsoncore.NewDocumentBuilder().AppendInt32("w", 1).AppendInt32("wtimeout", 0).Build())
	b.AppendDocument("settings", sb.Build())
	return b.Build()
}

// parseWriteConcernModes reads settings.getLastErrorModes {mode: {tagKey: minCount, ...}}
// with MongoDB's checks and messages (ReplSetWriteConcernModeDefinitions::parseFromBSON):
// objects all the way down, numeric counts truncated to integers and positive, no mode
// named twice. Whether the tag keys exist is checked once the members are known.
func parseWriteConcernModes(v bsoncore.Value) ([]topology.WriteConcernMode, error) {
	const field = "getLastErrorModes"
	d, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "Expected %s to be an Object, it actually had type %s", field, bsonutil.TypeName(v.Type))
	}
	elems, err := d.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "settings.%s: %v", field, err)
	}
	var modes []topology.WriteConcernMode
	seen := map[string]bool{}
	for _, e := range elems {
		name := e.Key()
		if seen[name] {
			return nil, mongoerr.Newf(mongoerr.Location51001, "%s contains multiple fields named %s", field, name)
		}
		seen[name] = true
		md, ok := e.Value().DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "Expected %s.%s to be an Object, not %s", field, name, bsonutil.TypeName(e.Value().Type))
		}
		ces, err := md.Elements()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidReplicaSetConfig, "settings.%s.%s: %v", field, name, err)
		}
		mode := topology.WriteConcernMode{Name: name}
		for _, ce := range ces {
			n, ok := num(ce.Value())
			if !ok {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "Expected %s.%s.%s to be a number, not %s",
					field, name, ce.Key(), bsonutil.TypeName(ce.Value().Type))
			}
			minCount := numberInt(n)
			if minCount <= 0 {
				return nil, mongoerr.Newf(mongoerr.BadValue, "Value of %s.%s.%s must be positive, but found %d",
					field, name, ce.Key(), minCount)
			}
			mode.Constraints = append(mode.Constraints, topology.TagConstraint{Key: ce.Key(), MinCount: minCount})
		}
		modes = append(modes, mode)
	}
	return modes, nil
}

// numberInt is BSONElement::numberInt for a number: truncation toward zero, NaN as 0 and
// out-of-range values clamped to the int32 range.
func numberInt(f float64) int {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt32:
		return math.MaxInt32
	case f <= math.MinInt32:
		return math.MinInt32
	}
	return int(f)
}

// writeConcernModesDoc is getLastErrorModes as replSetGetConfig shows it.
func writeConcernModesDoc(modes []topology.WriteConcernMode) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	for _, m := range modes {
		md := bsoncore.NewDocumentBuilder()
		for _, c := range m.Constraints {
			md.AppendInt32(c.Key, int32(c.MinCount))
		}
		b.AppendDocument(m.Name, md.Build())
	}
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
func appendOpTime(b []byte, key string, op optime.OpTime) []byte {
	return op.AppendElement(b, key)
}

// parseOpTime reads {ts, t}; a missing or malformed value is the null OpTime.
func parseOpTime(v bsoncore.Value) optime.OpTime {
	d, ok := v.DocumentOK()
	if !ok {
		return optime.OpTime{}
	}
	var op optime.OpTime
	if ts, err := d.LookupErr("ts"); err == nil {
		if t, i, ok := ts.TimestampOK(); ok {
			op.TS = optime.MakeTimestamp(t, i)
		}
	}
	if t, err := d.LookupErr("t"); err == nil {
		if n, ok := num(t); ok {
			op.Term = int64(n)
		}
	}
	return op
}

// CheckReconfig is MongoDB's validateConfigForReconfig: whether cfg may replace old. cfg is
// validated (ValidateConfig) and must keep the set name, each host's member _id and each
// member's arbiterOnly flag; without force its version must be greater than old's, at most
// one voting member may be added or removed (by member _id: a quorum of the new config then
// overlaps every quorum of the old one), and a PSA config whose secondary is electable may
// not follow a config with a single writable voter (a stale secondary could then be elected
// with the arbiter's vote). Every failure is NewReplicaSetConfigurationIncompatible.
func CheckReconfig(old, cfg topology.ReplSetConfig, force bool) error {
	incompatible := func(format string, args ...any) error {
		return mongoerr.Newf(mongoerr.NewReplicaSetConfigurationIncompatible, format, args...)
	}
	if err := ValidateConfig(cfg); err != nil {
		if me, ok := mongoerr.As(err); ok {
			return incompatible("%s", me.Msg)
		}
		return err
	}
	if !force && cfg.Version <= old.Version {
		return incompatible("New replica set configuration version and term must be greater than old, but "+
			"{version: %d, term: %d} is not greater than {version: %d, term: %d} for replica set %s",
			cfg.Version, cfg.Term, old.Version, old.Term, cfg.SetName)
	}
	if cfg.SetName != old.SetName {
		return incompatible("New and old configurations differ in replica set name; old was %s, and new is %s", old.SetName, cfg.SetName)
	}
	for _, n := range cfg.Members {
		for _, o := range old.Members {
			sameID, sameHost := n.ID == o.ID, n.Host == o.Host
			switch {
			case !sameID && !sameHost:
				continue
			case sameHost && !sameID:
				return incompatible("New and old configurations both have members with host of %s but in the new configuration the _id field is %d and in the old configuration it is %d for replica set %s",
					o.Host, n.ID, o.ID, cfg.SetName)
			case n.ArbiterOnly != o.ArbiterOnly:
				return incompatible("New and old configurations differ in the setting of the arbiterOnly field for member %s; to make this change, remove then re-add the member", o.Host)
			}
		}
	}
	if !force {
		if d := votingIDChanges(old, cfg); d > 1 {
			return incompatible("Non force replica set reconfig can only add or remove at most 1 voting member.")
		}
	}
	voters, arbiters := 0, 0
	for _, m := range old.Members {
		if m.Votes > 0 {
			voters++
		}
		if m.ArbiterOnly {
			arbiters++
		}
	}
	overlap := voters/2+1 <= voters-arbiters
	electable := 0
	for _, m := range cfg.Members {
		if m.Priority > 0 {
			electable++
		}
	}
	if !overlap && isPSA(cfg) && electable > 1 {
		return incompatible("Rejecting reconfig where the new config has a PSA topology and the secondary is electable, " +
			"but the old config contains only one writable node. Refer to " +
			"https://docs.mongodb.com/manual/reference/method/rs.reconfigForPSASet/ for next steps on reconfiguring a PSA set.")
	}
	return nil
}

// isPSA: three voting members, one of them an arbiter (MongoDB's ReplSetConfig::isPSASet).
func isPSA(cfg topology.ReplSetConfig) bool {
	voters, arbiters := 0, 0
	for _, m := range cfg.Members {
		if m.Votes > 0 {
			voters++
			if m.ArbiterOnly {
				arbiters++
			}
		}
	}
	return len(cfg.Members) == 3 && voters == 3 && arbiters == 1
}

// votingIDChanges is the size of the symmetric difference of the two configs' voting member
// _ids (MongoDB's validateSingleNodeChange identifies a node by its _id, not its host).
func votingIDChanges(a, b topology.ReplSetConfig) int {
	voters := func(c topology.ReplSetConfig) map[int]bool {
		m := map[int]bool{}
		for _, x := range c.Members {
			if x.Votes > 0 {
				m[x.ID] = true
			}
		}
		return m
	}
	va, vb := voters(a), voters(b)
	n := 0
	for id := range va {
		if !vb[id] {
			n++
		}
	}
	for id := range vb {
		if !va[id] {
			n++
		}
	}
	return n
}
