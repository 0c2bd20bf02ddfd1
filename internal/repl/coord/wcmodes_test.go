package coord_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
	"humongo/internal/repl/topology"
)

func withSettings(d bson.D, settings bson.D) bson.D {
	return append(d, bson.E{Key: "settings", Value: settings})
}

func dcMembers() []bson.D {
	tags := func(dc string) bson.E { return bson.E{Key: "tags", Value: bson.D{{Key: "dc", Value: dc}}} }
	return []bson.D{member(0, tags("east")), member(1, tags("east")), member(2, tags("west"))}
}

// TestGetLastErrorModesRoundTrip: settings.getLastErrorModes is parsed, kept in the config and
// shown by replSetGetConfig (and so persisted and sent in heartbeats) in the order given.
func TestGetLastErrorModesRoundTrip(t *testing.T) {
	modes := bson.D{
		{Key: "multiDC", Value: bson.D{{Key: "dc", Value: 2}}},
		{Key: "anyDC", Value: bson.D{{Key: "dc", Value: 1.9}}}, // numberInt truncates
	}
	cfg := parseCfg(t, withSettings(cfgDoc(1, dcMembers()...), bson.D{{Key: "getLastErrorModes", Value: modes}}))
	if err := coord.ValidateConfig(cfg); err != nil {
		t.Fatal(err)
	}
	want := []topology.WriteConcernMode{
		{Name: "multiDC", Constraints: []topology.TagConstraint{{Key: "dc", MinCount: 2}}},
		{Name: "anyDC", Constraints: []topology.TagConstraint{{Key: "dc", MinCount: 1}}},
	}
	got := cfg.Settings.GetLastErrorModes
	if len(got) != len(want) {
		t.Fatalf("modes = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || len(got[i].Constraints) != 1 || got[i].Constraints[0] != want[i].Constraints[0] {
			t.Fatalf("modes = %+v, want %+v", got, want)
		}
	}
	doc := coord.ConfigDocument(cfg)
	glem, err := doc.LookupErr("settings", "getLastErrorModes")
	if err != nil {
		t.Fatalf("no settings.getLastErrorModes in %v", doc)
	}
	if s := glem.String(); s != `{"multiDC": {"dc": {"$numberInt":"2"}},"anyDC": {"dc": {"$numberInt":"1"}}}` {
		t.Fatalf("getLastErrorModes = %s", s)
	}
	again, err := coord.ParseConfig(doc)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := again.WriteConcernMode("multiDC"); !ok || m.Constraints[0].MinCount != 2 {
		t.Fatalf("re-parsed modes = %+v", again.Settings.GetLastErrorModes)
	}
}

// TestGetLastErrorModesInvalid pins MongoDB 7.0's parse errors for getLastErrorModes
// (ReplSetWriteConcernModeDefinitions::parseFromBSON, ReplSetTagConfig).
func TestGetLastErrorModesInvalid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		modes any
		code  mongoerr.Code
		msg   string
	}{
		{"not an object", "x", mongoerr.TypeMismatch, "Expected getLastErrorModes to be an Object, it actually had type string"},
		{"mode not an object", bson.D{{Key: "m", Value: 2}}, mongoerr.TypeMismatch, "Expected getLastErrorModes.m to be an Object, not int"},
		{"count not a number", bson.D{{Key: "m", Value: bson.D{{Key: "dc", Value: "2"}}}}, mongoerr.TypeMismatch,
			"Expected getLastErrorModes.m.dc to be a number, not string"},
		{"count zero", bson.D{{Key: "m", Value: bson.D{{Key: "dc", Value: 0}}}}, mongoerr.BadValue,
			"Value of getLastErrorModes.m.dc must be positive, but found 0"},
		{"count negative", bson.D{{Key: "m", Value: bson.D{{Key: "dc", Value: -1.5}}}}, mongoerr.BadValue, "must be positive, but found -1"},
		{"unknown tag key", bson.D{{Key: "m", Value: bson.D{{Key: "region", Value: 1}}}}, mongoerr.NoSuchKey, "No replica set tag key region in config"},
		{"duplicate mode", bson.D{{Key: "m", Value: bson.D{{Key: "dc", Value: 1}}}, {Key: "m", Value: bson.D{{Key: "dc", Value: 2}}}},
			mongoerr.Location51001, "getLastErrorModes contains multiple fields named m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := bson.Marshal(withSettings(cfgDoc(1, dcMembers()...), bson.D{{Key: "getLastErrorModes", Value: tc.modes}}))
			if err != nil {
				t.Fatal(err)
			}
			_, err = coord.ParseConfig(bsoncore.Document(raw))
			wantErr(t, err, tc.code, tc.msg)
		})
	}
	// Settings before members: the tag keys are checked against the members all the same.
	raw, _ := bson.Marshal(bson.D{{Key: "_id", Value: "rs0"},
		{Key: "settings", Value: bson.D{{Key: "getLastErrorModes", Value: bson.D{{Key: "m", Value: bson.D{{Key: "dc", Value: 2}}}}}}},
		{Key: "members", Value: bson.A{dcMembers()[0], dcMembers()[2]}}})
	if _, err := coord.ParseConfig(bsoncore.Document(raw)); err != nil {
		t.Fatalf("settings before members: %v", err)
	}
	// A mode needing more distinct values than the members have is accepted, as MongoDB 7.0
	// does; writes using it fail with UnsatisfiableWriteConcern (TestWaitForWriteConcernModes).
	cfg := parseCfg(t, withSettings(cfgDoc(1, dcMembers()...),
		bson.D{{Key: "getLastErrorModes", Value: bson.D{{Key: "threeDCs", Value: bson.D{{Key: "dc", Value: 3}}}}}}))
	if err := coord.ValidateConfig(cfg); err != nil {
		t.Fatalf("unsatisfiable mode rejected: %v", err)
	}
}
