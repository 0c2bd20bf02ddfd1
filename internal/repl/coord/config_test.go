package coord_test

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
	"humongo/internal/repl/topology"
)

func parseCfg(t *testing.T, d bson.D) topology.ReplSetConfig {
	t.Helper()
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := coord.ParseConfig(bsoncore.Document(raw))
	if err != nil {
		t.Fatalf("parse %v: %v", d, err)
	}
	return cfg
}

func cfgDoc(version int, members ...bson.D) bson.D {
	a := bson.A{}
	for _, m := range members {
		a = append(a, m)
	}
	return bson.D{{Key: "_id", Value: "rs0"}, {Key: "version", Value: version}, {Key: "members", Value: a}}
}

func member(id int, extra ...bson.E) bson.D {
	return append(bson.D{{Key: "_id", Value: id}, {Key: "host", Value: "h" + string(rune('0'+id)) + ":27017"}}, extra...)
}

func wantErr(t *testing.T, err error, code mongoerr.Code, msg string) {
	t.Helper()
	if !mongoerr.Is(err, code) {
		t.Fatalf("got %v, want code %v", err, code)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("got %q, want it to contain %q", err.Error(), msg)
	}
}

// TestValidateConfigMemberRules pins MongoDB's messages for arbiter and non-voting
// misconfigurations (replSetInitiate reports them as InvalidReplicaSetConfig).
func TestValidateConfigMemberRules(t *testing.T) {
	vote0 := bson.E{Key: "votes", Value: 0}
	arb := bson.E{Key: "arbiterOnly", Value: true}
	for _, tc := range []struct {
		name string
		cfg  bson.D
		msg  string // "" means valid
	}{
		{"plain", cfgDoc(1, member(0), member(1)), ""},
		{"non-voter with priority", cfgDoc(1, member(0), member(1, vote0)), "priority must be 0 when non-voting (votes:0)"},
		{"non-voter priority 0", cfgDoc(1, member(0), member(1, vote0, bson.E{Key: "priority", Value: 0})), ""},
		{"arbiter without votes", cfgDoc(1, member(0), member(1, arb, vote0)), "Arbiter must vote (cannot have 0 votes)"},
		{"arbiter with tags", cfgDoc(1, member(0), member(1, arb, bson.E{Key: "tags", Value: bson.D{{Key: "dc", Value: "x"}}})), "Cannot set tags on arbiters."},
		{"arbiter priority 1 becomes 0", cfgDoc(1, member(0), member(1, arb, bson.E{Key: "priority", Value: 1})), ""},
		{"arbiter priority 2", cfgDoc(1, member(0), member(1, arb, bson.E{Key: "priority", Value: 2})), "is an arbiter but has priority 2. Arbiter priority must be 0."},
		{"hidden with priority", cfgDoc(1, member(0), member(1, bson.E{Key: "hidden", Value: true})), "priority must be 0 when hidden=true"},
		{"delayed with priority", cfgDoc(1, member(0), member(1, bson.E{Key: "secondaryDelaySecs", Value: 5})), "priority must be 0 when secondaryDelaySecs is used"},
		{"negative delay", cfgDoc(1, member(0), member(1, bson.E{Key: "priority", Value: 0}, bson.E{Key: "secondaryDelaySecs", Value: -1})), "secondaryDelaySecs field value of -1 is out of range"},
		{"no electable member", cfgDoc(1, member(0, bson.E{Key: "priority", Value: 0})), "at least one voting, electable member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := coord.ValidateConfig(parseCfg(t, tc.cfg))
			if tc.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, mongoerr.InvalidReplicaSetConfig, tc.msg)
		})
	}
}

func TestParseBuildIndexesFalseNeedsPriorityZero(t *testing.T) {
	raw, _ := bson.Marshal(cfgDoc(1, member(0), member(1, bson.E{Key: "buildIndexes", Value: false})))
	_, err := coord.ParseConfig(raw)
	wantErr(t, err, mongoerr.InvalidReplicaSetConfig, "priority must be 0 when buildIndexes=false")
}

// TestCheckReconfig covers MongoDB's validateConfigForReconfig rules; every failure is
// NewReplicaSetConfigurationIncompatible (103), also the member rules that replSetInitiate
// reports as 93 (jstests/replsets/no_arbiter_zero_votes.js expects 103 from a reconfig).
func TestCheckReconfig(t *testing.T) {
	old := parseCfg(t, cfgDoc(1, member(0), member(1), member(2)))
	incompatible := mongoerr.NewReplicaSetConfigurationIncompatible
	for _, tc := range []struct {
		name  string
		cfg   bson.D
		force bool
		msg   string
	}{
		{"add one voter", cfgDoc(2, member(0), member(1), member(2), member(3)), false, ""},
		{"remove one voter", cfgDoc(2, member(0), member(1)), false, ""},
		{"add two voters", cfgDoc(2, member(0), member(1), member(2), member(3), member(4)), false,
			"Non force replica set reconfig can only add or remove at most 1 voting member."},
		{"add two voters with force", cfgDoc(2, member(0), member(1), member(2), member(3), member(4)), true, ""},
		{"swap a voter for another", cfgDoc(2, member(0), member(1), member(3)), false,
			"Non force replica set reconfig can only add or remove at most 1 voting member."},
		{"add a non-voter and remove a voter", cfgDoc(2, member(0), member(1), member(3, bson.E{Key: "votes", Value: 0}, bson.E{Key: "priority", Value: 0})), false, ""},
		{"make one voter non-voting", cfgDoc(2, member(0), member(1), member(2, bson.E{Key: "votes", Value: 0}, bson.E{Key: "priority", Value: 0})), false, ""},
		{"same version", cfgDoc(1, member(0), member(1), member(2)), false,
			"New replica set configuration version and term must be greater than old, but {version: 1, term: 0} is not greater than {version: 1, term: 0} for replica set rs0"},
		{"same version with force", cfgDoc(1, member(0), member(1), member(2)), true, ""},
		{"host moves to another _id", cfgDoc(2, member(0), member(1), bson.D{{Key: "_id", Value: 5}, {Key: "host", Value: "h2:27017"}}), false,
			"New and old configurations both have members with host of h2:27017 but in the new configuration the _id field is 5 and in the old configuration it is 2"},
		{"member becomes an arbiter", cfgDoc(2, member(0), member(1), member(2, bson.E{Key: "arbiterOnly", Value: true})), false,
			"New and old configurations differ in the setting of the arbiterOnly field for member h2:27017"},
		{"zero-vote arbiter", cfgDoc(2, member(0), member(1), member(2), member(3, bson.E{Key: "arbiterOnly", Value: true}, bson.E{Key: "votes", Value: 0})), false,
			"Arbiter must vote (cannot have 0 votes)"},
		{"non-voter with priority", cfgDoc(2, member(0), member(1), member(2, bson.E{Key: "votes", Value: 0})), false,
			"priority must be 0 when non-voting (votes:0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := coord.CheckReconfig(old, parseCfg(t, tc.cfg), tc.force)
			if tc.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, incompatible, tc.msg)
		})
	}
	renamed := parseCfg(t, cfgDoc(2, member(0), member(1), member(2)))
	renamed.SetName = "other"
	wantErr(t, coord.CheckReconfig(old, renamed, false), incompatible, "New and old configurations differ in replica set name")
}

// TestCheckReconfigPSA: from a P+A config (one writable voter, so a write majority need not
// overlap an election majority) a PSA config with an electable secondary is refused; with
// the secondary at priority 0 it is allowed (MongoDB's rs.reconfigForPSASet procedure).
func TestCheckReconfigPSA(t *testing.T) {
	arb := bson.E{Key: "arbiterOnly", Value: true}
	old := parseCfg(t, cfgDoc(1, member(0), member(2, arb)))
	err := coord.CheckReconfig(old, parseCfg(t, cfgDoc(2, member(0), member(1), member(2, arb))), false)
	wantErr(t, err, mongoerr.NewReplicaSetConfigurationIncompatible, "Rejecting reconfig where the new config has a PSA topology")
	if err := coord.CheckReconfig(old, parseCfg(t, cfgDoc(2, member(0), member(1, bson.E{Key: "priority", Value: 0}), member(2, arb))), false); err != nil {
		t.Fatal(err)
	}
}
