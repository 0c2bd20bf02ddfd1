package client_test

import (
	"context"
	"humongo/internal/repl/applier/repltest"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"humongo/internal/client"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
)

func TestParseReplicaSetHosts(t *testing.T) {
	h, err := client.ParseReplicaSetHosts("cfg/127.0.0.1:1,example.net:27019")
	if err != nil {
		t.Fatal(err)
	}
	if h.SetName != "cfg" || len(h.Seeds) != 2 || h.Seeds[1] != "example.net:27019" || h.String() != "cfg/127.0.0.1:1,example.net:27019" {
		t.Fatalf("parsed %+v", h)
	}
	for _, bad := range []string{"", "cfg", "cfg/", "/h:1", "cfg/h", "cfg/h:1,", "cfg/h:0"} {
		if _, err := client.ParseReplicaSetHosts(bad); !mongoerr.Is(err, mongoerr.FailedToParse) {
			t.Errorf("%q: %v, want FailedToParse", bad, err)
		}
	}
}

// startMember starts an in-process replica-set member of rs0 (the replication tests'
// harness) and returns its host.
func startMember(t *testing.T) (string, *coord.Coordinator) {
	t.Helper()
	n := repltest.StartReplSetMember(t, "rs0")
	return n.Host, n.RC
}

// A ReplicaSet client seeded with one member finds the others and sends each command to the
// member its read preference asks for; a member it cannot reach fails a command within the
// command's context deadline, not the longer server-selection timeout.
func TestReplicaSetTargetsByReadPreference(t *testing.T) {
	h0, rc0 := startMember(t)
	h1, rc1 := startMember(t)
	cfg := bson.D{{Key: "_id", Value: "rs0"}, {Key: "members", Value: bson.A{
		bson.D{{Key: "_id", Value: 0}, {Key: "host", Value: h0}, {Key: "priority", Value: 2}},
		bson.D{{Key: "_id", Value: 1}, {Key: "host", Value: h1}, {Key: "priority", Value: 0}}}},
		{Key: "settings", Value: bson.D{{Key: "heartbeatIntervalMillis", Value: 200}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := rc0.Initiate(ctx, bsonDoc(t, cfg)); err != nil {
		t.Fatalf("initiate: %v", err)
	}
	for !rc0.IsWritablePrimary() || !rc1.Hello().Secondary {
		if ctx.Err() != nil {
			t.Fatal("no primary and secondary")
		}
		time.Sleep(20 * time.Millisecond)
	}

	var rw client.Rewriter
	rs, err := client.NewReplicaSet(client.ReplicaSetHosts{SetName: "rs0", Seeds: []string{h1}},
		client.Options{AppName: "test-rs", Dialer: &rw})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close(context.Background()) }()
	me := func(rp *readpref.ReadPref, d time.Duration) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		reply, err := rs.RunCommand(ctx, "admin", bson.D{{Key: "hello", Value: 1}}, rp)
		if err != nil {
			return "", err
		}
		host, _ := reply.Lookup("me").StringValueOK()
		return host, nil
	}
	for _, c := range []struct {
		rp   *readpref.ReadPref
		want string
	}{
		{nil, h0}, {readpref.Primary(), h0}, {readpref.PrimaryPreferred(), h0},
		{readpref.Secondary(), h1}, {readpref.SecondaryPreferred(), h1},
	} {
		name := "nil"
		if c.rp != nil {
			name = c.rp.Mode().String()
		}
		got, err := me(c.rp, 20*time.Second)
		if err != nil || got != c.want {
			t.Errorf("%s: reached %q (%v), want %s", name, got, err, c.want)
		}
	}

	// The secondary becomes unreachable for this client (its own host rewriter points it at
	// a closed port): secondary reads fail by the context's deadline, primary reads go on.
	if _, _, err := rw.Set(map[string]string{h1: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got, err := me(readpref.Secondary(), 1500*time.Millisecond); err == nil {
		// The driver may not have noticed yet on the first command; the next must fail.
		if got, err = me(readpref.Secondary(), 1500*time.Millisecond); err == nil {
			t.Fatalf("secondary read through a dead route reached %s", got)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("secondary read took %v to fail: the context deadline did not bound it", d)
	}
	if got, err := me(readpref.SecondaryPreferred(), 20*time.Second); err != nil || got != h0 {
		t.Errorf("secondaryPreferred with no reachable secondary: reached %q (%v), want the primary %s", got, err, h0)
	}
}

func bsonDoc(t *testing.T, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
