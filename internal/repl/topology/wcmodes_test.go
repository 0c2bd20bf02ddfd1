package topology

import (
	"testing"

	"humongo/internal/mongoerr"
)

// tagged is a three-member config tagged like a two-datacenter set: a and b in east (racks
// r1, r2), c in west (rack r1), with modes over dc and rack.
func tagged() ReplSetConfig {
	c := NewDefaultConfig("rs0", "a:1", "b:1", "c:1")
	c.Members[0].Tags = map[string]string{"dc": "east", "rack": "r1"}
	c.Members[1].Tags = map[string]string{"dc": "east", "rack": "r2"}
	c.Members[2].Tags = map[string]string{"dc": "west", "rack": "r1"}
	c.Settings.GetLastErrorModes = []WriteConcernMode{
		{Name: "multiDC", Constraints: []TagConstraint{{Key: "dc", MinCount: 2}}},
		{Name: "twoRacks", Constraints: []TagConstraint{{Key: "rack", MinCount: 2}}},
		{Name: "both", Constraints: []TagConstraint{{Key: "dc", MinCount: 2}, {Key: "rack", MinCount: 2}}},
		{Name: "threeDCs", Constraints: []TagConstraint{{Key: "dc", MinCount: 3}}},
	}
	return c
}

// TestWriteConcernModeSatisfiedBy: a mode counts DISTINCT tag values among the members
// holding the write, per constraint.
func TestWriteConcernModeSatisfiedBy(t *testing.T) {
	c := tagged()
	pick := func(ids ...int) []*MemberConfig {
		var ms []*MemberConfig
		for _, id := range ids {
			ms = append(ms, c.Member(id))
		}
		return ms
	}
	for _, tc := range []struct {
		mode    string
		holding []int
		want    bool
	}{
		{"multiDC", []int{0}, false},
		{"multiDC", []int{0, 1}, false}, // two members, one dc value: east counts once
		{"multiDC", []int{0, 2}, true},
		{"multiDC", []int{1, 2}, true},
		{"multiDC", []int{0, 1, 2}, true},
		{"twoRacks", []int{0, 2}, false}, // both in rack r1
		{"twoRacks", []int{0, 1}, true},
		{"both", []int{0, 1}, false}, // two racks, one dc
		{"both", []int{0, 2}, false}, // two dcs, one rack
		{"both", []int{1, 2}, true},
		{"threeDCs", []int{0, 1, 2}, false},
	} {
		mode, ok := c.WriteConcernMode(tc.mode)
		if !ok {
			t.Fatalf("mode %s not found", tc.mode)
		}
		if got := mode.SatisfiedBy(pick(tc.holding...)); got != tc.want {
			t.Errorf("%s by %v = %v, want %v", tc.mode, tc.holding, got, tc.want)
		}
	}
	if _, ok := c.WriteConcernMode("nope"); ok {
		t.Error("unknown mode found")
	}
	// Untagged members never satisfy a mode, even one without constraints (MongoDB's matcher
	// is only consulted as tags are fed to it).
	empty := WriteConcernMode{Name: "empty"}
	plain := NewDefaultConfig("rs0", "a:1")
	if empty.SatisfiedBy([]*MemberConfig{&plain.Members[0]}) {
		t.Error("empty mode satisfied by an untagged member")
	}
	if !empty.SatisfiedBy(pick(2)) {
		t.Error("empty mode not satisfied by a tagged member")
	}
}

// TestWriteConcernModeSatisfiable: a mode is satisfiable when all members together satisfy
// it; a mode asking for more distinct values than exist is not (MongoDB then fails writes
// with UnsatisfiableWriteConcern rather than rejecting the config).
func TestWriteConcernModeSatisfiable(t *testing.T) {
	c := tagged()
	for name, want := range map[string]bool{"multiDC": true, "twoRacks": true, "both": true, "threeDCs": false} {
		mode, _ := c.WriteConcernMode(name)
		if got := c.Satisfiable(mode); got != want {
			t.Errorf("Satisfiable(%s) = %v, want %v", name, got, want)
		}
	}
}

// TestCheckWriteConcernModeTags: a mode over a tag key no member has is NoSuchKey.
func TestCheckWriteConcernModeTags(t *testing.T) {
	c := tagged()
	if err := c.CheckWriteConcernModeTags(); err != nil {
		t.Fatal(err)
	}
	c.Settings.GetLastErrorModes = append(c.Settings.GetLastErrorModes,
		WriteConcernMode{Name: "byRegion", Constraints: []TagConstraint{{Key: "region", MinCount: 1}}})
	err := c.CheckWriteConcernModeTags()
	if codeOf(err) != mongoerr.NoSuchKey || err.Error() == "" {
		t.Fatalf("got %v, want NoSuchKey", err)
	}
}
