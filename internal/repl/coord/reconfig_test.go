package coord_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/mongoerr"
)

// currentConfig returns the node's config as replSetGetConfig shows it.
func currentConfig(t *testing.T, n *node) bson.D {
	t.Helper()
	out, err := n.admin(t, bson.D{{Key: "replSetGetConfig", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bson.Marshal(out["config"])
	if err != nil {
		t.Fatal(err)
	}
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func configVersion(t *testing.T, n *node) int {
	t.Helper()
	for _, e := range currentConfig(t, n) {
		if e.Key == "version" {
			switch v := e.Value.(type) {
			case int32:
				return int(v)
			case int64:
				return int(v)
			}
		}
	}
	t.Fatal("config without version")
	return 0
}

// setCfg is an rs0 config of the given members with short election and heartbeat intervals.
func setCfg(version int, members ...bson.D) bson.D {
	a := bson.A{}
	for _, m := range members {
		a = append(a, m)
	}
	return bson.D{{Key: "_id", Value: "rs0"}, {Key: "version", Value: version}, {Key: "members", Value: a},
		{Key: "settings", Value: bson.D{{Key: "electionTimeoutMillis", Value: 1000}, {Key: "heartbeatIntervalMillis", Value: 200}}}}
}

func hostMember(id int, host string, extra ...bson.E) bson.D {
	return append(bson.D{{Key: "_id", Value: id}, {Key: "host", Value: host}}, extra...)
}

func reconfig(t *testing.T, n *node, cfg bson.D, extra ...bson.E) error {
	t.Helper()
	_, err := n.admin(t, append(bson.D{{Key: "replSetReconfig", Value: cfg}}, extra...))
	return err
}

func wantCode(t *testing.T, what string, err error, code mongoerr.Code, msg string) {
	t.Helper()
	var ce interface{ HasErrorCode(int) bool }
	if !errors.As(err, &ce) || !ce.HasErrorCode(int(code)) {
		t.Fatalf("%s: got %v, want %v (%d)", what, err, code, code)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("%s: got %q, want it to contain %q", what, err.Error(), msg)
	}
}

// TestSafeReconfig drives replSetReconfig over the wire: MongoDB's validation errors, the
// config commitment precondition (CurrentConfigNotCommittedYet while a data-bearing voter
// added by the last reconfig has not replicated its "Reconfig set" no-op), ConfigurationInProgress
// for a concurrent reconfig, force bypassing both, NotWritablePrimary on a secondary and
// NodeNotElectable for a primary that would make itself unelectable.
//
// An arbiter keeps the primary in touch with a majority of voters while the voter that never
// replicates (an address nobody listens on) keeps the write majority out of reach.
func TestSafeReconfig(t *testing.T) {
	n0, arb, n2 := startNode(t, "rs0"), startNode(t, "rs0"), startNode(t, "rs0")
	const down = "127.0.0.1:1"
	arbiter := bson.E{Key: "arbiterOnly", Value: true}
	p0 := bson.E{Key: "priority", Value: 0}
	if _, err := n0.admin(t, bson.D{{Key: "replSetInitiate", Value: setCfg(1, hostMember(0, n0.host), hostMember(1, arb.host, arbiter))}}); err != nil {
		t.Fatalf("replSetInitiate: %v", err)
	}
	waitFor(t, 15*time.Second, "n0 to be elected", n0.rc.IsWritablePrimary)
	// The primary counts the arbiter towards a majority once it has heard from it.
	waitFor(t, 15*time.Second, "the primary to see the arbiter", func() bool {
		st, err := n0.admin(t, bson.D{{Key: "replSetGetStatus", Value: 1}})
		if err != nil {
			return false
		}
		for _, m := range st["members"].(bson.A) {
			if mm := toM(m); mm["name"] == arb.host {
				return mm["stateStr"] == "ARBITER" && mm["health"] == 1.0
			}
		}
		return false
	})

	// Validation: two voters at once, a zero-vote arbiter, a same-version config, a primary
	// making itself unelectable.
	err := reconfig(t, n0, setCfg(2, hostMember(0, n0.host), hostMember(1, arb.host, arbiter), hostMember(2, n2.host), hostMember(3, down, p0)))
	wantCode(t, "two voters added", err, mongoerr.NewReplicaSetConfigurationIncompatible,
		"Non force replica set reconfig can only add or remove at most 1 voting member.")
	err = reconfig(t, n0, setCfg(2, hostMember(0, n0.host), hostMember(1, arb.host, arbiter, bson.E{Key: "votes", Value: 0})))
	wantCode(t, "zero-vote arbiter", err, mongoerr.NewReplicaSetConfigurationIncompatible, "Arbiter must vote (cannot have 0 votes)")
	err = reconfig(t, n0, setCfg(1, hostMember(0, n0.host), hostMember(1, arb.host, arbiter)))
	wantCode(t, "same version", err, mongoerr.NewReplicaSetConfigurationIncompatible, "must be greater than old")
	err = reconfig(t, n0, setCfg(2, hostMember(0, n0.host, p0), hostMember(1, arb.host, arbiter), hostMember(2, n2.host)))
	wantCode(t, "unelectable primary", err, mongoerr.NodeNotElectable, "is not electable under the new configuration")

	// PSA with an electable secondary after a config with one writable voter is refused.
	err = reconfig(t, n0, setCfg(2, hostMember(0, n0.host), hostMember(1, arb.host, arbiter), hostMember(2, down)))
	wantCode(t, "PSA", err, mongoerr.NewReplicaSetConfigurationIncompatible, "PSA topology")
	// A data-bearing voter that never replicates: the config is installed, never committed.
	if err := reconfig(t, n0, setCfg(2, hostMember(0, n0.host), hostMember(1, arb.host, arbiter), hostMember(2, down, p0))); err != nil {
		t.Fatalf("add an unreachable voter: %v", err)
	}
	err = reconfig(t, n0, setCfg(3, hostMember(0, n0.host), hostMember(1, arb.host, arbiter)), bson.E{Key: "maxTimeMS", Value: 300})
	wantCode(t, "reconfig before the last one committed", err, mongoerr.CurrentConfigNotCommittedYet, "is not majority committed")
	if !n0.rc.IsWritablePrimary() {
		t.Fatal("the primary stepped down: the arbiter should keep a majority in touch")
	}

	// A reconfig waiting for commitment makes a concurrent one fail with
	// ConfigurationInProgress; the waiting one ends with its context.
	ctx, cancel := context.WithCancel(context.Background())
	raw, _ := bson.Marshal(setCfg(3, hostMember(0, n0.host), hostMember(1, arb.host, arbiter)))
	waiting := make(chan error, 1)
	go func() { waiting <- n0.rc.Reconfig(ctx, raw, false) }()
	waitFor(t, 10*time.Second, "a concurrent reconfig to report ConfigurationInProgress", func() bool {
		err := reconfig(t, n0, setCfg(3, hostMember(0, n0.host), hostMember(1, arb.host, arbiter)), bson.E{Key: "maxTimeMS", Value: 50})
		var ce interface{ HasErrorCode(int) bool }
		return errors.As(err, &ce) && ce.HasErrorCode(int(mongoerr.ConfigurationInProgress))
	})
	cancel()
	if err := <-waiting; err == nil {
		t.Fatal("the cancelled reconfig succeeded")
	}

	// force installs at once (version raised by a random large amount) and lets the next
	// safe reconfig skip the commitment check.
	if err := reconfig(t, n0, setCfg(3, hostMember(0, n0.host), hostMember(1, arb.host, arbiter)), bson.E{Key: "force", Value: true}); err != nil {
		t.Fatalf("force reconfig: %v", err)
	}
	v := configVersion(t, n0)
	if v < 10003 {
		t.Fatalf("forced config version %d, want >= 10003", v)
	}
	waitFor(t, 15*time.Second, "writable primary after the forced config", n0.rc.IsWritablePrimary)
	if err := reconfig(t, n0, setCfg(v+1, hostMember(0, n0.host), hostMember(1, arb.host, arbiter), hostMember(2, n2.host, p0))); err != nil {
		t.Fatalf("add a live member after a forced config: %v", err)
	}
	// The next one needs n2 to have the config and the no-op (initial sync, then steady
	// state); the server waits up to 10 s, the test retries on CurrentConfigNotCommittedYet.
	start := time.Now()
	waitFor(t, 60*time.Second, "a reconfig after the new member caught up", func() bool {
		err := reconfig(t, n0, setCfg(v+2, hostMember(0, n0.host), hostMember(1, arb.host, arbiter),
			hostMember(2, n2.host, p0, bson.E{Key: "tags", Value: bson.D{{Key: "dc", Value: "east"}}})))
		if err != nil && !strings.Contains(err.Error(), "CurrentConfigNotCommittedYet") {
			t.Fatalf("reconfig after catch-up: %v", err)
		}
		return err == nil
	})
	t.Logf("second safe reconfig accepted %v after the first", time.Since(start))

	// The no-op that commits a safe reconfig is in the primary's oplog.
	var noop bson.M
	if err := n0.client.Database("local").Collection("oplog.rs").FindOne(context.Background(),
		bson.D{{Key: "op", Value: "n"}, {Key: "o.msg", Value: "Reconfig set"}}).Decode(&noop); err != nil {
		t.Fatalf("no \"Reconfig set\" no-op in the oplog: %v", err)
	}

	// A secondary refuses a safe reconfig.
	waitFor(t, 15*time.Second, "n2 to be SECONDARY", func() bool { return n2.rc.Hello().Secondary })
	err = reconfig(t, n2, setCfg(v+3, hostMember(0, n0.host), hostMember(1, arb.host, arbiter), hostMember(2, n2.host, p0)))
	wantCode(t, "reconfig on a secondary", err, mongoerr.NotWritablePrimary, "should only be run on a writable PRIMARY")
}
